"""The C kernels (``tfadvisor/_native.c``) against numpy references, and their argument checks.

The decoder and the interval kernels are also checked end to end (test_reader, test_analyses_steps,
the fuzz tests) and under AddressSanitizer (test_bounds_checked); this module pins the kernels added
for speed to the numpy expressions they replace, and the refusals that keep a wrong call from
writing outside an array.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tfadvisor import _native
from tfadvisor.analyses.placement import meta_counts, meta_durations
from tfadvisor.io import wire
from tfadvisor.model.table import factorize
from tfadvisor.model.trace import _fnv1a
from tfadvisor.spans.intervals import intersect

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def test_meta_totals_equal_bincount():
    """placement.meta_counts / meta_durations (one C pass) give what np.bincount gave, dtypes included
    (an empty bincount with weights is int64)."""
    rng = np.random.default_rng(1)
    for it in range(300):
        n, nm = int(rng.integers(0, 400)), int(rng.integers(0, 30))
        meta = rng.integers(-2, nm + 3, n).astype(np.int32 if it % 2 else np.int64)
        if it % 7 == 0:
            meta[:] = -1
        dur = rng.integers(-(10**15), 10**15, n).astype(np.int64)
        plane = SimpleNamespace(ev_meta=meta, ev_dur_ps=dur, event_names=np.array(["x"] * nm, object))
        cnt, tot = meta_counts(plane), meta_durations(plane)
        ok = meta >= 0
        want_cnt = np.bincount(meta[ok], minlength=nm)[:nm]
        want_tot = np.bincount(meta[ok], weights=np.maximum(dur, 0)[ok], minlength=nm)[:nm]
        assert cnt.dtype == want_cnt.dtype and np.array_equal(cnt, want_cnt)
        assert tot.dtype == want_tot.dtype and np.array_equal(tot, want_tot)


def _extreme(rng, n):
    pool = np.array([I64_MIN, I64_MIN + 1, -1, 0, 1, I64_MAX - 1, I64_MAX, 10**18, -(10**18)], np.int64)
    x = rng.integers(-(10**16), 10**16, n).astype(np.int64)
    pick = rng.random(n) < 0.3
    x[pick] = rng.choice(pool, int(pick.sum()))
    return x


def test_time_checks_equal_numpy():
    rng = np.random.default_rng(2)
    for _ in range(300):
        n = int(rng.integers(0, 200))
        start, dur = _extreme(rng, n), _extreme(rng, n)
        neg, lost = _native.time_checks(start, dur)
        d = np.where(dur < 0, 0, dur)
        with np.errstate(over="ignore"):
            want_lost = (start == wire.START_OVERFLOW) | (d > I64_MAX - np.maximum(start, 0))
        assert (neg, lost) == (int((dur < 0).sum()), int(want_lost.sum()))


def test_window_checks_equal_numpy():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 200))
        start, dur = _extreme(rng, n), _extreme(rng, n)
        lo, hi = sorted(int(v) for v in rng.integers(-(10**16), 10**16, 2))
        longest, limit = (int(v) for v in rng.integers(0, 10**16, 2))
        floor = max(limit - int(I64_MAX), int(I64_MIN) + 1)
        far, late = _native.window_checks(start, dur, lo, hi, longest, limit, floor)
        want_far = (start < lo) | (start > hi) | (dur > longest)
        with np.errstate(over="ignore"):
            want_late = dur > np.int64(limit) - np.maximum(start, np.int64(floor))
        assert (far, late) == (int(want_far.sum()), int(want_late.sum()))


def test_intersect_without_index_is_the_same_pieces():
    s1, e1 = np.array([0, 10, 30], np.int64), np.array([5, 20, 40], np.int64)
    s2, e2 = np.array([3, 12, 35], np.int64), np.array([15, 18, 50], np.int64)
    ps, pe, pw = intersect(s1, e1, s2, e2)
    assert ps.tolist() == [3, 10, 12, 35] and pe.tolist() == [5, 15, 18, 40] and pw.tolist() == [0, 0, 1, 2]
    qs, qe = intersect(s1, e1, s2, e2, False)
    assert np.array_equal(qs, ps) and np.array_equal(qe, pe)


def test_fnv1a_matches_the_definition():
    pool = np.frombuffer(b"hello worldtf_op", np.uint8)
    off, ln = np.array([0, 6, 11, 3], np.int64), np.array([5, 5, 5, 0], np.int64)

    def fnv(b: bytes) -> int:
        h = 1469598103934665603
        for c in b:
            h = ((h ^ c) * 1099511628211) & (2**64 - 1)
        return h - 2**64 if h >= 2**63 else h

    want = [fnv(pool[o:o + n].tobytes()) for o, n in zip(off, ln)]
    assert _fnv1a(pool, off, ln).tolist() == want
    with pytest.raises(IndexError):  # a string outside the pool is refused, not read
        _fnv1a(pool, np.array([12], np.int64), np.array([5], np.int64))


def test_kernels_refuse_arrays_they_would_overrun():
    buf = np.zeros(16, np.uint8)
    pool = np.zeros(4, np.uint8)
    with pytest.raises(IndexError):  # 8 bytes into a 4-byte pool
        wire.gather_strings(buf, np.array([0], np.int64), np.array([8], np.int64), pool)
    with pytest.raises(IndexError):  # a string past the end of the buffer
        wire.gather_strings(buf, np.array([12], np.int64), np.array([8], np.int64), np.zeros(8, np.uint8))
    out = [np.empty(4, np.int64) for _ in range(5)]
    with pytest.raises(ValueError):  # a range outside the buffer
        wire.scan_fields(buf, 0, 17, *out)
    with pytest.raises(TypeError):  # an output of the wrong dtype is never written
        wire.scan_fields(buf, 0, 16, np.empty(4, np.int32), *out[1:])
    lines = np.zeros((2, wire.N_LINE_COLS), np.int64)
    i64 = [np.zeros(2, np.int64) for _ in range(9)]
    with pytest.raises(ValueError):  # per-line outputs shorter than the lines
        wire.count_lines_serial(buf, np.zeros(3, np.int64), np.zeros(3, np.int64), lines, 1 << 20, *i64[:4],
                                np.zeros(3, np.int64), *i64[4:])


def test_thread_knob():
    before = wire.get_num_threads()
    try:
        wire.set_num_threads(3)
        assert wire.get_num_threads() == 3
        wire.set_num_threads(None)
        assert wire.get_num_threads() >= 1
    finally:
        wire.set_num_threads(before)


# -------------------------------------------------------------------------- bucket_kernel: class codes

def _bucket_args(line_cls, meta_cls, unknown=4, stride=8, ncodes=16):
    ev_line = np.array([0, 1, 5, -1, 0], np.int32)  # 5 and -1: no such line -> the overflow bucket
    ev_meta = np.array([0, 1, 0, 0, 99], np.int32)  # 99: no such metadata -> unknown
    return (ev_line, ev_meta, np.asarray(line_cls, np.int64), np.asarray(meta_cls, np.int64), unknown, stride,
            ncodes)


def test_bucket_kernel_codes_in_range():
    order, counts = _native.bucket_kernel(*_bucket_args([0, 1, 1], [2, 3, 4]))
    rows = {c: order[counts[c]:counts[c + 1]].tolist() for c in range(17) if counts[c + 1] > counts[c]}
    assert rows == {2: [0], 4: [4], 8 + 3: [1], 16: [2, 3]}


def test_bucket_kernel_equals_a_stable_sort_of_the_codes():
    """The order is the rows sorted by code (stable), the bounds each code's run: the codes worked out twice in the
    kernel (no column of them) give what one column of codes gives numpy, whatever the index columns' width."""
    rng = np.random.default_rng(5)
    for it in range(200):
        n, nl, nm = int(rng.integers(0, 300)), int(rng.integers(0, 6)), int(rng.integers(0, 9))
        # every width the kernels read in place (the reader narrows ev_line and ev_meta to int8 or int16)
        ev_line = rng.integers(-1, nl + 2, n).astype((np.int8, np.int16, np.int32, np.int64)[it % 4])
        ev_meta = rng.integers(-1, nm + 2, n).astype((np.int64, np.int32, np.int16, np.int8)[it % 4])
        line_cls, meta_cls = rng.integers(0, 3, nl), rng.integers(0, 4, nm)
        order, counts = _native.bucket_kernel(ev_line, ev_meta, line_cls, meta_cls, 3, 4, 12)
        ok_l, ok_m = (ev_line >= 0) & (ev_line < nl), (ev_meta >= 0) & (ev_meta < nm)
        mc = np.where(ok_m, meta_cls[np.where(ok_m, ev_meta, 0)] if nm else 0, 3)
        codes = np.where(ok_l, (line_cls[np.where(ok_l, ev_line, 0)] if nl else 0) * 4 + mc, 12)
        assert order.dtype == np.int32 and order.tolist() == np.argsort(codes, kind="stable").tolist()
        assert counts.tolist() == [0] + np.cumsum(np.bincount(codes, minlength=13)).tolist()


