"""Host overheads inside steps: kernel launches and Python.

* ``kernel_launch_pct``: the steps analysis' ``kernel_launch`` category: time the host
  spends in CUDA launch calls (``cuLaunchKernel``, ``cudaLaunchKernel``, ...) while the
  device computes nothing, % of step time (xprof's "kernel launch"). ``kernel_launch_host_pct``
  is all launch-call time inside steps, hidden or not.
* ``python_overhead_pct``: time inside steps during which the host runs no TF work: the
  python thread is in no TF call (op dispatch, function execution, iterator, ...), and no
  TF op, runtime, launch or input wait runs on another host thread; % of step time. The
  host tracer does not record Python itself, so this is the Python the trace leaves
  unexplained (python-tracer frames and the Python side of ``tf.function`` calls count as
  Python). Device activity does not count as covering it: the time is still spent on the
  host's critical path between TF calls.
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context
from tfadvisor.analyses.steps import (
    L_PYTHON,
    M_FRAME,
    STEP_STATS,
    LazyUnion,
    Measure,
    activity,
    step_spans,
    step_table,
    union_rows,
)
from tfadvisor.trace import Trace


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
    s, e = p.ev_start_ps[rows], p.ev_end_ps[rows]
    if starts.shape[0]:
        k = np.searchsorted(starts, s, side="left")
        kk = np.minimum(k, starts.shape[0] - 1)
        drop |= (k < starts.shape[0]) & (starts[kk] >= s) & (ends[kk] <= e)
    return rows[~drop & (e > s)]


def analyze(trace: Trace, ctx: Context) -> AnalysisResult:
    res = AnalysisResult("overhead")
    act = activity(trace, ctx)
    tbl = step_table(ctx)
    names = ["kernel_launch_pct", "kernel_launch_host_pct", "python_overhead_pct", "python_overhead_ms_per_step"]
    if tbl is None:
        res.missing(names, "no steps found: overheads are measured per step")
        return res
    a, b, in_stats, tot = step_spans(tbl)
    g = act.get

    launch = g("launch")
    if len(launch) == 0:
        why = "CPU-only trace: no kernel launches" if not act.has_device else \
            "no CUDA launch calls on the host (the CUPTI driver API was not traced)"
        res.missing(["kernel_launch_pct", "kernel_launch_host_pct"], why)
    else:
        exposed = tbl["kernel_launch_ms"].to_numpy(np.float64) * PS_PER_MS
        res.add("kernel_launch_pct", 100.0 * float(exposed[in_stats].sum()) / tot if tot > 0 else None, "%",
                "launch-call time while the device computes nothing, % of step time")
        raw = launch.within(a, b)
        res.add("kernel_launch_host_pct", 100.0 * float(raw[in_stats].sum()) / tot if tot > 0 else None, "%",
                "all launch-call time inside steps, % of step time")

    p = act.host
    if p is None:
        res.missing(["python_overhead_pct", "python_overhead_ms_per_step"], "no host plane")
        return res
    order = np.argsort(a, kind="stable")
    pr = python_tf_rows(act, ctx, a[order], b[order])
    # TF work: on the python thread its TF calls, on every other training thread any event
    # (ops, launches, the executor, collectives), and the input waits on the tf.data consumer thread
    covered = LazyUnion(Measure.of_rows(p, pr), *[g(n) for n in ("train_threads", "func", "eager", "input_wait")])
    py = (b - a) - covered.within(a, b)
    n = int(in_stats.sum())
    res.add("python_overhead_pct", 100.0 * float(py[in_stats].sum()) / tot if tot > 0 else None, "%",
            "host time inside steps outside any TF call or op, % of step time")
    res.add("python_overhead_ms_per_step", float(py[in_stats].sum()) / PS_PER_MS / n if n else None, "ms",
            "the same, per step")
    return res


__all__ = ["analyze", "python_tf_rows"]
