"""The whole run (issue 53): throughput beside step time in every report, the time outside the steps by cause, the
window's place in the epochs, the unprofiled clock in tfadvisor_run.json, and the diff's verdict on the whole run.

The real pair ``run_validate_every_epoch`` -> ``run_validate_every_5th`` (sample_traces/make_whole_run_samples.py)
is closed by tests/test_closed_loop.py (faster, within 15 % of the script's wall clock per training step)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import ROOT, SAMPLES

import tfadvisor
from tfadvisor.io.runmeta import clock_facts, ignored_fields
from tfadvisor.report.diff import WHOLE_NOISE_PCT, diff_results

PROBLEM, TWIN = "run_validate_every_epoch", "run_validate_every_5th"


@pytest.fixture(scope="module")
def problem():
    return tfadvisor.analyze(SAMPLES / PROBLEM)


def test_throughput_is_first_start_to_last_end_over_the_training_steps(problem):
    """From the steps table: (the last step's end - the first step's start) / every marker's training steps."""
    for sample in (PROBLEM, "keras_fit_epochs", "loop_callback_spe10"):
        r = problem if sample == PROBLEM else tfadvisor.analyze(SAMPLES / sample)
        t = r.tables["steps"]
        start, end = t["start_ps"].to_numpy(), np.maximum(t["end_ps"].to_numpy(), t["wall_end_ps"].to_numpy())
        want = (end.max() - start.min()) / 1e9 / t["train_steps"].sum()
        assert r.metrics["throughput_ms_per_step"] == pytest.approx(want), sample
        assert r.metrics["throughput_window_ms"] == pytest.approx((end.max() - start.min()) / 1e9)


def test_outside_time_split_by_cause(problem):
    """Evaluation, checkpoints and epoch ends add up to the time outside the steps; the planted evaluation (300 batches
    at 2 of the window's epoch ends, 20 training steps) is its largest part: 600 evaluation steps, 30 per step."""
    m = problem.metrics
    parts = m["outside_eval_ms"] + m["outside_checkpoint_ms"] + m["outside_epoch_end_ms"]
    assert parts == pytest.approx(m["outside_ms"])
    assert m["outside_eval_count"] == 2 and m["outside_eval_steps"] == 600
    assert m["outside_eval_steps_per_train_step"] == pytest.approx(30.0)
    assert m["outside_eval_ms"] > m["outside_epoch_end_ms"] and m["outside_eval_pct"] >= 25
    top = problem.findings[0]
    assert top.rule == "outside_evaluation" and "validation_freq" in top.fix and "validation_steps" in top.fix
    # a node of its own beside the epoch ends', not folded into one finding of the time outside the steps
    rules = [f.rule for f in problem.findings]
    # each evaluation lasts to its iterator's teardown (a 0.6 s handle deletion after its last step): the little
    # left of the epoch ends is no finding; the fix recovers four fifths of the evaluation (every 5th epoch)
    assert m["outside_epoch_end_pct"] < 1 and "outside_epoch_end" not in rules
    assert top.impact_pct == pytest.approx(0.8 * m["outside_eval_pct"], abs=0.01)


def test_run_file_clock_of_the_pair():
    """The callback's clock on both sides of the window: each epoch's last interval holds the evaluation (its own time
    recorded), the fit's first epoch left out (10 steps: tracing), the window's 20 steps inside but the last."""
    md = json.loads(next((SAMPLES / PROBLEM).rglob("tfadvisor_run.json")).read_text())
    clock, notes = clock_facts(md)
    assert not notes and md["steps"]["starts_at_epoch_step"] == 5 and md["steps"]["steps_per_epoch"] == 10
    before, after = clock["before"], clock["after"]
    assert sum(before["steps"]) == 15 and sum(after["steps"]) == 115 and len(clock["inside"]["ms"]) == 19
    for side in (before, after):
        held = [i for i, k in enumerate(side["kind"]) if k]
        assert all(side["kind"][i] == "validation" and 0 < side["eval_ms"][i] < side["ms"][i] for i in held)
    assert len([k for k in before["kind"] + after["kind"] if k]) == 13  # epochs 1-15 less the window's 2


def test_window_across_epochs_is_said(problem):
    text = problem.metrics["window_epochs_text"]
    assert problem.metrics["window_epochs"] == "crosses epochs"
    assert "starts mid-epoch, at step 5 of 10" in text and "holds 2 epoch ends" in text
    assert "ends mid-epoch, at step 5 of 10" in text


def test_every_report_shows_throughput_beside_step_time(problem, tmp_path):
    tp = problem.metrics["throughput_ms_per_step"]
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(SAMPLES / PROBLEM), "--format", "json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    d = json.loads(r.stdout)
    assert d["summary"]["throughput_ms_per_step"] == pytest.approx(tp)
    assert d["summary"]["profiler_inflation_source"] == "clock"
    text = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(SAMPLES / PROBLEM)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300).stdout
    lines = text.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip().startswith("step time"))
    assert lines[i + 1].strip().startswith("throughput"), lines[i:i + 2]  # beside step time
    md = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(SAMPLES / PROBLEM), "--format",
                         "markdown"], capture_output=True, text=True, cwd=ROOT, timeout=300).stdout
    assert "Throughput (ms per step, evaluation and epoch ends included)" in md and "Unprofiled step time" in md
    html = tmp_path / "r.html"
    subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(SAMPLES / PROBLEM), "--html", str(html)],
                   capture_output=True, text=True, cwd=ROOT, timeout=300, check=True)
    assert "Throughput (ms per step, evaluation and epoch ends included)" in html.read_text()


