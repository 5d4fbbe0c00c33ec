"""Interval arithmetic on event times, shared by every analysis.

Intervals are ``[start, end)`` in ps, as int64 columns. A *set* is disjoint and sorted, with no
empty and no touching intervals (what :func:`union` returns); a *run* is such a set for one
thread. The linear-time kernels are C (``tfadvisor/_native.c``).

* sets: :func:`union`, :func:`union_runs`, :func:`intersect`, :func:`difference`,
  :func:`complement`;
* time inside windows: :class:`Measure` (wall time), :class:`Runs` (thread time),
  :class:`LazyUnion`, :func:`union_of`, :func:`contained`, :func:`contains_any`,
  :func:`priority_split`;
* event rows of a plane: :func:`line_ranges`, :func:`line_rows`, :func:`rows_runs`,
  :func:`line_runs`, :func:`rows_touching`, :func:`outermost`, :func:`run_bounds`;
* sets too big to hold as their union, read a time chunk at a time: :class:`ChunkedSet` (the RowSets of
  :mod:`tfadvisor.spans.rowsets`), :class:`UnionSet`; every reader above takes them.
"""

from __future__ import annotations

import heapq

import numpy as np

import tfadvisor._native as _native
from tfadvisor.model.trace import Plane

#: A disjoint set queried again with few points keeps a running sum of its lengths (8 bytes per interval) up to this
#: many intervals; a bigger one (a big trace's kernels: tens of millions) is read in one pass per query instead, a few
#: ms each (a run asks ~15 times), rather than hold the sum for as long as the set lives.
PREFIX_MAX_INTERVALS = 1 << 20

#: An empty int64 column (shared: never written to).
EMPTY = np.empty(0, np.int64)

# ------------------------------------------------------------------------------------------
# Kernels
# ------------------------------------------------------------------------------------------

#: ``_merge_sorted(s, e)``: Union of start-sorted intervals; ok=False when the starts were not sorted.
_merge_sorted = _native.merge_sorted

#: ``_union2_linear(s1, e1, s2, e2)``: Union of two sets of disjoint sorted intervals.
_union2_linear = _native.union2_linear

#: ``_union_small(bs, be, ss, se)``: Union of a big and a small set of disjoint sorted intervals: the big set is
#: copied in blocks, only the neighbourhood of each small interval is merged.
_union_small = _native.union_small

#: ``_prefix_lengths(s, e)``: running sums of the lengths e - s (n + 1 values, the first 0).
_prefix_lengths = _native.prefix_lengths

#: ``_cover_sorted(s, e, t)``: Covered length of disjoint sorted intervals in (-inf, t] for ascending query points
#: t.
_cover_sorted = _native.cover_sorted

#: ``_merge_rows(start, end, line, rows)``: Per-thread union of the intervals of event rows (ascending rows: grouped
#: by thread). Returns the merged intervals, thread by thread, the bounds of each thread's run, and ok=False when a
#: thread's starts were not sorted.
_merge_rows = _native.merge_rows

#: ``_merge_rows_all(start, dur, line, rows)``: (starts, ends, ok), the union over every thread of the intervals of
#: event rows grouped by thread (ascending) and sorted by start in each, in one merge; ok False (nothing merged)
#: for rows outside the columns or not in that order.
_merge_rows_all = _native.merge_rows_all

#: ``intersect(s1, e1, s2, e2, with_index=True)``: Pieces of (disjoint sorted) set 1 inside (disjoint sorted) set 2,
#: with (unless ``with_index`` is false) the index into set 2.
intersect = _native.intersect

#: ``_priority_cover(starts, ends, a, b)``: per layer (``starts[k]``, ``ends[k]``: arrays, read in place) and window,
#: the time the layer covers first (K x W, flat); None when a layer is not sorted and disjoint, or the windows'
#: starts or ends do not ascend.
_priority_cover = _native.priority_cover

#: ``_union_row_ranges(start, dur, rows, lo, hi, codes, code)``: (starts, ends, ok), the union of the ranges
#: ``rows[lo[g]:hi[g]]``, each one thread's rows ascending by start (with ``codes``, of the rows whose code is
#: ``code``), merged in one pass; ok False for rows out of the columns or out of order.
_union_row_ranges = _native.union_row_ranges

#: ``_union_rows(start, end, rows)``: the union of the intervals of event rows in any order (sorted in the kernel).
#: Here and in the merges, ``rows`` are read as they are when int32 or int64 (the row arrays of a plane are int32
#: where every row fits).
_union_rows = _native.union_rows


