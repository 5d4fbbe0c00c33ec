"""tfadvisor/spans/intervals.py: set operations against brute force, and the event-row helpers
on planes with and without the reader's layout (events grouped by line, in line order).

The kernels behind unions and coverage are also checked in test_analyses_steps (brute force) and
test_native (against numpy)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import SAMPLES, load_sample

from tfadvisor.spans.intervals import (
    Lanes,
    LazyUnion,
    Measure,
    Runs,
    complement,
    contains_any,
    difference,
    intersect,
    line_ranges,
    line_rows,
    line_runs,
    outermost,
    priority_split,
    priority_split_lanes,
    rows_touching,
    rows_union,
    union,
    union_holes,
    union_holes_many,
    union_length,
    union_lengths,
    within_many,
)


def _paint(pairs, lo: int = 0, hi: int = 500) -> np.ndarray:
    cover = np.zeros(hi - lo, bool)
    for a, b in pairs:
        cover[max(a, lo) - lo:max(min(b, hi), lo) - lo] = True
    return cover


def _random_set(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    s = rng.integers(0, 400, n)
    return union(s, s + rng.integers(0, 40, n))


def test_union_within_and_overlap():
    us, ue = union(np.array([5, 0, 2, 20, 9]), np.array([8, 3, 4, 30, 9]))  # [9, 9) is empty
    assert us.tolist() == [0, 5, 20] and ue.tolist() == [4, 8, 30]
    assert Measure(us, ue, disjoint=True).within(np.array([0, 6]), np.array([10, 25])).tolist() == [7, 7]
    vs, ve = union(np.array([3, 25]), np.array([6, 40]))
    a, b = intersect(us, ue, vs, ve, False)
    assert list(zip(a.tolist(), b.tolist())) == [(3, 4), (5, 6), (25, 30)]
    assert int(Measure(vs, ve, disjoint=True).within(us, ue).sum()) == 1 + 1 + 5
    s, e = union(np.array([0, 3]), np.array([3, 6]))  # touching intervals join
    assert s.tolist() == [0] and e.tolist() == [6]


@pytest.mark.parametrize("prefix_max", [0, 1 << 20], ids=["one_pass_per_query", "running_sum"])
def test_repeated_queries_are_the_painted_cover(prefix_max, monkeypatch):
    """A set queried again and again (few points each time): with its running sum of lengths kept, or read in one
    pass per query (a set above ``PREFIX_MAX_INTERVALS``), the covered time in each window is the painted one."""
    from tfadvisor.spans import intervals

    monkeypatch.setattr(intervals, "PREFIX_MAX_INTERVALS", prefix_max)
    rng = np.random.default_rng(4)
    s = np.arange(0, 20_000, 10)  # 2000 intervals: a query of 6 points is "few" (the running sum pays)
    e = s + rng.integers(1, 10, s.shape[0])
    m = Measure(s, e, disjoint=True)
    cover = _paint(zip(s.tolist(), e.tolist()), 0, 20_100)
    for _ in range(6):  # the first query streams; later ones use the running sum where it is kept
        a = rng.integers(0, 20_000, 3)
        b = a + rng.integers(0, 60, 3)
        assert m.within(a, b).tolist() == [int(cover[x:y].sum()) for x, y in zip(a.tolist(), b.tolist())]
    assert (m._prefix is None) == (prefix_max == 0)


@pytest.mark.parametrize("most_layers", [6, 140])  # the kernel keeps the layers in 64-bit words
@pytest.mark.parametrize("windows", ["disjoint", "overlapping", "nested"])
def test_priority_split_matches_painting(windows, most_layers):
    """Each layer gets the time of each window it covers and no earlier layer does (painted unit by unit);
    the one-sweep kernel takes disjoint windows and windows whose starts and ends both ascend (in any order),
    nested windows the general path: all three agree with the painting."""
    rng = np.random.default_rng(11)
    for _ in range(150 if most_layers < 64 else 20):
        layers = [(f"L{rng.integers(0, 3)}", Measure(*_random_set(rng, rng.integers(0, 25)), disjoint=True)
                   if rng.random() > 0.1 else None) for _ in range(rng.integers(0, most_layers))]
        w = int(rng.integers(1, 6))
        if windows == "disjoint":
            cut = np.sort(rng.integers(0, 450, 2 * w))
            a, b = cut[0::2], cut[1::2]
        elif windows == "overlapping":
            a = np.sort(rng.integers(0, 400, w))
            b = np.sort(a + rng.integers(0, 120, w))
            shuffle = rng.permutation(w)  # in any order: the kernel takes them by start
            a, b = a[shuffle], b[shuffle]
        else:
            a = np.sort(rng.integers(0, 200, w))
            b = a + rng.integers(0, 250, w)[::-1]
        got = priority_split((a, b), layers)
        for j in range(w):
            taken = np.zeros(500, bool)
            want: dict[str, int] = {}
            for name, m in layers:
                paint = _paint(zip(m.s, m.e)) if m is not None else np.zeros(500, bool)
                mine = paint & ~taken
                want[name] = want.get(name, 0) + int(mine[a[j]:b[j]].sum())
                taken |= paint
            want["_rest"] = int(b[j] - a[j]) - int(taken[a[j]:b[j]].sum())
            assert {k: int(np.asarray(v).reshape(-1)[j]) for k, v in got.items()} == want


def test_priority_split_lanes_is_one_split_per_lane():
    """One sweep for every lane (each moved to a window of its own) gives each lane's own split of the window,
    sets reaching past the window included; lanes must name the same layers."""
    rng = np.random.default_rng(5)
    for _ in range(100):
        lo, hi = sorted(int(x) for x in rng.integers(0, 450, 2))
        names = [f"L{rng.integers(0, 3)}" for _ in range(rng.integers(1, 6))]
        lanes = [[(n, Measure(*_random_set(rng, rng.integers(0, 20)), disjoint=True) if rng.random() > 0.2 else None)
                  for n in names] for _ in range(rng.integers(1, 9))]
        got = priority_split_lanes(lo, hi, lanes)
        for layers, mine in zip(lanes, got):
            want = priority_split((np.array([lo]), np.array([hi])), layers)
            assert list(mine) == list(want)
            assert {k: np.asarray(v).tolist() for k, v in mine.items()} == {k: np.asarray(v).tolist()
                                                                            for k, v in want.items()}
    with pytest.raises(ValueError, match="same layer names"):
        priority_split_lanes(0, 10, [[("a", None)], [("b", None)]])
    empty = Measure(np.array([5]), np.array([5]))  # one interval, of no length: an empty wall-time set
    got = priority_split_lanes(0, 10, [[("x", empty)], [("x", Measure(np.array([2]), np.array([4])))]])
    assert [{k: v.tolist() for k, v in d.items()} for d in got] == [{"x": [0], "_rest": [10]},
                                                                    {"x": [2], "_rest": [8]}]


def test_difference_complement_and_contains_any_match_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(200):
        us, ue = _random_set(rng, rng.integers(0, 30))
        ws, we = _random_set(rng, rng.integers(0, 10))
        ds, de = difference(us, ue, ws, we)
        assert np.array_equal(_paint(zip(ds, de)), _paint(zip(us, ue)) & ~_paint(zip(ws, we)))
        assert np.all(de > ds) and np.all(ds[1:] >= de[:-1])
        cs, ce = complement(us, ue, 50, 450)
        want = ~_paint(zip(us, ue))
        want[:50] = want[450:] = False
        assert np.array_equal(_paint(zip(cs, ce)), want)
        s = rng.integers(0, 400, 20)
        e = s + rng.integers(0, 120, 20)
        holds = [any(a <= x and y <= b for x, y in zip(ws, we)) for a, b in zip(s, e)]
        assert contains_any(s, e, ws, we).tolist() == holds


@pytest.mark.parametrize("n_sets", [3, 70], ids=["few_sets", "more_than_the_kernel_walks"])
def test_union_holes_and_length_are_the_painted_cover(n_sets):
    """The union's holes inside windows and its length, walked without building the union, on Measures, Runs and
    LazyUnions (above SWEEP_MAX_SETS sets, the smallest are joined first)."""
    rng = np.random.default_rng(11)
    for _ in range(150):
        sets = [Measure(*_random_set(rng, rng.integers(0, 12)), disjoint=True) for _ in range(n_sets)]
        sets.append(Runs([_random_set(rng, 5), _random_set(rng, 3)]))
        sets.append(LazyUnion(Measure(*_random_set(rng, 20), disjoint=True), Measure(*_random_set(rng, 1),
                                                                                    disjoint=True)))
        sets.append(None)
        pairs = [(a, b) for m in sets if m is not None for p in getattr(m, "parts", None) or
                 ([m.big, m.small] if isinstance(m, LazyUnion) else [m]) for a, b in zip(p.s, p.e)]
        cover = _paint(pairs)
        assert union_length(*sets) == int(cover.sum())
        ws, we = _random_set(rng, rng.integers(0, 6))
        hs, he = union_holes(sets, ws, we)
        assert np.array_equal(_paint(zip(hs, he)), ~cover & _paint(zip(ws, we)))
        assert np.all(he > hs) and np.all(hs[1:] > he[:-1])  # disjoint, sorted, no two touching: the answer's set
    with pytest.raises(ValueError, match="not disjoint and sorted"):
        union_length(Measure(np.array([5, 0]), np.array([9, 3]), disjoint=True))


def _host_plane(name: str = "tfdata_contention"):
    trace = load_sample(name)
    return max(trace.host_planes, key=lambda p: p.n_events)


def _shuffled(p):
    """The same events in another row order: not grouped by line."""
    o = np.random.default_rng(0).permutation(p.n_events)
    return replace(p, ev_line=p.ev_line[o], ev_meta=p.ev_meta[o], ev_start_ps=p.ev_start_ps[o],
                   ev_dur_ps=p.ev_dur_ps[o])


def test_line_ranges_are_the_readers_line_layout():
    p = _host_plane()
    rng = line_ranges(p)
    assert rng is not None and rng.shape == (len(p.lines), 2)
    first, n = p.lines["first_event"], p.lines["n_events"]
    assert rng[:, 0][n > 0].tolist() == first[n > 0].tolist()
    assert (rng[:, 1] - rng[:, 0]).tolist() == n.tolist()
    assert line_ranges(_shuffled(p)) is None


@pytest.mark.parametrize("every_row_below", [0, 1 << 30], ids=["searched", "every_row_tested"])
@pytest.mark.parametrize("grouped", [True, False], ids=["reader_layout", "not_grouped"])
def test_row_helpers_agree_with_a_mask_over_the_plane(grouped, every_row_below, monkeypatch):
    from tfadvisor.spans import intervals

    monkeypatch.setattr(intervals, "TEST_EVERY_ROW_BELOW", every_row_below)
    p = _host_plane()
    q = p if grouped else _shuffled(p)
    lines = np.flatnonzero(np.bincount(q.ev_line, minlength=len(q.lines))[:len(q.lines)] > 0)[::2]
    rows = line_rows(q, lines)
    assert rows.tolist() == np.flatnonzero(np.isin(q.ev_line, lines)).tolist()
    assert line_rows(q, lines[1]).tolist() == np.flatnonzero(q.ev_line == lines[1]).tolist()  # one line
    ok = np.zeros(len(q.lines) + 1, bool)
    ok[lines] = True
    got = union(*[np.concatenate(x) for x in zip(*line_runs(q, ok))])
    want = union(q.ev_start_ps[rows], q.ends(rows))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    for limit in (0, 1 << 30):  # thread by thread, and sorted at once in the kernel
        monkeypatch.setattr(intervals, "UNION_SORTED_ROWS", limit)
        assert all(np.array_equal(a, b) for a, b in zip(rows_union(q, rows), want))
        assert all(np.array_equal(a, b) for a, b in zip(rows_union(q, rows[::-1]), want))  # any order
    # rows touching a few windows: the same rows either way
    lo, hi = int(q.ev_start_ps.min()), q.max_end()
    ws = np.linspace(lo, hi, 9).astype(np.int64)[1:-1:2]
    we = ws + (hi - lo) // 50
    touch = rows_touching(q, lines, ws, we)
    s, e = q.ev_start_ps[rows], q.ends(rows)
    hit = ((ws[None, :] < e[:, None]) & (we[None, :] > s[:, None])).any(axis=1)
    assert hit.any() and np.sort(touch).tolist() == rows[hit].tolist()


def test_outermost_keeps_the_outer_event_of_each_nest_per_line():
    p = _host_plane()
    # by start (longest first on ties), per line: an event ending inside an earlier one is nested
    rows = np.flatnonzero(p.ev_dur_ps > 0)
    out = outermost(p, rows)
    assert np.all(np.diff(p.ev_start_ps[out]) >= 0)
    for li in np.unique(p.ev_line[rows])[:20]:
        mine = rows[p.ev_line[rows] == li]
        s, e = p.ev_start_ps[mine], p.ends(mine)
        o = np.lexsort((-e, s))
        s, e, mine = s[o], e[o], mine[o]
        keep = [i for i in range(mine.shape[0]) if i == 0 or e[i] > e[:i].max()]
        assert sorted(mine[keep].tolist()) == sorted(out[p.ev_line[out] == li].tolist())


def test_runs_within_in_lanes_equals_thread_by_thread():
    """Runs.within asks every thread's set at once (each moved to its own lane): the same lengths as one query
    per thread, for windows anywhere (before, across, after the sets; inverted ones give the same negatives)."""
    rng = np.random.default_rng(3)
    for _ in range(1000):
        base = int(rng.integers(-(10**12), 10**12))
        runs = []
        for _ in range(int(rng.integers(1, 8))):
            s = rng.integers(base, base + 10**6, int(rng.integers(0, 20))).astype(np.int64)
            runs.append(union(s, s + rng.integers(0, 10**4, s.shape[0])))
        r = Runs(runs)
        a = rng.integers(base - 10**4, base + 10**6 + 10**4, int(rng.integers(0, 15))).astype(np.int64)
        b = a + rng.integers(-(10**3), 10**5, a.shape[0])
        want = sum((m.within(a, b) for m in r.parts), np.zeros(a.shape[0], np.int64))
        for _ in range(2):  # the first query and the cached lanes
            assert np.array_equal(r.within(a, b), want)


def test_lanes_refuse_times_that_would_overflow():
    assert Lanes.fit(3, np.array([0, 10], np.int64)) is not None
    assert Lanes.fit(2**20, np.array([0, 2**45], np.int64)) is None
    assert Lanes.fit(2, np.array([-(2**62)], np.int64)) is None


def test_tfdata_threads_minus_waits_in_lanes(monkeypatch):
    """input._threads_minus_waits (every thread's union minus its waits, all threads in one pass) gives what
    the thread-by-thread path gives, on random threads and waits of real samples."""
    import tfadvisor.analyses.input as inp

    rng = np.random.default_rng(5)
    checked = 0
    for name in ("tfdata_repeat_map", "tfdata_contention", "real_tf_gpu_multiworker", "keras_fit_spe4"):
        for p in load_sample(name).planes:
            if not len(p.lines) or not p.n_events:
                continue
            for _ in range(6):
                lines = np.sort(rng.choice(len(p.lines), int(rng.integers(1, len(p.lines) + 1)), replace=False))
                waits = np.sort(rng.choice(p.n_events, int(rng.integers(0, min(200, p.n_events) + 1)),
                                           replace=False)).astype(np.int64)
                fast = inp._threads_minus_waits(p, lines, waits)
                with monkeypatch.context() as m:
                    m.setattr(Lanes, "fit", classmethod(lambda cls, *a: None))
                    slow = inp._threads_minus_waits(p, lines, waits)
                assert len(fast) == len(slow)
                for (s1, e1), (s2, e2) in zip(fast, slow):
                    assert np.array_equal(s1, s2) and np.array_equal(e1, e2)
                checked += 1
    assert checked >= 40


def test_line_rows_of_any_lines_are_their_runs_in_line_order(monkeypatch):
    """line_rows of lines in any order, repeated or out of range: each distinct line's run of rows, in line order,
    as joining one arange per line gives (random choices on a real capture's planes)."""
    import random

    import tfadvisor
    from tfadvisor.spans import intervals
    from tfadvisor.spans.intervals import line_ranges

    trace = tfadvisor.load(SAMPLES / "real_tf_gpu_multiworker")
    rand = random.Random(0)
    for p in trace.planes:
        rng = line_ranges(p)
        if rng is None:
            continue
        nl = len(p.lines)
        for _ in range(100):
            lines = np.array([rand.randint(-2, nl + 1) for _ in range(rand.randint(0, nl + 2))], np.int64)
            u = np.unique(lines)
            u = u[(u >= 0) & (u < nl)]
            runs = [np.arange(rng[i, 0], rng[i, 1]) for i in u if rng[i, 1] > rng[i, 0]]
            want = np.concatenate(runs) if runs else np.empty(0, np.int64)
            got = line_rows(p, lines)
            assert got.dtype == np.int64 and np.array_equal(got, want), (p.name, lines.tolist())
            monkeypatch.setattr(intervals, "INT32_ROWS_ABOVE", -1)  # a big plane's: int32 (every row fits)
            got = line_rows(p, lines)
            assert got.dtype == np.int32 and np.array_equal(got, want), (p.name, lines.tolist())
            monkeypatch.undo()


def _big_plane(rng, threads: int = 3, n: int = 3000):
    """A host plane of ``threads`` lines (the reader's layout: grouped by line, sorted by start in each) whose events
    overlap within a line, with a few very long ones."""
    p = _host_plane()
    per = [n // threads + int(rng.integers(0, 50)) for _ in range(threads)]
    starts = [np.sort(rng.integers(0, 10**7, k)) for k in per]
    durs = [rng.integers(0, 20_000, k) for k in per]
    for d in durs:
        d[rng.integers(0, d.shape[0], 3)] = rng.integers(10**6, 5 * 10**6, 3)  # a few long ones
        d[rng.integers(0, d.shape[0], 20)] = 0  # and empty ones
    line = np.repeat(np.arange(threads), per).astype(np.int8)
    return replace(p, ev_line=line, ev_meta=np.zeros(line.shape[0], np.int16),
                   ev_start_ps=np.concatenate(starts).astype(np.int64), ev_dur_ps=np.concatenate(durs).astype(np.int64),
                   lines=p.lines), per


@pytest.mark.parametrize("chunk_rows,long_rows", [(1 << 20, 1024), (97, 1024), (13, 2), (1, 0)])
def test_row_sets_read_in_chunks_are_their_union(chunk_rows, long_rows, monkeypatch):
    """A RowSet (a big set kept as its rows, read in time chunks) answers every reader as its union built: within,
    upto, total, union_length, union_holes, priority_split, the LazyUnion it is the big part of, its blocks, first
    and last; with codes, long rows and several threads, chunks of one row to all of them."""
    from tfadvisor.spans import intervals, rowsets
    from tfadvisor.spans.intervals import UnionSet, first_last
    from tfadvisor.spans.rowsets import RowSet, line_sets, row_set

    monkeypatch.setattr(rowsets, "ROWSET_MIN_ROWS", 0)
    monkeypatch.setattr(rowsets, "LINE_SET_CODE_MIN", 0)
    monkeypatch.setattr(intervals, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(rowsets, "LONG_ROWS", long_rows)
    rng = np.random.default_rng(chunk_rows)
    p, per = _big_plane(rng)
    rows = np.sort(rng.choice(p.n_events, p.n_events * 2 // 3, replace=False)).astype(np.int32)
    codes = rng.integers(-1, 3, p.n_events).astype(np.int8)  # a code per event of the plane; -1: in no set
    lines = np.array([0, 2])
    on = np.isin(p.ev_line, lines)
    sets = [row_set(p, rows), *line_sets(p, lines, codes, [0, 2])]
    assert all(isinstance(m, RowSet) for m in sets) and sets[1].rows is None  # over the lines: no row array
    want = [Measure(*rows_union(p, rows), disjoint=True)] + \
           [Measure(*rows_union(p, np.flatnonzero(on & (codes == c))), disjoint=True) for c in (0, 2)]
    lo, hi = -5, 10**7 + 6 * 10**6
    t = rng.integers(lo, hi, 500)
    a = np.sort(rng.integers(lo, hi, 40))
    b = a + rng.integers(0, 10**6, 40)
    small = Measure(*_random_set(rng, 30), disjoint=True)
    for m, w in zip(sets, want):
        wall = m.wall()
        assert np.array_equal(wall.s, w.s) and np.array_equal(wall.e, w.e)
        assert m.upto(t).tolist() == w.upto(t).tolist() and m.upto(t).tolist() == w.upto(t).tolist()  # and again
        assert m.within(a, b).tolist() == w.within(a, b).tolist()
        assert m.total() == w.total() == union_length(m)
        assert (len(m) > 0) == (len(w) > 0)
        blocks = [np.concatenate(x) for x in zip(*m.blocks())]
        assert np.array_equal(blocks[0], w.s) and np.array_equal(blocks[1], w.e)
        assert first_last(m) == (int(w.s[0]), int(w.e[-1]))
        lazy = LazyUnion(m, small)
        assert lazy.within(a, b).tolist() == LazyUnion(w, small).within(a, b).tolist()
        assert union_length(m, small) == union_length(w, small) == union_length(lazy)
        ws, we = union(a, b)
        for x, y in zip(union_holes([m, small], ws, we), union_holes([w, small], ws, we)):
            assert x.tolist() == y.tolist()
    both = UnionSet(sets[1:])
    assert both.within(a, b).tolist() == LazyUnion(*want[1:]).within(a, b).tolist()
    # several unions over the same RowSets, asked together (one pass): each as asked alone of the built unions
    many = [LazyUnion(sets[0], small), sets[1], both, small, LazyUnion(sets[2], sets[1], small), LazyUnion(small)]
    plain_many = [LazyUnion(want[0], small), want[1], LazyUnion(*want[1:]), small, LazyUnion(want[2], want[1], small),
                  LazyUnion(small)]
    assert [x.tolist() for x in within_many(many, a, b)] == [m.within(a, b).tolist() for m in plain_many]
    # lengths and holes of several unions, asked together: each as asked alone of the built unions
    assert union_lengths([[sets[0], small], sets[1:], [small], []]) == \
        [union_length(want[0], small), union_length(*want[1:]), union_length(small), 0]
    ws, we = union(a, b)
    cs, ce = complement(ws, we, lo, hi)
    asks = [([sets[0], small], ws, we), (sets[1:], cs, ce), ([small], ws, we), (sets[2:], cs[:0], ce[:0])]
    alone = [([want[0], small], ws, we), (want[1:], cs, ce), ([small], ws, we), (want[2:], cs[:0], ce[:0])]
    assert [[x.tolist() for x in h] for h in union_holes_many(asks)] == \
        [[x.tolist() for x in union_holes(*ask)] for ask in alone]
    # windows that touch at the chunks' cuts: a hole over a cut is two holes there, as the windows say
    cuts = np.array(intervals._edges(sets[1:])[1:-1], np.int64)
    if cuts.shape[0] > 1:
        asks = [([sets[0]], ws, we), (sets[1:], cuts[:-1], cuts[1:])]
        alone = [([want[0]], ws, we), (want[1:], cuts[:-1], cuts[1:])]
        assert [[x.tolist() for x in h] for h in union_holes_many(asks)] == \
            [[x.tolist() for x in union_holes(*ask)] for ask in alone]
    layers = [("x", sets[1]), ("y", small), ("x", sets[2]), ("z", sets[0])]
    plain = [("x", want[1]), ("y", small), ("x", want[2]), ("z", want[0])]
    steps = (a, np.maximum.accumulate(b))  # by start, ends ascending: the one-sweep path
    for win in (steps, (np.array([lo]), np.array([hi]))):
        got, exp = priority_split(win, layers), priority_split(win, plain)
        assert {k: np.asarray(v).tolist() for k, v in got.items()} == \
            {k: np.asarray(v).tolist() for k, v in exp.items()}
    lanes = priority_split_lanes(lo, hi, [layers, layers])
    assert [{k: v.tolist() for k, v in d.items()} for d in lanes] == \
        [{k: np.asarray(v).tolist() for k, v in priority_split((np.array([lo]), np.array([hi])), plain).items()}] * 2


def test_row_sets_refuse_rows_out_of_thread_order():
    """Rows not grouped by thread, or not by start within one, are not kept as rows: their union is built."""
    from tfadvisor.spans import rowsets
    from tfadvisor.spans.rowsets import RowSet, line_sets, row_set, thread_runs

    p, _ = _big_plane(np.random.default_rng(3))
    rows = np.arange(p.n_events, dtype=np.int64)
    assert thread_runs(p, rows) is not None
    q = replace(p, ev_start_ps=p.ev_start_ps[::-1].copy())  # every line's starts descend
    assert thread_runs(q, rows) is None and thread_runs(p, rows[::-1].copy()) is None
    old = rowsets.ROWSET_MIN_ROWS, rowsets.LINE_SET_CODE_MIN
    try:
        rowsets.ROWSET_MIN_ROWS = rowsets.LINE_SET_CODE_MIN = 0
        assert isinstance(row_set(p, rows), RowSet) and isinstance(row_set(q, rows), Measure)
        codes = np.zeros(p.n_events, np.int8)
        assert isinstance(line_sets(p, np.array([0, 1]), codes, [0])[0], RowSet)
        got = line_sets(q, np.array([0, 1]), codes, [0])[0]  # lines not sorted by start: built
        assert isinstance(got, Measure) and got.total() == row_set(q, np.flatnonzero(q.ev_line <= 1)).total()
    finally:
        rowsets.ROWSET_MIN_ROWS, rowsets.LINE_SET_CODE_MIN = old


@pytest.mark.parametrize("max_spans", [3, 50, 400])
def test_coarsen_of_a_row_set_is_coarsen_of_its_union(max_spans, monkeypatch):
    """The timeline's spans of a set kept as rows, read in two passes of chunks, are those of its union built."""
    from tfadvisor.analyses.timeline import coarsen, coarsen_set
    from tfadvisor.spans import intervals, rowsets
    from tfadvisor.spans.rowsets import row_set

    monkeypatch.setattr(rowsets, "ROWSET_MIN_ROWS", 0)
    monkeypatch.setattr(intervals, "CHUNK_ROWS", 61)
    p, _ = _big_plane(np.random.default_rng(max_spans), threads=2, n=4000)
    m = row_set(p, np.arange(p.n_events))
    w = m.wall()
    got, want = coarsen_set(m, "x", max_spans), coarsen(w.s, w.e, max_spans, "x")
    for col in ("start_ps", "end_ps", "covered_ps", "count"):
        assert np.asarray(got[col]).tolist() == np.asarray(want[col]).tolist(), col
