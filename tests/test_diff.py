"""tfadvisor diff: the verdict, per-figure changes, findings fixed/new/remaining, JSON, --fail-on-regression."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from rich.console import Console
from test_report_html import FakeFinding, make_result
from typer.testing import CliRunner

from tfadvisor.analyses import Metric
from tfadvisor.cli import diff as diff_cli
from tfadvisor.report.diff import diff_results, render_text

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"


def _f(rule: str, sev: str = "warning") -> FakeFinding:
    return FakeFinding(rule, sev, f"title of {rule}", "msg", {}, 10.0)


def _pair():
    before = make_result(step_base=100, input_ms=60, findings=[_f("input_bound", "critical"), _f("low_precision")])
    after = make_result(step_base=100, input_ms=5, findings=[_f("low_precision"), _f("step_gaps", "info")])
    return before, after


def test_diff_results_verdict_and_findings():
    before, after = _pair()
    d = diff_results(before, after)
    assert d["verdict"] == "faster"
    st = d["step_time"]
    assert st["before_ms"] > st["after_ms"] and st["change_pct"] < -30
    assert st["speedup"] == pytest.approx(st["before_ms"] / st["after_ms"])
    assert d["verdict_text"].startswith(f"faster by {abs(st['change_pct']):.1f} % per step")
    assert [f["rule"] for f in d["findings"]["fixed"]] == ["input_bound"]
    assert [f["rule"] for f in d["findings"]["new"]] == ["step_gaps"]
    assert [f["rule"] for f in d["findings"]["remaining"]] == ["low_precision"]
    figs = {f["metric"]: f for f in d["figures"]}
    assert figs["input_pct"]["judgement"] == "better" and figs["input_pct"]["change"] < 0
    assert figs["step_time_mean_ms"]["judgement"] == "better"
    assert figs["memory_peak_bytes"]["before"] == figs["memory_peak_bytes"]["after"]
    assert figs["allreduce_ms_per_step"]["change"] == 0 and figs["allreduce_ms_per_step"]["judgement"] == "same"
    assert {"Step time", "Breakdown (% of step)", "Input", "Idle and gaps", "Precision", "Memory",
            "AllReduce"} <= {f["section"] for f in d["figures"]}
    json.dumps(d)  # plain data

    d = diff_results(after, before)
    assert d["verdict"] == "slower" and d["step_time"]["change_pct"] > 30
    assert d["verdict_text"].startswith("slower by")
    assert [f["rule"] for f in d["findings"]["new"]] == ["input_bound"]


def test_diff_unchanged_and_missing():
    a = make_result()
    d = diff_results(a, make_result())
    assert d["verdict"] == "unchanged" and d["findings"]["fixed"] == [] and len(d["findings"]["remaining"]) == 3
    b = make_result()
    b.metrics.put("t", "step_time_mean_ms", Metric(None, "ms"))
    d = diff_results(a, b)
    assert d["verdict"] == "unknown" and "after" in d["verdict_text"]
    # a figure absent on one side is listed, without a change
    fig = next(f for f in d["figures"] if f["metric"] == "step_time_mean_ms")
    assert fig["after"] is None and fig["change"] is None


def test_render_text_fits_80_columns():
    before, after = _pair()
    buf = io.StringIO()
    render_text(diff_results(before, after), Console(file=buf, width=80, color_system=None))
    out = buf.getvalue()
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "Verdict: faster by" in out
    assert "Fixed findings (1)" in out and "- input_bound [critical]" in out
    assert "New findings (1)" in out and "+ step_gaps" in out
    assert "Remaining findings (1)" in out and "= low_precision" in out
    for label in ("mean", "waiting for input", "peak in use", "AllReduce per step", "16-bit compute"):
        assert label in out


def test_diff_command_with_fake_analyze(monkeypatch):
    before, after = _pair()
    calls = []

    def fake(path, run=None, rules_dirs=()):
        calls.append((path, run))
        return before if path == "b" else after

    monkeypatch.setattr("tfadvisor.api.analyze", fake)
    runner = CliRunner()
    diff_command = typer.Typer()  # diff alone: a one-command app is that command
    diff_cli.register(diff_command)
    r = runner.invoke(diff_command, ["b", "a", "--format", "json", "--run-before", "r1", "--fail-on-regression", "5"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["verdict"] == "faster"
    assert calls == [("b", "r1"), ("a", None)]
    r = runner.invoke(diff_command, ["a", "b", "--fail-on-regression", "5"])  # swapped: slower
    assert r.exit_code == 1
    assert "slower by" in r.stdout
    r = runner.invoke(diff_command, ["a", "b", "--fail-on-regression", "1000"])  # slower, but within budget
    assert r.exit_code == 0
    r = runner.invoke(diff_command, ["a", "b", "--format", "yaml"])
    assert r.exit_code == 2


# --------------------------------------------------------------------------- the real samples, end to end


def test_diff_repeat_map_vs_tuned():
    """The defaults-on pair: the map repeated every pass, then cached (tfdata_repeat_map -> _tuned)."""
    import tfadvisor

    d = diff_results(tfadvisor.analyze(SAMPLES / "tfdata_repeat_map"),
                     tfadvisor.analyze(SAMPLES / "tfdata_repeat_map_tuned"))
    assert d["verdict"] == "faster", d["verdict_text"]
    assert d["step_time"]["change_pct"] < -20
    assert "tfdata_no_cache" in [f["rule"] for f in d["findings"]["fixed"]]
    assert "input_bound" not in [f["rule"] for f in d["findings"]["new"] + d["findings"]["remaining"]]
    inp = next(f for f in d["figures"] if f["metric"] == "input_pct")
    assert inp["judgement"] == "better"


def test_diff_fp32_vs_mixed_precision():
    """SYNTHETIC pair with the same step time: precision finding fixed, verdict unchanged."""
    import tfadvisor

    d = diff_results(tfadvisor.analyze(SAMPLES / "synthetic_gpu_fp32"),
                     tfadvisor.analyze(SAMPLES / "synthetic_gpu_mixed"))
    assert [f["rule"] for f in d["findings"]["fixed"]] == ["mixed_precision_unused"]
    assert d["findings"]["new"] == []
    assert d["verdict"] == "unchanged", d["verdict_text"]
    lp = next(f for f in d["figures"] if f["metric"] == "low_precision_pct")
    assert lp["judgement"] == "better"


def test_diff_cli_end_to_end():
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="80")
    cmd = [sys.executable, "-m", "tfadvisor", "diff"]
    slow, fast = str(SAMPLES / "tfdata_repeat_map"), str(SAMPLES / "tfdata_repeat_map_tuned")
    r = subprocess.run(cmd + [slow, fast, "--fail-on-regression", "5"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "Verdict: faster by" in r.stdout and "tfdata_no_cache" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    r = subprocess.run(cmd + [fast, slow, "--fail-on-regression", "5", "--format", "json"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 1
    d = json.loads(r.stdout)
    assert d["verdict"] == "slower" and "tfdata_no_cache" in [f["rule"] for f in d["findings"]["new"]]
    assert "regressed" in r.stderr


def test_noise_interval_separates_noise_from_a_real_change():
    """Welch 95 % interval from per-step times: same distribution -> about equal; shifted by 10 sd -> faster."""
    import pandas as pd

    from tfadvisor.report.diff import noise_interval_pct

    class R:
        def __init__(self, ms):
            self.tables = {"steps": pd.DataFrame({"ms_per_step": ms, "in_stats": [True] * len(ms)})}

    base = [10.0, 10.4, 9.6, 10.2, 9.8, 10.1, 9.9, 10.0]
    lo, hi = noise_interval_pct(R(base), R([x * 1.02 for x in base]))
    assert lo < 0 < hi  # 2 % shift, sd 2.5 %, 8 steps a side: noise
    lo, hi = noise_interval_pct(R(base), R([x * 0.7 for x in base]))
    assert hi < 0 and -33 < lo < hi < -27
    assert noise_interval_pct(R([10.0]), R(base)) is None


def test_fail_on_regression_needs_a_significant_regression():
    """keras_fit_spe4 -> keras_fit_spe1 is +5 % per step, inside the steps' noise (95 % interval -2 .. +14 %): the
    verdict is "unchanged", so --fail-on-regression 1 passes; the same budget fails a real regression."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "tfadvisor", "diff"]
    r = subprocess.run(cmd + [str(SAMPLES / "keras_fit_spe4"), str(SAMPLES / "keras_fit_spe1"), "--format", "json",
                              "--fail-on-regression", "1"], capture_output=True, text=True, env=env, timeout=300)
    d = json.loads(r.stdout)
    assert d["step_time"]["change_pct"] > 1 and d["verdict"] == "unchanged", d["verdict_text"]
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cmd + [str(SAMPLES / "tfdata_seq_map_tuned"), str(SAMPLES / "tfdata_seq_map"),
                              "--fail-on-regression", "1"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1 and "regressed" in r.stderr


def test_conditions_name_what_differs():
    import tfadvisor
    from tfadvisor.report.diff import conditions

    same = conditions(tfadvisor.analyze(SAMPLES / "tfdata_seq_map"),
                      tfadvisor.analyze(SAMPLES / "tfdata_seq_map_tuned"))
    assert same["comparable"] and same["differ"] == []
    by = {c["name"]: c for c in same["items"]}
    assert by["batch size"]["before"] is None and not by["batch size"]["differs"]  # no run file, no --batch-size
    spe = conditions(tfadvisor.analyze(SAMPLES / "keras_fit_spe1"), tfadvisor.analyze(SAMPLES / "keras_fit_spe4"))
    by = {c["name"]: c for c in spe["items"]}
    # steps_per_execution differs, but per-step time stays comparable: not a reason to distrust the verdict
    assert by["steps_per_execution"]["differs"] and spe["comparable"]
