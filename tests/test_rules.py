"""Rule files: the built-in set, the loader's checks, and errors naming file and line."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from tfadvisor.advice import KNOWN_METRICS, RuleError, builtin_rules_dir, evaluate, load_rules
from tfadvisor.analyses import metric_registry
from tfadvisor.errors import TraceError

ROOT = Path(__file__).resolve().parent.parent

RULE_IDS = {
    "component_metric", "component_optimizer", "component_loss", "component_py_function", "component_debug_checks",
    "component_layer", "component_dtype_policy", "component_gradient",
    "outside_evaluation", "outside_checkpoint", "outside_epoch_end",
    "python_hotspot", "jax_op_by_op", "matrix_tf32",
    "input_bound", "tfdata_no_prefetch", "tfdata_sequential_map", "tfdata_no_cache", "tfdata_expensive_map",
    "step_gaps", "step_outliers", "kernel_launch_bound", "eager_execution", "retracing", "python_overhead",
    "host_ops_with_device", "mixed_precision_unused", "memory_oom_risk", "memory_headroom", "h2d_pageable",
    "allreduce_overhead", "allreduce_share", "straggler_host", "device_straggler", "missing_host", "load_imbalance",
    "data_small_files", "data_huge_files",
    # causes in time and structure (rules/20_host.toml, rules/05_capture.toml, rules/10_input.toml)
    "periodic_step_work", "phase_cache_fill", "tfdata_iterator_per_step", "tfdata_filter_after_map",
    "one_off_slow_step", "variable_work_per_step", "numpy_input_per_step",
    # tf.data causes (rules/10_input.toml)
    "tfdata_cpu_contention", "tfdata_generator", "tfdata_sequential_reads", "tfdata_vectorizable_map",
    # system samples and start-up (rules/05_system_input.toml, rules/60_system.toml)
    "system_input_disk_bound", "system_input_network_bound", "system_preprocessing_bound", "system_input_underused",
    "system_competing_load",
    # compute: the largest op costs (rules/35_compute.toml)
    "compute_bound_matrix", "compute_bound_ops", "op_time_dominant",
    "slow_startup", "host_memory_pressure", "idle_gpus", "gpu_low_utilisation", "cpu_cores_idle",
    # capture quality (rules/05_capture.toml)
    "capture_not_steady_state", "capture_no_steps", "devices_idle",
    # AMD Matrix Cores (rules/30_device.toml)
    "mixed_precision_unused_amd",
    # the generic explanation of every part of the wall time (rules/90_cost.toml)
    *(f"cost_{p}" for p in ("collective", "matrix", "data_movement", "optimizer", "gather_scatter", "custom_call",
                            "elementwise", "input", "between_steps", "runtime", "host_ops", "python", "idle",
                            "outside_steps")),
}

GOOD_RULE = '''
[[rule]]
id = "{id}"
title = "A test rule"
severity = "warning"
when = "{when}"
message = "input is {{input_pct:.1f}} %"
fix = "do something"
'''


def write(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "myrules"
    d.mkdir(exist_ok=True)
    (d / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return d


# --------------------------------------------------------------------------- built-in rules


def test_builtin_rules_load_and_have_the_fixed_ids():
    rules = load_rules()
    assert {r.id for r in rules} == RULE_IDS
    assert builtin_rules_dir() == ROOT / "rules"


@pytest.mark.parametrize("rule", load_rules(), ids=lambda r: r.id)
def test_every_rule_is_actionable(rule):
    assert rule.title and rule.why and rule.example, rule.id
    assert rule.evidence, f"{rule.id}: no evidence"
    assert rule.docs and all(d.url.startswith("https://") for d in rule.docs), rule.id
    assert "```" in rule.fix, f"{rule.id}: the fix needs a code example"
    for fix in [rule.fix] + [c.fix for c in rule.cases if c.fix]:
        in_code = False
        for line in fix.splitlines():
            if line.strip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:  # code is printed unwrapped at 7 columns in an 80-column terminal
                assert len(line) <= 73, f"{rule.id}: code line too long: {line!r}"
    assert rule.line and rule.path.endswith(".toml")


def test_known_metrics_are_the_declared_ones():
    registry = metric_registry()
    declared = {n for d in registry.values() for n in d.names()}
    assert declared == set(KNOWN_METRICS) and len(declared) >= 200
    assert {"steps", "gaps", "input", "tfdata", "overhead", "system", "datafiles", "multihost"} <= set(registry)
    assert "trace_context" not in KNOWN_METRICS  # a value, not a metric


def test_multihost_metrics_are_known():
    import tfadvisor.multihost.analysis as mod
    documented = set(re.findall(r"``([a-z][a-z0-9_]*)``", (mod.__doc__ or "").split("cross-host metrics")[1]
                                .split("run-level")[0])) if "cross-host metrics" in (mod.__doc__ or "") else set()
    assert documented and documented - set(metric_registry()["multihost"].names()) - {"multihost"} == set()


def test_datafiles_metrics_are_known():
    import numpy as np

    import tfadvisor.analyses.datafiles as mod

    res = mod.summarise(np.array([10, 2_000_000, 3_000_000_000], dtype=np.int64), "x")
    assert set(res.metrics) <= KNOWN_METRICS


# --------------------------------------------------------------------------- malformed rule files


def test_bad_toml_names_file_and_line(tmp_path):
    d = write(tmp_path, "bad.toml", '''
        [[rule]]
        id = "x"
        title = "unterminated
        ''')
    with pytest.raises(RuleError) as info:
        load_rules([d])
    err = info.value
    assert err.path.endswith("bad.toml") and err.line == 3
    assert str(err).startswith(f"{d / 'bad.toml'}:3: TOML syntax error")


def test_bad_expression_names_rule_file_line_and_column(tmp_path):
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="ok_rule", when="input_pct >= 5") +
              GOOD_RULE.format(id="broken", when="input_pct >= (5 +"))
    with pytest.raises(RuleError) as info:
        load_rules([d])
    err = info.value
    assert err.rule == "broken"
    assert err.line == 13  # the `when` line of the second table (which starts at line 9)
    msg = str(err)
    assert msg.startswith(f"{d / 'r.toml'}:13: rule 'broken' (table at line 9): when:")
    assert "column 18" in msg
    assert "^" in err.detail


def test_unknown_metric_is_a_load_error(tmp_path):
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="typo", when="inptu_pct >= 5"))
    with pytest.raises(RuleError) as info:
        load_rules([d])
    msg = str(info.value)
    assert ":5: rule 'typo'" in msg and "unknown metric 'inptu_pct'" in msg and "did you mean 'input_pct'" in msg


def test_unknown_metric_in_message_and_evidence(tmp_path):
    d = write(tmp_path, "r.toml", '''
        [[rule]]
        id = "m"
        title = "t"
        severity = "info"
        when = "input_pct > 1"
        message = "{input_pc:.1f}"
        fix = "f"
        ''')
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert ":6:" in str(info.value) and "message" in str(info.value)
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="e", when="input_pct > 1") + 'evidence = ["nope"]\n')
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert ":8:" in str(info.value) and "'nope'" in str(info.value)


@pytest.mark.parametrize(
    "extra, line, words",
    [
        ('sevrity = "info"\n', 8, "unknown key 'sevrity'"),
        ('impact = "input_pct +"\n', 8, "impact"),
        ('docs = ["not a url"]\n', 8, "not an http(s) URL"),
        ('[[rule.case]]\nwhen = "input_pct > 20"\nseverity = "fatal"\n', 10, "severity must be one of"),
        ('[[rule.case]]\nwhen = "input_pc > 20"\n', 9, "case 1: when"),
        ('[[rule.case]]\nseverity = "critical"\n', 8, "missing 'when'"),
    ],
)
def test_more_bad_rules(tmp_path, extra, line, words):
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="r1", when="input_pct > 1") + extra)
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert info.value.line == line, str(info.value)
    assert words in str(info.value)


def test_missing_key_bad_severity_bad_id(tmp_path):
    d = write(tmp_path, "r.toml", '[[rule]]\nid = "x"\ntitle = "t"\n')
    with pytest.raises(RuleError, match="missing required key 'severity'"):
        load_rules([d])
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="x", when="input_pct > 1").replace('"warning"', '"fatal"'))
    with pytest.raises(RuleError, match=r"r\.toml:4: rule 'x': severity must be one of"):
        load_rules([d])
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="Bad-Id", when="input_pct > 1"))
    with pytest.raises(RuleError, match=r"r\.toml:2: .*lower-case"):
        load_rules([d])
    d = write(tmp_path, "r.toml", 'something = 1\n')
    with pytest.raises(RuleError, match=r"r\.toml:1: unexpected top-level key 'something'"):
        load_rules([d])


def test_duplicate_ids_in_one_directory(tmp_path):
    d = write(tmp_path, "a.toml", GOOD_RULE.format(id="dup", when="input_pct > 1"))
    write(tmp_path, "b.toml", GOOD_RULE.format(id="dup", when="input_pct > 2"))
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert "b.toml:1" in str(info.value) and "duplicate rule id 'dup'" in str(info.value) and "a.toml:1" in str(
        info.value)


def test_missing_or_empty_directory(tmp_path):
    with pytest.raises(RuleError, match="no such rules directory"):
        load_rules([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(RuleError, match="no .toml rule files"):
        load_rules([tmp_path / "empty"])


def test_rule_error_is_bad_input_for_the_cli():
    assert issubclass(RuleError, TraceError)  # the CLI prints it on one line and exits 2


# --------------------------------------------------------------------------- user rules


def test_user_rules_add_replace_and_disable(tmp_path):
    d = write(tmp_path, "mine.toml", GOOD_RULE.format(id="my_rule", when="input_pct > 1") +
              GOOD_RULE.format(id="input_bound", when="input_pct > 50") +
              '[[rule]]\nid = "step_outliers"\nenabled = false\n')
    rules = load_rules([d])
    ids = [r.id for r in rules]
    assert "my_rule" in ids and "step_outliers" not in ids
    ib = next(r for r in rules if r.id == "input_bound")
    assert ib.when.source == "input_pct > 50" and ib.path.endswith("mine.toml")
    findings = evaluate({"input_pct": 30.0}, rules)
    assert [f.rule for f in findings] == ["my_rule"]
    assert findings[0].message == "input is 30.0 %"


def test_a_single_file_can_be_given(tmp_path):
    d = write(tmp_path, "one.toml", GOOD_RULE.format(id="solo", when="input_pct > 1"))
    rules = load_rules([d / "one.toml"], builtin=False)
    assert [r.id for r in rules] == ["solo"]


def test_runtime_type_error_names_the_rule(tmp_path):
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="typed", when="steps_source > 3"))
    rules = load_rules([d], builtin=False)
    with pytest.raises(RuleError) as info:
        evaluate({"steps_source": "trace_context"}, rules)
    assert "rule 'typed'" in str(info.value) and "r.toml:1" in str(info.value)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib messages")
def test_toml_error_at_end_of_document(tmp_path):
    d = write(tmp_path, "r.toml", '[[rule]]\nid = "x"\ntitle = """never closed\n')
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert info.value.line is not None


