"""``tfadvisor rules`` / ``rules explain``, the terminal report, the JSON report and ``--fail-on``."""

from __future__ import annotations

import io
import json
import re
import sys

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tfadvisor.advice import evaluate, load_rules
from tfadvisor.analyses import Metric, Metrics, Options
from tfadvisor.api import Result
from tfadvisor.cli.app import app
from tfadvisor.io.discovery import Run
from tfadvisor.report.json_report import SCHEMA_VERSION, result_to_dict
from tfadvisor.report.terminal import print_result

runner = CliRunner()
RULE_IDS = [r.id for r in load_rules()]

RUN_DIR = "/logs/plugins/profile/2026_01_01_00_00_00"


def fake_result(**overrides) -> Result:
    values = dict(
        steps_count=10, steps_source="trace_context", step_time_mean_ms=21.3, step_time_median_ms=20.9,
        step_time_p90_ms=22.1, step_time_min_ms=15.6, step_time_max_ms=25.0, step_input_pct=78.2,
        step_host_compute_pct=15.0, step_idle_pct=3.1, step_other_pct=3.7, step_device_compute_pct=None,
        input_pct=78.2, input_host_wait_pct=78.0, tfdata_present=True, tfdata_has_prefetch=False,
        tfdata_has_cache=False, tfdata_sequential_map=True, tfdata_map_element_us=450.0, tfdata_expensive_map=True,
        tfdata_repeated_source_no_cache=True, tfdata_pipeline="Iterator::Root::ForeverRepeat::BatchV2::Map",
        eager_pct=0.5, retrace_count=0, xprof_input_pct=80.0, memory_peak_bytes=None,
    )
    values.update(overrides)
    units = {"step_time_mean_ms": "ms", "input_pct": "%", "tfdata_map_element_us": "us"}
    m = Metrics()
    for k, v in values.items():
        m.put("test", k, Metric(v, units.get(k, ""), ""))
    r = Result(
        run=Run("2026_01_01_00_00_00", RUN_DIR, (f"{RUN_DIR}/localhost.xplane.pb",), "/logs"),
        summary={"run": "2026_01_01_00_00_00", "hosts": ["localhost"], "events": 15109, "time_span_ms": 432.1,
                 "file_bytes": 373649, "planes": [{"host": "localhost", "name": "/host:CPU", "lines": 12,
                                                   "events": 15000}]},
        metrics=m,
        notes=["memory: no MemoryAllocation events in this trace (CPU runs need TF_CPU_ALLOCATOR_USE_BFC=true)"],
        options=Options(),
    )
    r.findings = evaluate(m, load_rules())
    return r


def render(result: Result, width: int = 80, notes: bool = False) -> str:
    buf = io.StringIO()
    print_result(result, Console(file=buf, width=width, force_terminal=False, color_system=None), notes=notes)
    return buf.getvalue()


# --------------------------------------------------------------------------- tfadvisor rules


def test_rules_lists_every_rule():
    res = runner.invoke(app, ["rules"])
    assert res.exit_code == 0, res.output
    for rid in RULE_IDS:
        assert rid in res.output
    assert all(len(line) <= 80 for line in res.output.splitlines())


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rules_explain_every_rule(rule_id):
    res = runner.invoke(app, ["rules", "explain", rule_id])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.startswith(f"# {rule_id}: ")
    for section in ("## What it checks", "## Why it matters", "## Example", "## How to fix", "## Learn more"):
        assert section in out, (rule_id, section)
    assert "```" in out and "https://" in out
    assert "Defined in: rules/" in out


def test_rules_explain_unknown_id():
    res = runner.invoke(app, ["rules", "explain", "no_such_rule"])
    assert res.exit_code == 2
    assert "no rule 'no_such_rule'" in res.output


def test_rules_with_a_user_directory(tmp_path):
    (tmp_path / "r.toml").write_text(
        '[[rule]]\nid = "team_rule"\ntitle = "Our own check"\nseverity = "info"\nwhen = "input_pct > 1"\n'
        'message = "m"\nfix = "f"\nwhy = "because"\n')
    res = runner.invoke(app, ["rules", "--rules", str(tmp_path)])
    assert res.exit_code == 0 and "team_rule" in res.output
    res = runner.invoke(app, ["rules", "--rules", str(tmp_path), "explain", "team_rule"])
    assert res.exit_code == 0 and "because" in res.output