# -------------------------------------------------------------------------- merge_rows_all: one union of rows

def _rows_union_by_numpy(start, dur, rows):
    from tfadvisor.spans.intervals import union

    return union(start[rows], start[rows] + dur[rows])


def test_merge_rows_all_is_the_union_of_the_rows():
    """Rows grouped by thread and sorted by start in each: the kernel's one merge is the union numpy gives (empty
    intervals left out, touching ones joined); rows in any other order, or outside the columns, are refused
    (ok False, nothing merged) so the caller takes the general path."""
    rng = np.random.default_rng(7)
    refused = merged = 0
    for it in range(400):
        nl, n = int(rng.integers(1, 7)), int(rng.integers(0, 250))
        line = np.sort(rng.integers(0, nl, n)).astype(np.int32 if it % 2 else np.int64)
        start = np.zeros(n, np.int64)
        for li in range(nl):
            m = line == li
            start[m] = np.sort(rng.integers(0, 2000, int(m.sum())))
        dur = rng.integers(-5, 80, n).astype(np.int64)  # some empty or negative: left out
        rows = np.flatnonzero(rng.random(n) < 0.7).astype(np.int32 if it // 2 % 2 else np.int64)  # read in place
        bad = it % 5 == 4 and rows.shape[0] > 2
        if bad:
            rows = [rows[::-1].copy(), np.append(rows, n), np.append(rows, -1)][it % 3]
        s, e, ok = _native.merge_rows_all(start, dur, line, rows)
        assert s.dtype == e.dtype == np.int64
        if bad and not (it % 3 == 0 and np.unique(line[rows]).shape[0] == 1
                        and np.all(np.diff(start[rows]) >= 0)):
            assert not ok and s.shape[0] == e.shape[0] == 0
            refused += 1
            continue
        assert ok
        want = _rows_union_by_numpy(start, dur, rows)
        assert s.tolist() == want[0].tolist() and e.tolist() == want[1].tolist()
        merged += 1
    assert refused > 30 and merged > 300


def test_union_rows_merges_sorted_runs_as_a_sort_would():
    """_union_rows sorts the intervals by merging the runs already in order (one per line: rows ascending): the
    union is the one numpy's sort gives, whatever the runs - one, many, of length one (any order), ties, empty
    intervals, runs that interleave in time. A merge that dropped or misplaced a run's tail fails here."""
    rng = np.random.default_rng(11)
    shapes = 0
    for it in range(600):
        n = int(rng.integers(0, 400))
        runs = int(rng.integers(1, 40)) if it % 4 else n or 1  # it % 4 == 0: every interval its own run
        cut = np.sort(rng.choice(np.arange(1, max(n, 1)), min(runs - 1, max(n - 1, 0)), replace=False))
        start = np.concatenate([np.sort(part) for part in np.split(rng.integers(0, 5000, n), cut)]).astype(np.int64)
        if it % 5 == 0:
            start = rng.permutation(start)
        dur = rng.integers(0, 300, n).astype(np.int64) * (rng.random(n) > 0.1)  # some empty
        rows = np.arange(n, dtype=np.int32 if it % 2 else np.int64)
        s, e = _native.union_rows(start, dur, rows)
        want = _rows_union_by_numpy(start, dur, rows)
        assert s.tolist() == want[0].tolist() and e.tolist() == want[1].tolist()
        shapes += len(cut) > 3
    assert shapes > 300  # most cases had several runs to merge


@pytest.mark.parametrize("sorted_rows", [1 << 16, 100])  # the sample's rows through _union_rows, then _merge_rows_all
def test_row_unions_read_int32_and_int64_rows_alike(monkeypatch, sorted_rows):
    """rows_union (few rows: _union_rows; many: _merge_rows_all) and rows_runs (_merge_rows) give the same sets for
    a plane's rows as int32 (as the planes hold them) and as int64, sorted or (for the few) in any order."""
    import tfadvisor
    from tfadvisor.spans import intervals

    monkeypatch.setattr(intervals, "UNION_SORTED_ROWS", sorted_rows)

    plane = max(tfadvisor.load(str(SAMPLES / "real_tf_gpu_multiworker")).planes, key=lambda p: p.n_events)
    rng = np.random.default_rng(3)
    for k in (50, 5000, plane.n_events):
        rows = np.sort(rng.choice(plane.n_events, min(k, plane.n_events), replace=False)).astype(np.int32)
        for fn in (intervals.rows_union, lambda p, r: intervals.union_runs(intervals.rows_runs(p, r))):
            a, b = fn(plane, rows), fn(plane, rows.astype(np.int64))
            assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
    few = rng.permutation(plane.n_events)[:300].astype(np.int32)
    a = _native.union_rows(plane.ev_start_ps, plane.ev_dur_ps, few)
    b = _native.union_rows(plane.ev_start_ps, plane.ev_dur_ps, few.astype(np.int64))
    assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


@pytest.mark.parametrize("line_cls, meta_cls, unknown, stride, ncodes", [
    ([0, -1, 1], [2, 3, 4], 4, 8, 16),  # a negative line class
    ([0, 2, 1], [2, 3, 4], 4, 8, 16),  # line class 2: codes 16..23, past ncodes
    ([0, 1, 1], [2, 3, 4], 4, 8, 12),  # line class 1: codes 8..15, past ncodes=12
    ([0, 2**61, 1], [2, 3, 4], 4, 8, 16),  # 2**61 * 8 wraps int64 to a negative code
    ([0, 1, 1], [2, -3, 4], 4, 8, 16),  # a negative metadata class
    ([0, 1, 1], [2, 3, 8], 4, 8, 16),  # a metadata class of stride: the next line class's codes
    ([0, 1, 1], [2, 3, 4], -1, 8, 16),  # unknown negative
    ([0, 1, 1], [2, 3, 4], 8, 8, 16),  # unknown of stride
    ([0, 0, 0], [0, 0, 0], 0, 0, 16),  # stride 0
    ([0, 0, 0], [0, 0, 0], 0, 8, -1),  # ncodes negative
    ([0, 0, 0], [0, 0, 0], 0, 8, 2**63 - 1),  # ncodes + 2 past int64
])
def test_bucket_kernel_refuses_a_bad_code(line_cls, meta_cls, unknown, stride, ncodes):
    """A class whose codes would fall outside [0, ncodes) is refused before any event is bucketed (the
    kernel counts events into counts[code + 1]: a bad code would write outside that array)."""
    with pytest.raises(ValueError):
        _native.bucket_kernel(*_bucket_args(line_cls, meta_cls, unknown, stride, ncodes))


# -------------------------------------------------------------------------- str_groups: strings by bytes

def _pool(strings: list[bytes]):
    ln = np.array([len(s) for s in strings], np.int64)
    off = np.concatenate([[0], np.cumsum(ln)[:-1]]).astype(np.int64)
    return np.frombuffer(b"".join(strings) or b"\0", np.uint8), off, ln


def test_str_groups_equal_factorize_of_the_bytes():
    rng = np.random.default_rng(5)
    for it in range(200):
        n = int(rng.integers(0, 300))
        words = [b"", b"a", b"ab", b"ba", b"tf_op", b"tf_op\0", b"\xff\xfe"] + [
            bytes(rng.integers(0, 256, int(rng.integers(0, 12))).astype(np.uint8)) for _ in range(5)]
        strings = [words[int(i)] for i in rng.integers(0, len(words), n)]
        pool, off, ln = _pool(strings)
        if it % 3 == 0:  # the same bytes anywhere in the pool: offsets into one copy
            pool = np.frombuffer(b"".join(words), np.uint8)
            at = np.cumsum([0] + [len(w) for w in words])
            pick = rng.integers(0, len(words), n)
            strings = [words[int(i)] for i in pick]
            off, ln = at[pick].astype(np.int64), np.array([len(s) for s in strings], np.int64)
        codes, first = _native.str_groups(pool, off, ln, _fnv1a(pool, off, ln))
        want, uniq = factorize(np.array(strings + [b""], object)[:n])
        assert codes.tolist() == want.tolist() and len(first) == len(uniq)
        assert [strings[i] for i in first] == list(uniq)


def test_str_groups_keeps_colliding_strings_apart():
    """Two different strings of the same hash stay two groups: the hash only places a string, its bytes
    decide. A real 64-bit FNV-1a collision is not at hand (about 2**32 strings to hash for one), so the
    hashes are given: every string hashes alike, the worst case (or a low-bits collision, that lands strings
    in the same slot with different hashes)."""
    strings = [b"kernel_a", b"kernel_b", b"kernel_a", b"", b"kernel_b", b"kernel_ab", b"", b"a"]
    pool, off, ln = _pool(strings)
    want = [0, 1, 0, 2, 1, 3, 2, 4]
    for hashes in (np.zeros(len(strings), np.int64), np.full(len(strings), -1, np.int64),
                   np.array([0, 1 << 40, 0, 2 << 40, 1 << 40, 3 << 40, 2 << 40, 4 << 40], np.int64),
                   _fnv1a(pool, off, ln)):
        codes, first = _native.str_groups(pool, off, ln, hashes)
        assert codes.tolist() == want and first.tolist() == [0, 1, 3, 5, 7]


def test_str_groups_refuses_a_string_outside_the_pool():
    pool, off, ln = _pool([b"abc", b"de"])
    with pytest.raises(IndexError):
        _native.str_groups(pool, np.array([0, 4], np.int64), ln, np.zeros(2, np.int64))
    with pytest.raises(ValueError):  # hashes of another length
        _native.str_groups(pool, off, ln, np.zeros(3, np.int64))


def test_value_codes_keep_colliding_strings_apart(tmp_path, monkeypatch):
    """Stat values coded by a plane (StatColumn.codes, strings_at): with every string hashing alike (the
    hash replaced for this test), different values still get different codes and their own strings."""
    import tfadvisor
    import tfadvisor.model.trace as trace_mod
    from tfadvisor.proto import xplane_pb2

    space = xplane_pb2.XSpace(hostnames=["h"])
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].id, p.event_metadata[1].name = 1, "ev"
    p.stat_metadata[7].id, p.stat_metadata[7].name = 7, "payload"
    p.stat_metadata[9].id, p.stat_metadata[9].name = 9, "ref_target"
    line = p.lines.add(id=3, name="python", timestamp_ns=1000)
    values = ["conv", "matmul", "conv", b"\x00\x01", "", "matmul", "conv2", 7, "ref"]
    for k, v in enumerate(values):
        s = line.events.add(metadata_id=1, offset_ps=10 * k, duration_ps=5).stats.add(metadata_id=7)
        if isinstance(v, bytes):
            s.bytes_value = v
        elif isinstance(v, int):
            s.int64_value = v
        elif v == "ref":
            s.ref_value = 9
        else:
            s.str_value = v
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(space.SerializeToString())
    plane = tfadvisor.load(str(f)).planes[0]
    col = plane.stat("payload")
    codes, strings = col.codes()
    got = [strings[c] for c in codes]
    assert got == ["conv", "matmul", "conv", "\x00\x01", "", "matmul", "conv2", "7", "ref_target"]
    monkeypatch.setattr(trace_mod, "_fnv1a", lambda pool, off, ln: np.zeros(len(off), np.int64))
    monkeypatch.setattr(trace_mod, "SMALL_VALUE_CODES", 0)  # the hashing path, not the few values' dict
    codes2, strings2 = col.codes()
    assert codes2.tolist() == codes.tolist() and strings2 == strings
    assert len(set(codes.tolist())) == 7