def test_pair_diff_is_on_the_unprofiled_clock():
    """Both captures have the callback's clock: the verdict is on it, and both profiled figures are shown."""
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "diff", str(SAMPLES / PROBLEM), str(SAMPLES / TWIN),
                        "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    d = json.loads(r.stdout)
    assert d["verdict_on"] == "unprofiled" and d["verdict"] == "faster"
    assert "unprofiled clock" in d["verdict_text"] and "step time" in d["verdict_text"]
    assert "throughput" in d["verdict_text"]
    assert d["verdict_speedup"] == pytest.approx(d["unprofiled"]["speedup"])
    names = {f["metric"] for f in d["figures"]}
    assert {"throughput_ms_per_step", "unprofiled_ms_per_step", "step_time_mean_ms"} <= names


def test_same_capture_twice_is_unchanged_on_the_clock(problem):
    """A capture against itself: the unprofiled clock's verdict is unchanged, its noise interval holding 0."""
    d = diff_results(problem, problem)
    assert d["verdict_on"] == "unprofiled" and d["verdict"] == "unchanged", d["verdict_text"]
    lo, hi = d["unprofiled"]["interval_pct"]
    assert lo < 0 < hi


def _result(**metrics):
    return SimpleNamespace(metrics=metrics, tables={}, findings=[], run=None, options=None)


@pytest.mark.parametrize("step_b,step_a,tp_b,tp_a,on,verdict", [
    (47.5, 62.8, 320.0, 52.0, "throughput", "faster"),  # the pair: step time slower, the run 6x faster
    (40.0, 20.0, 60.0, 40.0, "step_time", "faster"),  # both faster: step time's verdict
    (40.0, 20.0, 60.0, 59.0, "step_time", "faster"),  # throughput within its noise: step time's
    (20.0, 20.1, 30.0, 60.0, "throughput", "slower"),  # evaluation added: steps unchanged, the run slower
])
def test_diff_verdict_on_throughput_when_they_disagree(step_b, step_a, tp_b, tp_a, on, verdict):
    d = diff_results(_result(step_time_mean_ms=step_b, throughput_ms_per_step=tp_b),
                     _result(step_time_mean_ms=step_a, throughput_ms_per_step=tp_a))
    assert d["verdict_on"] == on and d["verdict"] == verdict, d["verdict_text"]
    if on == "throughput":
        assert "throughput moved" in d["verdict_text"] and "step time alone" in d["verdict_text"]
        assert d["verdict_change_pct"] == pytest.approx((tp_a - tp_b) / tp_b * 100)
    assert abs(d["throughput"]["change_pct"]) >= WHOLE_NOISE_PCT or on == "step_time"


def test_diff_unprofiled_clock_takes_the_verdict_when_both_have_it():
    d = diff_results(_result(step_time_mean_ms=40.0, throughput_ms_per_step=60.0, unprofiled_ms_per_step=50.0),
                     _result(step_time_mean_ms=20.0, throughput_ms_per_step=40.0, unprofiled_ms_per_step=55.0))
    assert d["verdict_on"] == "unprofiled" and d["verdict"] == "slower"
    one = diff_results(_result(step_time_mean_ms=40.0, unprofiled_ms_per_step=50.0), _result(step_time_mean_ms=20.0))
    assert one["verdict_on"] == "step_time" and one["unprofiled"] is None


BAD_CLOCKS = [
    "fast", 3, [1, 2],
    {"before": {"ms": [1.0, "x"], "steps": [1, 1]}},
    {"before": {"ms": [1.0, math.nan], "steps": [1, 1]}},
    {"before": {"ms": [1.0, 1e400], "steps": [1, 1]}},
    {"before": {"ms": [1.0, -2.0], "steps": [1, 1]}},
    {"before": {"ms": [1.0, 2.0], "steps": [1]}},
    {"before": {"ms": [1.0, 2.0], "steps": [1, 0]}},
    {"before": {"ms": [1.0, 2.0], "steps": [1, 1.5]}},
    {"before": {"ms": [1.0, 2.0], "steps": [1, True]}},
    {"before": {"ms": [1.0, 2.0], "steps": [1, 1], "kind": ["", "lunch"]}},
    {"before": {"ms": [1.0, 2.0], "steps": [1, 1], "eval_ms": [0.0]}},
    {"after": {"ms": [1.0] * 100_001, "steps": [1] * 100_001}},
    {"inside": "x"},
]


@pytest.mark.parametrize("bad", BAD_CLOCKS, ids=range(len(BAD_CLOCKS)))
def test_bad_clock_is_a_note_never_a_crash(bad, tmp_path):
    """Other tools write tfadvisor_run.json: a clock that cannot be used is ignored with a note, and the report is
    made (an estimate of the inflation instead)."""
    md = {"clock": bad}
    got, notes = clock_facts(md)
    assert not got and len(notes) == 1 and any("clock" in n for n in ignored_fields(md))
    import shutil

    run = tmp_path / "run"
    src = next((SAMPLES / PROBLEM).rglob("tfadvisor_run.json")).parent
    shutil.copytree(src, run)
    meta = json.loads((run / "tfadvisor_run.json").read_text())
    meta["clock"] = bad
    (run / "tfadvisor_run.json").write_text(json.dumps(meta))
    res = tfadvisor.analyze(run)
    assert res.metrics["profiler_inflation_source"] == "estimate"
    assert any("clock" in n for n in res.notes)