def test_fix_placeholders_are_filled_and_checked(tmp_path):
    """``{{metric}}`` in a fix becomes the run's value; an unknown name is a load error."""
    from tfadvisor.advice import evaluate, load_rules
    from tfadvisor.advice.rules import RuleError

    good = tmp_path / "good"
    good.mkdir()
    (good / "r.toml").write_text(
        '[[rule]]\nid = "slow_host_x"\ntitle = "t"\nseverity = "warning"\nwhen = "straggler_ratio > 1.2"\n'
        'message = "m"\nfix = "tfadvisor analyze RUN/{{straggler_host}}.xplane.pb vs {{median_host}}"\n')
    rules = [r for r in load_rules(extra_dirs=[str(good)]) if r.id == "slow_host_x"]
    found = evaluate({"straggler_ratio": 1.6, "straggler_host": "host2", "median_host": None}, rules)
    assert found[0].fix == "tfadvisor analyze RUN/host2.xplane.pb vs <median_host>"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "r.toml").write_text(
        '[[rule]]\nid = "slow_host_y"\ntitle = "t"\nseverity = "warning"\nwhen = "straggler_ratio > 1.2"\n'
        'message = "m"\nfix = "see {{no_such_metric}}"\n')
    with pytest.raises(RuleError, match="no_such_metric"):
        load_rules(extra_dirs=[str(bad)])