def test_few_value_codes_equal_the_general_path(monkeypatch):
    """A few stat values (up to SMALL_VALUE_CODES) are coded in one Python pass: the same codes and strings
    as the hashing path, on random draws of every stat kind from real samples."""
    import tfadvisor
    import tfadvisor.model.trace as trace_mod

    rng = np.random.default_rng(7)
    checked = 0
    for name in ("real_tf_gpu_multiworker", "tfdata_repeat_map", "gpu_jax_input_numpy", "real_jax_rocm_mi300_gemm"):
        for plane in tfadvisor.load(str(SAMPLES / name)).planes:
            n = plane.st_kind.shape[0]
            for _ in range(30 if n else 0):
                idx = rng.integers(0, n, int(rng.integers(1, trace_mod.SMALL_VALUE_CODES + 1)))
                kind, raw = plane.st_kind[idx], plane.st_value[idx]
                small = plane.value_codes(kind, raw)
                monkeypatch.setattr(trace_mod, "SMALL_VALUE_CODES", 0)
                general = plane.value_codes(kind, raw)
                monkeypatch.undo()
                assert small[0].tolist() == general[0].tolist() and small[1] == general[1]
                checked += 1
    assert checked >= 100


# -------------------------------------------------------------------------- int32 index columns

def _huge(tmp_path, name: str, dtype, n: int, mode: str = "r+"):
    """An n-item array backed by a sparse file: no memory or disk is used until it is written."""
    path = tmp_path / name
    with open(path, "wb") as fh:
        fh.truncate(n * np.dtype(dtype).itemsize)
    return np.memmap(path, dtype=dtype, mode=mode, shape=(n,))


