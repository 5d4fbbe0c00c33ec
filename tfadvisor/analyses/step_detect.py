"""Step detection: where the run's steps are, how many training steps each marker holds, and
what ran before each step.

Steps come from the first marker kind the trace has, in this order (``steps_source``):

``trace_context``
    Events with a non-zero ``_r`` (root) stat or named ``TraceContext``, e.g.
    ``tf.profiler.experimental.Trace('train', step_num=i, _r=1)``. TF's own implicit roots
    (``FunctionRun``, ``SessionRun``, ``RunGraph``, ``ExecutorState::Process``) carry ``_r`` too;
    like xprof they never make a step by themselves. Where a Keras ``Profiled batch`` event
    wraps the marker, the outermost of the two is the step.
``profiled_batch``
    Keras 3's TensorBoard callback: ``Profiled batch`` events with ``step_num`` (no ``_r``, so
    xprof finds no steps in such profiles).
``device_steps``
    The ``Steps`` line of device planes (TPU; GPU profiles whose converter derived one):
    the device with the most steps.
``function_cadence``
    No markers: the calls of the repeating train function on the python thread
    (``EagerLocalExecute: __inference_<fn>_<n>``, e.g. Keras 3's
    ``__inference_multi_step_on_iterator_<n>``; the most called one, as Keras' evaluation runs
    a function of the same name); step *i* runs from call *i* to call *i+1*, or to the end of
    its own call when another Keras step function (validation) runs before call *i+1*.
``iterator_cadence``
    As above from the ``IteratorGetNext*`` calls.

Only the outermost marker of each nest counts. Steps are then made disjoint: markers of no
positive length are dropped, a marker that mostly repeats an earlier one (the same step
marked on two threads) is rejected, a smaller overlap is clipped; each with a note. So no
share of step or wall time can leave 0..100.

A marker may hold several training steps (Keras ``steps_per_execution=k``: one call of the
train function, one ``Profiled batch``, runs k steps). k comes from the first source that
knows (``steps_per_execution_source``): ``run_file`` (``tfadvisor_run.json``
``steps.steps_per_execution``, written by the Keras callback), ``step_num_stride`` (Keras
numbers a marker by its first step, so consecutive markers' ``step_num`` jump by k), or
``loop_structure`` (Keras' multi-step loop calls ``IteratorGetNextAsOptional`` once per step
inside each call): :func:`executions`.

Each step is labelled with what ran before it when that was not training (``preceded_by``):
``validation`` (a Keras step function other than the train one ran in between) or
``epoch_end`` (a ``Profiled batch`` step number starting again; the run file's
``steps.epoch_ends_after_step``): :func:`preceded_by`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tfadvisor.analyses import device_lines
from tfadvisor.analyses.activity import L_PYTHON, M_FUNC_CALL, STEP_STATS, Activity, activity, union_rows
from tfadvisor.analyses.base import Context
from tfadvisor.io.runmeta import steps_per_execution
from tfadvisor.model.table import group_sum
from tfadvisor.model.trace import Plane, StatColumn, Trace
from tfadvisor.spans.intervals import EMPTY, Measure, outermost

#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("step_num", "group_id", "step_id") + STEP_STATS

#: The functions a training step calls (preferred over others repeating on the python thread).
TRAIN_FN_RE = re.compile(r"multi_step_on_iterator|train_step|train_function|one_step_on|step_on_iterator")
#: Keras' step functions (train, test, predict; Keras 3 names them all multi_step_on_iterator).
KERAS_STEP_FN_RE = re.compile(r"multi_step_on_iterator|one_step_on|step_on_iterator|train_function|train_step|"
                              r"test_function|test_step|predict_function|predict_step")

# ------------------------------------------------------------------------------------------
# Step markers
# ------------------------------------------------------------------------------------------

@dataclass
class StepSet:
    """Steps as columns, one row per marker: where they came from (``steps_source``), their
    start and end (ps), step number and name, and the host rows of their markers."""

    source: str
    start: np.ndarray
    end: np.ndarray
    number: np.ndarray
    name: np.ndarray
    marker_rows: np.ndarray = field(default_factory=lambda: EMPTY)  # host rows used as markers
    note: str | None = None


def _step_numbers(p: Plane, st: dict[str, StatColumn], rows: np.ndarray, inner: np.ndarray | None = None) -> np.ndarray:
    """Step number of each marker row (from ``inner``, the root marker inside it, first), from
    ``step_num``/``step_id``/``iter_num``; -1 where unknown, 0.. when none is known."""
    num = np.full(rows.shape, np.nan)
    for key in ("step_num", "step_id", "iter_num"):
        for rr in ([inner] if inner is not None else []) + [rows]:
            v = st[key].values_at(rr)
            fill = np.isnan(num) & np.isfinite(v) & (np.abs(v) < 2.0 ** 62)
            num[fill] = v[fill]
    missing = np.isnan(num)
    if missing.all():
        return np.arange(rows.shape[0], dtype=np.int64)
    if missing.any():
        num[missing] = -1
    return num.astype(np.int64)


def device_steps(act: Activity, ctx: Context) -> list[tuple[Plane, np.ndarray, np.ndarray]]:
    """Per device plane with a ``Steps`` line: (plane, event rows of its steps by start, step
    numbers). Step numbers come from ``step_num``/``group_id`` stats or numeric event names, so
    that the same step can be matched across devices; else they count from 0."""
    return ctx.once(_device_steps, act)


def _device_steps(act: Activity) -> list[tuple[Plane, np.ndarray, np.ndarray]]:
    out = []
    for d in act.devices:
        lr = device_lines.step_lines(d)
        if not lr.shape[0]:
            continue
        rows = d.timed_rows_on_lines(lr)
        if not rows.shape[0]:
            continue
        rows = rows[np.argsort(d.ev_start_ps[rows], kind="stable")]
        num = np.full(rows.shape[0], np.nan)
        for key_ in ("step_num", "group_id", "step_id"):
            v = d.stat(key_, rows).values_at(rows)
            fill = np.isnan(num) & np.isfinite(v) & (np.abs(v) < 2.0 ** 62)  # castable to int64
            num[fill] = v[fill]
        if np.isnan(num).any():
            names = [str(n) for n in d.names_of(rows)]
            if all(n.isdigit() and len(n) < 18 for n in names):
                num = np.array([int(n) for n in names], np.float64)
        if np.isnan(num).any() or np.unique(num).shape[0] != num.shape[0]:
            num = np.arange(rows.shape[0], dtype=np.float64)
        out.append((d, rows, num.astype(np.int64)))
    return out


def _clean_steps(steps: StepSet) -> StepSet:
    """Steps as disjoint intervals of positive length, by start.

    Markers of no positive duration are dropped; a marker that mostly repeats an earlier one
    (overlap of at least half the shorter: the same step marked on two threads) is rejected;
    a smaller overlap is clipped (the later step starts where the earlier ends). Each is noted.
    """
    s, e = steps.start, steps.end
    n = int(s.shape[0])
    if n == 0:
        return steps
    keep = np.flatnonzero(e > s)
    keep = keep[np.argsort(s[keep], kind="stable")]
    new_s = s[keep].copy()
    dropped_len = n - keep.shape[0]
    ok = np.ones(keep.shape[0], bool)
    rejected = clipped = 0
    last_s, last_e = None, None
    for i in range(keep.shape[0]):
        a, b = int(new_s[i]), int(e[keep[i]])
        if last_e is not None and a < last_e:
            if min(b, last_e) - a >= 0.5 * min(b - a, last_e - last_s) or b <= last_e:
                ok[i] = False
                rejected += 1
                continue
            new_s[i] = a = last_e
            clipped += 1
        last_s, last_e = a, b
    if dropped_len == 0 and rejected == 0 and clipped == 0:
        return steps
    idx = keep[ok]
    notes = [steps.note] if steps.note else []
    if dropped_len:
        notes.append(f"{dropped_len} step marker(s) with no positive duration ignored")
    if rejected:
        notes.append(f"{rejected} step marker(s) overlapping an earlier one (the same step marked twice) rejected")
    if clipped:
        notes.append(f"{clipped} step(s) overlapping the one before clipped to start where it ends")
    marker_rows = steps.marker_rows[idx] if steps.marker_rows.shape[0] == n else steps.marker_rows
    return StepSet(steps.source, new_s[ok], e[idx], steps.number[idx], steps.name[idx], marker_rows,
                   note="; ".join(notes))


def detect_steps(trace: Trace, ctx: Context) -> StepSet:
    """The run's steps (see the module docstring), as disjoint intervals of positive length; found once
    per analysis run."""
    return ctx.once(_found_steps, trace, ctx)


def _found_steps(trace: Trace, ctx: Context) -> StepSet:
    return _clean_steps(_detect_steps(trace, ctx))


def _detect_steps(trace: Trace, ctx: Context) -> StepSet:
    act = activity(trace, ctx)
    p = act.host
    none = StepSet("none", EMPTY, EMPTY, EMPTY, np.empty(0, object))
    if p is not None:
        st = ctx.stats(p, STEP_STATS)
        roots, pb = act.rows.get("roots", EMPTY), act.rows.get("profiled_batch", EMPTY)
        if roots.shape[0]:
            outer_roots = outermost(p, roots)
            rows = outer_roots
            inner = None
            if pb.shape[0]:
                both = outermost(p, union_rows(outer_roots, pb))
                # keep the outermost marker of each nest that holds a root marker
                rm = Measure(p.ev_start_ps[outer_roots], p.ends(outer_roots))
                holds = rm.within(p.ev_start_ps[both], p.ends(both)) > 0
                rows = both[holds]
                # the root marker inside each (for the step number)
                idx = np.searchsorted(p.ev_start_ps[outer_roots], p.ev_start_ps[rows], side="left")
                inner = outer_roots[np.minimum(idx, outer_roots.shape[0] - 1)]
            return StepSet("trace_context", p.ev_start_ps[rows], p.ends(rows),
                           _step_numbers(p, st, rows, inner), p.names_of(rows), rows)
        if pb.shape[0]:
            rows = outermost(p, pb)
            return StepSet("profiled_batch", p.ev_start_ps[rows], p.ends(rows), _step_numbers(p, st, rows),
                           p.names_of(rows), rows)
    dev = device_steps(act, ctx)
    if dev:
        best = max(dev, key=lambda x: x[1].shape[0])  # the device with the most steps (the first on ties)
        d, rows = best[0], best[1]
        # Like xprof, a step takes as long as its slowest device: the same step number elsewhere.
        dur = d.ev_dur_ps[rows].copy()
        pos = {int(n): i for i, n in enumerate(best[2])}
        for other, orows, onum in dev:
            if other is d:
                continue
            for n, r in zip(onum.tolist(), orows.tolist()):
                i = pos.get(n)
                if i is not None and other.ev_dur_ps[r] > dur[i]:
                    dur[i] = other.ev_dur_ps[r]
        return StepSet("device_steps", d.ev_start_ps[rows], d.ev_start_ps[rows] + dur, best[2], d.names_of(rows),
                       note=(f"steps from the Steps line of {device_lines.short_name(d)}"
                             + (f" ({len(dev)} devices have one)" if len(dev) > 1 else "")))
    if p is None:
        return none
    # Cadence of the repeating train function on the python thread.
    cand = act.code_rows((L_PYTHON,), (M_FUNC_CALL,))
    if cand.shape[0] >= 2:
        cand = outermost(p, cand)
        names = np.array([str(n).split(": ", 1)[-1] for n in p.names_of(cand)], dtype=object)
        fn_names, fn_of = np.unique(names, return_inverse=True)
        fn_count = np.bincount(fn_of, minlength=len(fn_names))
        fn_sum = group_sum(fn_of, p.ev_dur_ps[cand], len(fn_names))
        repeated = np.flatnonzero(fn_count >= 2)
        if repeated.shape[0]:
            pref = np.array([TRAIN_FN_RE.search(str(fn_names[i])) is not None for i in repeated], bool)
            pool = repeated[pref] if pref.any() else repeated
            # the most called (Keras' evaluation runs the same kind of function, fewer times), then the
            # most time; ties: the first name in sorted order
            best = fn_names[pool[np.lexsort((-fn_sum[pool], -fn_count[pool]))[0]]]
            rows = cand[names == best]
            rows = rows[np.argsort(p.ev_start_ps[rows], kind="stable")]
            s = p.ev_start_ps[rows]
            e = np.append(s[1:], p.ends(rows[-1]))
            # a step followed by validation (other Keras step functions) ends with its own call
            other = cand[(names != best) & np.array([KERAS_STEP_FN_RE.search(n) is not None for n in names], bool)]
            if other.shape[0] and rows.shape[0] > 1:
                t = np.sort(p.ev_start_ps[other])
                held = np.searchsorted(t, s[1:], side="left") > np.searchsorted(t, s[:-1], side="left")
                e[:-1][held] = p.ends(rows[:-1][held])
            return StepSet("function_cadence", s, e, np.arange(rows.shape[0], dtype=np.int64),
                           np.full(rows.shape[0], str(best), dtype=object),
                           note=f"no step markers: steps follow the calls of {best}")
    it = act.rows.get("input", EMPTY)
    if it.shape[0] >= 2:
        it = outermost(p, it)
        line_ids, line_n = np.unique(p.ev_line[it], return_counts=True)
        it = it[p.ev_line[it] == line_ids[np.argmax(line_n)]]  # the line with the most calls
        if it.shape[0] >= 2:
            s = p.ev_start_ps[it]
            e = np.append(s[1:], p.ends(it[-1]))
            return StepSet("iterator_cadence", s, e, np.arange(it.shape[0], dtype=np.int64),
                           np.full(it.shape[0], "IteratorGetNext", dtype=object),
                           note="no step markers or repeating function: steps follow the IteratorGetNext calls")
    return none


# ------------------------------------------------------------------------------------------
# Training steps per marker (Keras steps_per_execution)
# ------------------------------------------------------------------------------------------

#: Stride evidence is believed only when markers follow each other this closely (the median
#: time between two markers, as a share of the median marker): a loop that marks every 10th
#: step shows stride 10 too, but with 9 unmarked steps between its markers.
STRIDE_MAX_GAP_FRACTION = 0.5
#: Events of the input iterator that Keras' multi-step loop calls once per step.
_LOOP_INPUT_PREFIX = "IteratorGetNextAsOptional"


@dataclass
class Executions:
    """How many training steps each step marker (an execution) holds."""
    k: int  # steps per execution
    source: str  # run_file / step_num_stride / loop_structure / none
    per_row: np.ndarray  # training steps of each marker (the last of an epoch may hold fewer)
    note: str | None = None


def _stride(steps: StepSet) -> tuple[int | None, np.ndarray]:
    """(k, step-number difference to the next marker per row, 0 where unknown) from the
    ``step_num`` of consecutive markers (Keras numbers a marker by its first step)."""
    n = steps.number.shape[0]
    diff = np.zeros(n, np.int64)
    if n < 2 or steps.source not in ("trace_context", "profiled_batch") or (steps.number < 0).any():
        return None, diff
    d = np.diff(steps.number)
    diff[:-1] = np.where(d > 0, d, 0)
    pos = d[d > 0]
    if not pos.shape[0]:
        return None, diff
    vals, counts = np.unique(pos, return_counts=True)
    k = int(vals[counts.argmax()])
    if k < 2 or counts.max() < 0.5 * pos.shape[0]:
        return None, diff
    pairs = np.flatnonzero(d == k)
    gap = np.median(steps.start[pairs + 1] - steps.end[pairs])
    if gap > STRIDE_MAX_GAP_FRACTION * np.median(steps.end - steps.start):
        return None, diff
    return k, diff


def _loop_counts(act: Activity, steps: StepSet) -> np.ndarray | None:
    """Per marker, the calls of Keras' multi-step loop into its iterator (one per step), or None
    when the trace shows no such loop."""
    p = act.host
    if p is None:
        return None
    rows = act.rows.get("input", EMPTY)
    if not rows.shape[0]:
        return None
    names = p.event_names
    loop = np.fromiter((str(n).startswith(_LOOP_INPUT_PREFIX) for n in names), bool, len(names))
    rows = rows[loop[np.maximum(p.ev_meta[rows], 0)] & (p.ev_meta[rows] >= 0)]
    if not rows.shape[0] or not any("multi_step_on_iterator" in str(n) for n in names):
        return None
    rows = outermost(p, rows)
    t = np.sort(p.ev_start_ps[rows])
    return np.searchsorted(t, steps.end, side="left") - np.searchsorted(t, steps.start, side="left")


def preceded_by(trace: Trace, act: Activity, steps: StepSet) -> np.ndarray:
    """What ran between each step and the one before it, when it was not training:
    ``validation`` (a Keras step function other than the one the steps run: Keras'
    evaluation at an epoch end), ``epoch_end`` (the marker's step number starts again, or the
    run file's ``steps.epoch_ends_after_step`` falls between the two markers), else ``""``.

    Keras' ``fit`` evaluates only at an epoch's end. A custom loop (its own ``TraceContext`` markers)
    that evaluates between its markers where no epoch end is known evaluates every few steps as part
    of its training loop: that time is the loop's (the ``variation`` analysis names it), not labelled."""
    n = steps.start.shape[0]
    out = np.full(n, "", dtype=object)
    p = act.host
    if n < 2 or p is None:
        return out
    if steps.source == "profiled_batch":  # Keras numbers batches from 0 in each epoch
        out[1:][np.diff(steps.number) <= 0] = "epoch_end"
    meta = (trace.run_metadata or {}).get("steps")
    ends = meta.get("epoch_ends_after_step") if isinstance(meta, dict) else None
    if steps.source == "trace_context" and isinstance(ends, list) and (steps.number >= 0).all():
        last = np.array([v for v in ends if isinstance(v, int) and not isinstance(v, bool)], np.int64)
        if last.shape[0]:
            k = np.searchsorted(np.sort(last), steps.number, side="left")  # epoch ends before each marker's first step
            out[1:][np.diff(k) > 0] = "epoch_end"
    calls = outermost(p, act.code_rows((L_PYTHON,), (M_FUNC_CALL,)))
    if not calls.shape[0]:
        return out
    cs = p.ev_start_ps[calls]
    names = np.array([str(x) for x in p.names_of(calls)], dtype=object)
    inside = Measure(steps.start, steps.end, disjoint=True).within(cs, cs + 1) > 0
    train = set(names[inside].tolist())
    val = ~inside & np.array([x not in train and KERAS_STEP_FN_RE.search(x) is not None for x in names], bool)
    if val.any():
        t = np.sort(cs[val])
        held = np.searchsorted(t, steps.start[1:], side="left") > np.searchsorted(t, steps.end[:-1], side="left")
        if steps.source == "trace_context":
            held &= out[1:] == "epoch_end"  # a custom loop's evaluation between steps is its own work
        out[1:][held] = "validation"
    return out


def executions(trace: Trace, act: Activity, steps: StepSet) -> Executions:
    """Training steps per marker, from the first source that knows: the run file's
    ``steps_per_execution``, the ``step_num`` stride of consecutive markers, or the iterator calls
    of Keras' multi-step loop inside each marker. A marker's own count is its step-number
    difference to the next marker (or its loop's count) when that is between 1 and k, else k."""
    n = steps.start.shape[0]
    one = Executions(1, "none", np.ones(n, np.int64))
    if n == 0:
        return one
    k_run, _ = steps_per_execution(trace.run_metadata or {})
    k_stride, diff = _stride(steps)
    loop = _loop_counts(act, steps) if steps.source in ("trace_context", "profiled_batch",
                                                        "function_cadence") else None
    k_loop = None
    if loop is not None and (loop > 0).any():
        k_loop = int(np.median(loop[loop > 0]))
        k_loop = k_loop if k_loop >= 2 else None
    if k_run is not None:
        k, source = k_run, "run_file"
    elif k_stride is not None:
        k, source = k_stride, "step_num_stride"
    elif k_loop is not None:
        k, source = k_loop, "loop_structure"
    else:
        return one
    if k == 1:
        return Executions(1, source, np.ones(n, np.int64))
    per = np.full(n, k, np.int64)
    if loop is not None:
        ok = (loop >= 1) & (loop <= k)
        per[ok] = loop[ok]
    ok = (diff >= 1) & (diff <= k)
    per[ok] = diff[ok]
    note = None
    if k_run is not None and k_stride is not None and k_stride != k_run:
        note = (f"steps_per_execution: tfadvisor_run.json says {k_run}, the step_num stride of the markers "
                f"{k_stride}: {k_run} used")
    return Executions(k, source, per, note)




#: Keras's train step functions (``fit``'s ``train_function``): a marker of Keras's batch (AdvisorCallback's, Keras's
#: own ``Profiled batch``) holds one call of them, then the batch-end hooks.
KERAS_STEP_FUNCTION = re.compile(r"^EagerLocalExecute: __inference_(?:multi|one)_step_on_iterator_\d+$")
#: The first op the program runs after the call may wait for the call's work to finish (its executor running on):
#: a wait this long in it, before it does anything, is still the step's work.
WAITS_FOR_CALL_PS = 1_000_000_000


def work_ends(host: Plane | None, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Where each step's own work ends: its marker's end, or, where the marker holds a call of Keras's train step
    function, the end of that call's work (the call, and what its executor runs on after it returns on the host's
    threads but tf.data's). After it, inside the marker, Keras runs the callbacks' batch-end hooks and its logging:
    time between the steps (the callbacks listed before AdvisorCallback end before its marker does). ``start`` and
    ``stop``: the step markers' starts and ends, ascending."""
    end = np.asarray(stop, np.int64).copy()
    first = np.asarray(start, np.int64)
    if host is None or not end.shape[0]:
        return end
    meta = np.fromiter((bool(KERAS_STEP_FUNCTION.match(str(n))) for n in host.event_names), bool,
                       count=len(host.event_names))
    if not meta.any():
        return end
    rows = host.rows_with_meta(meta)
    c_lo = host.ev_start_ps[rows]
    c_hi = c_lo + np.maximum(host.ev_dur_ps[rows], 0)
    k = np.searchsorted(first, c_lo, side="right") - 1
    inside = (k >= 0) & (c_hi <= end[np.maximum(k, 0)])
    if not inside.any():
        return end
    last = np.full(end.shape[0], -1, np.int64)
    np.maximum.at(last, k[inside], c_hi[inside])
    # the call's work that outlives it: the next op on the call's thread waiting before it does anything
    main = host.rows_on_lines(np.unique(host.ev_line[rows]))
    m_lo = host.ev_start_ps[main]
    order = np.argsort(m_lo, kind="stable")
    m_lo = m_lo[order]
    m_hi = m_lo + np.maximum(host.ev_dur_ps[main][order], 0)
    has = np.flatnonzero(last >= 0)
    i = np.searchsorted(m_lo, last[has], side="left")
    ok = (i < m_lo.shape[0]) & (m_lo[np.minimum(i, m_lo.shape[0] - 1)] < end[has])
    has, i = has[ok], i[ok]
    nxt = np.minimum(i + 1, m_lo.shape[0] - 1)
    child = np.where((i + 1 < m_lo.shape[0]) & (m_lo[nxt] < m_hi[i]), m_lo[nxt], m_hi[i])
    waits = child - m_lo[i] >= WAITS_FOR_CALL_PS
    last[has[waits]] = np.minimum(child[waits], end[has[waits]])
    return np.where(last >= 0, last, end)


__all__ = ["Executions", "StepSet", "detect_steps", "device_steps", "executions", "preceded_by", "work_ends"]
