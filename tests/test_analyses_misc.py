"""gaps, eager and overhead on the samples: the metrics the planted findings rest on, the
planted numbers where the generators measured them, and missing-data behaviour."""

from __future__ import annotations

import json

import pytest
from conftest import SAMPLES, expected, sample_dirs
from test_analyses_steps import _host_arg, run_mine


def _first_host(sample: str) -> str | None:
    hosts = sorted({x.name.split(".xplane.pb")[0] for x in (SAMPLES / sample).rglob("*.xplane.pb")})
    return _host_arg(sample, hosts[0]) if hosts else None


def _measured(sample: str) -> dict:
    f = SAMPLES / sample / "measured.json"
    return json.loads(f.read_text()) if f.is_file() else {}


# finding id -> (metric, threshold it must reach when present / stay under when absent)
THRESHOLD_OF = {
    "step_gaps": ("idle_between_steps_pct", 10.0),
    "eager_execution": ("eager_pct", 10.0),
    "retracing": ("retrace_count", 2),
    "python_overhead": ("python_overhead_pct", 10.0),
    "kernel_launch_bound": ("kernel_launch_pct", 3.0),
}


def _decided_here(sample: str) -> bool:
    f = expected(SAMPLES / sample).get("findings", {})
    return bool(set(THRESHOLD_OF) & set(f.get("present", []) + f.get("absent", [])) - {"python_overhead"}) or \
        "python_overhead" in f.get("present", [])


@pytest.mark.parametrize("sample", [p.name for p in sample_dirs() if _decided_here(p.name)])
def test_metrics_behind_planted_findings(sample):
    f = expected(SAMPLES / sample).get("findings", {})
    ctx = run_mine(sample, _first_host(sample))
    checked = 0
    for rid, (m, thr) in THRESHOLD_OF.items():
        v = ctx.metric(m)
        if rid in f.get("present", []):
            assert v is not None and v >= thr, f"{sample}: {m} = {v}, planted {rid}"
            checked += 1
        elif rid in f.get("absent", []) and rid != "python_overhead":
            # python_overhead may be high where eager dispatch or retracing explains it
            assert v is None or v < thr, f"{sample}: {m} = {v}, but {rid} is planted absent"
            checked += 1
    assert checked


def test_step_gaps_sample_gaps():
    m = _measured("step_gaps")
    ctx = run_mine("step_gaps")
    n = ctx.metric("steps_count")
    assert ctx.metric("gaps_count") == n - 1  # one sleep after every step but the last inside the window
    # measured: 100.18 ms against the planted 100 ms sleep (0.2 %); 15 % leaves room for a sleep that
    # oversleeps on a loaded host when the sample is captured again
    assert ctx.metric("gap_mean_ms") == pytest.approx(m["sleep_ms"], rel=0.15)
    assert ctx.metric("gap_host_activity") == "idle"  # time.sleep: nothing traced
    assert ctx.metric("idle_between_steps_pct") > ctx.metric("idle_within_steps_pct")


def test_gaps_with_python_frames_name_the_host_work():
    names = [p.name for p in sample_dirs() if "step_gaps" in expected(p).get("findings", {}).get("present", [])
             and expected(p).get("kind") == "synthetic"]
    assert names, "no synthetic gap sample"
    for name in names:
        ctx = run_mine(name, _first_host(name))
        assert ctx.metric("gap_host_activity") in ("python", "callbacks")
        assert ctx.metric("gap_host_python_pct") > 50


def test_retracing_counts_every_profiled_step():
    m = _measured("retracing")
    ctx = run_mine("retracing")
    traced = sum(v for k, v in m["files"]["localhost"]["tf_function_call"].items() if k.startswith("traced"))
    assert ctx.metric("retrace_count") == traced == ctx.metric("steps_count")
    assert ctx.metric("retraced_functions")
    tbl = ctx.table("tf_functions")
    assert int(tbl["retraces"].sum()) == traced


def test_no_retrace_when_functions_were_traced_before_the_window():
    """tracing_count 2 on notTraced calls (traced during warm-up) is no retrace."""
    ctx = run_mine("tfdata_seq_map_tuned")
    assert ctx.metric("tf_function_calls") >= 1
    assert ctx.metric("retrace_count") == 0


@pytest.mark.parametrize("sample", ["python_overhead", "custom_loop_python"])
def test_python_overhead_matches_xprof_other_time(sample):
    """Host time inside steps with no TF work: xprof's 'All Others' per step, recorded at capture time."""
    xprof = _measured(sample)["xprof_overview"]
    ctx = run_mine(sample)
    # measured: 0.026 and 0.049 ms apart; xprof prints its figure to 0.1 ms (rounding: up to 0.05)
    assert ctx.metric("python_overhead_ms_per_step") == pytest.approx(xprof["other_ms_avg"], abs=0.06)
    assert ctx.metric("python_overhead_pct") == pytest.approx(
        100 * xprof["other_ms_avg"] / xprof["rows_step_time_ms_mean"], rel=0.01)
    if sample == "python_overhead":
        assert ctx.metric("idle_within_steps_pct") > 40  # the TF threads idle meanwhile


@pytest.mark.parametrize("sample", [
    pytest.param("python_overhead", marks=pytest.mark.xfail(strict=True, reason=(
        "tool 65.4 % (= xprof's All Others) vs 74.2 % timed: the timed Python holds .numpy() calls the "
        "trace shows as TF ops: a difference of definition, kept visible, not loosened"))),
    "custom_loop_python"])
def test_python_overhead_against_wall_clock(sample):
    """The generator timed the pure-Python work inside each step with perf_counter (in-stats steps)."""
    m = _measured(sample)
    py, st = m["python_ms"][1:-1], m["measured_step_ms"][1:-1]
    ctx = run_mine(sample)
    # measured: 3.4 % apart on custom_loop_python (12 % on python_overhead: the xfail above says why)
    assert ctx.metric("python_overhead_pct") == pytest.approx(100 * sum(py) / sum(st), rel=0.05)


def test_eager_sample_counts_ops_not_input():
    ctx = run_mine("eager")
    assert ctx.metric("eager_op_count") == _measured("eager")["files"]["localhost"]["eager_op_dispatch"]
    # next(iterator) dispatches IteratorGetNext eagerly: that is input wait, not eager overhead
    ib = run_mine("input_bound_defaults_off")
    assert ib.metric("eager_pct") < 10 and ib.metric("input_pct") > 50


def test_missing_data_notes():
    ctx = run_mine("eager")
    ov = ctx.results["overhead"]
    assert ov.metrics["kernel_launch_pct"].value is None and any("kernel launches" in n for n in ov.notes)
    eg = ctx.results["eager"]
    assert eg.metrics["retrace_count"].value is None and any("tf.function" in n for n in eg.notes)
    st = ctx.results["steps"]
    assert st.metrics["step_kernel_launch_pct"].value is None
