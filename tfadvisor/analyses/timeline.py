"""The activity timeline of the capture window, bounded in size, for the reports' timeline view.

One table, ``timeline``: per lane (what ran: device compute, device copies, collectives, the
training threads, input waits, tf.data workers, the python thread's host work; and ``idle`` as the
analyses count it: between steps nothing in the gaps analysis' busy set ran, inside a step no layer
of the step-time split did), the lane's activity as merged wall-time intervals. A lane with more
than :data:`MAX_SPANS` intervals keeps its :data:`MAX_SPANS` - 1 widest holes and merges across the
others, so each row is a span whose ``covered_ps`` says how much of it really was active (the
report draws that share, not the span's width). Lane ``window`` is the host's traced span.
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses.activity import Activity
from tfadvisor.analyses.base import AnalysisResult, Context, declare
from tfadvisor.analyses.gaps import busy_set
from tfadvisor.analyses.step_detect import StepSet
from tfadvisor.analyses.steps import python_host_activity, step_layers
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import (
    ChunkedSet,
    Measure,
    complement,
    intersect,
    union,
    union_holes,
    union_holes_many,
)

#: Most rows per lane: well above the pixel columns of a report at its default zoom.
MAX_SPANS = 3000

#: Lanes in display order: (lane, activity sets joined, device lane).
LANES = (
    ("device compute", ("dev_compute",), True),
    ("device copies", ("dev_h2d", "dev_copy"), True),
    ("device collectives", ("dev_collective",), True),
    ("training threads", ("train_threads",), False),
    ("input wait", ("input_wait",), False),
    ("tf.data workers", ("@tfdata",), False),
    ("host collectives", ("collective",), False),
    ("python", ("@python",), False),
)


def coarsen(s: np.ndarray, e: np.ndarray, max_spans: int = MAX_SPANS, lane: str = "") -> Table:
    """Disjoint sorted intervals as at most ``max_spans`` spans (start_ps, end_ps, covered_ps, count):
    the widest holes are kept, the narrowest closed."""
    s = np.asarray(s, np.int64)
    e = np.asarray(e, np.int64)
    n = s.shape[0]
    if n <= max_spans:
        keep = np.arange(n)
    else:
        keep = np.concatenate([[0], widest(s[1:] - e[:-1], max_spans - 1) + 1])
    first = keep
    last = np.append(keep[1:], n) - 1
    covered = _covered_upto(s, e, np.concatenate([first, last + 1]))
    return Table({"lane": lane, "start_ps": s[first], "end_ps": e[last],
                  "covered_ps": covered[first.shape[0]:] - covered[:first.shape[0]], "count": last - first + 1})


def coarsen_set(m: Measure | ChunkedSet, lane: str = "", max_spans: int = MAX_SPANS) -> Table:
    """:func:`coarsen` of a wall-time set; a ChunkedSet's read block by block in two passes (the widest holes, then
    their spans), not built, unless holes of the same width tie for the last places kept (then, as :func:`coarsen`
    would choose among them, built)."""
    if not isinstance(m, ChunkedSet):
        return coarsen(m.s, m.e, max_spans, lane)
    keep_n = max_spans - 1  # holes kept
    w_parts, i_parts = [], []
    n, prev_e = 0, None
    for s, e in m.blocks():
        ends_before = e[:-1] if prev_e is None else np.concatenate([[prev_e], e[:-1]])
        w_parts.append(s[(0 if prev_e is not None else 1):] - ends_before)
        i_parts.append(np.arange(n - (prev_e is not None), n + s.shape[0] - 1, dtype=np.int64))
        n += s.shape[0]
        prev_e = int(e[-1])
        if sum(w.shape[0] for w in w_parts) > 4 * keep_n:  # the widest so far, ties kept
            w, i = _widest(np.concatenate(w_parts), np.concatenate(i_parts), keep_n)
            w_parts, i_parts = [w], [i]
    if n <= max_spans:
        w = m.wall()
        return coarsen(w.s, w.e, max_spans, lane)
    w, i = _widest(np.concatenate(w_parts), np.concatenate(i_parts), keep_n)
    if w.shape[0] != keep_n:  # ties at the last place: coarsen's own choice among them
        w = m.wall()
        return coarsen(w.s, w.e, max_spans, lane)
    keep = np.concatenate([[0], np.sort(i) + 1])
    first = keep
    last = np.append(keep[1:], n) - 1
    at = np.concatenate([first, last + 1])
    order = np.argsort(at, kind="stable")
    srt = at[order]
    covered = np.zeros(at.shape[0], np.int64)
    start, end = np.empty(first.shape[0], np.int64), np.empty(first.shape[0], np.int64)
    g0, carry = 0, 0
    for s, e in m.blocks():
        g1 = g0 + s.shape[0]
        a, b = np.searchsorted(first, [g0, g1])
        start[a:b] = s[first[a:b] - g0]
        a, b = np.searchsorted(last, [g0, g1])
        end[a:b] = e[last[a:b] - g0]
        run = np.cumsum(e - s)
        a, b = np.searchsorted(srt, [g0 + 1, g1 + 1])  # the points i in (g0, g1]
        covered[order[a:b]] = carry + run[srt[a:b] - g0 - 1]
        carry += int(run[-1])
        g0 = g1
    return Table({"lane": lane, "start_ps": start, "end_ps": end,
                  "covered_ps": covered[first.shape[0]:] - covered[:first.shape[0]], "count": last - first + 1})


def widest(widths: np.ndarray, k: int) -> np.ndarray:
    """The indices of the ``k`` largest ``widths``, in index order; of equal widths the first are kept (the same
    choice on every CPU: a partition's order among ties is its vector unit's)."""
    n = widths.shape[0]
    if k >= n:
        return np.arange(n)
    kth = np.partition(widths, n - k)[n - k]  # a value: the same whatever the order of ties
    above = np.flatnonzero(widths > kth)
    return np.sort(np.concatenate([above, np.flatnonzero(widths == kth)[:k - above.shape[0]]]))


def _widest(w: np.ndarray, i: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` widest holes (widths ``w``, indices ``i``), with every hole as wide as the k-th."""
    if w.shape[0] <= k:
        return w, i
    kth = np.partition(w, w.shape[0] - k)[w.shape[0] - k]
    sel = w >= kth
    return w[sel], i[sel]


