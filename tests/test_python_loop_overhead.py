"""A custom loop losing about a fifth of each step to Python (``float(loss)`` + numpy work) gets a
python_overhead finding whose size matches the cost measured outside tfadvisor.

The sample ``custom_loop_python`` is a real capture (sample_traces/make_samples.py); its
measured.json holds the planted cost measured two ways: perf_counter around the host work in
the profiled steps (``python_pct``) and by removing the work (``python_pct_by_removal``).
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

import tfadvisor

SAMPLE = ROOT / "sample_traces" / "custom_loop_python"
MEASURED = json.loads((SAMPLE / "measured.json").read_text())


@pytest.fixture(scope="module")
def result():
    return tfadvisor.analyze(str(SAMPLE))


def test_planted_cost_is_what_the_issue_describes():
    # a sixth to a quarter of the step, by both measurements
    assert 15.0 <= MEASURED["python_pct"] <= 30.0
    assert 15.0 <= MEASURED["python_pct_by_removal"] <= 30.0


def test_python_overhead_fires_with_the_measured_size(result):
    f = next((f for f in result.findings if f.rule == "python_overhead"), None)
    assert f is not None, [x.rule for x in result.findings]
    assert result.findings[0].rule == "python_overhead"
    # measured: 18.5 % against 19.7 % by perf_counter (6 % apart) and 24.4 % by removal (24 % apart: removing
    # the work also removes its knock-on costs, allocation and GIL hand-offs, which the trace puts elsewhere)
    for truth in (MEASURED["python_pct"], MEASURED["python_pct_by_removal"]):
        assert f.impact_pct == pytest.approx(truth, rel=0.25)
    # xprof's overview puts the same time in "All Others" (measured: 18.54 against 18.6, 0.3 %)
    assert f.impact_pct == pytest.approx(MEASURED["xprof_overview"]["conclusion_pct"], rel=0.25)
    # one number: the message and the evidence say what the impact says
    assert f"{f.impact_pct:.0f} % of step time" in f.message
    assert f.evidence["python_overhead_pct"] == pytest.approx(f.impact_pct, abs=0.01)


def test_per_step_python_time_matches_perf_counter(result):
    m = result.metrics
    steps = result.tables["steps"]
    used = steps["in_stats"].to_numpy(bool)
    python_ms = [v for v, u in zip(MEASURED["python_ms"], used) if u]
    assert len(steps) == len(MEASURED["python_ms"]) == 14
    # measured: 14.15 ms against 14.64 ms by perf_counter (3.3 %); the removal figure (24 % apart) bounds it
    assert m["python_overhead_ms_per_step"] == pytest.approx(sum(python_ms) / len(python_ms), rel=0.25)


def test_tf_function_call_overhead_is_kept_apart(result):
    m = result.metrics
    # the Python side of the tf.function call is not the user's Python: small here, and not in python_overhead
    assert 0.0 < m["function_call_overhead_pct"] < 5.0
    assert m["python_overhead_pct"] + m["function_call_overhead_pct"] <= 100.0


def test_a_loop_without_host_work_gets_no_finding():
    res = tfadvisor.analyze(str(ROOT / "sample_traces" / "tfdata_seq_map_tuned"))
    assert res.metrics["python_overhead_pct"] < 10.0
    assert "python_overhead" not in {f.rule for f in res.findings}