def test_straggler_fix_names_the_hosts():
    from conftest import SAMPLES

    import tfadvisor

    res = tfadvisor.analyze(SAMPLES / "synthetic_multihost_straggler")
    top = res.findings[0]
    assert top.rule == "straggler_host"
    assert "RUN/host2.xplane.pb" in top.fix
    assert f"RUN/{res.metrics['median_host']}.xplane.pb" in top.fix
    missing = next(f for f in res.findings if f.rule == "missing_host")
    assert "host4" in missing.fix


@pytest.mark.parametrize("extra, problem", [
    ('marks = ["gapz"]', "unknown mark 'gapz' (did you mean 'gaps'?)"),
    ('marks = "gaps"', "marks must be a list of mark names"),
    ('plots = ["stepz"]', "unknown plot 'stepz' (did you mean 'steps'?)"),
    ('plots = "steps"', "plots must be a list of plot names"),
    ('scope = "host:no_such_metric"', "unknown metric 'no_such_metric' in scope"),
    ('scope = "everyone"', "scope must be one of run, none or host:<metric>"),
])
def test_marks_and_scope_are_checked(tmp_path, extra, problem):
    """What a rule marks is named from tfadvisor.analyses.marks, whose spans from its scope: a typo is a load
    error, not a finding that silently marks nothing."""
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="marking", when="input_pct >= 5") + extra + "\n")
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert problem in str(info.value), str(info.value)