def _fill_args(**big):
    """fill_chunks arguments for no chunk at all, with the given arrays in place of the empty ones."""
    i64, i32 = np.zeros(0, np.int64), np.zeros(0, np.int32)
    args = dict(buf=np.zeros(4, np.uint8), ch_line=i64, ch_start=i64, ch_end=i64, ch_ev=i64, ch_st=i64, ch_str=i64,
                line_ts=i64, ev_lookup=i32, ev_sorted=i64, st_lookup=i32, st_sorted=i64, ev_line=i32.copy(),
                ev_meta=i32.copy(), ev_start=i64.copy(), ev_dur=i64.copy(), st_event=i32.copy(), st_stat=i32.copy(),
                st_kind=np.zeros(0, np.uint8), st_value=i64.copy(), str_off=i64.copy(), str_len=i64.copy(),
                out_err=i64.copy(), out_err_at=i64.copy())
    args.update(big)
    return list(args.values())


I32_MAX = int(np.iinfo(np.int32).max)


@pytest.mark.parametrize("what", ["line_ts", "ev_sorted", "st_sorted", "events"])
def test_fill_chunks_refuses_counts_past_int32(tmp_path, what):
    """Line rows, event rows and metadata positions are stored in int32 columns: a count past int32 is
    refused (OverflowError naming it) before anything is decoded, instead of wrapping; a count of
    exactly int32's maximum is accepted."""
    fill = wire.fill_chunks_serial
    for n, ok in ((I32_MAX, True), (I32_MAX + 1, False)):
        if what == "events":
            big = {k: _huge(tmp_path, f"{k}{n}", dt, n) for k, dt in
                   (("ev_line", np.int32), ("ev_meta", np.int32), ("ev_start", np.int64), ("ev_dur", np.int64))}
            word = "events"
        else:
            big = {what: _huge(tmp_path, f"{what}{n}", np.int64, n, "r")}
            word = {"line_ts": "lines", "ev_sorted": "event metadata ids", "st_sorted": "stat metadata ids"}[what]
        if ok:
            fill(*_fill_args(**big))
        else:
            with pytest.raises(OverflowError, match=f"{n} {word}"):
                fill(*_fill_args(**big))
        del big


