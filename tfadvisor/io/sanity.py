"""Impossible event times, fixed at load time so that no analysis turns them into figures.

A valid file may still hold absurd values: negative durations, events lasting longer than the
capture, events days before their line starts, starts that do not fit in int64 picoseconds.
:func:`sanitize` clips or drops them, per host, with one note per kind of fix in
``Trace.load_notes``:

* a negative duration becomes 0;
* an event whose start does not fit in int64 ps (``wire.START_OVERFLOW``) is dropped;
* the capture window is read from the ``Task Environment`` plane (``profile_start_time`` /
  ``profile_stop_time``, ns; saved event times are relative to the start) when the host's line
  timestamps lie in it, else estimated from the bulk of the event starts (then only values more
  than ten times its length, at least ten minutes, away are caught);
* an event starting more than one window length (at least 1 s) outside the window is dropped,
  and so is one lasting longer than the window (plus the tolerance below);
* an event ending well after the window (a tenth of its length, at least 10 ms; one length, at
  least 1 s, for an estimated window) is clipped to end there.

So the events a host keeps span less than int64 holds (an estimated window's slack is at most
:data:`MAX_WINDOW_PS` and a third of what int64 leaves beside its length).

Stat values out of range for their stat (``inf`` for a batch size, a negative byte count, text
where a number belongs) are dropped with a note too (:mod:`tfadvisor.io.statcheck`).

Sane profiles are untouched: their events lie in the window, with the few milliseconds of
slack real writers show (JAX events end ~1 ms after ``profile_stop_time``).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

import tfadvisor._native as _native
import tfadvisor.io.wire as wire
from tfadvisor.io.statcheck import check_stats
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.model.values import as_int

PS_PER_NS = 1000
PS_PER_MS = 10**9
#: Starts at least this far outside the window (or one window length, if longer) are dropped.
MIN_SLACK_PS = 10**12  # 1 s
#: Ends this far past the window (or a tenth of its length, if longer) are clipped.
MIN_END_TOLERANCE_PS = 10 * PS_PER_MS
#: Slack around a window estimated from the events: this many times its length, taken as at least a
#: minute (so at least 10 minutes).
ESTIMATE_SLACK_FACTOR = 10
MIN_ESTIMATE_SPAN_PS = 60 * 10**12
#: A window from the Task Environment plane longer than this is not believed.
MAX_WINDOW_PS = 30 * 24 * 3600 * 10**12
_QUANTILE_SAMPLE = 1 << 20
_I64_MAX = int(np.iinfo(np.int64).max)


def sanitize(trace: Trace) -> None:
    """Fix the impossible event times of every host of ``trace`` in place, and drop the stat values out of
    range (:func:`tfadvisor.io.statcheck.check_stats`); notes go to ``trace.load_notes[host]``."""
    for host in trace.hosts:
        planes = [p for p in trace.planes if p.host == host]
        checked = check_stats(planes)  # first: the window below reads plane stats
        notes = sanitize_planes(planes) + checked
        if notes:
            trace.load_notes.setdefault(host, []).extend(notes)


def sanitize_planes(planes: list[Plane]) -> list[str]:
    """Fix the impossible event times of one host's planes in place; return notes on what changed."""
    notes: list[str] = []
    neg = 0
    over = 0
    for p in planes:
        if p.n_events == 0:
            continue
        n_neg, n_lost = _native.time_checks(p.ev_start_ps, p.ev_dur_ps)  # one pass; the fixes only when needed
        if not (n_neg or n_lost):
            continue
        bad = p.ev_dur_ps < 0
        if bad.any():
            neg += int(bad.sum())
            p.ev_dur_ps[bad] = 0
            _forget(p)
        # a start int64 cannot hold, or an end that would overflow it
        lost = (p.ev_start_ps == wire.START_OVERFLOW) | (p.ev_dur_ps > _I64_MAX - np.maximum(p.ev_start_ps, 0))
        if lost.any():
            over += int(lost.sum())
            _keep(p, ~lost)
    if neg:
        notes.append(f"{neg:,} event(s) with a negative duration: set to 0")
    if over:
        notes.append(f"{over:,} event(s) whose start (line timestamp_ns x 1000 + offset_ps) or end does not fit "
                     "in int64 picoseconds: dropped")
    busy = [p for p in planes if p.n_events]
    if not busy:
        return notes
    window, source = _window(planes, busy)
    if window is None:
        return notes
    w0, w1 = window
    length = w1 - w0
    if source.startswith("from"):
        slack = max(length, MIN_SLACK_PS)
        tol = max(length // 10, MIN_END_TOLERANCE_PS)
    else:  # an estimate is rough: only values far off are caught
        # at most a month, and never so much that the events kept (starts within the slack either side, ends
        # clipped at the slack past it) span more than int64 holds: a quarter of the starts days off stretch the
        # estimate itself (fuzz seed 59: 1e18 ps, a slack of ten times that kept starts at -2**63 and 2**62)
        slack = tol = min(ESTIMATE_SLACK_FACTOR * max(length, MIN_ESTIMATE_SPAN_PS), MAX_WINDOW_PS,
                          max(_I64_MAX - length, 0) // 3)
    # bounds as int64 (numpy arithmetic with a Python int beyond int64 raises)
    lo, hi, limit, longest = (_clamp(x) for x in (w0 - slack, w1 + slack, w1 + tol, length + tol))
    floor = _clamp(int(limit) - _I64_MAX)  # starts below it cannot end past the limit
    dropped = too_long = clipped = 0
    for p in busy:
        start = p.ev_start_ps
        if _native.window_checks(start, p.ev_dur_ps, int(lo), int(hi), int(longest), int(limit), int(floor)) == (0, 0):
            continue  # nothing to drop or clip (one pass)
        far = (start < lo) | (start > hi)
        long_ = p.ev_dur_ps > longest
        if far.any() or long_.any():
            dropped += int(far.sum())
            too_long += int((long_ & ~far).sum())
            _keep(p, ~(far | long_))
            start = p.ev_start_ps
        # end > limit, written so that start + duration cannot overflow
        late = p.ev_dur_ps > limit - np.maximum(start, floor)
        if late.any():
            clipped += int(late.sum())
            p.ev_dur_ps[late] = np.maximum(limit - start[late], 0)
            _forget(p)
    span = f"{w0 / PS_PER_MS:,.1f} .. {w1 / PS_PER_MS:,.1f} ms, {source}"
    if dropped:
        notes.append(f"{dropped:,} event(s) starting far outside the capture window ({span}): dropped")
    if too_long:
        notes.append(f"{too_long:,} event(s) lasting longer than the capture window ({span}): dropped")
    if clipped:
        notes.append(f"{clipped:,} event(s) ending after the capture window ({span}): clipped to end at "
                     f"{limit / PS_PER_MS:,.1f} ms")
    return notes


def _clamp(x: int) -> np.int64:
    return np.int64(min(max(x, -_I64_MAX), _I64_MAX))


def _window(planes: list[Plane], busy: list[Plane]) -> tuple[tuple[int, int] | None, str]:
    """The capture window in ps and where it came from."""
    te = _task_window(planes)
    if te is not None and _lines_inside(busy, te):
        return te, "from the Task Environment plane"
    est = _estimated_window(busy)
    return est, "estimated from the event starts"


def _task_window(planes: Iterable[Plane]) -> tuple[int, int] | None:
    for p in planes:
        if p.name != "Task Environment":
            continue
        a, b = _int(p.stats.get("profile_start_time")), _int(p.stats.get("profile_stop_time"))
        if a is None or b is None or not 0 < b - a <= MAX_WINDOW_PS // PS_PER_NS:
            return None
        return 0, (b - a) * PS_PER_NS
    return None


def _int(v: object) -> int | None:
    return as_int(v) if isinstance(v, (int, float)) else None


def _lines_inside(busy: list[Plane], window: tuple[int, int]) -> bool:
    """Whether most lines with events start in (or near) the window: saved times are relative."""
    w0, w1 = window
    slack = max(w1 - w0, MIN_SLACK_PS)
    inside = total = 0
    for p in busy:
        has = _line_counts(p) > 0
        total += int(has.sum())
        ps = _line_starts_ps(p, has)
        inside += int(((ps >= w0 - slack) & (ps <= w1 + slack)).sum())
    return total > 0 and 2 * inside >= total


def _estimated_window(busy: list[Plane]) -> tuple[int, int] | None:
    """The middle half of the event starts (a sample of them on big traces), widened to the line
    starts of lines with events: quartiles stay put when a few starts are absurd, and line starts
    anchor the window when all of them are. Where that spans more than :data:`MAX_WINDOW_PS` (a
    quarter of the starts or more absurd), the same over the values within that of the line starts'
    median."""
    parts = []
    line_ps = []
    for p in busy:
        s = p.ev_start_ps
        step = max(1, s.shape[0] // _QUANTILE_SAMPLE)
        parts.append(s[::step])
        line_ps.append(_line_starts_ps(p))
    starts = np.concatenate(parts)
    lines = np.concatenate(line_ps)
    if starts.shape[0] == 0:
        return None
    lo, hi = _middle_half(starts, lines, None)
    if hi - lo > MAX_WINDOW_PS:  # the starts disagree by more than a month (a whole thread's offsets absurd):
        # the same estimate over the starts and line starts within a month of the line starts' median (saved
        # times are relative to them; the starts' median where no line start fits)
        anchor = int(np.median(lines)) if lines.shape[0] else int(np.median(starts))
        a, b = _clamp(anchor - MAX_WINDOW_PS), _clamp(anchor + MAX_WINDOW_PS)
        lo, hi = _middle_half(starts[(starts >= a) & (starts <= b)], lines[(lines >= a) & (lines <= b)], anchor)
    return lo, hi


def _middle_half(starts: np.ndarray, lines: np.ndarray, empty: int | None) -> tuple[int, int]:
    """The quartiles of ``starts`` (``(empty, empty)`` where there are none), widened to the line starts."""
    lo = hi = empty
    if starts.shape[0]:
        lo, hi = (int(x) for x in np.quantile(starts, [0.25, 0.75], method="inverted_cdf"))
    if lines.shape[0]:
        lo, hi = min(lo, int(lines.min())), max(hi, int(lines.max()))
    return lo, hi


def _line_counts(p: Plane) -> np.ndarray:
    """Events per line: the lines table's ``n_events`` (the decoder's count, kept by :func:`_keep`) where it adds
    up to the plane's events, else counted from ``ev_line`` (a pass over every event)."""
    n = p.lines["n_events"] if len(p.lines) and "n_events" in p.lines else None
    if n is not None and int(np.sum(n)) == p.n_events and bool(np.all(n >= 0)):
        return np.asarray(n)
    return np.bincount(p.ev_line[p.ev_line >= 0], minlength=len(p.lines))[: len(p.lines)]


def _line_starts_ps(p: Plane, has: np.ndarray | None = None) -> np.ndarray:
    """Start (ps) of each line that has events (``has``: which lines have, when known), where it fits in int64 ps."""
    has = _line_counts(p) > 0 if has is None else has
    ts = p.lines["timestamp_ns"][has]
    return ts[(ts >= -wire.MAX_TS_NS) & (ts <= wire.MAX_TS_NS)] * PS_PER_NS


def _forget(p: Plane) -> None:
    """Drop cached values derived from the event columns."""
    for name in ("stats_by_event",):
        p.__dict__.pop(name, None)


def _keep(p: Plane, keep: np.ndarray) -> None:
    """Keep only the events where ``keep`` is true (their stats too); renumber stat rows and lines."""
    new_row = np.cumsum(keep, dtype=np.int64) - 1
    st_keep = keep[p.st_event]
    p.ev_line = p.ev_line[keep]
    p.ev_meta = p.ev_meta[keep]
    p.ev_start_ps = p.ev_start_ps[keep]
    p.ev_dur_ps = p.ev_dur_ps[keep]
    p.st_event = new_row[p.st_event[st_keep]].astype(np.int32)
    p.st_stat = p.st_stat[st_keep]
    p.st_kind = p.st_kind[st_keep]
    p.st_value = p.st_value[st_keep]
    if len(p.lines):
        n = np.bincount(p.ev_line, minlength=len(p.lines)).astype(np.int64)
        p.lines["n_events"] = n
        p.lines["first_event"] = np.cumsum(n) - n
    _forget(p)