#: :func:`_covered_upto` sums the lengths of this many intervals at a time.
COVER_SLICE = 1 << 20


def _covered_upto(s: np.ndarray, e: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The summed length of intervals ``[0, i)`` for each ``i`` of ``at`` (in [0, n], any order), a slice of
    :data:`COVER_SLICE` intervals at a time: no running sum of every interval is held (a lane holds millions)."""
    out = np.zeros(at.shape[0], np.int64)
    order = np.argsort(at, kind="stable")
    srt = at[order]
    carry = 0
    for lo in range(0, s.shape[0], COVER_SLICE):
        hi = min(lo + COVER_SLICE, s.shape[0])
        run = np.cumsum(e[lo:hi] - s[lo:hi])
        a, b = np.searchsorted(srt, [lo + 1, hi + 1])  # the points i in (lo, hi]
        out[order[a:b]] = carry + run[srt[a:b] - lo - 1]
        carry += int(run[-1])
    return out


def idle_set(act, ctx: Context, steps, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Idle time as the gaps analysis counts it: outside the steps the holes of its busy set, inside them the time no
    step-time layer but ``idle`` covers. Each part is found in memory the size of the answer (:func:`union_holes`): the
    busy set and the steps' layers are not joined, nor their complements built (a big run holds millions)."""
    whole = (np.array([lo], np.int64), np.array([hi], np.int64))
    busy = busy_set(act, ctx)
    if steps is None or not steps.start.shape[0]:
        return union_holes([busy], *whole)
    ss, se = union(steps.start, steps.end)
    work = [m for name, m in step_layers(act, ctx, steps) if name != "idle"]
    outside, inside = union_holes_many([([busy], *complement(ss, se, lo, hi)),
                                        (work, *intersect(ss, se, *whole, False))])
    idle = Measure(*outside, disjoint=True) | Measure(*inside, disjoint=True)  # they touch at the steps' edges
    return idle.s, idle.e


DECLARED = declare(
    "timeline",
    doc="For the reports' timeline view; no metrics.",
    tables="`timeline` (lane, start_ps, end_ps, covered_ps, count): per lane (`window`, `device compute`, `device "
           "copies`, `device collectives`, `training threads`, `input wait`, `tf.data workers`, `host collectives`, "
           "`python`, `idle`) the merged activity intervals, at most 3000 per lane (the narrowest holes closed; "
           "`covered_ps` is the active time inside each span). `idle` is idle as `idle_pct` counts it (between steps "
           "the gaps analysis' busy set, inside steps the step split's idle), so its time inside the steps' wall time "
           "adds up to `idle_pct`",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, steps: StepSet) -> AnalysisResult:
    res = AnalysisResult("timeline")
    lo, hi = act.span
    if hi <= lo:
        res.notes.append("the trace has no events: no timeline")
        return res
    frames = [Table({"lane": ["window"], "start_ps": np.array([lo], np.int64), "end_ps": np.array([hi], np.int64),
                     "covered_ps": np.array([hi - lo], np.int64), "count": np.array([1], np.int64)})]
    for lane, names, on_device in LANES:
        if on_device and not act.devices:
            continue
        if names == ("@tfdata",):
            m = act.threads("tfdata").wall()
        elif names == ("@python",):  # the steps analysis' python host work (markers and waits left out)
            m = python_host_activity(act, ctx, steps)
        else:
            m = act.union(*names)
        if len(m):
            frames.append(coarsen_set(m, lane))
    gs, ge = idle_set(act, ctx, steps, lo, hi)
    if gs.shape[0]:
        frames.append(coarsen(gs, ge, lane="idle"))
    res.tables["timeline"] = Table.concat(frames)
    return res


__all__ = ["LANES", "MAX_SPANS", "analyze", "coarsen"]