@pytest.mark.parametrize("column,count,width", [("ev_line", "line_ts", np.int8), ("ev_meta", "ev_sorted", np.int16),
                                                 ("st_stat", "st_sorted", np.int8)])
def test_fill_chunks_writes_narrow_index_columns_only_where_they_hold(column, count, width):
    """ev_line, ev_meta and st_stat are written in the width they are given (the reader allocates the narrowest):
    refused (OverflowError naming the column) where that width cannot hold every index of its count, accepted where
    it holds exactly the largest; any other dtype refused."""
    top = int(np.iinfo(width).max)
    for n, ok in ((top + 1, True), (top + 2, False)):  # the indexes are [-1, n): the largest is n - 1
        args = {column: np.zeros(0, width), count: np.zeros(n, np.int64)}
        for fill in (wire.fill_chunks, wire.fill_chunks_serial):
            if ok:
                assert fill(*_fill_args(**args)) is None
            else:
                with pytest.raises(OverflowError, match=column):
                    fill(*_fill_args(**args))
    with pytest.raises(TypeError, match=column):
        wire.fill_chunks(*_fill_args(**{column: np.zeros(0, np.int64)}))


def test_fill_chunks_int32_check_is_on_the_columns_it_bounds():
    """Longer stat and string columns are fine: their indexes are stored as int64 (st_value)."""
    args = _fill_args()
    assert wire.fill_chunks_serial(*args) is None


