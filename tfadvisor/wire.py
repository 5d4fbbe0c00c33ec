"""Decode the protobuf wire format of one XPlane straight into numpy arrays.

A per-event Python loop over protobuf objects costs seconds per million events, so the
hot part of reading (lines, events and their stats) is decoded here by numba-compiled
functions in two passes over the plane's bytes: one counts, one fills preallocated
columns. Metadata (a few thousand names) is left to the generated protobuf module.

Every read is bounds-checked: a malformed buffer yields an error code and byte offset,
never a crash. Field numbers are those of ``proto/xplane.proto``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# Stat value kinds, stored per stat row in ``Plane.stat_kind``.
KIND_NONE = 0
KIND_DOUBLE = 1
KIND_UINT64 = 2
KIND_INT64 = 3
KIND_STR = 4
KIND_BYTES = 5
KIND_REF = 6
KIND_GZIP = 8

# Error codes returned by the decoders.
OK = 0
ERR_TRUNCATED = 1
ERR_WIRE_TYPE = 2
ERR_VARINT = 3
ERR_FIELD = 4

ERROR_TEXT = {
    # Raised inside a record that the file holds in full: the wire format is corrupt, not cut short.
    ERR_TRUNCATED: "corrupt protobuf wire format (a length runs past the end of its message)",
    ERR_WIRE_TYPE: "invalid protobuf wire type",
    ERR_VARINT: "malformed varint",
    ERR_FIELD: "field with an unexpected wire type",
}

# Line columns (int64 matrix, one row per line).
L_ID, L_DISPLAY_ID, L_TS_NS, L_DUR_PS = 0, 1, 2, 3
L_NAME_OFF, L_NAME_LEN, L_DNAME_OFF, L_DNAME_LEN = 4, 5, 6, 7
L_FIRST_EVENT, L_N_EVENTS = 8, 9
N_LINE_COLS = 10

#: Event starts are ``timestamp_ns * 1000 + offset_ps`` in int64 ps; a start that does not fit is
#: stored as this value (the reader drops such events with a note).
START_OVERFLOW = np.iinfo(np.int64).min
MAX_TS_NS = np.iinfo(np.int64).max // 1000
_I64_MAX = np.iinfo(np.int64).max


def encode_varint(v: int) -> bytes:
    """The protobuf varint of ``v`` (a negative value as its 64-bit two's complement)."""
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    """Return (value as uint64, new position); position -1 on error."""
    result = np.uint64(0)
    shift = 0
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= np.uint64(b & 0x7F) << np.uint64(shift)
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            return result, -1
    return result, -1


@njit(cache=True, nogil=True)
def _skip(buf, pos, end, wt):
    """Skip one field value of wire type ``wt``; return the new position or -1."""
    if wt == 0:
        _, pos = _varint(buf, pos, end)
        return pos
    if wt == 1:
        return pos + 8 if pos + 8 <= end else -1
    if wt == 2:
        n, pos = _varint(buf, pos, end)
        if pos < 0 or n > np.uint64(end - pos):
            return -1
        return pos + np.int64(n)
    if wt == 5:
        return pos + 4 if pos + 4 <= end else -1
    return -2


@njit(cache=True, nogil=True)
def _fixed64(buf, pos):
    v = np.uint64(0)
    for i in range(8):
        v |= np.uint64(buf[pos + i]) << np.uint64(8 * i)
    return v


@njit(cache=True, nogil=True)
def scan_fields(buf, start, end, out_field, out_wt, out_off, out_len):
    """List the top-level fields of a message in ``buf[start:end]``.

    Fills ``out_*`` (field number, wire type, payload offset, payload length or value)
    and returns (count, error, error position). Stops at the capacity of ``out_field``;
    returns count = capacity + 1 when more fields exist.
    """
    pos = start
    n = 0
    cap = out_field.shape[0]
    while pos < end:
        tag_at = pos
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return n, ERR_VARINT, tag_at
        field = np.int64(tag >> np.uint64(3))
        wt = np.int64(tag & np.uint64(7))
        if field == 0:
            return n, ERR_FIELD, tag_at
        value_at = pos
        length = np.int64(0)
        if wt == 2:
            ln, pos = _varint(buf, pos, end)
            if pos < 0 or ln > np.uint64(end - pos):
                return n, ERR_TRUNCATED, tag_at
            value_at = pos
            length = np.int64(ln)
            pos += length
        elif wt == 0:
            v, pos = _varint(buf, pos, end)
            if pos < 0:
                return n, ERR_TRUNCATED, tag_at
            length = np.int64(v)
        else:
            pos = _skip(buf, pos, end, wt)
            if pos == -2:
                return n, ERR_WIRE_TYPE, tag_at
            if pos < 0:
                return n, ERR_TRUNCATED, tag_at
            length = pos - value_at
        if n < cap:
            out_field[n] = field
            out_wt[n] = wt
            out_off[n] = value_at
            out_len[n] = length
        n += 1
    return n, OK, 0


@njit(cache=True, nogil=True)
def _count_event(buf, pos, end):
    """Count the stats of one XEvent; return (stats, strings, error, error position)."""
    n_stats = 0
    n_strs = 0
    while pos < end:
        tag_at = pos
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return 0, 0, ERR_VARINT, tag_at
        field = tag >> np.uint64(3)
        wt = np.int64(tag & np.uint64(7))
        if field == 4 and wt == 2:
            ln, pos = _varint(buf, pos, end)
            if pos < 0 or ln > np.uint64(end - pos):
                return 0, 0, ERR_TRUNCATED, tag_at
            stat_end = pos + np.int64(ln)
            n_stats += 1
            # A string-valued stat needs a slot in the plane's string table.
            p = pos
            while p < stat_end:
                t2_at = p
                t2, p = _varint(buf, p, stat_end)
                if p < 0:
                    return 0, 0, ERR_VARINT, t2_at
                f2 = t2 >> np.uint64(3)
                w2 = np.int64(t2 & np.uint64(7))
                if w2 == 2 and (f2 == 5 or f2 == 6 or f2 == 8):
                    n_strs += 1
                p = _skip(buf, p, stat_end, w2)
                if p == -2:
                    return 0, 0, ERR_WIRE_TYPE, t2_at
                if p < 0:
                    return 0, 0, ERR_TRUNCATED, t2_at
            pos = stat_end
        else:
            pos = _skip(buf, pos, end, wt)
            if pos == -2:
                return 0, 0, ERR_WIRE_TYPE, tag_at
            if pos < 0:
                return 0, 0, ERR_TRUNCATED, tag_at
    return n_stats, n_strs, OK, 0


@njit(cache=True, nogil=True)
def _count_line(buf, li, pos, end, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base):
    """Pass 1 for one line: its scalar fields, its event/stat/string counts and chunk marks.

    A chunk mark is set at the first event that starts at least ``chunk_bytes`` after the
    previous mark, so that pass 2 can fill chunks in parallel. Returns
    (chunks, stats, strings, error, error position).
    """
    n_events = 0
    n_stats = 0
    n_strs = 0
    n_chunks = 1
    ch_pos[ch_base] = pos
    ch_ev[ch_base] = 0
    ch_st[ch_base] = 0
    ch_str[ch_base] = 0
    next_mark = pos + chunk_bytes
    while pos < end:
        tag_at = pos
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return 0, 0, 0, ERR_VARINT, tag_at
        field = np.int64(tag >> np.uint64(3))
        wt = np.int64(tag & np.uint64(7))
        if wt == 0:
            v, pos = _varint(buf, pos, end)
            if pos < 0:
                return 0, 0, 0, ERR_TRUNCATED, tag_at
            if field == 1:
                lines[li, L_ID] = np.int64(v)
            elif field == 10:
                lines[li, L_DISPLAY_ID] = np.int64(v)
            elif field == 3:
                lines[li, L_TS_NS] = np.int64(v)
            elif field == 9:
                lines[li, L_DUR_PS] = np.int64(v)
            continue
        if wt != 2:
            pos = _skip(buf, pos, end, wt)
            if pos == -2:
                return 0, 0, 0, ERR_WIRE_TYPE, tag_at
            if pos < 0:
                return 0, 0, 0, ERR_TRUNCATED, tag_at
            continue
        ln, pos = _varint(buf, pos, end)
        if pos < 0 or ln > np.uint64(end - pos):
            return 0, 0, 0, ERR_TRUNCATED, tag_at
        sub_end = pos + np.int64(ln)
        if field == 4:
            if tag_at >= next_mark:
                c = ch_base + n_chunks
                ch_pos[c] = tag_at
                ch_ev[c] = n_events
                ch_st[c] = n_stats
                ch_str[c] = n_strs
                n_chunks += 1
                next_mark = tag_at + chunk_bytes
            s, k, err, err_at = _count_event(buf, pos, sub_end)
            if err != OK:
                return 0, 0, 0, err, err_at
            n_events += 1
            n_stats += s
            n_strs += k
        elif field == 2:
            lines[li, L_NAME_OFF] = pos
            lines[li, L_NAME_LEN] = np.int64(ln)
        elif field == 11:
            lines[li, L_DNAME_OFF] = pos
            lines[li, L_DNAME_LEN] = np.int64(ln)
        pos = sub_end
    lines[li, L_N_EVENTS] = n_events
    return n_chunks, n_stats, n_strs, OK, 0


@njit(cache=True, nogil=True)
def _count_one(li, buf, line_off, line_len, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base,
               out_chunks, out_stats, out_strs, out_err, out_err_at):
    pos = line_off[li]
    c, s, k, err, at = _count_line(buf, li, pos, pos + line_len[li], lines, chunk_bytes, ch_pos, ch_ev,
                                   ch_st, ch_str, ch_base[li])
    out_chunks[li] = c
    out_stats[li] = s
    out_strs[li] = k
    out_err[li] = err
    out_err_at[li] = at


@njit(cache=True, nogil=True, parallel=True)
def count_lines(buf, line_off, line_len, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base,
                out_chunks, out_stats, out_strs, out_err, out_err_at):
    """Pass 1 over every line, lines in parallel; per-line results in the ``out_*`` arrays."""
    for li in prange(line_off.shape[0]):
        _count_one(li, buf, line_off, line_len, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base,
                   out_chunks, out_stats, out_strs, out_err, out_err_at)


@njit(cache=True, nogil=True)
def count_lines_serial(buf, line_off, line_len, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base,
                       out_chunks, out_stats, out_strs, out_err, out_err_at):
    """:func:`count_lines` in this thread: a parallel launch costs more than a small plane's decode."""
    for li in range(line_off.shape[0]):
        _count_one(li, buf, line_off, line_len, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base,
                   out_chunks, out_stats, out_strs, out_err, out_err_at)


@njit(cache=True, nogil=True)
def _dense(lookup, sorted_ids, key):
    """Map a metadata id to its dense index (-1 when unknown)."""
    if key >= 0 and key < lookup.shape[0]:
        return lookup[key]
    i = np.searchsorted(sorted_ids, key)
    if i < sorted_ids.shape[0] and sorted_ids[i] == key:
        return np.int32(i)
    return np.int32(-1)


@njit(cache=True, nogil=True)
def _start_ps(base_ok, base, offset):
    """``base + offset``, or :data:`START_OVERFLOW` when the line start or the sum leaves int64."""
    if not base_ok:
        return START_OVERFLOW
    if offset > 0 and base > _I64_MAX - offset:
        return START_OVERFLOW
    if offset < 0 and base < -_I64_MAX - offset:
        return START_OVERFLOW
    return base + offset


@njit(cache=True, nogil=True)
def _fill_chunk(buf, pos, end, li, ts_ns, ei, si, ki, ev_lookup, ev_sorted, st_lookup, st_sorted,
                ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len):
    """Pass 2 for one chunk of a line: decode its events and their stats.

    ``ei``/``si``/``ki`` are the first event, stat and string rows of the chunk. Event
    starts are absolute picoseconds: ``line.timestamp_ns * 1000 + offset_ps``. Metadata ids
    become dense indexes into the plane's sorted metadata ids; string, bytes and gzip values
    store an index into ``str_off``/``str_len`` (byte ranges of ``buf``).
    Returns (error, error position).
    """
    base_ok = -MAX_TS_NS <= ts_ns <= MAX_TS_NS
    base = ts_ns * 1000 if base_ok else np.int64(0)
    n_ev = ev_line.shape[0]
    n_st = st_event.shape[0]
    n_str = str_off.shape[0]
    while pos < end:
        tag_at = pos
        tag, pos = _varint(buf, pos, end)
        if pos < 0:
            return ERR_VARINT, tag_at
        field = np.int64(tag >> np.uint64(3))
        wt = np.int64(tag & np.uint64(7))
        if not (field == 4 and wt == 2):
            pos = _skip(buf, pos, end, wt)
            if pos == -2:
                return ERR_WIRE_TYPE, tag_at
            if pos < 0:
                return ERR_TRUNCATED, tag_at
            continue
        ln, pos = _varint(buf, pos, end)
        if pos < 0 or ln > np.uint64(end - pos):
            return ERR_TRUNCATED, tag_at
        sub_end = pos + np.int64(ln)
        if ei >= n_ev:
            return ERR_TRUNCATED, tag_at
        meta = np.int64(0)
        offset = np.int64(0)
        dur = np.int64(0)
        p = pos
        while p < sub_end:
            t_at = p
            t, p = _varint(buf, p, sub_end)
            if p < 0:
                return ERR_VARINT, t_at
            f = np.int64(t >> np.uint64(3))
            w = np.int64(t & np.uint64(7))
            if w == 0:
                v, p = _varint(buf, p, sub_end)
                if p < 0:
                    return ERR_TRUNCATED, t_at
                if f == 1:
                    meta = np.int64(v)
                elif f == 2:
                    offset = np.int64(v)
                elif f == 3:
                    dur = np.int64(v)
                continue
            if f == 4 and w == 2:
                sl, p = _varint(buf, p, sub_end)
                if p < 0 or sl > np.uint64(sub_end - p):
                    return ERR_TRUNCATED, t_at
                if si >= n_st:
                    return ERR_TRUNCATED, t_at
                s_end = p + np.int64(sl)
                st_event[si] = ei
                st_stat[si] = -1
                st_kind[si] = KIND_NONE
                st_value[si] = 0
                q = p
                while q < s_end:
                    u_at = q
                    u, q = _varint(buf, q, s_end)
                    if q < 0:
                        return ERR_VARINT, u_at
                    g = np.int64(u >> np.uint64(3))
                    x = np.int64(u & np.uint64(7))
                    if x == 0:
                        v, q = _varint(buf, q, s_end)
                        if q < 0:
                            return ERR_TRUNCATED, u_at
                        if g == 1:
                            st_stat[si] = _dense(st_lookup, st_sorted, np.int64(v))
                        elif g == 3:
                            st_kind[si] = KIND_UINT64
                            st_value[si] = np.int64(v)
                        elif g == 4:
                            st_kind[si] = KIND_INT64
                            st_value[si] = np.int64(v)
                        elif g == 7:
                            st_kind[si] = KIND_REF
                            st_value[si] = _dense(st_lookup, st_sorted, np.int64(v))
                    elif x == 1:
                        if q + 8 > s_end:
                            return ERR_TRUNCATED, u_at
                        if g == 2:
                            st_kind[si] = KIND_DOUBLE
                            st_value[si] = np.int64(_fixed64(buf, q))
                        q += 8
                    elif x == 2:
                        vl, q = _varint(buf, q, s_end)
                        if q < 0 or vl > np.uint64(s_end - q):
                            return ERR_TRUNCATED, u_at
                        if g == 5 or g == 6 or g == 8:
                            if ki >= n_str:
                                return ERR_TRUNCATED, u_at
                            st_kind[si] = KIND_STR if g == 5 else (KIND_BYTES if g == 6 else KIND_GZIP)
                            str_off[ki] = q
                            str_len[ki] = np.int64(vl)
                            st_value[si] = ki
                            ki += 1
                        q += np.int64(vl)
                    else:
                        q = _skip(buf, q, s_end, x)
                        if q == -2:
                            return ERR_WIRE_TYPE, u_at
                        if q < 0:
                            return ERR_TRUNCATED, u_at
                si += 1
                p = s_end
                continue
            p = _skip(buf, p, sub_end, w)
            if p == -2:
                return ERR_WIRE_TYPE, t_at
            if p < 0:
                return ERR_TRUNCATED, t_at
        ev_line[ei] = li
        ev_meta[ei] = _dense(ev_lookup, ev_sorted, meta)
        ev_start[ei] = _start_ps(base_ok, base, offset)
        ev_dur[ei] = dur
        ei += 1
        pos = sub_end
    return OK, 0


@njit(cache=True, nogil=True)
def _fill_one(c, buf, ch_line, ch_start, ch_end, ch_ev, ch_st, ch_str, line_ts, ev_lookup, ev_sorted, st_lookup,
              st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off,
              str_len, out_err, out_err_at):
    """Pass 2 for chunk ``c`` (shared by the parallel and the serial loop)."""
    li = ch_line[c]
    err, at = _fill_chunk(buf, ch_start[c], ch_end[c], li, line_ts[li], ch_ev[c], ch_st[c], ch_str[c],
                          ev_lookup, ev_sorted, st_lookup, st_sorted, ev_line, ev_meta, ev_start, ev_dur,
                          st_event, st_stat, st_kind, st_value, str_off, str_len)
    out_err[c] = err
    out_err_at[c] = at


@njit(cache=True, nogil=True, parallel=True)
def fill_chunks(buf, ch_line, ch_start, ch_end, ch_ev, ch_st, ch_str, line_ts, ev_lookup, ev_sorted, st_lookup,
                st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off,
                str_len, out_err, out_err_at):
    """Pass 2 over every chunk, chunks in parallel (they write disjoint rows)."""
    for c in prange(ch_line.shape[0]):
        _fill_one(c, buf, ch_line, ch_start, ch_end, ch_ev, ch_st, ch_str, line_ts, ev_lookup, ev_sorted,
                  st_lookup, st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value,
                  str_off, str_len, out_err, out_err_at)


@njit(cache=True, nogil=True)
def fill_chunks_serial(buf, ch_line, ch_start, ch_end, ch_ev, ch_st, ch_str, line_ts, ev_lookup, ev_sorted,
                       st_lookup, st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind,
                       st_value, str_off, str_len, out_err, out_err_at):
    """:func:`fill_chunks` in this thread, for small planes."""
    for c in range(ch_line.shape[0]):
        _fill_one(c, buf, ch_line, ch_start, ch_end, ch_ev, ch_st, ch_str, line_ts, ev_lookup, ev_sorted,
                  st_lookup, st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value,
                  str_off, str_len, out_err, out_err_at)


@njit(cache=True, nogil=True)
def gather_strings(buf, str_off, str_len, pool):
    """Copy the string values' bytes into one compact pool; rewrite offsets to it."""
    p = 0
    for i in range(str_off.shape[0]):
        n = str_len[i]
        o = str_off[i]
        for j in range(n):
            pool[p + j] = buf[o + j]
        str_off[i] = p
        p += n
    return p
