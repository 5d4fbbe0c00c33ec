"""Big sets of event rows kept as their rows, read a time chunk at a time (:class:`RowSet`).

A set of millions of event rows (a big trace's kernel launches, a device's kernels) costs 16 bytes an interval as its
union; kept as its rows it costs 4 or 8 bytes a row, or, over whole lines, a byte of code an event. The readers of
:class:`tfadvisor.spans.intervals.ChunkedSet` (priority splits, union lengths and holes, ``within`` queries,
:class:`~tfadvisor.spans.intervals.LazyUnion`, the timeline's spans) build its union a chunk of time at a time
(:meth:`RowSet.part`), with the answers of the union built whole.

* :func:`row_set`: the union of event rows (a RowSet when they are many);
* :func:`line_sets`: the unions of a plane's events on some lines, by a code per event;
* :func:`thread_runs`: whether rows are in the order a RowSet reads (grouped by thread, by start in each).
"""

from __future__ import annotations

import numpy as np

import tfadvisor._native as _native
from tfadvisor.model.trace import Plane
from tfadvisor.spans.intervals import (
    EMPTY,
    FAR,
    ChunkedSet,
    Measure,
    line_ranges,
    line_sorted,
    row_index,
    rows_union,
    union_runs,
)

#: A set of more event rows than this (its union would hold up to 64 MB) is kept as its rows (:class:`RowSet`, 4 or 8
#: bytes a row) and its union built a time chunk at a time where it is read; fewer, as its union (:class:`Measure`,
#: 16 bytes an interval), which is quicker to ask again and again.
ROWSET_MIN_ROWS = 1 << 22

#: :func:`line_sets` over lines of more rows than :data:`ROWSET_MIN_ROWS` keeps as rows the codes of more rows than
#: this (their unions together would hold as much as the lines' one).
LINE_SET_CODE_MIN = 1 << 16

#: A :class:`RowSet` keeps its longest rows (fewer than this many) apart: the others' longest duration bounds how far
#: before a chunk a row that reaches into it can start.
LONG_ROWS = 1024

#: :class:`RowSet` reads its rows' columns this many rows at a time when it is made.
ROW_SLICE = 1 << 20