# -------------------------------------------------------------------------- constants: one definition

KINDS = ("KIND_NONE", "KIND_DOUBLE", "KIND_UINT64", "KIND_INT64", "KIND_STR", "KIND_BYTES", "KIND_REF", "KIND_GZIP")
WIRE = ("OK", "ERR_TRUNCATED", "ERR_WIRE_TYPE", "ERR_VARINT", "ERR_FIELD", "L_ID", "L_DISPLAY_ID", "L_TS_NS",
        "L_DUR_PS", "L_NAME_OFF", "L_NAME_LEN", "L_DNAME_OFF", "L_DNAME_LEN", "L_FIRST_EVENT", "L_N_EVENTS",
        "N_LINE_COLS", "START_OVERFLOW", "MAX_TS_NS")


def test_constants_are_the_kernels():
    """The Python modules use the very values the C kernels write (exported by _native, not copied)."""
    from tfadvisor.model import kinds

    for name in KINDS:
        assert getattr(kinds, name) == getattr(_native, name), name
    for name in WIRE:
        assert getattr(wire, name) == getattr(_native, name), name
    assert sorted(getattr(kinds, k) for k in KINDS) == [0, 1, 2, 3, 4, 5, 6, 8]
    assert len({getattr(kinds, k) for k in KINDS}) == len(KINDS)
    assert (wire.OK, wire.ERR_TRUNCATED, wire.ERR_WIRE_TYPE, wire.ERR_VARINT, wire.ERR_FIELD) == (0, 1, 2, 3, 4)
    assert set(wire.ERROR_TEXT) == {wire.ERR_TRUNCATED, wire.ERR_WIRE_TYPE, wire.ERR_VARINT, wire.ERR_FIELD}
    cols = [getattr(wire, n) for n in WIRE if n.startswith("L_")]
    assert sorted(cols) == list(range(wire.N_LINE_COLS))
    assert wire.START_OVERFLOW == I64_MIN and wire.MAX_TS_NS == I64_MAX // 1000


def test_constants_are_not_copied_by_hand():
    """kinds.py and wire.py take each shared constant from _native: none is a literal there."""
    import ast
    import inspect

    from tfadvisor.model import kinds

    for module, names in ((kinds, KINDS), (wire, WIRE)):
        tree = ast.parse(inspect.getsource(module))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for t, v in zip(targets, values):
                if isinstance(t, ast.Name) and t.id in names:
                    assert ast.unparse(v) == f"_native.{t.id}", f"{module.__name__}.{t.id} = {ast.unparse(v)}"


def test_stat_at_equals_plane_stat(monkeypatch):
    """Context.stat_at (a small plane's column read once per run, cut to the rows asked) gives Plane.stat's values
    for the same rows, on small and (forced) big planes, for rows few and many, sorted or not."""
    import tfadvisor
    import tfadvisor.analyses.base as base
    from tfadvisor.analyses import Context

    rng = np.random.default_rng(13)
    checked = 0
    for name in ("real_tf_gpu_multiworker", "tfdata_repeat_map", "memory_heavy"):
        for plane in tfadvisor.load(str(SAMPLES / name)).planes:
            if not plane.n_events or not plane.stat_index:
                continue
            stats = list(plane.stat_index)
            for small in (True, False):
                monkeypatch.setattr(base, "SMALL_PLANE_STATS", 1 << 40 if small else -1)
                ctx = Context()
                for _ in range(10):
                    stat = stats[int(rng.integers(len(stats)))]
                    rows = rng.integers(0, plane.n_events, int(rng.integers(0, 60)))
                    got, want = ctx.stat_at(plane, stat, rows), plane.stat(stat, rows)
                    for a, b in ((got.rows, want.rows), (got.kind, want.kind), (got.raw, want.raw)):
                        assert a.dtype == b.dtype and a.tolist() == b.tolist(), (name, plane.name, stat)
                    checked += 1
    assert checked >= 100


