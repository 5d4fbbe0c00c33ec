"""Host overheads inside steps (inside the step markers; shares are of the steps' wall time): kernel
launches and Python.

* ``kernel_launch_pct``: the steps analysis' ``kernel_launch`` category: time the host
  spends in CUDA launch calls (``cuLaunchKernel``, ``cudaLaunchKernel``, ...) while the
  device computes nothing, % of step time (xprof's "kernel launch"). ``kernel_launch_host_pct``
  is all launch-call time inside steps, hidden or not.
* ``python_overhead_pct``: time inside steps during which the host runs no TF work: the
  python thread is in no TF call (op dispatch, function execution, iterator, ...), and no
  TF op, runtime, launch or input wait runs on another host thread; % of step time. The
  host tracer does not record Python itself, so this is the Python the trace leaves
  unexplained (python-tracer frames count as Python). Device activity does not count as
  covering it: the time is still spent on the host's critical path between TF calls.
  Calibrated on ``sample_traces/custom_loop_python`` against the host work's cost measured
  by removing it.
* ``function_call_overhead_pct``: the Python side of ``tf.function`` calls (inside an event
  with a ``tf_function_call`` stat, outside its TF work: argument handling, dispatch), % of
  step time. Kept out of ``python_overhead_pct``: removing the user's per-step Python does
  not remove it; fewer calls (several steps per call) do.
* ``step_outliers_excess_pct``: the time the outlier steps (the steps table's ``outlier``
  column) take beyond the median step, summed over them, % of the time of all steps: what
  making them ordinary steps would save. ``step_outliers_excess_ms`` is the same in ms.
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses.activity import L_PYTHON, M_FRAME, STEP_STATS, Activity, union_rows
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.steps import step_spans, training_steps
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import LazyUnion, Measure, contains_any


def python_tf_rows(act, ctx: Context, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Python-thread events that are TF work (not markers, step wrappers, frames or tf.function wrappers)."""
    p = act.host
    rows = act.rows.get("python_all", np.empty(0, np.int64))
    if rows.shape[0] == 0:
        return rows
    drop = np.isin(rows, union_rows(act.rows.get("roots"), act.rows.get("profiled_batch"),
                                    act.code_rows((L_PYTHON,), (M_FRAME,))))
    fc = ctx.stats(p, STEP_STATS)["tf_function_call"]
    if len(fc):
        drop |= np.isin(rows, fc.rows)
    s, e = p.ev_start_ps[rows], p.ends(rows)
    drop |= contains_any(s, e, starts, ends)  # wrappers around whole steps
    return rows[~drop & (e > s)]


#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = STEP_STATS

DECLARED = declare(
    "overhead",
    ("step_outliers_excess_ms", "ms", "time the outlier steps take beyond the median step, summed"),
    ("step_outliers_excess_pct", "%", "the same, % of the time of all steps: what making the outliers median steps "
                                      "would save (the outlier steps' time beyond the median step, summed; % of all "
                                      "step time)"),
    ("kernel_launch_pct", "%", "launch-call time while the device computes nothing, % of step time"),
    ("kernel_launch_host_pct", "%", "all launch-call time inside steps, % of step time"),
    ("python_overhead_pct", "%", "host time inside steps outside any TF call or op and outside tf.function calls, % "
                                 "of step time"),
    ("python_overhead_ms_per_step", "ms", "the same, per step"),
    ("function_call_overhead_pct", "%", "Python side of tf.function calls inside steps (in the call, outside its TF "
                                        "work), % of step time"),
    doc="`kernel_launch_pct` is the exposed launch time (the `kernel_launch` step category, as xprof); "
        "`kernel_launch_host_pct` (all launch-call time inside steps, hidden or not). `python_overhead_pct`: time "
        "inside steps with no TF call on the python thread and no TF op/runtime/launch/input wait on any host thread "
        "(python-tracer frames and the Python side of tf.function calls count as Python)",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("overhead")
    tbl = step_table
    names = ["kernel_launch_pct", "kernel_launch_host_pct", "python_overhead_pct", "python_overhead_ms_per_step",
             "function_call_overhead_pct", "step_outliers_excess_ms", "step_outliers_excess_pct"]
    if tbl is None:
        res.missing(names, "no steps found: overheads are measured per step")
        return res
    a, _, in_stats, tot = step_spans(tbl)  # shares of the steps' wall time
    b = tbl["end_ps"]  # measured inside the markers: between them is the gaps' time
    g = act.get
    _outlier_excess(res, tbl)

    launch = g("launch")
    if len(launch) == 0:
        why = "CPU-only trace: no kernel launches" if not act.has_device else \
            "no CUDA launch calls on the host (the CUPTI driver API was not traced)"
        res.missing(["kernel_launch_pct", "kernel_launch_host_pct"], why)
    else:
        exposed = tbl["kernel_launch_ms"] * PS_PER_MS
        res.add("kernel_launch_pct", 100.0 * float(exposed[in_stats].sum()) / tot if tot > 0 else None)
        raw = launch.within(a, b)
        res.add("kernel_launch_host_pct", 100.0 * float(raw[in_stats].sum()) / tot if tot > 0 else None)

    p = act.host
    if p is None:
        res.missing(["python_overhead_pct", "python_overhead_ms_per_step", "function_call_overhead_pct"],
                    "no host plane")
        return res
    order = np.argsort(a, kind="stable")
    pr = python_tf_rows(act, ctx, a[order], b[order])
    # TF work: on the python thread its TF calls, on every other training thread any event
    # (ops, launches, the executor, collectives), and the input waits on the tf.data consumer thread
    parts = [Measure.of_rows(p, pr), *[g(n) for n in ("train_threads", "func", "eager", "input_wait")]]
    tf_work = LazyUnion(*parts).within(a, b)
    # The Python side of tf.function calls (argument handling before and after the execution)
    # is the cost of calling the function, not of the user's Python: kept apart.
    fc = ctx.stats(p, STEP_STATS)["tf_function_call"]
    fc_rows = np.sort(fc.rows) if len(fc) else np.empty(0, np.int64)
    with_calls = LazyUnion(*parts, Measure.of_rows(p, fc_rows)).within(a, b) if fc_rows.shape[0] else tf_work
    py = (b - a) - with_calls
    n = training_steps(tbl, in_stats)
    res.add("python_overhead_pct", 100.0 * float(py[in_stats].sum()) / tot if tot > 0 else None)
    res.add("python_overhead_ms_per_step", float(py[in_stats].sum()) / PS_PER_MS / n if n else None)
    call = with_calls - tf_work
    res.add("function_call_overhead_pct", 100.0 * float(call[in_stats].sum()) / tot if tot > 0 else None)
    return res


def _outlier_excess(res: AnalysisResult, tbl) -> None:
    """Time the outlier steps take beyond the median step (over all steps, as the outliers are found)."""
    names = ["step_outliers_excess_ms", "step_outliers_excess_pct"]
    if "outlier" not in tbl or "duration_ms" not in tbl or not len(tbl):
        res.missing(names, "no step durations")
        return
    dur = tbl["duration_ms"]
    out = tbl["outlier"]
    excess = float(np.clip(dur[out] - np.median(dur), 0.0, None).sum())
    total = float(dur.sum())
    res.add("step_outliers_excess_ms", excess)
    res.add("step_outliers_excess_pct", 100.0 * excess / total if total > 0 else None)


__all__ = ["analyze", "python_tf_rows"]
