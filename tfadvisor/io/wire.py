"""Decode the protobuf wire format of one XPlane straight into numpy arrays.

A per-event Python loop over protobuf objects costs seconds per million events, so the
hot part of reading (lines, events and their stats) is decoded by C functions
(``tfadvisor/_native.c``, compiled when the package is installed) in two passes over the
plane's bytes: one counts, one fills preallocated columns. Metadata (a few thousand names)
is left to the generated protobuf module.

Every read is bounds-checked: a malformed buffer yields an error code and byte offset,
never a crash. Field numbers are those of ``proto/xplane.proto``.
"""

from __future__ import annotations

import os

import numpy as np

import tfadvisor._native as _native

# The constants the kernels share with this module are defined once, in tfadvisor/_native.c, and exported
# by it: taken from there, never copied.

# Error codes returned by the decoders.
OK = _native.OK
ERR_TRUNCATED = _native.ERR_TRUNCATED
ERR_WIRE_TYPE = _native.ERR_WIRE_TYPE
ERR_VARINT = _native.ERR_VARINT
ERR_FIELD = _native.ERR_FIELD

ERROR_TEXT = {
    # Raised inside a record that the file holds in full: the wire format is corrupt, not cut short.
    ERR_TRUNCATED: "corrupt protobuf wire format (a length runs past the end of its message)",
    ERR_WIRE_TYPE: "invalid protobuf wire type",
    ERR_VARINT: "malformed varint",
    ERR_FIELD: "field with an unexpected wire type",
}

# Line columns (int64 matrix, one row per line).
L_ID, L_DISPLAY_ID, L_TS_NS, L_DUR_PS = _native.L_ID, _native.L_DISPLAY_ID, _native.L_TS_NS, _native.L_DUR_PS
L_NAME_OFF, L_NAME_LEN = _native.L_NAME_OFF, _native.L_NAME_LEN
L_DNAME_OFF, L_DNAME_LEN = _native.L_DNAME_OFF, _native.L_DNAME_LEN
L_FIRST_EVENT, L_N_EVENTS = _native.L_FIRST_EVENT, _native.L_N_EVENTS
N_LINE_COLS = _native.N_LINE_COLS

#: Event starts are ``timestamp_ns * 1000 + offset_ps`` in int64 ps; a start that does not fit is
#: stored as this value (int64's minimum; the reader drops such events with a note).
START_OVERFLOW = _native.START_OVERFLOW
#: The largest line timestamp (ns) whose start in ps fits int64 (int64's maximum // 1000).
MAX_TS_NS = _native.MAX_TS_NS
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


def set_num_threads(n: int | None) -> None:
    """Threads for the parallel decode of large planes (None or <= 0: every CPU this process may use)."""
    _native.set_num_threads(int(n or 0))


def get_num_threads() -> int:
    """Threads the parallel decode uses."""
    return _native.get_num_threads()


# The kernels, compiled ahead of time (tfadvisor/_native.c). Arguments and results as documented
# here; each checks every read against the buffer and every write against its output array.

#: ``scan_fields(buf, start, end, out_field, out_wt, out_off, out_len) -> (count, error, error position)``:
#: the top-level fields of the message ``buf[start:end]`` (field number, wire type, payload offset, payload
#: length or varint value); stops filling at the capacity of the outputs and returns count = capacity + 1
#: or more when more fields exist.
scan_fields = _native.scan_fields

#: Pass 1, ``count_lines(buf, line_off, line_len, lines, chunk_bytes, ch_pos, ch_ev, ch_st, ch_str, ch_base,
#: out_chunks, out_stats, out_strs, out_err, out_err_at[, st_lookup, st_sorted, keep, out_all])``: per line its
#: scalar fields (into ``lines``, a (lines, N_LINE_COLS) int64 matrix), its event/stat/string counts and chunk
#: marks (from ``ch_base[line]``: a mark at the first event that starts at least ``chunk_bytes`` after the
#: previous one, so that pass 2 can fill chunks in parallel); lines on threads (:func:`set_num_threads`). With
#: ``keep`` (uint8 per dense stat id, and a last entry for ids not in the metadata; None: every stat) only the
#: kept stats and their strings are counted, and ``out_all`` gets every stat per line.
count_lines = _native.count_lines
#: :func:`count_lines` in this thread: a parallel launch costs more than a small plane's decode.
count_lines_serial = _native.count_lines_serial

#: Pass 2, ``fill_chunks(buf, ch_line, ch_start, ch_end, ch_ev, ch_st, ch_str, line_ts, ev_lookup, ev_sorted,
#: st_lookup, st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off,
#: str_len, out_err, out_err_at[, keep])``: decode each chunk's events and their stats into preallocated columns
#: (with ``keep`` as in :func:`count_lines`, only the kept stats; the others are read and checked, not stored).
#: Event starts are absolute picoseconds, ``line.timestamp_ns * 1000 + offset_ps`` (:data:`START_OVERFLOW`
#: when that leaves int64); metadata ids become dense indexes into the plane's sorted metadata ids
#: (``*_lookup``: a direct table, ``*_sorted``: binary search; -1 when unknown); string, bytes and gzip
#: values store an index into ``str_off``/``str_len`` (byte ranges of ``buf``). Chunks on threads
#: (they write disjoint rows).
fill_chunks = _native.fill_chunks
#: :func:`fill_chunks` in this thread, for small planes.
fill_chunks_serial = _native.fill_chunks_serial

#: One pass for a small plane, ``decode_serial(buf, line_off, line_len, lines, ev_lookup, ev_sorted, st_lookup,
#: st_sorted, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len[, keep])
#: -> (events, stats, strings, stats read) or None``: each line's own fields (as :func:`count_lines`, without the
#: per-stat count), then its events and stats as :func:`fill_chunks` decodes them, into columns of the caller's
#: capacity; None on any error or a capacity exceeded (the two passes then decode, and report the error).
decode_serial = _native.decode_serial

#: ``gather_strings(buf, str_off, str_len, pool) -> bytes used``: copy the string values' bytes into one
#: compact pool and rewrite the offsets to it.
gather_strings = _native.gather_strings


if os.environ.get("TFADVISOR_NUM_THREADS", "").strip().isdigit():
    set_num_threads(int(os.environ["TFADVISOR_NUM_THREADS"]))