def _raw_set(rng, n: int, span: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted disjoint intervals as the kernel takes them, empty ones and touching ones included."""
    cuts = np.sort(rng.integers(0, span, 2 * n)).astype(np.int64)
    return cuts[0::2].copy(), cuts[1::2].copy()


@pytest.mark.parametrize("most_layers", [8, 40])  # up to 32 layers the skipping sweep, above it the heap
def test_priority_cover_equals_painting(most_layers):
    """Per layer and window, the time the layer covers and no earlier one does, painted unit by unit: empty and
    touching intervals, no windows, windows sharing ends, layers with nothing in any window."""
    rng = np.random.default_rng(7)
    for _ in range(600):
        k = int(rng.integers(0, most_layers))
        layers = [_raw_set(rng, int(rng.integers(0, 12)), 300) for _ in range(k)]
        w = int(rng.integers(0, 5))
        a = np.sort(rng.integers(0, 300, w)).astype(np.int64)
        b = np.sort(a + rng.integers(0, 80, w)).astype(np.int64)
        got = np.asarray(_native.priority_cover([s for s, _ in layers], [e for _, e in layers], a, b)).reshape(k, w)
        taken = np.zeros(400, bool)
        for i, (s, e) in enumerate(layers):
            paint = np.zeros(400, bool)
            for x, y in zip(s.tolist(), e.tolist()):
                paint[x:y] = True
            mine = paint & ~taken
            assert got[i].tolist() == [int(mine[x:y].sum()) for x, y in zip(a.tolist(), b.tolist())]
            taken |= paint


def _cover_threads(threads, layers, a, b):
    before = wire.get_num_threads()
    try:
        wire.set_num_threads(threads)
        return np.asarray(_native.priority_cover([s for s, _ in layers], [e for _, e in layers], a, b))
    finally:
        wire.set_num_threads(before)


def test_priority_cover_in_parallel_parts_equals_one_sweep():
    """From 2**18 intervals on, the skipping sweep runs on parts of the time on several threads: the same answer as
    one sweep (and, on a first case small enough to paint, as painting), for windows cut between parts, steps whose
    ends pass the next start, one window over everything, windows outside the layers and empty ones, and layers
    bunched in one place (parts with nothing in them)."""
    rng = np.random.default_rng(31)
    span = 3_000_000
    layers = [_raw_set(rng, 140_000, span) for _ in range(3)]
    a = np.sort(rng.integers(0, span, 40)).astype(np.int64)
    b = np.minimum(np.sort(a + rng.integers(0, span // 10, 40)), span).astype(np.int64)
    got = _cover_threads(3, layers, a, b).reshape(3, 40)
    taken = np.zeros(span + 1, bool)
    for i, (s, e) in enumerate(layers):
        d = np.zeros(span + 2, np.int64)
        np.add.at(d, s, 1)
        np.add.at(d, e, -1)
        mine = (np.cumsum(d)[: span + 1] > 0) & ~taken
        c = np.concatenate(([0], np.cumsum(mine)))
        assert got[i].tolist() == (c[b] - c[a]).tolist()
        taken |= mine
    for case in range(8):
        k = int(rng.integers(1, 33))
        n = 300_000 // k + 1
        if case == 6:  # every interval in a hundredth of the time
            layers = [(s // 100, e // 100) for s, e in (_raw_set(rng, n, 10**9) for _ in range(k))]
        else:
            layers = [_raw_set(rng, n, 10**9) for _ in range(k)]
        w = [1, 3, 200, 2000, 0, 57, 1, 900][case]
        a = np.sort(rng.integers(-10**8, 11 * 10**8, w)).astype(np.int64)
        b = np.sort(a + rng.integers(0, 3 * 10**8 if w < 10 else 10**6, w)).astype(np.int64)
        if case == 4:
            a, b = np.zeros(0, np.int64), np.zeros(0, np.int64)
        one = _cover_threads(1, layers, a, b)
        for threads in (2, 3, 7):
            assert _cover_threads(threads, layers, a, b).tolist() == one.tolist(), (case, threads)


def test_rows_where_equals_flatnonzero_of_the_mask():
    rng = np.random.default_rng(8)
    for it in range(200):
        n, nm = int(rng.integers(0, 300)), int(rng.integers(0, 20))
        idx = rng.integers(-1, nm + 2, n).astype(np.int32 if it % 2 else np.int64)
        mask = rng.random(nm) < 0.3
        want = np.flatnonzero(np.append(np.append(mask, [False, False]), False)[idx])
        got = _native.rows_where(idx, mask)
        assert got.dtype == np.int32 and got.tolist() == want.tolist()  # int32: every row fits


def test_starts_at_marks_the_lines_with_a_start_at_a_mark():
    rng = np.random.default_rng(9)
    for _ in range(200):
        n, nl = int(rng.integers(0, 300)), int(rng.integers(0, 8))
        start = rng.integers(0, 100, n).astype(np.int64)
        line = rng.integers(-1, nl + 1, n).astype(np.int32)
        marks = np.unique(rng.integers(0, 100, int(rng.integers(0, 10)))).astype(np.int64)
        want = np.zeros(nl, np.uint8)
        hit = np.isin(start, marks) & (line >= 0) & (line < nl)
        want[line[hit]] = 1
        assert _native.starts_at(start, line, marks, nl).tolist() == want.tolist()


def test_step_tally_equals_bincount():
    """Each event in its step (the last step starting at or before it, if it has not ended), by metadata, with
    line and metadata masks or none: the numpy expressions variation.py used before, step starts in any spacing
    and events in any order."""
    rng = np.random.default_rng(10)
    for it in range(300):
        n_ev, nm, nl, n = int(rng.integers(0, 400)), int(rng.integers(1, 12)), int(rng.integers(1, 6)), \
            int(rng.integers(1, 9))
        a = np.sort(rng.choice(1000, n, replace=False)).astype(np.int64)
        b = np.minimum(a + rng.integers(0, 200, n), np.append(a[1:], 10**6)).astype(np.int64)
        ends = (a + (b - a) // 2).astype(np.int64)
        start = rng.integers(-50, 1100, n_ev).astype(np.int64)
        if it % 3 == 0:
            start.sort()
        dur = rng.integers(0, 10**6, n_ev).astype(np.int64)
        meta = rng.integers(-1, nm, n_ev).astype(np.int32)
        line = rng.integers(0, nl, n_ev).astype(np.int32)
        pres = None if it % 2 else (rng.random(nl) < 0.6).astype(np.uint8)
        op_meta = None if it % 4 < 2 else rng.random(nm) < 0.5
        op_lines = None if it % 4 < 2 else rng.random(nl) < 0.7
        i = np.searchsorted(a, start, side="right") - 1
        ok = (i >= 0) & (meta >= 0)
        i = np.maximum(i, 0)
        ok &= start < b[i]
        okp = ok & (True if pres is None else pres.astype(bool)[line])
        key = meta[okp].astype(np.int64) * n + i[okp]
        want_cnt = np.bincount(key, minlength=nm * n)
        want_tim = np.bincount(key, weights=dur[okp].astype(float), minlength=nm * n)
        after = (start[okp] >= ends[i[okp]]) * dur[okp].astype(float)
        want_aft = np.bincount(meta[okp], weights=after, minlength=nm)
        oko = ok if op_meta is None else ok & op_meta[np.maximum(meta, 0)] & op_lines[line]
        want_ops = np.bincount(i[oko], weights=dur[oko].astype(float), minlength=n)
        cnt, tim, aft, ops = np.zeros(nm * n, np.int64), np.zeros(nm * n), np.zeros(nm), np.zeros(n)
        _native.step_tally(start, dur, meta, line, a, b, ends, pres, op_meta, op_lines, cnt, tim, aft, ops)
        assert cnt.tolist() == want_cnt.tolist() and tim.tolist() == want_tim.tolist()
        assert aft.tolist() == want_aft.tolist() and ops.tolist() == want_ops.tolist()
    with pytest.raises(ValueError):  # outputs of the wrong size are never written
        z = np.zeros(3, np.int64)
        _native.step_tally(z, z, z, z, z, z, z, None, None, None, np.zeros(2, np.int64), np.zeros(2), np.zeros(1),
                           np.zeros(3))
    with pytest.raises(TypeError):
        _native.step_tally(z, z, z, z, z, z, z, None, None, None, np.zeros(3), np.zeros(3), np.zeros(1), np.zeros(3))


def test_row_sums_equal_bincount():
    """Time and count per code of event rows (attribution's per-name totals), with codes given or taken from the
    metadata (known metadata, positive durations only); rows outside the columns are refused."""
    rng = np.random.default_rng(12)
    for it in range(300):
        n_ev, n = int(rng.integers(1, 300)), int(rng.integers(1, 15))
        dur = rng.integers(-5, 10**9, n_ev).astype(np.int64)
        meta = rng.integers(-1, n - 1, n_ev).astype(np.int32)
        rows = rng.integers(0, n_ev, int(rng.integers(0, 400))).astype(np.int64)
        if it % 2:
            codes = rng.integers(0, n, rows.shape[0]).astype(np.int32)
            c, d = codes, dur[rows]
        else:
            codes = None
            ok = (meta[rows] >= 0) & (dur[rows] > 0)
            c, d = meta[rows][ok] + 1, dur[rows][ok]
        tot, cnt = np.zeros(n), np.zeros(n, np.int64)
        _native.row_sums(dur, rows, codes, meta, tot, cnt)
        assert tot.tolist() == np.bincount(c, weights=d.astype(float), minlength=n).tolist()
        assert cnt.tolist() == np.bincount(c, minlength=n).tolist()
    with pytest.raises(IndexError):
        _native.row_sums(dur, np.array([n_ev], np.int64), None, meta, tot, cnt)
