"""Eager execution and tf.function retracing.

* Eager ops: ``EagerExecute`` events with ``is_func`` 0 (an op dispatched from Python one
  at a time) that are not inside a function execution on the same thread. ``eager_pct`` is
  their wall time (union) as % of the profiled training wall time: from the first step's
  start to the last step's end less the intervals between steps labelled validation or epoch
  end (Keras' evaluation and epoch-end callbacks run eager ops that are not the training
  loop's), else the trace span.
* The steps that hold occasional work (a checkpoint, an evaluation: the ``variation`` analysis'
  ``step_patterns``) are left out of that wall time: the ops such work dispatches eagerly are its cost
  (``periodic_*``), not a train step run eagerly.
* JAX: ``xla_executions_per_step`` counts the XLA programs the host ran per training step (PjRt's
  ``...LoadedExecutable::Execute`` events): 1 or a few under ``jax.jit``, one per operation when the
  step runs op by op from Python.
* tf.function: events carrying ``tf_function_call`` (``notTraced-nonXla``,
  ``traced-nonXla``, ``traced-xla``...) are calls of a ``tf.function``; ``tracing_count``
  counts that function's traces so far. A call that traced (``traced-*``) with
  ``tracing_count`` of 2 or more is a retrace. Without ``tf_function_call`` the growth of
  ``tracing_count`` per function over the window counts instead.
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses.activity import STEP_STATS, Activity
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.steps import training_steps
from tfadvisor.analyses.variation import held_steps
from tfadvisor.model.table import Table, factorize, group_sum
from tfadvisor.model.trace import Trace
from tfadvisor.model.values import to_int64
from tfadvisor.spans.intervals import Measure, difference, union_of

#: Eager ops that fetch the next batch: their time is input wait.
#: Ops that fetch input or make an iterator (``iter(ds)``): the input pipeline's time (tfdata counts an
#: iterator made in every step), not eager overhead.
INPUT_OPS = frozenset({"OptionalGetValue", "OptionalHasValue", "IteratorGetNextAsOptional", "IteratorGetNextSync",
                       "MultiDeviceIteratorGetNextFromShard", "MakeIterator", "AnonymousIterator",
                       "AnonymousIteratorV2", "AnonymousIteratorV3", "DeleteIterator"})


def _windows(tbl: Table | None, act) -> tuple[np.ndarray, np.ndarray]:
    """The profiled training wall time as disjoint windows (start_ps, end_ps): the first step's
    start to the last step's end less the intervals between steps that the steps analysis labels
    as not training (``preceded_by``: validation, epoch end); the trace span without steps."""
    if tbl is None:
        lo, hi = act.span
        return np.array([lo], np.int64), np.array([hi], np.int64)
    order = np.argsort(tbl["start_ps"], kind="stable")
    a = tbl["start_ps"][order]
    b = tbl["end_ps"][order]
    after = tbl["preceded_by"][order]
    cut = np.flatnonzero(np.array([bool(x) for x in after[1:]], bool)) + 1  # steps after a non-train interval
    starts = np.concatenate([a[:1], a[cut]])
    ends = np.concatenate([np.maximum.accumulate(b)[cut - 1], [int(b.max())]])
    return starts, np.maximum(ends, starts)


def _occasional_spans(ctx: Context, tbl: Table | None) -> tuple[np.ndarray, np.ndarray]:
    """The wall spans of the steps that hold occasional work (the variation analysis' patterns): ops a
    checkpoint or an evaluation dispatches eagerly there are that work's, not the train step's."""
    pat = ctx.table("step_patterns")
    if tbl is None or pat is None or not len(pat):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    held = set().union(*held_steps(pat))
    rows = np.flatnonzero(np.isin(np.asarray(tbl["step"]), list(held)))
    order = np.argsort(np.asarray(tbl["start_ps"])[rows], kind="stable")
    rows = rows[order]
    return np.asarray(tbl["start_ps"])[rows], np.asarray(tbl["wall_end_ps"])[rows]


#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("eager_op",) + STEP_STATS

DECLARED = declare(
    "eager",
    ("eager_op_count", "count", "ops dispatched eagerly (EagerExecute, is_func 0, outside functions; input fetches "
                                "left out) in the profiled wall time"),
    ("eager_pct", "%", "eager op time (union, input waits left out), % of the profiled wall time (eager op time, % "
                       "of profiled wall time of the training thread)"),
    ("eager_ms", "ms", "eager op time over the profiled wall time"),
    ("xla_executions_per_step", "count", "XLA programs executed per training step (PjRt `LoadedExecutable::Execute` "
                                         "events inside the steps, per step): one per operation without jax.jit"),
    ("tf_function_calls", "count", "tf.function calls in the profile"),
    ("retrace_count", "count", "tf.function retraces in the profile (traced calls with tracing_count >= 2) "
                               "(tracing_count growth over the window)"),
    ("retraced_functions", "", "functions that retraced (comma-separated names)"),
    ("retrace_pct", "%", "time in tf.function calls that traced, % of the profiled wall time"),
    doc="`eager_ms` (eager op time over the profiled wall time); input fetches dispatched eagerly "
        "(`IteratorGetNext*`, `Optional*`) are input, not eager time; `retrace_pct` (time in tf.function calls that "
        "traced, % of wall time)",
    tables="`tf_functions`; `tf_functions` (function, calls, traced_calls, retraces, tracing_count_min/max, "
           "total_ms, mean_ms)",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("eager")
    p = act.host
    if p is None:
        res.missing(["eager_pct", "eager_op_count", "tf_function_calls", "retrace_count", "retraced_functions"],
                    "no host plane: eager execution and tf.function calls are host events")
        return res
    w = difference(*_windows(step_table, act), *_occasional_spans(ctx, step_table))
    wall = int((w[1] - w[0]).sum())
    er = act.rows.get("eager", np.empty(0, np.int64))
    if not p.meta_mask("EagerExecute").any():
        res.missing(["eager_pct", "eager_op_count"], "no EagerExecute events: the host tracer level may be too low "
                                                    "or no op was dispatched from Python", tf_only=True)
    else:
        # Ops that fetch input (IteratorGetNext, Optional*) are input time, not eager overhead.
        op_names = p.stat("eager_op", er).strings_at(er)
        is_input = np.array([bool(n) and (str(n).startswith("IteratorGetNext") or str(n) in INPUT_OPS)
                             for n in op_names], bool) if er.shape[0] else np.zeros(0, bool)
        sel = er[~is_input]
        if sel.shape[0]:  # ops overlapping a training window
            sel = sel[Measure(w[0], w[1], disjoint=True).within(p.ev_start_ps[sel], p.ends(sel)) > 0]
        res.add("eager_op_count", int(sel.shape[0]))
        em = Measure.of_rows(p, sel)
        inp = act.get("input_wait")
        # eager time not spent waiting for input
        eager_ps = int(union_of(em, inp).within(*w).sum() - inp.within(*w).sum()) if wall > 0 else 0
        res.add("eager_pct", 100.0 * eager_ps / wall if wall > 0 else None)
        res.add("eager_ms", eager_ps / PS_PER_MS)

    _xla_executions(res, p, step_table)
    st = ctx.stats(p, STEP_STATS)
    call = st["tf_function_call"]
    tc = st["tracing_count"]
    if len(call) == 0 and len(tc) == 0:
        res.missing(["tf_function_calls", "retrace_count", "retraced_functions"],
                    "no tf.function call events (tf_function_call / tracing_count stats)", tf_only=True)
        return res
    rows = np.union1d(call.rows, tc.rows)  # few rows
    kind = call.strings_at(rows)
    count = tc.values_at(rows)
    names = p.names_of(rows).astype(str).astype(object)
    start = p.ev_start_ps[rows]
    dur = p.ev_dur_ps[rows].astype(np.float64)
    has_kind = np.array([k is not None for k in kind], bool)
    traced = np.array([k is not None and str(k).startswith("traced") for k in kind], bool)
    retrace = traced & (count >= 2)
    codes, functions = factorize(names)  # in order of first call
    nf = len(functions)
    calls = np.bincount(codes, minlength=nf)
    total_ms = group_sum(codes, dur, nf) / PS_PER_MS
    tc_min = np.full(nf, np.nan)
    tc_max = np.full(nf, np.nan)
    for i in range(nf):  # few functions
        c = count[codes == i]
        c = c[~np.isnan(c)]
        if c.shape[0]:
            tc_min[i], tc_max[i] = c.min(), c.max()
    retraces = np.bincount(codes, weights=retrace, minlength=nf).astype(int)
    if not has_kind.any():  # no call kinds: count tracing_count growth
        retraces = to_int64(tc_max - tc_min)
        res.qualify(("retrace_count", "retrace_pct", "retraced_functions"),
                    "no tf_function_call stat: retraces counted as tracing_count growth over the window")
    order = np.argsort(-total_ms, kind="stable")
    res.tables["tf_functions"] = Table({
        "function": functions, "calls": calls,
        "traced_calls": np.bincount(codes, weights=traced, minlength=nf).astype(int),
        "retraces": retraces, "tracing_count_min": tc_min, "tracing_count_max": tc_max, "total_ms": total_ms,
        "mean_ms": total_ms / calls}).take(order)
    res.add("tf_function_calls", int(rows.shape[0]))
    res.add("retrace_count", sum(retraces.tolist()))  # Python ints: a sum past int64 does not wrap
    res.add("retraced_functions", ",".join(str(functions[i]) for i in order if retraces[i] > 0))
    # time spent tracing (python-side graph building) as a share of the wall time
    if traced.any() and wall > 0:
        m = Measure.union(start[traced], start[traced] + p.ev_dur_ps[rows][traced])
        res.add("retrace_pct", 100.0 * float(m.within(*w).sum()) / wall)
    return res


#: One XLA program run by PjRt (JAX, and TF with PjRt): counted once per dispatch.
_EXECUTE_RE = re.compile(r"^PjRt\w*LoadedExecutable::Execute$")


def _xla_executions(res: AnalysisResult, p, tbl: Table | None) -> None:
    mask = np.array([bool(_EXECUTE_RE.match(str(n))) for n in p.event_names], bool)
    if tbl is None or not mask.any():
        res.missing(["xla_executions_per_step"], "no steps" if tbl is None else
                    "no PjRt program executions (LoadedExecutable::Execute) in the trace")
        return
    rows = np.flatnonzero(mask[np.maximum(p.ev_meta, 0)] & (p.ev_meta >= 0))
    s = p.ev_start_ps[rows]
    inside = Measure(tbl["start_ps"], tbl["end_ps"], disjoint=True).within(s, s + 1) > 0
    n_steps = float(training_steps(tbl))
    res.add("xla_executions_per_step", float(inside.sum()) / n_steps if n_steps else None)


__all__ = ["analyze"]