class RowSet(ChunkedSet):
    """The wall-time union of many event rows of one plane (a big trace's kernel launches, a device's kernels of one
    op category), kept as the rows and read a time chunk at a time: 4 or 8 bytes a row (or, over whole lines, one
    byte of code), not the union's 16.

    The rows are positions ``[lo[g], hi[g])`` for each thread ``g``: positions in ``rows`` (ascending, grouped by
    thread, sorted by start in each: see :func:`row_set`), or with ``rows`` None the plane's own rows (whole lines in
    the reader's layout: see :func:`line_sets`). With ``codes`` (one per position) only the rows whose code is
    ``code`` belong to the set."""

    def __init__(self, plane: Plane, rows: np.ndarray | None, lo: np.ndarray, hi: np.ndarray,
                 codes: np.ndarray | None = None, code: int = 0):
        self.plane, self.rows, self.codes, self.code = plane, rows, codes, code
        self.lo, self.hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        self.size = int((self.hi - self.lo).sum())
        self.n = 0
        tops = []
        dur = plane.ev_dur_ps
        k = max(LONG_ROWS, 1)  # the longest durations looked at: the long rows' and the reach's
        for a, b in self._slices():
            d = dur[self._at(a, b)]
            if codes is not None:
                d = d[codes[a:b] == code]
            self.n += int(np.count_nonzero(d > 0))  # empty without a row of some length, as its union
            tops.append(d if d.shape[0] <= k else np.partition(d, d.shape[0] - k)[-k:].copy())  # not a view of all
        top = np.concatenate(tops) if tops else EMPTY
        #: every row but the long ones (fewer than LONG_ROWS, those longer than this) lasts at most this long; -1:
        #: the rows are too few to keep any apart
        self.reach = int(np.partition(top, top.shape[0] - k)[top.shape[0] - k]) if top.shape[0] >= k else -1
        longs = []
        if self.reach >= 0:
            for a, b in self._slices():
                sel = dur[self._at(a, b)] > self.reach
                if codes is not None:
                    sel &= codes[a:b] == code
                longs.append(self._rows_at(a, b, sel))
        #: the plane rows longer than ``reach`` (ascending), tested against every chunk
        self.long = np.concatenate(longs) if longs else EMPTY

    def __len__(self) -> int:
        return self.n

    def _slices(self):
        """Every thread's positions, :data:`ROW_SLICE` at a time: (a, b)."""
        for lo, hi in zip(self.lo.tolist(), self.hi.tolist()):
            for a in range(lo, hi, ROW_SLICE):
                yield a, min(a + ROW_SLICE, hi)

    def _at(self, a: int, b: int):
        """The plane rows at positions [a, b): a slice of the columns, or of ``rows``."""
        return slice(a, b) if self.rows is None else self.rows[a:b]

    def _rows_at(self, a: int, b: int, sel: np.ndarray) -> np.ndarray:
        """The plane rows at the positions [a, b) that ``sel`` picks."""
        return np.flatnonzero(sel) + a if self.rows is None else self.rows[a:b][sel]

    def _selected(self) -> np.ndarray:
        parts = [self._rows_at(a, b, np.ones(b - a, bool) if self.codes is None else self.codes[a:b] == self.code)
                 for a, b in self._slices()]
        return np.concatenate(parts) if parts else EMPTY

    def wall(self) -> Measure:
        """The whole union, built (memory of every interval: the readers that chunk do not call this)."""
        return Measure(*rows_union(self.plane, self._selected()), disjoint=True)

    def _first_at(self, lo: int, hi: int, t: int) -> int:
        """The first position in ``[lo, hi)`` of a thread's whose row starts at ``t`` or later (``hi`` if none)."""
        start, rows = self.plane.ev_start_ps, self.rows
        while lo < hi:
            mid = (lo + hi) // 2
            if int(start[mid if rows is None else rows[mid]]) < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def part(self, t0: int, t1: int) -> tuple[np.ndarray, np.ndarray]:
        """The union of the set's rows that meet ``[t0, t1)``, with some that end before ``t0`` (disjoint sorted: the
        readers clip it to the chunk)."""
        start, dur = self.plane.ev_start_ps, self.plane.ev_dur_ps
        from_t = t0 - self.reach if self.reach >= 0 else -FAR
        lo, hi = [], []
        for a, b in zip(self.lo.tolist(), self.hi.tolist()):  # each thread's rows in the chunk
            i = self._first_at(a, b, from_t)
            j = self._first_at(i, b, t1)
            if j > i:
                lo.append(i)
                hi.append(j)
        s, e, ok = _native.union_row_ranges(start, dur, self.rows, np.array(lo, np.int64), np.array(hi, np.int64),
                                     self.codes, self.code)
        if not ok:
            raise ValueError("RowSet: its plane's columns changed after it was made")
        runs = [(s, e)]
        if self.long.shape[0]:
            lr = self.long
            s = start[lr]
            lr = lr[(s < from_t) & (s + dur[lr] > t0)]  # started before the searched starts, reach into the chunk
            if lr.shape[0]:
                runs.append(rows_union(self.plane, lr))
        return union_runs(runs)

    def cuts(self, k: int) -> np.ndarray:
        if k <= 1 or not self.size:
            return EMPTY
        step = max(1, self.size // (64 * k))
        start = self.plane.ev_start_ps
        s = np.sort(np.concatenate([start[a:b:step] if self.rows is None else start[self.rows[a:b:step]]
                                    for a, b in zip(self.lo.tolist(), self.hi.tolist())]))  # a sample, not a copy
        return np.unique(s[(np.arange(1, k) * s.shape[0]) // k])


def row_set(plane: Plane, rows: np.ndarray) -> Measure | RowSet:
    """The wall-time union of event rows: a :class:`RowSet` when they are more than :data:`ROWSET_MIN_ROWS` and
    ascend, grouped by thread and sorted by start in each, else a :class:`Measure`."""
    rows = row_index(rows)
    if rows.shape[0] > ROWSET_MIN_ROWS:
        bounds = thread_runs(plane, rows)
        if bounds is not None:
            return RowSet(plane, rows, bounds[:-1], bounds[1:])
    return Measure.of_rows(plane, rows)


def line_sets(plane: Plane, lines: np.ndarray, codes: np.ndarray, wanted: list[int]) -> list[Measure | RowSet]:
    """For each code ``wanted``, the wall-time union of the events on ``lines`` whose code (``codes``: one per event
    of the plane) is it: a :class:`RowSet` over the lines themselves (no row array: a byte of code an event) where
    the lines hold more than :data:`ROWSET_MIN_ROWS` rows, the code more than :data:`LINE_SET_CODE_MIN`, and the
    plane is in the reader's layout with those lines sorted by start; else a :class:`Measure`."""
    rng = line_ranges(plane)
    lines = np.unique(np.asarray(lines, np.int64))
    if rng is not None:
        lines = lines[(lines >= 0) & (lines < rng.shape[0])]
        lo, hi = rng[lines, 0], rng[lines, 1]
        full = hi > lo
        lo, hi = lo[full], hi[full]
    if rng is None or not all(line_sorted(plane, a, b) for a, b in zip(lo.tolist(), hi.tolist())):
        rows = plane.rows_on_lines(lines)
        return [Measure.of_rows(plane, rows[codes[rows] == c]) for c in wanted]
    big = int((hi - lo).sum()) > ROWSET_MIN_ROWS
    out = []
    for c in wanted:
        n = sum(int(np.count_nonzero(codes[a:b] == c)) for a, b in zip(lo.tolist(), hi.tolist())) if big else 0
        if big and n > LINE_SET_CODE_MIN:
            out.append(RowSet(plane, None, lo, hi, codes, c))
        else:
            rows = np.concatenate([np.flatnonzero(codes[a:b] == c) + a for a, b in zip(lo.tolist(), hi.tolist())]
                                  or [EMPTY])
            out.append(Measure.of_rows(plane, rows))
    return out


def thread_runs(plane: Plane, rows: np.ndarray) -> np.ndarray | None:
    """Each thread's run of ``rows`` (bounds, as :func:`run_bounds`) when they ascend, are grouped by thread and
    sorted by start in each; else None. Read a slice at a time."""
    line = plane.ev_line
    start = plane.ev_start_ps
    n = rows.shape[0]
    cuts = []
    for lo in range(0, n, ROW_SLICE):
        r = rows[lo:min(lo + ROW_SLICE + 1, n)]  # one row of overlap: the order across slices
        if r.shape[0] < 2:
            continue
        if not bool(np.all(r[1:] > r[:-1])) or r[0] < 0 or r[-1] >= plane.n_events:
            return None
        ln = line[r]
        new = ln[1:] != ln[:-1]
        s = start[r]
        if bool(np.any((s[1:] < s[:-1]) & ~new)):
            return None
        cuts.append(np.flatnonzero(new) + lo + 1)
    out = np.concatenate([[0], *cuts, [n]]).astype(np.int64)
    if n and bool(np.any(np.diff(line[rows[out[:-1]]].astype(np.int64)) <= 0)) and out.shape[0] > 2:
        return None  # a thread's rows in two runs
    return out


__all__ = ["LINE_SET_CODE_MIN", "LONG_ROWS", "ROWSET_MIN_ROWS", "ROW_SLICE", "RowSet", "line_sets", "row_set",
           "thread_runs"]