def _union2(s1: np.ndarray, e1: np.ndarray, s2: np.ndarray, e2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of two sets of disjoint sorted intervals."""
    n1, n2 = s1.shape[0], s2.shape[0]
    if n1 * 16 < n2:
        return _union_small(s2, e2, s1, e1)
    if n2 * 16 < n1:
        return _union_small(s1, e1, s2, e2)
    return _union2_linear(s1, e1, s2, e2)


# ------------------------------------------------------------------------------------------
# Sets
# ------------------------------------------------------------------------------------------

def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as a set: sorted, disjoint, empty ones dropped, touching ones joined."""
    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    if starts.shape[0] == 0:
        return EMPTY, EMPTY
    s, e, ok = _merge_sorted(starts, ends)
    if not ok:
        o = np.argsort(starts, kind="stable")
        s, e, _ = _merge_sorted(starts[o], ends[o])
    return s, e


def union_runs(runs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Union of several sets (e.g. one per thread)."""
    runs = [r for r in runs if r[0].shape[0]]
    if not runs:
        return EMPTY, EMPTY
    if len(runs) == 1:
        return runs[0]
    # always join the two smallest: the big sets are copied as few times as possible
    heap = [(r[0].shape[0], i, r) for i, r in enumerate(runs)]
    heapq.heapify(heap)
    k = len(heap)
    while len(heap) > 1:
        _, _, x = heapq.heappop(heap)
        _, _, y = heapq.heappop(heap)
        z = _union2(x[0], x[1], y[0], y[1])
        heapq.heappush(heap, (z[0].shape[0], k, z))
        k += 1
    return heap[0][2]


def difference(us: np.ndarray, ue: np.ndarray, ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Set ``U`` minus set ``W``."""
    if not ws.shape[0]:
        return us, ue
    t = np.concatenate([us, ue, ws, we])
    w = np.concatenate([np.ones(us.shape[0]), -np.ones(ue.shape[0]), np.full(ws.shape[0], 2.0),
                        np.full(we.shape[0], -2.0)])
    order = np.lexsort((w, t))  # at equal times, ends (negative) before starts
    t, c = t[order], np.cumsum(w[order])
    inside = c == 1
    seg_s = t[:-1][inside[:-1]]
    seg_e = t[1:][inside[:-1]]
    keep = seg_e > seg_s
    return seg_s[keep], seg_e[keep]


def complement(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The holes of set (s, e) inside [lo, hi)."""
    n = s.shape[0]
    gs = np.empty(n + 1, np.int64)  # built in place: these sets hold millions of intervals
    gs[0] = lo
    gs[1:] = e
    ge = np.empty(n + 1, np.int64)
    ge[:n] = s
    ge[n] = hi
    np.clip(gs, lo, hi, out=gs)
    np.clip(ge, lo, hi, out=ge)
    ok = ge > gs
    if ok.all():
        return gs, ge
    return gs[ok], ge[ok]


def contains_any(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    """Per interval [s, e): holds a whole window of the set (ws, we) (e.g. an event wrapping a step)."""
    if not ws.shape[0]:
        return np.zeros(s.shape[0], bool)
    k = np.searchsorted(ws, s, side="left")  # the first window starting inside: later ones end later
    kk = np.minimum(k, ws.shape[0] - 1)
    return (k < ws.shape[0]) & (ws[kk] >= s) & (we[kk] <= e)


# ------------------------------------------------------------------------------------------
# Time inside windows
# ------------------------------------------------------------------------------------------

class _Covered:
    """A set whose covered length up to any time is known (``upto``): its length inside windows follows."""

    __slots__ = ()

    def upto(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Covered length inside each window [a, b)."""
        a = np.asarray(a, np.int64)
        b = np.asarray(b, np.int64)
        r = self.upto(np.concatenate([a.ravel(), b.ravel()]))
        n = a.size
        return (r[n:] - r[:n]).reshape(a.shape)


class Measure(_Covered):
    """Length of a set of intervals inside windows.

    Intervals may overlap (each counts) unless the set is ``disjoint`` (wall time);
    ``within(a, b)`` is vectorised over windows.
    """

    __slots__ = ("s", "e", "_ss", "_cs", "_es", "_ce", "disjoint", "_prefix", "_queries")

    def __init__(self, starts: np.ndarray, ends: np.ndarray, disjoint: bool = False):
        self.s = np.asarray(starts, np.int64)
        self.e = np.asarray(ends, np.int64)
        self.disjoint = disjoint
        self._ss = None
        self._prefix = None
        self._queries = 0

    @classmethod
    def union(cls, starts: np.ndarray, ends: np.ndarray) -> Measure:
        """Wall time of intervals (their :func:`union`)."""
        s, e = union(starts, ends)
        return cls(s, e, disjoint=True)

    @classmethod
    def of_rows(cls, plane: Plane, rows: np.ndarray) -> Measure:
        """Wall-time union of event rows (ascending rows: grouped by thread, sorted in each)."""
        return cls(*rows_union(plane, rows), disjoint=True)

    @classmethod
    def empty(cls) -> Measure:
        return cls(EMPTY, EMPTY, disjoint=True)

    def __len__(self) -> int:
        return int(self.s.shape[0])

    def total(self) -> int:
        return int(np.sum(self.e - self.s))

    def _prep(self) -> None:
        if self._ss is not None:
            return
        if self.disjoint:
            self._ss = self.s
            self._es = self.e
        else:
            self._ss = np.sort(self.s, kind="stable")
            self._es = np.sort(self.e, kind="stable")
        self._cs = np.concatenate([[0], np.cumsum(self._ss)])
        self._ce = np.concatenate([[0], np.cumsum(self._es)])

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, t] for each t."""
        t = np.asarray(t, np.int64)
        if self.s.shape[0] == 0:
            return np.zeros(t.shape, np.int64)
        if self.disjoint and (self._prefix is not None or (self._queries >= 1 and t.size * 64 < self.s.shape[0]
                                                            and self.s.shape[0] <= PREFIX_MAX_INTERVALS)):
            # queried again with few points: binary search in a prefix sum of the lengths
            if self._prefix is None:
                self._prefix = _prefix_lengths(self.s, self.e)
            k = np.searchsorted(self.s, t, side="right")
            last = np.maximum(k - 1, 0)
            over = np.where(k > 0, np.maximum(self.e[last] - t, 0), 0)
            return self._prefix[k] - over
        if self.disjoint:  # the first query: one streaming pass, nothing to allocate
            self._queries += 1
            flat = np.ascontiguousarray(t.ravel())
            if flat.shape[0] > 1 and not bool(np.all(flat[1:] >= flat[:-1])):
                o = np.argsort(flat, kind="stable")
                r = np.empty_like(flat)
                r[o] = _cover_sorted(self.s, self.e, flat[o])
            else:
                r = _cover_sorted(self.s, self.e, flat)
            return r.reshape(t.shape)
        self._prep()
        ns = np.searchsorted(self._ss, t, side="right")
        ne = np.searchsorted(self._es, t, side="right")
        return (ns * t - self._cs[ns]) - (ne * t - self._ce[ne])

    def wall(self) -> Measure:
        return self if self.disjoint else Measure.union(self.s, self.e)

    def __or__(self, other: Measure) -> Measure:
        a, b = self.wall(), other.wall()
        if len(b) == 0:
            return a
        if len(a) == 0:
            return b
        return Measure(*_union2(a.s, a.e, b.s, b.e), disjoint=True)


def union_of(*parts: Measure | None) -> Measure:
    """Wall-time union of measures (None and empty ones skipped); of ChunkedSets among them, a :class:`UnionSet`."""
    parts = [p for p in parts if p is not None and len(p)]
    if any(isinstance(p, ChunkedSet) for p in parts):
        return parts[0] if len(parts) == 1 else UnionSet([p if isinstance(p, ChunkedSet) else p.wall() for p in parts])
    parts = [p.wall() for p in parts]
    if not parts:
        return Measure.empty()
    s, e = union_runs([(p.s, p.e) for p in parts])
    return Measure(s, e, disjoint=True)


class Lanes:
    """Sets of intervals (one per lane: a thread, a device) moved apart so that one call on their union does the
    work of one call per lane: lane k is shifted by ``k * span - lo``, where ``[lo, lo + span)`` holds every
    lane's times, so no two lanes touch and each lane's answers are exact (integer) as with its own set."""

    __slots__ = ("lo", "hi", "span", "n")

    def __init__(self, lo: int, hi: int, n: int):
        self.lo, self.hi, self.n = int(lo), int(hi), int(n)
        self.span = self.hi - self.lo + 1

    @classmethod
    def fit(cls, n: int, *values: np.ndarray) -> Lanes | None:
        """Lanes for ``n`` lanes holding these times, or None where they do not fit in int64 moved apart."""
        vals = [v for v in values if v.shape[0]]
        if not vals or n < 1:
            return None
        lo = min(int(v.min()) for v in vals)
        hi = max(int(v.max()) for v in vals)
        lanes = cls(lo, hi, n)
        if abs(lo) >= 2**61 or abs(hi) >= 2**61 or lanes.span * (n + 1) >= 2**61:
            return None
        return lanes

    def offsets(self) -> np.ndarray:
        """The shift of each lane."""
        return np.arange(self.n, dtype=np.int64) * self.span - self.lo

    def queries(self, t: np.ndarray) -> np.ndarray:
        """Times ``t`` asked in every lane (lane-major, shape (n, t.size)), clipped to the lanes' range first (a
        set inside ``[lo, hi]`` covers as much up to ``t`` as up to ``t`` clipped there)."""
        return np.clip(np.asarray(t, np.int64).ravel(), self.lo, self.hi)[None, :] + self.offsets()[:, None]


class Runs:
    """Thread time: one disjoint set per thread; lengths add up over threads."""

    def __init__(self, runs: list[tuple[np.ndarray, np.ndarray]]):
        self.parts = [Measure(a, b, disjoint=True) for a, b in runs if a.shape[0]]
        self._lanes: tuple[Lanes, Measure] | None = None

    def __len__(self) -> int:
        return sum(len(m) for m in self.parts)

    def total(self) -> int:
        return sum(m.total() for m in self.parts)

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a, np.int64)
        b = np.asarray(b, np.int64)
        if len(self.parts) > 1 and self._lanes is None:
            lanes = Lanes.fit(len(self.parts), *[m.s for m in self.parts], *[m.e for m in self.parts])
            if lanes is not None:  # every thread's set in its own lane: one query instead of one per thread
                off = lanes.offsets()
                self._lanes = (lanes, Measure(np.concatenate([m.s + o for m, o in zip(self.parts, off)]),
                                              np.concatenate([m.e + o for m, o in zip(self.parts, off)]),
                                              disjoint=True))
        if self._lanes is not None:
            lanes, m = self._lanes
            n = a.size
            r = m.within(lanes.queries(a), lanes.queries(b)).reshape(lanes.n, n).sum(axis=0)
            return r.reshape(a.shape)
        out = np.zeros(a.shape, np.int64)
        for m in self.parts:
            out += m.within(a, b)
        return out

    def wall(self) -> Measure:
        return union_of(*self.parts)


class LazyUnion:
    """A union for ``within`` queries kept as one big set plus a small one, so that adding a
    small set does not copy the big one (within = big + small - their overlap)."""

    SMALL = 1 / 16

    def __init__(self, *measures: Measure | None):
        self.big = Measure.empty()
        self.small = Measure.empty()
        for m in sorted((m for m in measures if m is not None and len(m)), key=len, reverse=True):
            self.add(m)

    def __len__(self) -> int:
        return len(self.big) + len(self.small)

    def wall(self) -> Measure:
        return union_of(self.big, self.small)

    def total(self) -> int:
        return union_length(self)

    def add(self, m: Measure | Runs | LazyUnion | ChunkedSet) -> None:
        if isinstance(m, LazyUnion):
            self.add(m.big)
            self.add(m.small)
            return
        if isinstance(m, ChunkedSet) and not len(self.big):
            self.big = m  # the big one read in chunks, as it is
        else:
            m = m.wall()
            if len(m) <= max(len(self.big), 1) * self.SMALL:
                self.small = self.small | m
            else:
                self.big = self.big.wall() | m  # a chunked big one built: two big sets
        if len(self.small) > max(len(self.big), 1) * self.SMALL:
            self.big, self.small = self.big.wall() | self.small, Measure.empty()

    def within(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if isinstance(self.big, ChunkedSet) and len(self.small):  # one pass over the big set's chunks
            return UnionSet([self.big, self.small]).within(a, b)
        out = self.big.within(a, b)
        if len(self.small) == 0:
            return out
        out = out + self.small.within(a, b)
        if len(self.big) == 0:
            return out
        a = np.ascontiguousarray(a, np.int64)
        b = np.ascontiguousarray(b, np.int64)
        if a.shape[0] > 1 and not (bool(np.all(a[1:] >= b[:-1])) and bool(np.all(b >= a))):
            return union_of(self.big, self.small).within(a, b)  # windows overlap each other: the plain way
        # the overlap of small and big inside each window, from the small set's pieces
        ps, pe, pw = intersect(self.small.s, self.small.e, a, b)
        if ps.shape[0]:
            up = self.big.upto(np.concatenate([pe, ps]))
            ov = up[:pe.shape[0]] - up[pe.shape[0]:]
            out = out - np.bincount(pw, weights=ov.astype(np.float64), minlength=a.shape[0]).astype(np.int64)
        return out


# ------------------------------------------------------------------------------------------
# Big sets kept as their rows, read a time chunk at a time
# ------------------------------------------------------------------------------------------

#: The readers of ChunkedSets (:mod:`tfadvisor.spans.rowsets`) cut time into chunks of about this many of their
#: rows.
CHUNK_ROWS = 1 << 19

FAR = 1 << 62  # beyond every time: the outer edges of the chunks


class ChunkedSet(_Covered):
    """A wall-time set too big to hold as its union, read a time chunk at a time: :meth:`part` gives the union of
    what meets a chunk. :func:`priority_split`, :func:`union_length`, :func:`union_holes`, :class:`LazyUnion`,
    :meth:`within` and the timeline's spans read it chunk by chunk, with the same answers as its :meth:`wall` set;
    anything else reads :meth:`wall`, built in full."""

    #: rows (or intervals) behind the set: the chunks are planned on them
    size = 0

    def part(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def cuts(self, k: int) -> np.ndarray:
        """``k - 1`` ascending times that split the set into ``k`` chunks of about as many rows."""
        raise NotImplementedError

    def wall(self) -> Measure:
        raise NotImplementedError

    def pieces(self, backward: bool = False):
        """The set's intervals, chunk by chunk: (c0, c1, s, e), the chunk ``[c0, c1)`` and the intervals clipped to
        it, in time order (``backward``: last chunk first). An interval over a cut comes as two pieces that touch
        there."""
        edges = _edges([self])
        chunks = list(zip(edges[:-1], edges[1:]))
        for c0, c1 in (chunks[::-1] if backward else chunks):
            yield (c0, c1, *_clipped(self.part(c0, c1), c0, c1))

    def blocks(self):
        """The set's intervals in time order, a block (s, e) at a time: exactly its :meth:`wall` set's (the pieces of
        an interval over a cut joined)."""
        cs = ce = None  # the last interval so far, held back: the next chunk may continue it
        for _, _, s, e in self.pieces():
            if not s.shape[0]:
                continue
            if cs is not None:
                if int(s[0]) == ce:  # a set's intervals never touch: the same interval, cut
                    s = s.copy()
                    s[0] = cs
                else:
                    yield np.array([cs], np.int64), np.array([ce], np.int64)
            cs, ce = int(s[-1]), int(e[-1])
            if s.shape[0] > 1:
                yield s[:-1], e[:-1]
        if cs is not None:
            yield np.array([cs], np.int64), np.array([ce], np.int64)

    def total(self) -> int:
        return sum(int((e - s).sum()) for _, _, s, e in self.pieces())

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Covered length in (-inf, t] for each t (as :meth:`Measure.upto`); the last answer is kept, for the
        analyses that ask the same times of several unions it is the big part of (:class:`LazyUnion`)."""
        t = np.asarray(t, np.int64)
        last = getattr(self, "_last", None)
        if last is not None and last[0].shape == t.shape and bool(np.array_equal(last[0], t)):
            return last[1].copy()
        out = self._upto(t)
        self._last = (t.copy(), out.copy())
        return out

    def _upto(self, t: np.ndarray) -> np.ndarray:
        return _upto_many([[self]], t)[0]


class UnionSet(ChunkedSet):
    """The union of sets (the RowSets of several devices, a RowSet and Measures), read a chunk at a time as they
    are."""

    def __init__(self, sets: list):
        self.sets = [m for m in sets if len(m)]
        self.size = sum(m.size if isinstance(m, ChunkedSet) else len(m) for m in self.sets)

    def __len__(self) -> int:
        return sum(len(m) for m in self.sets)

    def wall(self) -> Measure:
        return union_of(*[m.wall() for m in self.sets])

    def part(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        return union_runs([_restricted(m, t0, t1) for m in self.sets])

    def cuts(self, k: int) -> np.ndarray:
        return _cuts(self.sets, k)


def _chunked_in(groups) -> list:
    """The ChunkedSets among groups of sets, each once."""
    return list({id(m): m for g in groups for m in g if isinstance(m, ChunkedSet)}.values())


def _parts_at(sets: list, c0: int, c1: int) -> dict:
    """Each ChunkedSet's part of the chunk ``[c0, c1)``, by id: built once for every reader of the chunk."""
    return {id(m): m.part(c0, c1) for m in sets}


def _upto_many(groups: list[list], t: np.ndarray) -> list[np.ndarray]:
    """For each group of sets (ChunkedSets and wall-time Measures), the covered length of their union in (-inf, t]
    for each t: the chunks walked once for all groups, each ChunkedSet's part built once a chunk. The cover is
    summed chunk by chunk, so any chunk edges give the same answers."""
    flat = t.ravel()
    order = np.argsort(flat, kind="stable")
    srt = flat[order]
    bases = _chunked_in(groups)
    edges = _edges(bases)
    outs = [np.empty(flat.shape[0], np.int64) for _ in groups]
    carry = [0] * len(groups)
    for c0, c1 in zip(edges[:-1], edges[1:]):
        memo = _parts_at(bases, c0, c1)
        i, j = (int(x) for x in np.searchsorted(srt, [c0, c1]))
        for k, g in enumerate(groups):
            got = [_restricted(m, c0, c1, memo) for m in g]
            s, e = _clipped(got[0] if len(got) == 1 else union_runs(got), c0, c1)
            if j > i:
                outs[k][order[i:j]] = carry[k] + _cover_sorted(s, e, srt[i:j])
            carry[k] += int((e - s).sum())
    return [o.reshape(t.shape) for o in outs]


def _chunk_members(m) -> list | None:
    """The sets a set read in chunks is the union of (a UnionSet's, a LazyUnion's over a ChunkedSet); None for a set
    held whole."""
    if isinstance(m, UnionSet):
        return list(m.sets)
    if isinstance(m, ChunkedSet):
        return [m]
    if isinstance(m, LazyUnion) and isinstance(m.big, ChunkedSet):
        return _chunk_members(m.big) + ([m.small] if len(m.small) else [])
    return None


def within_many(sets: list, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    """``[m.within(a, b) for m in sets]``: those read in chunks (ChunkedSets, LazyUnions over one) walk the chunks in
    one pass together, the big sets they share built once a chunk for all of them (a big device's kernels are in
    most of the input analysis' unions)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    out: list = [None] * len(sets)
    chunked = {k: g for k, g in enumerate(_chunk_members(m) for m in sets) if g}
    if len(chunked) > 1:
        n = a.size
        got = _upto_many(list(chunked.values()), np.concatenate([a.ravel(), b.ravel()]))
        for k, r in zip(chunked, got):
            out[k] = (r[n:] - r[:n]).reshape(a.shape)
    return [m.within(a, b) if o is None else o for m, o in zip(sets, out)]


def _clipped(part: tuple[np.ndarray, np.ndarray], c0: int, c1: int) -> tuple[np.ndarray, np.ndarray]:
    """A disjoint sorted set's intervals inside ``[c0, c1)``, cut there (only the two at the edges can cross them)."""
    s, e = part
    i, j = int(np.searchsorted(e, c0, side="right")), int(np.searchsorted(s, c1, side="left"))
    s, e = s[i:j], e[i:j]
    if s.shape[0] and s[0] < c0:
        s = s.copy()
        s[0] = c0
    if e.shape[0] and e[-1] > c1:
        e = e.copy()
        e[-1] = c1
    return s, e


def _cuts(sets, k: int) -> np.ndarray:
    """Cuts for about ``k`` chunks of the ChunkedSets among ``sets`` together (each cut by its share of rows)."""
    big = [m for m in sets if isinstance(m, ChunkedSet)]
    total = sum(m.size for m in big)
    if k <= 1 or not total:
        return EMPTY
    cuts = np.unique(np.concatenate([m.cuts(max(1, round(k * m.size / total))) for m in big]))
    if cuts.shape[0] >= k:  # several sets: about k chunks in all
        cuts = cuts[(np.arange(1, k) * cuts.shape[0]) // k]
    return cuts


def _edges(sets) -> list[int]:
    """Chunk edges for reading ``sets`` (the ChunkedSets among them): -far, cuts of about :data:`CHUNK_ROWS` of their
    rows each, far."""
    total = sum(m.size for m in sets if isinstance(m, ChunkedSet))
    return [-FAR, *_cuts(sets, -(-total // CHUNK_ROWS)).tolist(), FAR]


def _restricted(m, c0: int, c1: int, memo: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of a ChunkedSet or a wall-time Measure that meet ``[c0, c1)`` (views of a Measure's); a
    ChunkedSet's from ``memo`` (:func:`_parts_at`) where it holds it."""
    if isinstance(m, ChunkedSet):
        got = memo.get(id(m)) if memo else None
        return m.part(c0, c1) if got is None else got
    i = int(np.searchsorted(m.e, c0, side="right"))
    j = int(np.searchsorted(m.s, c1, side="left"))
    return m.s[i:j], m.e[i:j]


def first_last(m: Measure | ChunkedSet) -> tuple[int, int]:
    """The first start and the last end of a non-empty wall-time set (a ChunkedSet's from its first and last chunks
    that hold any)."""
    if not isinstance(m, ChunkedSet):
        return int(m.s[0]), int(m.e[-1])
    first = next(int(s[0]) for _, _, s, _ in m.pieces() if s.shape[0])
    last = next(int(e[-1]) for _, _, _, e in m.pieces(backward=True) if e.shape[0])
    return first, last


def _has_chunked(sets) -> bool:
    return any(isinstance(m, ChunkedSet) for m in sets)


#: At most this many disjoint sets are walked by :func:`union_length` and :func:`union_holes` (the kernels' limit;
#: more are joined first, the smallest together).
SWEEP_MAX_SETS = 64


def _sweep_sets(sets) -> list:
    """The disjoint sorted sets the union of ``sets`` is made of: a Measure's wall set, a LazyUnion's two, each
    thread's set of a Runs, a ChunkedSet as it is; None and empty ones left out; at most :data:`SWEEP_MAX_SETS` (the
    smallest Measures joined)."""
    out: list = []
    for m in sets:
        if m is None or not len(m):
            continue
        if isinstance(m, ChunkedSet):
            out.append(m)
        elif isinstance(m, LazyUnion):
            out.extend(x for x in (m.big, m.small) if len(x))
        elif isinstance(m, Runs):
            out.extend(m.parts)
        else:
            out.append(m.wall())
    if len(out) > SWEEP_MAX_SETS:
        keep = [m for m in out if isinstance(m, ChunkedSet)]
        ms = sorted((m for m in out if not isinstance(m, ChunkedSet)), key=len, reverse=True)
        room = SWEEP_MAX_SETS - 1 - len(keep)
        out = keep + ms[:room] + [union_of(*ms[room:])]
    return out


def union_length(*sets) -> int:
    """``union_of(*sets).total()`` (Measures, Runs, LazyUnions, ChunkedSets), walked in one pass without building
    the union (ChunkedSets a chunk at a time)."""
    if len(sets) <= SWEEP_MAX_SETS and all(type(m) is Measure and m.disjoint for m in sets):  # the usual: as they are
        return _native.union_length([a for m in sets if len(m) for a in (m.s, m.e)])
    return union_lengths([sets])[0]


def union_lengths(groups: list) -> list[int]:
    """``[union_length(*g) for g in groups]``, the ChunkedSets among them read in one pass together (each chunk's
    part built once for all the groups)."""
    parts = [_sweep_sets(g) for g in groups]
    bases = _chunked_in(parts)
    if not bases:
        return [_native.union_length([a for m in ps for a in (m.s, m.e)]) for ps in parts]
    edges = _edges(bases)
    totals = [0] * len(parts)
    for c0, c1 in zip(edges[:-1], edges[1:]):
        memo = _parts_at(bases, c0, c1)
        for k, ps in enumerate(parts):
            totals[k] += _native.union_length([a for m in ps for a in _clipped(_restricted(m, c0, c1, memo), c0, c1)])
    return totals


def union_holes(sets, ws: np.ndarray, we: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The holes of the union of ``sets`` (Measures, Runs, LazyUnions) inside the disjoint sorted windows
    ``[ws, we)``: ``intersect(*complement(union), ws, we)`` without building the union or its complement (memory the
    size of the answer)."""
    return union_holes_many([(sets, ws, we)])[0]


def union_holes_many(asks: list) -> list[tuple[np.ndarray, np.ndarray]]:
    """``[union_holes(sets, ws, we) for sets, ws, we in asks]``, the ChunkedSets among them read in one pass
    together (each chunk's part built once for all the asks)."""
    asks = [(_sweep_sets(sets), np.ascontiguousarray(ws, np.int64), np.ascontiguousarray(we, np.int64))
            for sets, ws, we in asks]
    bases = _chunked_in([ps for ps, _, _ in asks])
    if not bases:
        return [_native.union_holes([a for m in ps for a in (m.s, m.e)], ws, we) for ps, ws, we in asks]
    edges = _edges(bases)
    for k in range(1, len(edges) - 1):  # no cut on a window's edge: a hole cut at a cut is one hole, joined below
        c = edges[k]
        while any(_holds(ws, c) or _holds(we, c) for _, ws, we in asks):
            c += 1
        edges[k] = c
    edges = sorted(set(edges))
    found: list[tuple[list, list]] = [([], []) for _ in asks]
    for c0, c1 in zip(edges[:-1], edges[1:]):
        memo = None
        for (ps, ws, we), (hs, he) in zip(asks, found):
            i, j = int(np.searchsorted(we, c0, side="right")), int(np.searchsorted(ws, c1, side="left"))
            if j <= i:
                continue
            memo = memo if memo is not None else _parts_at(bases, c0, c1)
            s, e = _native.union_holes([a for m in ps for a in _restricted(m, c0, c1, memo)],
                                       np.clip(ws[i:j], c0, c1), np.clip(we[i:j], c0, c1))
            hs.append(s)
            he.append(e)
    return [_joined_at(hs, he, edges) for hs, he in found]


def _joined_at(hs: list, he: list, edges: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Holes found chunk by chunk, those cut at a chunk edge joined again."""
    if not hs:
        return EMPTY, EMPTY
    s, e = np.concatenate(hs), np.concatenate(he)
    cut = np.zeros(s.shape[0], bool)  # a hole that starts where the one before ends, at a cut: one hole
    if s.shape[0] > 1:
        cut[1:] = (s[1:] == e[:-1]) & np.isin(s[1:], edges)
    if cut.any():
        first = np.flatnonzero(~cut)
        last = np.append(first[1:], s.shape[0]) - 1
        s, e = s[first], e[last]
    return s, e


def _holds(a: np.ndarray, t: int) -> bool:
    """Whether the sorted ``a`` holds ``t``."""
    i = int(np.searchsorted(a, t))
    return i < a.shape[0] and int(a[i]) == t


def step_of(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For times ``t``, the index of the span of the sorted, disjoint ``[starts, ends)`` that holds each
    (clipped to 0 where none does), and whether one does."""
    i = np.searchsorted(starts, t, side="right") - 1
    inside = i >= 0
    i = np.maximum(i, 0)
    if starts.shape[0]:
        inside &= t < ends[i]
    return i, inside


def contained(m: Measure, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per interval: lies entirely inside the (disjoint) set ``m``."""
    if len(m) == 0 or starts.shape[0] == 0:
        return np.zeros(starts.shape[0], bool)
    return m.within(starts, ends) >= (ends - starts)


def priority_split(windows: tuple[np.ndarray, np.ndarray],
                   layers: list[tuple[str, Measure | Runs | LazyUnion | None]]) -> dict[str, np.ndarray]:
    """Split each window's time into exclusive categories, the first layer winning overlaps.

    Returns the ps per window for each layer name (layers with the same name add up) and
    ``_rest`` for time no layer covers.
    """
    a, b = windows
    fast = _priority_cover_of(a, b, layers)
    if fast is not None:
        return fast
    out: dict[str, np.ndarray] = {}
    acc = LazyUnion()
    prev = np.zeros(a.shape[0], np.int64)
    for name, m in layers:
        if m is None or len(m) == 0:
            out.setdefault(name, np.zeros(a.shape[0], np.int64))
            continue
        acc.add(m)
        cur = acc.within(a, b)
        out[name] = out.get(name, 0) + (cur - prev)
        prev = cur
    out["_rest"] = (b - a) - prev
    return out


def priority_split_lanes(lo: int, hi: int, lanes: list[list[tuple[str, Measure | Runs | LazyUnion | None]]]
                         ) -> list[dict[str, np.ndarray]]:
    """:func:`priority_split` of the one window ``[lo, hi)`` for each lane's own layers (the same names in
    the same order in every lane, e.g. one lane per device), in one sweep: each lane's sets (clipped to the
    window) are moved into a lane of their own (:class:`Lanes`), where no other lane's reach. Each value is an
    array of one, as :func:`priority_split` gives for one window."""
    chunked = any(isinstance(m, ChunkedSet) for layers in lanes for _, m in layers)
    room = Lanes.fit(len(lanes), np.array([lo, hi], np.int64)) if hi > lo and len(lanes) > 1 and not chunked \
        else None
    if room is None:  # one lane or none, no room to move them, or big lanes kept as rows: each split on its own
        return [priority_split((np.array([lo], np.int64), np.array([hi], np.int64)), layers) for layers in lanes]
    names = [name for name, _ in lanes[0]]
    if any([name for name, _ in layers] != names for layers in lanes):
        raise ValueError("priority_split_lanes: every lane needs the same layer names in the same order")
    off = room.offsets()
    merged: list[tuple[str, Measure | None]] = []
    for j, name in enumerate(names):
        s_parts, e_parts = [], []
        for k, layers in enumerate(lanes):
            m = layers[j][1]
            if m is None or len(m) == 0:
                continue
            w = m.wall()
            if len(w) == 0:  # only empty intervals
                continue
            shift = off[k]
            if w.s[0] >= lo and w.e[-1] <= hi:  # sorted and disjoint: inside the window already
                s_parts.append(w.s + shift)
                e_parts.append(w.e + shift)
            else:
                s_parts.append(np.clip(w.s, lo, hi) + shift)
                e_parts.append(np.clip(w.e, lo, hi) + shift)
        merged.append((name, Measure(np.concatenate(s_parts), np.concatenate(e_parts), disjoint=True)
                       if s_parts else None))
    starts = off + lo
    out = priority_split((starts, starts + (hi - lo)), merged)
    return [{name: v[k:k + 1] for name, v in out.items()} for k in range(len(lanes))]


def _priority_cover_of(a: np.ndarray, b: np.ndarray, layers: list) -> dict[str, np.ndarray] | None:
    """:func:`priority_split` in one sweep (``_priority_cover``) where the windows, taken by start, have
    ascending ends too (disjoint windows, or steps that overlap the next); None otherwise. Each layer goes
    in as its wall-time set."""
    a = np.ascontiguousarray(a, np.int64)
    b = np.ascontiguousarray(b, np.int64)
    if a.ndim != 1 or a.shape != b.shape:
        return None
    kept = [(name, m if isinstance(m, ChunkedSet) else m.wall()) for name, m in layers if m is not None and len(m)]
    order = None
    if a.shape[0] > 1 and not bool(np.all(a[1:] >= a[:-1])):  # windows in any order: taken by start
        order = np.lexsort((b, a))
    sa, sb = (a, b) if order is None else (a[order], b[order])
    if _has_chunked(m for _, m in kept):
        cover = _chunked_cover([m for _, m in kept], sa, sb)
    else:
        cover = _priority_cover([w.s for _, w in kept], [w.e for _, w in kept], sa, sb)
    if cover is None:
        return None
    cover = cover.reshape(len(kept), a.shape[0])
    if order is not None:
        back = np.empty_like(cover)
        back[:, order] = cover
        cover = back
    out: dict[str, np.ndarray] = {}
    covered = np.zeros(a.shape[0], np.int64)
    k = 0
    for name, m in layers:
        if m is None or len(m) == 0:
            out.setdefault(name, np.zeros(a.shape[0], np.int64))
            continue
        out[name] = out.get(name, 0) + cover[k]
        covered += cover[k]
        k += 1
    out["_rest"] = (b - a) - covered
    return out


def _chunked_cover(sets: list, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """``_priority_cover`` of ``sets`` (wall-time Measures and ChunkedSets) over windows by start with ascending ends, a
    time chunk at a time: each window's part in a chunk is covered by the sets' intervals there, and the parts add
    up (the cover of a window is a sum over any partition of it). None where the windows are not in that order."""
    if a.shape[0] > 1 and not (bool(np.all(a[1:] >= a[:-1])) and bool(np.all(b[1:] >= b[:-1]))):
        return None
    out = np.zeros((len(sets), a.shape[0]), np.int64)
    edges = _edges(sets)
    for c0, c1 in zip(edges[:-1], edges[1:]):
        i, j = int(np.searchsorted(b, c0, side="right")), int(np.searchsorted(a, c1, side="left"))
        if j <= i:  # no window meets the chunk
            continue
        parts = [_restricted(m, c0, c1) for m in sets]
        got = _priority_cover([s for s, _ in parts], [e for _, e in parts], np.clip(a[i:j], c0, c1),
                              np.clip(b[i:j], c0, c1))
        if got is None:
            return None
        out[:, i:j] += got.reshape(len(sets), j - i)
    return out.ravel()


# ------------------------------------------------------------------------------------------
# Event rows of a plane
# ------------------------------------------------------------------------------------------

def run_bounds(values: np.ndarray) -> np.ndarray:
    """Bounds of the runs of equal ``values``: run i is ``[b[i], b[i + 1])`` (``[0]`` when empty)."""
    n = values.shape[0]
    if n == 0:
        return np.zeros(1, np.int64)
    cut = np.flatnonzero(values[1:] != values[:-1]) + 1
    return np.concatenate([[0], cut, [n]]).astype(np.int64)


def line_ranges(plane: Plane) -> np.ndarray | None:
    """``[first, end)`` event rows of each line (an array of shape (lines, 2)) when the plane's events
    are grouped by line in line order, as the reader stores them; else None (then select rows by
    ``plane.ev_line``). Read from ``ev_line`` itself, so it holds whatever built the plane; found once per
    plane and ``ev_line`` (read-only: every caller shares it)."""
    ln = plane.ev_line
    nl = len(plane.lines)
    cached = plane.__dict__.get("_tfadvisor_line_ranges")
    if cached is not None and cached[0] is ln and cached[1] == nl:
        return cached[2]
    if ln.shape[0] == 0:
        out = np.zeros((nl, 2), np.int64)
    elif ln.shape[0] > 1 and not bool(np.all(ln[1:] >= ln[:-1])):
        out = None
    else:
        idx = np.arange(nl, dtype=ln.dtype)
        out = np.stack([np.searchsorted(ln, idx, side="left"), np.searchsorted(ln, idx, side="right")], axis=1)
    if out is not None:
        out.setflags(write=False)
    plane.__dict__["_tfadvisor_line_ranges"] = (ln, nl, out)
    return out


#: :func:`line_rows` gives int32 rows on planes of more events than this (4 bytes a row saved where it counts).
INT32_ROWS_ABOVE = 1 << 20


def line_rows(plane: Plane, lines: np.ndarray | int) -> np.ndarray:
    """Event rows of the given lines, ascending: int32 on a plane of more than :data:`INT32_ROWS_ABOVE` events
    (where every row fits: a big device's kernels number tens of millions), else int64 (what the analyses' other
    row arrays mix with at no conversion)."""
    rng = line_ranges(plane)
    dt = np.int32 if INT32_ROWS_ABOVE < plane.n_events < 2**31 else np.int64
    if rng is not None and isinstance(lines, (int, np.integer)):  # one line: its range
        li = int(lines)
        return np.arange(rng[li, 0], rng[li, 1], dtype=dt) if 0 <= li < rng.shape[0] else np.empty(0, dt)
    lines = np.asarray(lines, np.int64).ravel()
    if lines.shape[0] > 1 and not bool(np.all(lines[1:] > lines[:-1])):
        lines = np.unique(lines)
    if rng is None:
        return plane.rows_on_lines(lines)
    lines = lines[(lines >= 0) & (lines < rng.shape[0])]
    a, b = rng[lines, 0], rng[lines, 1]
    full = b > a
    a, b = a[full], b[full]
    if not a.shape[0]:
        return np.empty(0, dt)
    if a.shape[0] == 1 or bool(np.all(a[1:] == b[:-1])):  # adjacent lines: one run of rows
        return np.arange(a[0], b[-1], dtype=dt)
    n = b - a  # each line's run of rows, in line order (the lines' ranges ascend)
    return np.repeat((a - np.concatenate([[0], np.cumsum(n)[:-1]])).astype(dt), n) + np.arange(int(n.sum()), dtype=dt)


def _runs_to_list(s: np.ndarray, e: np.ndarray, bounds: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(s[a:b], e[a:b]) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def union_per_line(lines: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per run of equal ``lines`` (a thread), the union of its intervals."""
    starts = np.ascontiguousarray(starts, np.int64)
    ends = np.ascontiguousarray(ends, np.int64)
    b = run_bounds(np.asarray(lines))
    if b.shape[0] - 1 > 256:  # not grouped by line: group first
        o = np.argsort(lines, kind="stable")
        lines, starts, ends = np.asarray(lines)[o], starts[o], ends[o]
        b = run_bounds(lines)
    return [union(starts[x:y], ends[x:y]) for x, y in zip(b[:-1], b[1:])]


#: Up to this many rows :func:`rows_union` sorts their intervals in one kernel call; more go thread by thread.
UNION_SORTED_ROWS = 1 << 16


def row_index(rows) -> np.ndarray:
    """Event rows as the kernels read them in place: a contiguous int32 or int64 array as it is (the planes' row
    arrays are int32: no int64 copy of millions of rows), anything else as int64."""
    rows = np.asarray(rows)
    if rows.dtype != np.int32 and rows.dtype != np.int64:
        return np.ascontiguousarray(rows, np.int64)
    return np.ascontiguousarray(rows)


def rows_union(plane: Plane, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals of (ascending) event rows: few rows sorted at once, many thread by thread."""
    rows = row_index(rows)
    if rows.shape[0] <= UNION_SORTED_ROWS:
        rows = rows[(rows >= 0) & (rows < plane.n_events)] if rows.shape[0] else rows
        return _union_rows(plane.ev_start_ps, plane.ev_dur_ps, rows)
    s, e, ok = _merge_rows_all(plane.ev_start_ps, plane.ev_dur_ps, plane.ev_line, rows)
    if ok:  # grouped by thread, sorted in each: merged in one pass, no per-thread sets in between
        return s, e
    return union_runs(rows_runs(plane, rows))


def rows_runs(plane: Plane, rows: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each thread's union of the intervals of (ascending) event rows."""
    rows = row_index(rows)
    if rows.shape[0] and (rows[0] < 0 or rows[-1] >= plane.n_events or rows.min() < 0
                          or rows.max() >= plane.n_events):
        rows = rows[(rows >= 0) & (rows < plane.n_events)]
    if rows.shape[0] == 0:
        return []
    s, e, b, ok = _merge_rows(plane.ev_start_ps, plane.ev_dur_ps, plane.ev_line, rows)
    if ok:
        return _runs_to_list(s, e, b)
    return union_per_line(plane.ev_line[rows], plane.ev_start_ps[rows], plane.ends(rows))


def line_runs(plane: Plane, line_ok: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each chosen thread's union of its events' intervals (``line_ok``: a mask over the lines)."""
    rng = line_ranges(plane)
    ok = np.asarray(line_ok, bool)
    if rng is not None:
        out = []
        for li in np.flatnonzero(ok[:len(plane.lines)]):
            x, y = int(rng[li, 0]), int(rng[li, 1])
            if y > x:  # the line's events where they lie (no column of their ends), else sorted first
                s, e, in_order = _union_row_ranges(plane.ev_start_ps, plane.ev_dur_ps, None, np.array([x]),
                                                   np.array([y]), None, 0)
                out.append((s, e) if in_order else union(plane.ev_start_ps[x:y], plane.ends(slice(x, y))))
        return out
    m = ok[plane.ev_line] & (plane.ev_meta >= 0)
    return union_per_line(plane.ev_line[m], plane.ev_start_ps[m], plane.ends(m))


#: :func:`rows_touching` tests every row of its lines where they hold fewer events than this in all.
TEST_EVERY_ROW_BELOW = 1 << 14


def rows_touching(plane: Plane, lines: np.ndarray, us: np.ndarray, ue: np.ndarray,
                  meta_mask: np.ndarray | None = None) -> np.ndarray:
    """Rows on ``lines`` (optionally of the metadata in ``meta_mask``) that intersect the set
    (us, ue); a binary search per line, no pass over the plane (lines of few events in all: each of
    their rows is tested, which costs less than the searches)."""
    if us.size == 0:
        return EMPTY
    found = []
    starts_all, dur_all = plane.ev_start_ps, plane.ev_dur_ps
    rng = line_ranges(plane)
    lines = np.asarray(lines, np.int64)
    if rng is not None:
        ok = lines[(lines >= 0) & (lines < rng.shape[0])]
        if int((rng[ok, 1] - rng[ok, 0]).sum()) < TEST_EVERY_ROW_BELOW and bool(np.all(ok[1:] > ok[:-1])):
            found.append(line_rows(plane, ok))
            lines = EMPTY
    for li in lines:
        if rng is None:
            idx = np.flatnonzero(plane.ev_line == li)  # lines not contiguous: test every event of the line
            if idx.size:
                found.append(idx)
            continue
        if not 0 <= li < rng.shape[0]:
            continue
        a, b = int(rng[li, 0]), int(rng[li, 1])
        if b <= a:
            continue
        starts = starts_all[a:b]
        if not bool(starts[-1] >= starts[0]) or (b - a > 1 and not line_sorted(plane, a, b)):
            idx = np.arange(a, b)  # unsorted line: test every event
        else:
            maxdur = int(dur_all[a:b].max())
            lo = np.searchsorted(starts, us - maxdur, side="left")
            hi = np.searchsorted(starts, ue, side="left")
            n = hi - lo
            if n.sum() == 0:
                continue
            keep = n > 0
            lo, n = lo[keep], n[keep]
            rep = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n)
            idx = np.unique(np.arange(int(n.sum())) + rep) + a
        found.append(idx)
    if not found:
        return EMPTY
    rows = np.concatenate(found)
    if meta_mask is not None:
        rows = rows[np.append(meta_mask, False)[plane.ev_meta[rows]]]
    s, e = plane.ev_start_ps[rows], plane.ev_start_ps[rows] + plane.ev_dur_ps[rows]
    i = np.searchsorted(us, e, side="left") - 1
    ok = (i >= 0) & (ue[np.maximum(i, 0)] > s)
    return rows[ok]


def line_sorted(plane: Plane, a: int, b: int) -> bool:
    cache = plane.__dict__.setdefault("_tfadvisor_line_sorted", {})
    v = cache.get(a)
    if v is None:
        st = plane.ev_start_ps[a:b]
        v = bool(np.all(st[1:] >= st[:-1]))
        cache[a] = v
    return v


def outermost(plane: Plane, rows: np.ndarray) -> np.ndarray:
    """The rows not nested inside another of ``rows`` on the same line, by start (of equal
    intervals on a line, the first)."""
    if rows.shape[0] <= 1:
        return rows
    s, e, ln = plane.ev_start_ps[rows], plane.ends(rows), plane.ev_line[rows].astype(np.int64)
    order = np.lexsort((-e, s, ln))
    rows, s, e, ln = rows[order], s[order], e[order], ln[order]
    keep = np.ones(rows.shape[0], bool)
    b = run_bounds(ln)
    for x, y in zip(b[:-1], b[1:]):
        if y - x < 2:
            continue
        emax = np.maximum.accumulate(e[x:y])
        keep[x + 1:y] = e[x + 1:y] > emax[:-1]
    out = rows[keep]
    return out[np.argsort(plane.ev_start_ps[out], kind="stable")]


__all__ = ["CHUNK_ROWS", "EMPTY", "FAR", "ChunkedSet", "Lanes", "LazyUnion", "Measure", "Runs", "UnionSet",
           "complement", "contained", "contains_any", "difference", "first_last", "intersect", "line_ranges",
           "line_rows", "line_runs", "line_sorted", "outermost", "priority_split", "priority_split_lanes", "row_index",
           "rows_runs", "rows_touching", "rows_union", "run_bounds", "union", "union_holes", "union_length",
           "union_holes_many", "union_lengths", "union_of", "union_per_line", "union_runs", "within_many"]
