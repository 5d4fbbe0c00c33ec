"""The C kernels (``tfadvisor/_native.c``) against numpy references, and their argument checks.

The decoder and the interval kernels are also checked end to end (test_reader, test_analyses_steps,
the fuzz tests) and under AddressSanitizer (test_bounds_checked); this module pins the kernels added
for speed to the numpy expressions they replace, and the refusals that keep a wrong call from
writing outside an array.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tfadvisor import _native
from tfadvisor.analyses.intervals import intersect
from tfadvisor.analyses.placement import meta_counts, meta_durations
from tfadvisor.io import wire
from tfadvisor.model.trace import _fnv1a

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
    out = [np.empty(4, np.int64) for _ in range(4)]
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