def test_bad_rules_dir_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from tfadvisor.cli import app as cli

    (tmp_path / "bad.toml").write_text('[[rule]]\nid = "x"\ntitle = "t"\nseverity = "info"\n'
                                       'when = "input_pct >>> 1"\nmessage = "m"\nfix = "f"\n')
    monkeypatch.setattr(sys, "argv", ["tfadvisor", "rules", "--rules", str(tmp_path)])
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"{tmp_path / 'bad.toml'}:5: rule 'x'" in err and "column" in err


# --------------------------------------------------------------------------- terminal report


def test_terminal_report_summary_findings_notes():
    out = render(fake_result(), notes=True)
    lines = out.splitlines()
    assert lines[0].startswith("tfadvisor report for plugins/profile/2026_01_01_00_00_00")
    assert "15,109 events" in out and "10 (found by trace_context)" in out
    assert "mean 21.3  median 20.9  p90 22.1  min 15.6  max 25 ms" in out
    assert "input 78 %" in out and "host compute 15 %" in out
    first = out.index("1. CRITICAL  Training waits for input")
    assert "Evidence: input_pct = 78.2 %" in out
    assert "prefetch(AUTOTUNE)" in out and "https://www.tensorflow.org/guide/data_performance" in out
    # no tfdata_cause named: input_bound leads; the tf.data conditions are folded into its finding (one finding
    # for one cost: tfadvisor.advice.explain), each with its fix, then the notes
    numbered = [i for i, line in enumerate(lines) if re.match(r"\d+\. (CRITICAL|WARNING|INFO)  ", line.strip())]
    assert len(numbered) == 1 and "A tf.data map runs on one thread" in out
    assert first < out.index("Also, for the same cost: A tf.data map runs on one thread") < out.index("Notes")
    assert "TF_CPU_ALLOCATOR_USE_BFC" in out


def test_terminal_report_fits_80_columns_without_colour():
    out = render(fake_result())
    assert "\x1b[" not in out  # no ANSI codes when not a terminal
    for line in out.splitlines():
        assert line == line.rstrip(), f"trailing spaces: {line!r}"
        if not line.strip().startswith("https://"):  # links are never broken
            assert len(line) <= 80, line


def test_terminal_report_without_steps_or_findings():
    m = dict.fromkeys(["input_pct", "tfdata_present", "tfdata_has_prefetch", "tfdata_sequential_map",
                       "tfdata_expensive_map", "tfdata_repeated_source_no_cache"])
    r = fake_result(steps_count=0, steps_source="none", step_time_mean_ms=None, step_time_median_ms=None,
                    step_time_p90_ms=None, step_time_min_ms=None, step_time_max_ms=None, step_input_pct=None,
                    step_host_compute_pct=None, step_idle_pct=None, step_other_pct=None, **m)
    out = render(r)
    assert "none found" in out and "No findings" in out


# --------------------------------------------------------------------------- JSON report


def test_json_report_schema():
    r = fake_result()
    d = result_to_dict(r)
    assert d == r.to_dict()
    json.dumps(d)  # serialisable as it is
    assert d["schema_version"] == SCHEMA_VERSION and isinstance(d["version"], str)
    s = d["summary"]
    assert s["steps"] == 10 and isinstance(s["steps"], int)
    assert s["step_time_ms"] == {"mean": 21.3, "median": 20.9, "p90": 22.1, "min": 15.6, "max": 25.0}
    assert s["loaded"]["events"] == 15109
    assert s["breakdown_pct"]["input"] == 78.2 and "device_compute" not in s["breakdown_pct"]
    assert d["metrics"]["input_pct"] == 78.2 and d["metrics"]["memory_peak_bytes"] is None
    assert d["units"]["input_pct"] == "%"
    assert [f["rule"] for f in d["findings"]][0] == "input_bound"
    f0 = d["findings"][0]
    assert set(f0) >= {"rule", "severity", "title", "message", "evidence", "impact_pct", "fix", "docs"}
    assert d["notes"] and d["hosts"] == []
    assert d["run"]["label"] == "plugins/profile/2026_01_01_00_00_00"
    assert d["options"]["param_count"] is None


