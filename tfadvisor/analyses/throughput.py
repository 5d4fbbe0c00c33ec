"""The whole run: throughput beside step time, the time outside the steps by cause, and the profiler's own cost.

**Throughput** (``throughput_ms_per_step``) is wall time per training step over the window, evaluation, epoch ends,
checkpoints and callbacks included: from the first step's start to the last step's end, divided by the training steps
of every step marker in it (a marker of Keras ``steps_per_execution=k`` counts k; the steps statistics' first and last
are counted too). It is what sets time-to-train; step time (start to next start, validation and epoch ends left out)
is what each step costs.

Time outside the steps (``outside_*``: the intervals between steps labelled ``validation`` or ``epoch_end``) by
cause: ``eval`` (from the interval's start, where Keras makes the evaluation's iterator, to the end of the last call
of a Keras evaluation step function in it, or of its iterator's teardown after it, :data:`TEARDOWN`; evaluation steps
= those calls x steps_per_execution), ``checkpoint``
(from the first to the last TF save op, ``SaveV2`` or ``MergeV2Checkpoints``), ``epoch_end`` (the rest: epoch-end
callbacks, logging, the iterator restarting).

The profiler's cost: where the Keras callback timed steps with a plain clock outside the window
(``tfadvisor_run.json`` ``clock``, see :mod:`tfadvisor.keras`), ``profiler_inflation`` is the trace's median step
time over the clock's median per training step outside the window (intervals with nothing between steps). Without
the clock it is an estimate: the host events the profiler recorded per training step times
:data:`EVENT_COST_US` each, ``step / (step - events x cost)``; ``profiler_inflation_source`` says which.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tfadvisor.analyses.activity import L_PYTHON, M_FUNC_CALL, Activity
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.step_detect import KERAS_STEP_FN_RE
from tfadvisor.io.runmeta import clock_facts, steps_per_execution
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import Measure, outermost

#: TF ops that write a checkpoint.
CHECKPOINT_RE = re.compile(r"\b(SaveV2|MergeV2Checkpoints|SaveSlices)\b")
#: The profiler's cost per recorded host event (us), for the estimate without a clock: (trace median step - unprofiled
#: clock median) / host events per step of tests/inflation_capture.py's heavily traced model, 9 captures on the
#: project's shared 2-core machine (2026-12-02): 0.24, 0.39, 0.47, 0.48, 0.53, 2.39 us under 3 other workers' load,
#: 0.35, 0.43, 0.44 us without; the median (0.44), rounded. A rough figure: the cost per event moves with the machine
#: and its load, hence "estimate".
EVENT_COST_US = 0.5
#: The clock's fewest intervals with nothing between steps for a median step time outside the window.
CLOCK_MIN = 3

#: An evaluation's iterator dropped after its last step (Keras makes one per evaluation): the deletion of its handle
#: stops its threads and frees its buffers: 0.6 s after each evaluation of run_validate_every_epoch (a prefetching,
#: parallel-map validation set), none of that length in the epoch ends without evaluation of its twin
#: run_validate_every_5th. Deletions shorter than TEARDOWN_MIN_PS are any tensor's.
TEARDOWN = "TFE_DeleteTensorHandle"
TEARDOWN_MIN_PS = 1_000_000_000

CAUSES = ("eval", "checkpoint", "epoch_end")

DECLARED = declare(
    "throughput",
    ("throughput_ms_per_step", "ms", "throughput: wall time per training step over the window, evaluation, epoch "
                                     "ends, checkpoints and callbacks included (first step start to last step end / "
                                     "training steps; a marker of steps_per_execution=k counts k)"),
    ("throughput_steps_per_s", "", "training steps per second over that window"),
    ("throughput_examples_per_s", "", "examples per second over that window (batch size known)"),
    ("throughput_window_ms", "ms", "the window throughput is measured over: first step start to last step end"),
    ("throughput_vs_step_time", "", "throughput (ms per step) / mean step time: 1 when nothing runs outside the steps"),
    ("outside_ms", "ms", "time in that window outside every step's wall time (validation, epoch ends)"),
    ("outside_pct", "%", "its share of the throughput window"),
    ("outside_ms_per_step", "ms", "time outside the steps per training step"),
    ("outside_eval_ms", "ms", "evaluation between steps: from the interval's start (the evaluation's iterator) to "
                              "the end of its last evaluation step function call"),
    ("outside_eval_pct", "%", "evaluation: share of the throughput window"),
    ("outside_eval_ms_per_step", "ms", "evaluation per training step"),
    ("outside_eval_ms_per_step_run", "ms", "evaluation per training step over the run: the window's evaluation with "
                                           "that of the intervals the callback's clock timed outside it (their "
                                           "`eval_ms`; tfadvisor_run.json `clock`), over their training steps "
                                           "together; the window's alone without a clock"),
    ("outside_eval_count", "count", "evaluation passes in the window"),
    ("outside_eval_steps", "count", "evaluation steps in the window (evaluation step function calls x "
                                    "steps_per_execution)"),
    ("outside_eval_steps_per_train_step", "", "evaluation steps per training step in the window"),
    ("outside_eval_step_ms", "ms", "wall time per evaluation step"),
    ("outside_checkpoint_ms", "ms", "checkpoints between steps: first to last TF save op (SaveV2, MergeV2Checkpoints) "
                                    "of each interval"),
    ("outside_checkpoint_pct", "%", "checkpoints: share of the throughput window"),
    ("outside_checkpoint_ms_per_step", "ms", "checkpoints per training step"),
    ("outside_checkpoint_count", "count", "intervals between steps with a checkpoint"),
    ("outside_epoch_end_ms", "ms", "the rest of the time outside the steps: epoch-end callbacks, logging, the "
                                   "iterator restarting"),
    ("outside_epoch_end_pct", "%", "epoch ends: share of the throughput window"),
    ("outside_epoch_end_ms_per_step", "ms", "epoch ends per training step"),
    ("outside_epoch_end_count", "count", "intervals outside the steps (validation or epoch end)"),
    ("window_epochs", "", "how the window lies in the epochs: `whole epochs`, `mid-epoch` (within one), "
                          "`crosses epochs`; `unknown` without epoch facts"),
    ("window_epochs_text", "", "the window's place in the epochs, said"),
    ("unprofiled_ms_per_step", "ms", "the callback's plain clock outside the window: wall time per training step, "
                                     "evaluation and epoch ends included (sum of the intervals / their steps)"),
    ("unprofiled_step_ms", "ms", "the clock's median per training step outside the window, intervals with nothing "
                                 "between steps (the unprofiled step time)"),
    ("unprofiled_steps_count", "count", "training steps the clock timed outside the window"),
    ("profiler_inflation", "", "how much slower the profiled steps ran: the trace's median step time / the "
                               "unprofiled one (clock), or the estimate from the events recorded per step"),
    ("profiler_inflation_source", "", "`clock` (the callback timed steps outside the window) or `estimate` (events "
                                      "per step x a cost per event)"),
    ("profiler_inflation_text", "", "the inflation, said"),
    ("trace_events_per_step", "count", "host events the profiler recorded per training step"),
    doc="Throughput = (last step end - first step start) / training steps (markers x steps_per_execution), "
        "evaluation, epoch ends, checkpoints and callbacks included; step time leaves validation and epoch ends out. "
        "The time outside the steps by cause: evaluation (Keras evaluation step function calls), checkpoints (TF "
        "save ops), epoch ends (the rest). The profiler's inflation: trace median step / the callback's unprofiled "
        f"clock median (tfadvisor_run.json `clock`), or estimated as step / (step - host events per step x "
        f"{EVENT_COST_US:g} us)",
    tables="`outside_steps` (start_ps, end_ps, kind, ms, eval_ms, eval_steps, checkpoint_ms, epoch_end_ms)",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("throughput")
    tbl = step_table
    if tbl is None:
        res.missing(list(DECLARED.names()), "no steps found: no window of training steps")
        return res
    start = np.asarray(tbl["start_ps"], np.int64)
    end = np.asarray(tbl["end_ps"], np.int64)
    w_end = np.asarray(tbl["wall_end_ps"], np.int64)
    nsteps = np.asarray(tbl["train_steps"], np.int64)
    after = np.asarray(tbl["preceded_by"], dtype=object)
    order = np.argsort(start, kind="stable")
    start, end, w_end, nsteps, after = start[order], end[order], w_end[order], nsteps[order], after[order]
    total_steps = int(nsteps.sum())
    lo, hi = int(start[0]), int(max(end.max(), w_end.max()))
    window_ms = (hi - lo) / PS_PER_MS
    if total_steps <= 0 or hi <= lo:
        res.missing(list(DECLARED.names()), "the steps span no time")
        return res
    tp = window_ms / total_steps
    res.add("throughput_window_ms", window_ms)
    res.add("throughput_ms_per_step", tp)
    res.add("throughput_steps_per_s", 1000.0 / tp)
    batch = ctx.options.batch_size
    if batch:
        res.add("throughput_examples_per_s", 1000.0 * batch / tp)
    else:
        res.missing(["throughput_examples_per_s"], "")  # the batch size is not known
    mean = ctx.metric("step_time_mean_ms")
    if isinstance(mean, (int, float)) and mean > 0:
        res.add("throughput_vs_step_time", tp / mean)

    _outside(res, act, start, end, w_end, after, nsteps, window_ms, total_steps, trace)
    _eval_over_run(res, trace, total_steps)
    _epochs(res, trace, tbl, after, ctx.metric("steps_source"))
    _inflation(res, trace, ctx, act, lo, hi, total_steps)
    return res


def _outside(res: AnalysisResult, act: Activity, start, end, w_end, after, nsteps, window_ms: float,
             total_steps: int, trace: Trace) -> None:
    """The intervals between steps labelled validation or epoch end, split by cause."""
    held = after[1:] != ""
    g_lo, g_hi = w_end[:-1][held], start[1:][held]
    kinds = after[1:][held]
    n = g_lo.shape[0]
    eval_ps = np.zeros(n, np.int64)
    eval_calls = np.zeros(n, np.int64)
    ckpt_ps = np.zeros(n, np.int64)
    p = act.host
    if n and p is not None:
        calls = outermost(p, act.code_rows((L_PYTHON,), (M_FUNC_CALL,)))
        if calls.shape[0]:
            cs, ce = p.ev_start_ps[calls], p.ends(calls)
            names = np.array([str(x) for x in p.names_of(calls)], dtype=object)
            inside = Measure(start, end, disjoint=True).within(cs, cs + 1) > 0
            train = set(names[inside].tolist())
            ev = ~inside & np.array([x not in train and KERAS_STEP_FN_RE.search(x) is not None for x in names], bool)
            cs, ce = cs[ev], ce[ev]
            dels = _teardown_rows(p)
            for i in range(n):
                m = (cs >= g_lo[i]) & (cs < g_hi[i])
                if m.any():
                    eval_calls[i] = int(m.sum())
                    # from the interval's start: Keras makes the evaluation's iterator (and traces its step function
                    # the first time) before the first call; after the last, its iterator's teardown, then the
                    # epoch ends
                    last = min(int(ce[m].max()), int(g_hi[i]))
                    eval_ps[i] = _teardown_end(p, dels, last, int(g_hi[i])) - int(g_lo[i])
        rows = _checkpoint_rows(p)
        if rows.shape[0]:
            ss, se = p.ev_start_ps[rows], p.ends(rows)
            for i in range(n):
                m = (ss >= g_lo[i]) & (ss < g_hi[i])
                if m.any():
                    ckpt_ps[i] = int(min(se[m].max(), g_hi[i]) - ss[m].min())
    gap = np.maximum(g_hi - g_lo, 0)
    ckpt_ps = np.minimum(ckpt_ps, np.maximum(gap - eval_ps, 0))
    rest = np.maximum(gap - eval_ps - ckpt_ps, 0)
    k, _ = steps_per_execution(trace.run_metadata or {})
    k = k or int(np.median(nsteps)) if nsteps.shape[0] else 1
    res.tables["outside_steps"] = Table({
        "start_ps": g_lo, "end_ps": g_hi, "kind": kinds, "ms": gap / PS_PER_MS, "eval_ms": eval_ps / PS_PER_MS,
        "eval_steps": eval_calls * k, "checkpoint_ms": ckpt_ps / PS_PER_MS, "epoch_end_ms": rest / PS_PER_MS}, n=n)
    out_ms = float(gap.sum()) / PS_PER_MS
    res.add("outside_ms", out_ms)
    res.add("outside_pct", 100.0 * out_ms / window_ms)
    res.add("outside_ms_per_step", out_ms / total_steps)
    for cause, ps in (("eval", eval_ps), ("checkpoint", ckpt_ps), ("epoch_end", rest)):
        ms = float(ps.sum()) / PS_PER_MS
        res.add(f"outside_{cause}_ms", ms)
        res.add(f"outside_{cause}_pct", 100.0 * ms / window_ms)
        res.add(f"outside_{cause}_ms_per_step", ms / total_steps)
    res.add("outside_eval_count", int((eval_calls > 0).sum()))
    res.add("outside_checkpoint_count", int((ckpt_ps > 0).sum()))
    res.add("outside_epoch_end_count", n)
    steps_eval = int(eval_calls.sum()) * k
    res.add("outside_eval_steps", steps_eval)
    res.add("outside_eval_steps_per_train_step", steps_eval / total_steps)
    if steps_eval:
        res.add("outside_eval_step_ms", float(eval_ps.sum()) / PS_PER_MS / steps_eval)
    else:
        res.missing(["outside_eval_step_ms"], "")


def _eval_over_run(res: AnalysisResult, trace: Trace, total_steps: int) -> None:
    """Evaluation per training step over the window and the intervals the run file's clock timed outside it (an
    evaluation weighs once per epoch, which one window rarely shows in proportion)."""
    window_ms = res.metrics["outside_eval_ms"].value if "outside_eval_ms" in res.metrics else 0.0
    sides = _clock_outside_window(trace.run_metadata if isinstance(trace.run_metadata, dict) else {})
    ms = float(window_ms or 0.0) + sum(float(sum(c["eval_ms"])) for c in sides)
    steps = total_steps + sum(int(sum(c["steps"])) for c in sides)
    res.add("outside_eval_ms_per_step_run", ms / steps)


def _teardown_rows(p: Any) -> np.ndarray:
    """Rows of the host's tensor-handle deletions of :data:`TEARDOWN_MIN_PS` or more (an iterator's handle dropped:
    its threads stopped and its buffers freed)."""
    dels = p.events_named([TEARDOWN])
    return dels[p.ev_dur_ps[dels] >= TEARDOWN_MIN_PS] if dels.shape[0] else dels


def _teardown_end(p: Any, dels: np.ndarray, last: int, hi: int) -> int:
    """The end of an evaluation: its last step function call's end (``last``), or that of the long handle deletions
    after it in the same interval (its iterator's teardown), at most ``hi``."""
    if not dels.shape[0]:
        return last
    ds = p.ev_start_ps[dels]
    m = (ds >= last) & (ds < hi)
    return max(last, min(int(p.ends(dels[m]).max()), hi)) if m.any() else last


def _checkpoint_rows(p: Any) -> np.ndarray:
    """Rows of the host plane's TF save ops."""
    names = p.event_names
    hit = np.fromiter((CHECKPOINT_RE.search(str(x)) is not None for x in names), bool, len(names))
    if not hit.any():
        return np.zeros(0, np.int64)
    meta = p.ev_meta
    ok = (meta >= 0) & hit[np.clip(meta, 0, len(names) - 1)]
    return np.flatnonzero(ok)


def _epochs(res: AnalysisResult, trace: Trace, tbl: Table, after: np.ndarray, source: Any) -> None:
    """Where the window lies in the epochs: within one, whole epochs, or across epoch ends; said."""
    md = trace.run_metadata if isinstance(trace.run_metadata, dict) else {}
    st = md.get("steps") if isinstance(md.get("steps"), dict) else {}
    ends = int((after[1:] != "").sum())
    per = st.get("steps_per_epoch")
    per = per if isinstance(per, int) and not isinstance(per, bool) and per > 0 else None
    first = st.get("starts_at_epoch_step")
    last = st.get("ends_at_epoch_step")
    first = first if isinstance(first, int) and not isinstance(first, bool) and first >= 0 else None
    last = last if isinstance(last, int) and not isinstance(last, bool) and last >= 0 else None
    if first is None and source == "profiled_batch":
        first = int(np.asarray(tbl["step"])[0])  # Keras numbers batches from 0 in each epoch
    bits = []
    starts_mid = first is not None and first > 0
    ends_mid = last is not None and per is not None and last < per
    if first is None and last is None:
        kind = "unknown" if ends == 0 else "crosses epochs"
    elif ends:
        kind = "crosses epochs"
    elif starts_mid or ends_mid or first is None or last is None:
        kind = "mid-epoch"
    else:
        kind = "whole epochs"
    of = f" of {per}" if per else ""
    if first is not None:
        bits.append(f"starts {'mid-epoch, at step ' + str(first) + of if starts_mid else 'at an epoch start'}")
    if ends:
        bits.append(f"holds {ends} epoch end{'s' if ends > 1 else ''} ({ends + 1} epochs)")
    else:
        bits.append("holds no epoch end")
    if last is not None and per is not None:
        bits.append(f"ends {'mid-epoch, at step ' + str(last) + of if ends_mid else 'at an epoch end'}")
    text = "the window " + ", ".join(bits)
    if not ends:
        text += (": evaluation and epoch-end work are not in it, so throughput here is the steps' own; the unprofiled "
                 "clock (tfadvisor_run.json clock) covers them")
    elif kind == "crosses epochs" and (starts_mid or ends_mid):
        text += (": throughput counts its epoch ends against the steps it holds, not a whole epoch's; over whole "
                 "epochs they weigh once per epoch")
    res.add("window_epochs", kind)
    res.add("window_epochs_text", text)


def _clock_outside_window(md: dict) -> list[dict]:
    """The run file's clock's sides outside the window, before and after it (``inside`` times the window itself)."""
    clock, _ = clock_facts(md)
    return [clock[side] for side in ("before", "after") if clock.get(side)]


def _clock_outside(md: dict) -> tuple[float | None, float | None, int, list[str]]:
    """(ms per training step outside the window, everything included; median ms per step of the intervals with
    nothing between steps; steps timed; notes) from the run file's clock."""
    ms, steps, plain = [], [], []
    for c in _clock_outside_window(md):
        for v, n, kind in zip(c["ms"], c["steps"], c["kind"]):
            ms.append(v)
            steps.append(n)
            if not kind:
                plain.append(v / n)
    total = sum(steps)
    if not total:
        return None, None, 0, []
    med = float(np.median(plain)) if len(plain) >= CLOCK_MIN else None
    return sum(ms) / total, med, total, []


def _inflation(res: AnalysisResult, trace: Trace, ctx: Context, act: Activity, lo: int, hi: int,
               total_steps: int) -> None:
    md = trace.run_metadata if isinstance(trace.run_metadata, dict) else {}
    p = act.host
    events = 0
    if p is not None and p.ev_start_ps.shape[0]:
        s = p.ev_start_ps
        events = int(((s >= lo) & (s < hi)).sum())
    per_step = events / total_steps
    res.add("trace_events_per_step", per_step)
    tp_out, step_out, n_out, _ = _clock_outside(md)
    median = ctx.metric("step_time_median_ms")
    median = float(median) if isinstance(median, (int, float)) and median > 0 else None
    if tp_out is not None:
        res.add("unprofiled_ms_per_step", tp_out)
        res.add("unprofiled_steps_count", n_out)
    else:
        res.missing(["unprofiled_ms_per_step", "unprofiled_steps_count"],
                    "no unprofiled clock (tfadvisor_run.json clock: the Keras AdvisorCallback times the steps "
                    "outside its window): the profiler's inflation is an estimate", tf_only=True)
    if step_out is not None:
        res.add("unprofiled_step_ms", step_out)
    else:
        res.missing(["unprofiled_step_ms"], "")
    if median is None:
        res.missing(["profiler_inflation", "profiler_inflation_source", "profiler_inflation_text"], "no step time")
        return
    if step_out is not None:
        r = median / step_out
        res.add("profiler_inflation", r)
        res.add("profiler_inflation_source", "clock")
        how = f"{median:.3g} ms per step in the trace, {step_out:.3g} ms by the clock over {n_out} unprofiled steps"
        if r >= 1.1:
            text = f"steps inside the window {r:.1f}x slower than outside ({how}): figures below are inflated"
        elif r <= 0.9:
            text = f"steps inside the window {1 / r:.1f}x faster than outside ({how}): the window is not typical"
        else:
            text = f"steps inside the window as fast as outside ({r:.2f}x; {how})"
        res.add("profiler_inflation_text", text)
        return
    cost_ms = per_step * EVENT_COST_US / 1000.0
    own = max(median - cost_ms, 0.1 * median)
    r = median / own
    res.add("profiler_inflation", r)
    res.add("profiler_inflation_source", "estimate")
    res.add("profiler_inflation_text",
            f"estimate: the profiler recorded {per_step:,.0f} host events per step, at about {EVENT_COST_US:g} us "
            f"each (0.2-2.4 us measured on 2 shared cores) {cost_ms:.3g} ms of the {median:.3g} ms step ({r:.2f}x); "
            "no unprofiled clock to measure it")


__all__ = ["CAUSES", "CHECKPOINT_RE", "EVENT_COST_US", "analyze"]