def test_marks_and_scope_reach_the_finding(tmp_path):
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="marking", when="input_pct >= 5") +
              'marks = ["input_wait", "steps"]\nscope = "host:straggler_host"\nplots = ["hosts"]\n')
    rule = next(r for r in load_rules([d]) if r.id == "marking")
    assert (rule.marks, rule.scope, rule.plots) == (["input_wait", "steps"], "host:straggler_host", ["hosts"])


def test_key_lines_from_the_index_are_the_scans():
    """_Lines.key_line answers a bare key from one pass over the file: the same line as a scan with the key's own
    pattern, for every key set in every built-in rules file, within every rule's table and over the whole file."""
    import re

    from tfadvisor.advice.rules import _Lines, builtin_rules_dir

    def scan(lines: _Lines, key: str, start: int | None, end: int | None) -> int | None:
        pat = re.compile(r"^\s*(" + re.escape(key) + r"|\"" + re.escape(key) + r"\")\s*=")
        for i in range((start or 1) - 1, min((end - 1) if end else len(lines.lines), len(lines.lines))):
            if lines.code[i] and pat.match(lines.lines[i]):
                return i + 1
        return None

    checked = 0
    for f in sorted(builtin_rules_dir().glob("*.toml")):
        lines = _Lines(f.read_text(encoding="utf-8"))
        keys = {m.group(1) for ln in lines.lines if (m := re.match(r'\s*"?([A-Za-z0-9_-]+)"?\s*=', ln))}
        heads = lines.headers("rule")
        for start, end in [(None, None), *zip(heads, heads[1:] + [None])]:
            for key in sorted(keys) + ["no_such_key"]:
                assert lines.key_line(key, start, end) == scan(lines, key, start, end), (f.name, key, start)
                checked += 1
    assert checked > 1000


@pytest.mark.parametrize("value", ["0", "1.5", "true", '"half"'])
def test_recovers_is_a_share_above_0_and_at_most_1(tmp_path, value):
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="rec", when="input_pct > 1") + f"recovers = {value}\n")
    with pytest.raises(RuleError) as info:
        load_rules([d])
    assert "'recovers' must be a number above 0 and at most 1" in str(info.value)
    d = write(tmp_path, "r.toml", GOOD_RULE.format(id="rec", when="input_pct > 1") + "recovers = 0.25\n")
    assert {r.id: r for r in load_rules([d])}["rec"].recovers == 0.25