def test_json_report_handles_numpy_and_nan():
    np = pytest.importorskip("numpy")
    r = fake_result(step_time_mean_ms=np.float64(21.3), steps_count=np.int64(10), input_pct=float("nan"))
    d = result_to_dict(r)
    json.dumps(d, allow_nan=False)
    assert d["summary"]["steps"] == 10 and d["metrics"]["input_pct"] is None


def test_json_report_lists_hosts_when_several():
    from tfadvisor.analyses import HostAnalysis

    r = fake_result()
    hm = Metrics()
    hm.put("steps", "step_time_mean_ms", Metric(20.0, "ms"))
    r.hosts = [HostAnalysis("worker0", hm), HostAnalysis("worker1", hm)]
    d = result_to_dict(r)
    assert [h["host"] for h in d["hosts"]] == ["worker0", "worker1"]
    assert d["hosts"][0]["metrics"]["step_time_mean_ms"] == 20.0
    assert "worker0" in render(r)


# --------------------------------------------------------------------------- analyze --format / --fail-on


@pytest.fixture
def patched_analyze(monkeypatch):
    holder = {"result": fake_result()}
    monkeypatch.setattr("tfadvisor.api.analyze", lambda *a, **k: holder["result"])
    return holder


def test_analyze_json_output(patched_analyze, tmp_path):
    res = runner.invoke(app, ["analyze", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["findings"][0]["rule"] == "input_bound"


def test_fail_on(patched_analyze, tmp_path):
    assert runner.invoke(app, ["analyze", str(tmp_path), "--fail-on", "critical"]).exit_code == 1
    assert runner.invoke(app, ["analyze", str(tmp_path), "--fail-on", "warning"]).exit_code == 1
    patched_analyze["result"] = fake_result(input_pct=10.0, tfdata_sequential_map=False, tfdata_expensive_map=False,
                                            tfdata_repeated_source_no_cache=False)
    assert [f.severity for f in patched_analyze["result"].findings] == ["warning"]  # input_bound folded in
    assert runner.invoke(app, ["analyze", str(tmp_path), "--fail-on", "critical"]).exit_code == 0
    assert runner.invoke(app, ["analyze", str(tmp_path), "--fail-on", "warning"]).exit_code == 1
    patched_analyze["result"] = fake_result(input_pct=1.0, tfdata_has_prefetch=True, tfdata_sequential_map=False,
                                            tfdata_expensive_map=False, tfdata_repeated_source_no_cache=False)
    assert patched_analyze["result"].findings == []
    assert runner.invoke(app, ["analyze", str(tmp_path), "--fail-on", "warning"]).exit_code == 0


def test_brief_terminal_report_for_training_logs():
    """The end of a capture window prints the brief report: titles and messages, no fixes or notes."""
    import io

    from conftest import SAMPLES
    from rich.console import Console

    import tfadvisor
    from tfadvisor.report.terminal import print_result

    result = tfadvisor.analyze(SAMPLES / "tfdata_repeat_map")
    assert len(result.findings) >= 2
    full, brief = io.StringIO(), io.StringIO()
    print_result(result, Console(file=full, width=100))
    print_result(result, Console(file=brief, width=100), brief=True)
    assert "Fix:" in full.getvalue() and "Fix:" not in brief.getvalue()
    assert all(f.title in brief.getvalue() for f in result.findings)
    assert "note(s) on what this trace could not tell" in brief.getvalue()
    assert len(brief.getvalue().splitlines()) < len(full.getvalue().splitlines()) / 2


def test_html_alone_prints_one_line_naming_the_file(tmp_path):
    """``--html FILE`` without ``--format``: the report is the file; stdout is one line naming it, not the terminal
    report. With ``--format`` given too, that format is printed as well (and the file named on stderr)."""
    from pathlib import Path

    sample = str(Path(__file__).resolve().parent.parent / "sample_traces" / "step_gaps")
    page = tmp_path / "report.html"
    res = runner.invoke(app, ["analyze", sample, "--html", str(page)])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines() == [res.stdout.strip()] and str(page) in res.stdout
    assert re.fullmatch(rf"wrote {re.escape(str(page))} \(\d+ findings?\): open it in a browser\n", res.stdout)
    assert page.read_text().lstrip().lower().startswith("<!doctype html")
    both = runner.invoke(app, ["analyze", sample, "--html", str(page), "--format", "text"])
    assert both.exit_code == 0 and "Findings" in both.stdout and len(both.stdout.splitlines()) > 10
    assert f"wrote {page}" in both.stderr
