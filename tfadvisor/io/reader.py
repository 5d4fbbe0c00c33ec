"""Read ``.xplane.pb`` files into a columnar :class:`~tfadvisor.model.trace.Trace`.

A local file is mapped read-only and each XPlane decoded into columns by :mod:`tfadvisor.io.wire`
where it lies, the decode giving the file's pages back as it passes them (a few MiB at a time), so
peak memory is the columns, not the file as well. A remote file (or one that cannot be mapped) is
streamed one XPlane at a time, each plane's bytes read into one buffer and released before the
next. Nothing is ever written next to the input.

Cost is bounded by the input: gzip string stats may inflate to 64 MiB each and 256 MiB per
file; metadata-id lookup tables are sized by the ids in use; a byte-identical repeat of a
small plane is dropped; small planes skip the parallel decode. Impossible event times are
clipped or dropped with a note (:mod:`tfadvisor.io.sanity`, ``Trace.load_notes``).
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

import tfadvisor.io.wire as wire
import tfadvisor.model.kinds as kinds
from tfadvisor.errors import TraceError, one_line
from tfadvisor.io.discovery import RUN_METADATA_FILE, Run, filesystem, host_name, is_remote, resolve
from tfadvisor.io.events import read_events
from tfadvisor.io.runmeta import UNREADABLE_KEY
from tfadvisor.io.sanity import sanitize
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.proto import xplane_pb2

#: A gzip-compressed string stat may expand to at most this many bytes.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
#: All the compressed string stats of one file may expand to at most this many bytes together.
MAX_DECOMPRESSED_TOTAL_BYTES = 256 * 1024 * 1024
#: Direct lookup tables for metadata ids are used up to this many entries...
_MAX_LOOKUP = 1 << 22
#: ... and only when the ids are dense enough: at most this many entries per id (plus a small floor),
#: so that the table's size follows the number of ids, not the largest one.
_LOOKUP_SLOTS_PER_ID = 4
_LOOKUP_FLOOR = 4096
#: A plane whose lines hold fewer bytes than this is decoded in this thread (a parallel launch
#: costs more than such a plane's whole decode).
SERIAL_BELOW_BYTES = 1 << 20
#: Planes up to this size are compared with the file's earlier planes (byte-identical repeats are dropped).
_DEDUP_BELOW_BYTES = 64 * 1024
#: A record claiming more than this many times the file's size is corrupt, not cut short.
_CORRUPT_LENGTH_FACTOR = 16


class InflateBudget:
    """What is left of one file's allowance for inflated (gunzipped) string stats."""

    def __init__(self, total: int | None = None) -> None:
        self.total = MAX_DECOMPRESSED_TOTAL_BYTES if total is None else total
        self.left = self.total


Progress = Callable[[int, int], None]


def load(path, run: str | None = None, progress: Progress | None = None, stats: frozenset[str] | None = None
         ) -> Trace:
    """Load a profile: a logdir (newest run), a run directory, or ``.xplane.pb`` file(s). ``stats``: the
    event-level stat names to keep (the analyses' :func:`~tfadvisor.analyses.event_stats`); None keeps all."""
    chosen = path if isinstance(path, Run) else resolve(path, run=run)
    return load_run(chosen, progress=progress, stats=stats)


def load_run(run: Run, progress: Progress | None = None, hosts: list[str] | None = None,
             stats: frozenset[str] | None = None) -> Trace:
    """Load every host file of ``run`` (or only ``hosts``), keeping the event-level stats named in ``stats``
    (None: all). The others are read and checked but never stored (:func:`decode_lines`): a big trace's kernels
    carry several stats each that no analysis reads (correlation ids, kernel details...)."""
    files = [f for f in run.files if hosts is None or host_name(f) in hosts]
    stats = frozenset(stats) if stats is not None else None  # any iterable of names; a frozenset is a key
    total = sum(_size(f) for f in files)
    done = 0
    planes: list[Plane] = []
    trace = Trace(planes=planes, files=files, run_name=run.name, run_dir=run.directory, file_bytes=total)

    def step(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    # Many planes mean many live objects, and the cyclic GC's full passes over them would cost
    # more than the decode itself (20,000 empty planes: 2.5 s of 3.5 s); loading makes no cycles.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for f in files:
            read_file(f, trace, step, stats)
    finally:
        if gc_was_on:
            gc.enable()
    where = files[0] if len(files) == 1 else f"{run.directory} ({len(files)} host files)"
    n_read = trace.n_events
    if not n_read:  # nothing to analyse: a gate that passed here would pass on a capture of nothing
        raise TraceError(where, f"empty profile: no events in any of its {len(trace.planes)} plane(s) (the "
                                "profiler recorded nothing: was anything run while it was on?)")
    sanitize(trace)
    if not trace.n_events:
        raise TraceError(where, f"no event lies in the capture window: all {n_read:,} start far outside it, "
                                "last longer than it or do not fit in int64 picoseconds")
    trace.run_metadata = read_run_metadata(run.directory)
    trace.events = read_events(run.directory, _written_at(files))
    for note in trace.events.notes:
        for h in trace.hosts:
            trace.load_notes.setdefault(h, []).append(f"events: {note}")
    return trace


def _written_at(files: list[str]) -> float | None:
    """When the profile was written (its local files' newest modification time), None where unknown."""
    try:
        return max(os.path.getmtime(f) for f in files) if files and not any(is_remote(f) for f in files) else None
    except OSError:
        return None


def read_run_metadata(directory: str) -> dict:
    """The run's ``tfadvisor_run.json`` (parameter count, batch size, ...), {} when there is none, or
    ``{UNREADABLE_KEY: why}`` when it cannot be read or is not a JSON object."""
    path = f"{directory.rstrip('/')}/{RUN_METADATA_FILE}"
    try:
        if is_remote(path):
            fs = filesystem(path)
            if not fs.exists(path):
                return {}
            with fs.open(path, "rb") as fh:
                text = fh.read()
        else:
            if not os.path.isfile(path):
                return {}
            with open(path, "rb") as fh:
                text = fh.read()
        data = json.loads(text)
    except (OSError, ValueError, RecursionError) as err:  # RecursionError: absurdly deep nesting
        return {UNREADABLE_KEY: f"{RUN_METADATA_FILE}: unreadable ({type(err).__name__}: {one_line(err)[:200]}): "
                                "ignored, the profile is analysed without it"}
    if not isinstance(data, dict):
        return {UNREADABLE_KEY: f"{RUN_METADATA_FILE}: not a JSON object ({type(data).__name__}): ignored, the "
                                "profile is analysed without it"}
    return data


def _size(path: str) -> int:
    if is_remote(path):
        try:
            return int(filesystem(path).size(path))
        except Exception:  # noqa: BLE001
            return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _open(path: str) -> BinaryIO:
    try:
        if is_remote(path):
            return filesystem(path).open(path, "rb")
        return open(path, "rb")
    except FileNotFoundError:
        raise TraceError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceError(path, "is a directory, not a .xplane.pb file") from None
    except PermissionError:
        raise TraceError(path, "permission denied") from None
    except OSError as err:
        raise TraceError(path, f"cannot open ({err.strerror or err})") from None


def _read_varint(fh: BinaryIO, path: str, where: int) -> tuple[int, int]:
    """Read one varint from a stream; return (value, bytes used); (-1, 0) at clean EOF."""
    value = 0
    shift = 0
    used = 0
    while True:
        b = fh.read(1)
        if not b:
            if used == 0:
                return -1, 0
            raise TraceError(path, f"truncated file (ends inside a field header at byte {where + used})")
        used += 1
        value |= (b[0] & 0x7F) << shift
        if b[0] < 0x80:
            return value, used
        shift += 7
        if shift >= 70:
            raise TraceError(path, f"not an XPlane profile (malformed varint at byte {where})")


#: A truncated file modified this recently may still be being written (TensorFlow writes the whole file
#: when the profiler stops; a large one takes seconds, a gs:// upload longer).
WRITING_RECENT_S = 60.0


def read_file(path: str, trace: Trace, progress: Callable[[int], None] | None = None,
              stats: frozenset[str] | None = None) -> None:
    """Stream one host file into ``trace`` (planes appended). A truncated file that was modified in the last
    :data:`WRITING_RECENT_S` seconds, or that grew while it was read, is reported as incomplete."""
    mtime, size = _stamp(path)
    try:
        _read_file(path, trace, progress, stats)
    except TraceError as err:
        if not err.problem.startswith("truncated"):
            raise
        now_mtime, now_size = _stamp(path)
        age = time.time() - now_mtime if now_mtime is not None else None
        if now_size != size or now_mtime != mtime:
            why = f"it grew from {size:,} to {now_size:,} bytes while being read"
        elif age is not None and age < WRITING_RECENT_S:
            why = f"it was modified in the last {WRITING_RECENT_S:.0f} s"  # not its age: the same file, the same line
        else:
            raise
        raise TraceError(path, f"incomplete file, it may still be being written: {why} ({err.problem}); the "
                               "profiler writes it when it stops: wait for the capture to finish, then analyse "
                               "again") from None


def _stamp(path: str) -> tuple[float | None, int | None]:
    """(mtime, size) of a local file; (None, None) for a remote one or one that is gone."""
    if is_remote(path):
        return None, None
    try:
        st = os.stat(path)
    except OSError:
        return None, None
    return st.st_mtime, st.st_size


def _read_file(path: str, trace: Trace, progress: Callable[[int], None] | None = None,
               stats: frozenset[str] | None = None) -> None:
    host = host_name(path)
    size = _size(path)
    if size == 0 and not is_remote(path):
        raise TraceError(path, "empty file (0 bytes): not a profile")
    with _open(path) as fh:
        head = fh.read(2)
        if head[:2] == b"\x1f\x8b":
            raise TraceError(path, "gzip-compressed data: not an .xplane.pb profile (a legacy trace.json.gz?)")
        if head[:1] in (b"{", b"["):
            raise TraceError(path, "JSON text, not an XPlane profile")
        fh.seek(0)
        mapping = _map(fh, size) if not is_remote(path) else None
        pos = 0
        n_planes = 0
        budget = InflateBudget()
        seen: dict[int, list[np.ndarray]] = {}  # small planes already read, by size: a repeat is dropped
        repeats = 0
        while True:
            tag, used = _read_varint(fh, path, pos)
            if tag < 0:
                break
            field, wt = tag >> 3, tag & 7
            pos += used
            if wt != 2 or field not in (1, 2, 3, 4):
                if field in (1, 2, 3, 4) or wt not in (0, 1, 5):
                    raise TraceError(path, f"not an XPlane profile (unexpected field {field} wire type {wt} "
                                           f"at byte {pos - used})")
                pos += _skip_stream(fh, path, wt, pos)
                continue
            length, used = _read_varint(fh, path, pos)
            if length < 0:
                raise TraceError(path, f"truncated file (ends at byte {pos})")
            pos += used
            if size and pos + length > size:
                if length > _CORRUPT_LENGTH_FACTOR * size:
                    raise TraceError(path, f"corrupt file: the protobuf wire format is corrupt (a record at byte "
                                           f"{pos} claims {length:,} bytes in a file of {size:,})")
                raise TraceError(path, f"truncated file: a record of {length} bytes at byte {pos} runs past "
                                       f"the end ({size} bytes)")
            if field == 1:
                mapped = mapping is not None and pos + length <= len(mapping)
                if mapped:  # the plane's pages, read where decoded and given back behind (no copy of the plane)
                    buf = np.frombuffer(mapping, np.uint8, length, pos)
                    fh.seek(length, os.SEEK_CUR)
                else:
                    buf = np.empty(length, dtype=np.uint8)
                    got = fh.readinto(memoryview(buf)) if hasattr(fh, "readinto") else _read_into(fh, buf)
                    if got != length:
                        raise TraceError(path, f"truncated file (plane at byte {pos} needs {length} bytes, "
                                               f"{got} left)")
                same = seen.setdefault(length, []) if length <= _DEDUP_BELOW_BYTES else None
                if same is not None and any(np.array_equal(buf, b) for b in same):
                    repeats += 1
                else:
                    if same is not None:
                        same.append(buf)
                    trace.planes.append(decode_plane(buf, host, path, pos, budget, stats, release=mapped))
                    if mapped:
                        _drop_pages(mapping, pos, length)
                del buf
                n_planes += 1
            else:
                data = fh.read(length)
                if len(data) != length:
                    raise TraceError(path, f"truncated file at byte {pos}")
                text = data.decode("utf-8", "replace")
                {2: trace.errors, 3: trace.warnings, 4: trace.hostnames}[field].append(text)
            pos += length
            if progress is not None:
                progress(length + used + 1)
        if n_planes == 0:
            raise TraceError(path, "not an XPlane profile (no planes found)")
        if repeats:
            trace.load_notes.setdefault(host, []).append(
                f"{repeats:,} plane(s) byte-identical to an earlier plane of {os.path.basename(path)}: dropped "
                "(a profile holds each plane once)")


def _map(fh: BinaryIO, size: int) -> mmap.mmap | None:
    """The file mapped read-only, so that a plane is decoded where it lies and its pages given back as the decode
    passes them (:func:`decode_plane`'s ``release``): the memory of a load is its columns, not the file's bytes as
    well. None where the file cannot be mapped (a pipe, a special file, a file of under a page): it is read. A file
    cut shorter by another program while it is decoded would stop the process (SIGBUS, as any mapped file): the
    profiler writes its files once, whole, and a file still growing is read up to its size when opened."""
    if size < mmap.PAGESIZE or not hasattr(fh, "fileno"):
        return None
    try:
        return mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None


def _drop_pages(mapping: mmap.mmap, start: int, length: int) -> None:
    """Give back the pages of ``mapping[start:start + length]`` this process holds (read again where touched)."""
    if not hasattr(mmap, "MADV_DONTNEED"):
        return
    lo = start - start % mmap.PAGESIZE
    mapping.madvise(mmap.MADV_DONTNEED, lo, min(start + length, len(mapping)) - lo)


def _read_into(fh: BinaryIO, buf: np.ndarray) -> int:
    data = fh.read(buf.shape[0])
    buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return len(data)


def _skip_stream(fh: BinaryIO, path: str, wt: int, pos: int) -> int:
    """Skip an unknown scalar field of the XSpace; return the bytes skipped."""
    if wt == 0:
        _, used = _read_varint(fh, path, pos)
        return used
    n = 8 if wt == 1 else 4
    if len(fh.read(n)) != n:
        raise TraceError(path, f"truncated file at byte {pos}")
    return n


def _fail(path: str, base: int, code: int, at: int, what: str) -> TraceError:
    return TraceError(path, f"not a valid XPlane profile: {wire.ERROR_TEXT.get(code, 'decode error')} "
                            f"in {what} at byte {base + at}")


def _lookup(sorted_ids: np.ndarray) -> np.ndarray:
    """A direct id -> dense index table when the ids are small and dense, else an empty one (the
    decoder then finds ids by binary search): its size follows the number of ids in use."""
    n = len(sorted_ids)
    if n == 0 or sorted_ids[0] < 0 or sorted_ids[-1] >= min(_MAX_LOOKUP, _LOOKUP_SLOTS_PER_ID * n + _LOOKUP_FLOOR):
        return np.empty(0, dtype=np.int32)
    table = np.full(int(sorted_ids[-1]) + 1, -1, dtype=np.int32)
    table[sorted_ids] = np.arange(len(sorted_ids), dtype=np.int32)
    return table


def decode_plane(buf: np.ndarray, host: str, path: str, base: int = 0, budget: InflateBudget | None = None,
                 stats: frozenset[str] | None = None, release: bool = False) -> Plane:
    """Decode one XPlane's bytes into a :class:`Plane` (``budget``: the file's inflate allowance; ``stats``: the
    event-level stat names kept, None for all). ``release``: ``buf`` lies in a read-only file mapping, whose pages
    the decode gives back as it passes them (never for other memory: its pages would be lost)."""
    budget = budget if budget is not None else InflateBudget()
    end = buf.shape[0]
    cap = 4096
    while True:
        fld, wts, offs, lens, tag_at = np.empty((5, cap), np.int64)
        n, err, at = wire.scan_fields(buf, 0, end, fld, wts, offs, lens, tag_at)
        if err != wire.OK:
            raise _fail(path, base, err, at, "a plane")
        if n <= cap:
            break
        cap = n
    fld, wts, offs, lens, tag_at = fld[:n], wts[:n], offs[:n], lens[:n], tag_at[:n]
    is_line = (fld == 3) & (wts == 2)
    line_off = offs[is_line].copy()
    line_len = lens[is_line].copy()

    # Everything but the lines is small: its records, as they are in the buffer, parsed by protobuf.
    md = _plane_meta(_records(buf, tag_at, np.append(tag_at[1:], end), ~is_line & ((wts == 0) | (wts == 2))),
                     path, base, budget)

    keep = None if stats is None else md.keep_mask(stats)
    cols, skipped = decode_lines(buf, line_off, line_len, md.ev_lut, md.ev_ids, md.st_lut, md.st_ids, path, base,
                                 keep, release)
    lines, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len = cols
    del cols
    n_str = len(str_off)

    view = memoryview(buf)

    def texts(off_col: int, len_col: int) -> np.ndarray:
        out = np.empty(len(lines), dtype=object)
        out[:] = [str(view[o : o + ln], "utf-8", "replace") if ln else ""
                  for o, ln in zip(lines[:, off_col].tolist(), lines[:, len_col].tolist())]
        return out

    line_df = Table(
        {
            "id": lines[:, wire.L_ID],
            "display_id": lines[:, wire.L_DISPLAY_ID],
            "name": texts(wire.L_NAME_OFF, wire.L_NAME_LEN),
            "display_name": texts(wire.L_DNAME_OFF, wire.L_DNAME_LEN),
            "timestamp_ns": lines[:, wire.L_TS_NS],
            "duration_ps": lines[:, wire.L_DUR_PS],
            "first_event": lines[:, wire.L_FIRST_EVENT],
            "n_events": lines[:, wire.L_N_EVENTS],
        },
        n=len(lines),
    )

    pool = np.empty(int(str_len.sum()) if n_str else 0, dtype=np.uint8)
    if n_str:
        wire.gather_strings(buf, str_off, str_len, pool)
        pool = _inflate_gzip_stats(pool, str_off, str_len, st_kind, st_value, path, budget)
    if md.extra_strings:
        pool, str_off, str_len = _append_strings(pool, str_off, str_len, md.extra_strings)
    st_value = narrow_values(st_value)
    meta_stats = md.stats_table(n_str)
    return Plane(
        host=host,
        id=md.id,
        name=md.name,
        lines=line_df,
        event_names=md.event_names.copy(),
        event_display_names=md.event_display.copy(),
        event_meta_ids=md.ev_ids.copy(),
        stat_names=md.stat_names.copy(),
        ev_line=ev_line,
        ev_meta=ev_meta,
        ev_start_ps=ev_start,
        ev_dur_ps=ev_dur,
        st_event=st_event,
        st_stat=st_stat,
        st_kind=st_kind,
        st_value=st_value,
        str_pool=pool,
        str_off=str_off,
        str_len=str_len,
        meta_stats=meta_stats,
        stats=dict(md.plane_stats),
        child_ids={k: list(v) for k, v in md.child_ids.items()},
        kept_stats=stats,
        stats_skipped=skipped,
    )


@dataclass(frozen=True)
class _PlaneMeta:
    """A plane's metadata records decoded: ids, names, lookups, metadata-level stats (strings indexed from 0
    among ``extra_strings``; the plane's own strings come first), plane-level stats. Shared by the planes
    whose records are byte-identical (:func:`_plane_meta`): read-only, copied into each plane."""

    id: int
    name: str
    ev_ids: np.ndarray
    st_ids: np.ndarray
    event_names: np.ndarray
    event_display: np.ndarray
    stat_names: np.ndarray
    ev_lut: np.ndarray
    st_lut: np.ndarray
    meta_dense: np.ndarray
    meta_stat: np.ndarray
    meta_kind: np.ndarray
    meta_raw: np.ndarray
    extra_strings: tuple[bytes, ...]
    child_ids: dict
    plane_stats: dict
    keeps: dict = field(default_factory=dict, compare=False, repr=False)
    tables: dict = field(default_factory=dict, compare=False, repr=False)

    def keep_mask(self, stats: frozenset[str]) -> np.ndarray:
        """Per dense stat id, and a last entry for ids not in the metadata: whether ``stats`` keeps its stats
        (worked out once per set of names: every host of a pod repeats its devices' metadata)."""
        got = self.keeps.get(stats)
        if got is None:
            got = self.keeps[stats] = np.append(np.array([str(n) in stats for n in self.stat_names], bool), False)
            got.setflags(write=False)
        return got

    def stats_table(self, n_str: int) -> Table:
        """The metadata-level stats as a plane with ``n_str`` strings of its own holds them (the metadata's strings
        come after the plane's): read-only, shared by the planes of this metadata with as many strings."""
        got = self.tables.get(n_str)
        if got is None:
            raw = self.meta_raw.copy()
            raw[self.meta_kind == kinds.KIND_STR] += n_str
            cols = {"meta": self.meta_dense.copy(), "stat": self.meta_stat.copy(), "kind": self.meta_kind.copy(),
                    "raw": raw}
            for col in cols.values():
                col.setflags(write=False)
            if len(self.tables) >= 8:  # a plane's string count varies: keep a few
                self.tables.clear()
            got = self.tables[n_str] = Table(cols)
        return got


#: Decoded metadata by its record bytes, at most this many (most recently used kept): the planes of a pod's
#: hosts repeat their devices' metadata byte for byte, so each is parsed once per process.
META_CACHE_ENTRIES = 64
#: Records longer than this are decoded every time (the cache's keys stay small).
META_CACHE_MAX_BYTES = 256 * 1024
_META_CACHE: OrderedDict[bytes, _PlaneMeta] = OrderedDict()


def _plane_meta(records: bytes, path: str, base: int, budget: InflateBudget) -> _PlaneMeta:
    """The decoded metadata of a plane's non-line records; from the cache when the same bytes were decoded
    before without inflating anything (an inflate draws on this file's budget, so it is never skipped)."""
    small = len(records) <= META_CACHE_MAX_BYTES
    if small and records in _META_CACHE:
        _META_CACHE.move_to_end(records)
        return _META_CACHE[records]
    left = budget.left
    md = _decode_meta(records, path, base, budget)
    if small and budget.left == left:
        _META_CACHE[records] = md
        if len(_META_CACHE) > META_CACHE_ENTRIES:
            _META_CACHE.popitem(last=False)
    return md


def _decode_meta(records: bytes, path: str, base: int, budget: InflateBudget) -> _PlaneMeta:
    xp = xplane_pb2.XPlane()
    try:
        xp.ParseFromString(records)
    except Exception as err:  # noqa: BLE001 - protobuf raises DecodeError and others
        raise TraceError(path, f"not a valid XPlane profile: bad plane metadata near byte {base} ({err})") from None
    ev_items = sorted(xp.event_metadata.items())  # by id; one pass over each map (a lookup by key is slower)
    st_items = sorted((k, v.name) for k, v in xp.stat_metadata.items())
    ev_ids = np.array([k for k, _ in ev_items], dtype=np.int64)
    st_ids = np.array([k for k, _ in st_items], dtype=np.int64)
    ev_md = [m for _, m in ev_items]
    ev_lut, st_lut = _lookup(ev_ids), _lookup(st_ids)
    meta_rows = []
    child_ids: dict[int, list[int]] = {}
    extra_strings: list[bytes] = []
    for dense, m in enumerate(ev_md):
        for st in m.stats:
            kind, raw = _pb_stat_value(st, st_lut, st_ids, extra_strings, 0, path, budget)
            meta_rows.append((dense, _dense_id(st_lut, st_ids, st.metadata_id), kind, raw))
        if m.child_id:
            child_ids[dense] = [_dense_id(ev_lut, ev_ids, c) for c in m.child_id]
    arr = np.array(meta_rows, dtype=np.int64).reshape(-1, 4)
    plane_stats = {}
    for st in xp.stats:
        name = xp.stat_metadata[st.metadata_id].name if st.metadata_id in xp.stat_metadata else str(st.metadata_id)
        plane_stats[name] = _pb_stat_python(st, xp, path, budget)
    return _PlaneMeta(
        id=int(xp.id), name=xp.name, ev_ids=ev_ids, st_ids=st_ids,
        event_names=np.array([m.name for m in ev_md], dtype=object),
        event_display=np.array([m.display_name or m.name for m in ev_md], dtype=object),
        stat_names=np.array([n for _, n in st_items], dtype=object), ev_lut=ev_lut, st_lut=st_lut,
        meta_dense=arr[:, 0], meta_stat=arr[:, 1], meta_kind=arr[:, 2].astype(np.uint8), meta_raw=arr[:, 3],
        extra_strings=tuple(extra_strings), child_ids=child_ids, plane_stats=plane_stats)


def _records(buf: np.ndarray, start: np.ndarray, stop: np.ndarray, keep: np.ndarray) -> bytes:
    """The bytes of the records ``keep`` selects (record i: ``buf[start[i]:stop[i]]``), adjacent ones
    copied as one range."""
    start, stop = start[keep], stop[keep]
    if not len(start):
        return b""
    first = np.flatnonzero(np.append(True, start[1:] != stop[:-1]))  # the first record of each run
    last = np.append(first[1:], len(start)) - 1
    return b"".join(buf[a:b].tobytes() for a, b in zip(start[first].tolist(), stop[last].tolist()))


#: The most events (or lines) one plane may hold: its index columns are int32.
INDEX_MAX = 2**31 - 1
#: Pass 2 splits lines into chunks of about this many bytes, filled in parallel.
CHUNK_BYTES = 4 << 20


def decode_lines(buf, line_off, line_len, ev_lut, ev_ids, st_lut, st_ids, path: str, base: int,
                 keep: np.ndarray | None = None, release: bool = False):
    """Both decoding passes over a plane's lines; returns (the line matrix and the columns, the stats skipped).
    ``keep``: per dense stat id (and a last entry for unknown ids), whether its stats are kept; None keeps all.
    A stat not kept is read through and checked in both passes as any other, but never counted, stored nor given a
    string slot, so the stats no analysis reads are never held (a big plane has tens of millions). The index columns
    (ev_line, ev_meta, st_stat) come in their :func:`index_type`s."""
    n_lines = len(line_off)
    lines = np.zeros((n_lines, wire.N_LINE_COLS), dtype=np.int64)
    if n_lines == 0:
        i64 = np.empty(0, np.int64)
        return (lines, np.empty(0, index_type(0)), np.empty(0, index_type(len(ev_ids))), i64, i64.copy(),
                np.empty(0, np.int32), np.empty(0, index_type(len(st_ids))), np.empty(0, np.uint8), i64.copy(),
                i64.copy(), i64.copy()), 0
    serial = int(line_len.sum()) < SERIAL_BELOW_BYTES
    if serial:
        got = _decode_serial(buf, line_off, line_len, lines, ev_lut, ev_ids, st_lut, st_ids, keep)
        if got is not None:
            return got
    count_lines = wire.count_lines_serial if serial else wire.count_lines
    fill_chunks = wire.fill_chunks_serial if serial else wire.fill_chunks
    one_chunk = int(line_len.max()) < CHUNK_BYTES  # every line in one chunk (small planes): no chunk bookkeeping
    max_chunks = np.ones(n_lines, np.int64) if one_chunk else line_len // CHUNK_BYTES + 1
    ch_base = (np.arange(n_lines, dtype=np.int64) if one_chunk
               else np.concatenate([[0], np.cumsum(max_chunks)[:-1]]).astype(np.int64))
    total = n_lines if one_chunk else int(max_chunks.sum())
    ch_pos, ch_ev, ch_st, ch_str = (np.zeros(total, np.int64) for _ in range(4))
    n_chunks, n_stats, n_strs, errs, err_at, n_all = (np.zeros(n_lines, np.int64) for _ in range(6))
    # keep: the stats kept are the only ones counted, filled and given string slots (the others are read through
    # and checked, never stored)
    keep_u8 = None if keep is None else np.ascontiguousarray(keep, np.uint8)
    count_lines(buf, line_off, line_len, lines, CHUNK_BYTES, ch_pos, ch_ev, ch_st, ch_str, ch_base,
                n_chunks, n_stats, n_strs, errs, err_at, st_lut, st_ids, keep_u8, n_all, release)
    bad = np.flatnonzero(errs)
    if len(bad):
        raise _fail(path, base, int(errs[bad[0]]), int(err_at[bad[0]]), "a line")
    n_events = lines[:, wire.L_N_EVENTS]
    ev_base = np.concatenate([[0], np.cumsum(n_events)]).astype(np.int64)
    st_base = np.concatenate([[0], np.cumsum(n_stats)]).astype(np.int64)
    str_base = np.concatenate([[0], np.cumsum(n_strs)]).astype(np.int64)
    lines[:, wire.L_FIRST_EVENT] = ev_base[:-1]
    # Flatten the chunk marks: chunk c of line li covers [mark c, mark c+1 or the line's end).
    if one_chunk and bool(np.all(n_chunks == 1)):
        line_of = idx = ch_base
        start = ch_pos
        end = line_off + line_len
    else:
        line_of = np.repeat(np.arange(n_lines, dtype=np.int64), n_chunks)
        within = np.arange(len(line_of), dtype=np.int64) - np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
        idx = ch_base[line_of] + within
        start = ch_pos[idx]
        last = within == n_chunks[line_of] - 1
        end = np.where(last, (line_off + line_len)[line_of], np.append(start[1:], 0))
    n_ev, n_st, n_str = int(ev_base[-1]), int(st_base[-1]), int(str_base[-1])
    if max(n_ev, n_lines) > INDEX_MAX:  # the int32 index columns (the kernels refuse it too, later)
        what = f"{n_ev:,} events" if n_ev > INDEX_MAX else f"{n_lines:,} lines"
        raise TraceError(path, f"one plane holds {what}: more than tfadvisor's index columns hold "
                               f"({INDEX_MAX:,}); split the capture into shorter windows")
    # the index columns in their narrow types from the start (the kernel writes any of them): no int32 column of
    # every event written only to be narrowed (a 4 GB trace's would be 1 GB of memory touched and given back)
    ev_line = np.empty(n_ev, index_type(n_lines))
    ev_meta = np.empty(n_ev, index_type(len(ev_ids)))
    ev_start = np.empty(n_ev, np.int64)
    ev_dur = np.empty(n_ev, np.int64)
    line_ts = lines[:, wire.L_TS_NS].copy()
    ev_b, st_b, str_b = ev_base[line_of] + ch_ev[idx], st_base[line_of] + ch_st[idx], str_base[line_of] + ch_str[idx]
    st_event, st_value = np.empty(n_st, np.int32), np.empty(n_st, np.int64)
    st_stat = np.empty(n_st, index_type(len(st_ids)))
    st_kind = np.empty(n_st, np.uint8)
    str_off, str_len = np.empty(n_str, np.int64), np.empty(n_str, np.int64)
    c_err = np.zeros(len(line_of), np.int64)
    c_at = np.zeros(len(line_of), np.int64)
    fill_chunks(buf, line_of, start, end, ev_b, st_b, str_b, line_ts, ev_lut, ev_ids, st_lut, st_ids, ev_line,
                ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len, c_err, c_at, keep_u8,
                release)
    bad = np.flatnonzero(c_err)
    if len(bad):
        raise _fail(path, base, int(c_err[bad[0]]), int(c_at[bad[0]]), "an event")
    skipped = int(n_all.sum()) - n_st
    return (lines, ev_line, ev_meta, ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len), \
        skipped


def _decode_serial(buf, line_off, line_len, lines, ev_lut, ev_ids, st_lut, st_ids, keep):
    """A small plane's lines in one pass (:func:`wire.decode_serial`) into columns of a capacity no plane exceeds
    (every event, stat or string value is a sub-message of two bytes at least), then cut to size: what
    :func:`decode_lines` returns, or None where the bytes hold an error or the plane more rows than the index columns
    hold (the two passes then report it)."""
    cap = int(line_len.sum()) // 2 + 1
    ev_line, ev_meta, st_event, st_stat = np.empty((4, cap), np.int32)  # rows: contiguous, cut to size below
    ev_start, ev_dur, st_value, str_off, str_len = np.empty((5, cap), np.int64)
    st_kind = np.empty(cap, np.uint8)
    keep_u8 = None if keep is None else np.ascontiguousarray(keep, np.uint8)
    got = wire.decode_serial(buf, line_off, line_len, lines, ev_lut, ev_ids, st_lut, st_ids, ev_line, ev_meta,
                             ev_start, ev_dur, st_event, st_stat, st_kind, st_value, str_off, str_len, keep_u8)
    if got is None or max(got[0], lines.shape[0]) > INDEX_MAX:  # the two passes report either
        lines[:] = 0
        return None
    n_ev, n_st, n_str, n_all = got
    lines[:, wire.L_FIRST_EVENT] = np.cumsum(lines[:, wire.L_N_EVENTS]) - lines[:, wire.L_N_EVENTS]
    # cut to size, the index columns to their narrow type in the same copy
    cols = (lines, ev_line[:n_ev].astype(index_type(lines.shape[0])), ev_meta[:n_ev].astype(index_type(len(ev_ids))),
            ev_start[:n_ev].copy(), ev_dur[:n_ev].copy(), st_event[:n_st].copy(),
            st_stat[:n_st].astype(index_type(len(st_ids))), st_kind[:n_st].copy(), st_value[:n_st].copy(),
            str_off[:n_str].copy(), str_len[:n_str].copy())
    return cols, n_all - n_st


def narrow_values(col: np.ndarray) -> np.ndarray:
    """The stat payloads as int32 where every one lies in int32's range (references, ids, counts: 4 bytes a stat
    saved on a big device's millions), else as they are. Exact: int32 back to int64 gives the same integer, so the
    same bits of a double or an unsigned value (:meth:`Plane.stat_columns` gives them back as int64)."""
    if col.dtype.itemsize <= 4 or not col.shape[0]:
        return col
    lo = hi = 0
    for i in range(0, col.shape[0], _VALUE_SLICE):  # no mask of every value
        part = col[i:i + _VALUE_SLICE]
        lo, hi = min(lo, int(part.min())), max(hi, int(part.max()))
        if lo < -(1 << 31) or hi >= 1 << 31:
            return col
    return col.astype(np.int32)


_VALUE_SLICE = 1 << 22


def index_type(n: int) -> np.dtype:
    """The narrowest signed type that holds the values [-1, n) (int32 at most): the type a plane's ``ev_line`` (by its
    lines), ``ev_meta`` and ``st_stat`` (by its event and stat metadata) are decoded in. The kernels read every signed
    width in place (``_native``'s index arrays)."""
    return next((dt for top, dt in _NARROW if n <= top), _INT32)


#: (the most values, the type that holds them and -1) for :func:`index_type`, narrowest first.
_NARROW = ((127, np.dtype(np.int8)), (32767, np.dtype(np.int16)))
_INT32 = np.dtype(np.int32)


def _dense_id(lut: np.ndarray, ids: np.ndarray, key: int) -> int:
    if 0 <= key < len(lut):
        return int(lut[key])
    if not _I64_MIN <= key <= _I64_MAX:  # a uint64 ref_value above int64: no such id
        return -1
    i = int(np.searchsorted(ids, np.int64(key)))
    return i if i < len(ids) and ids[i] == key else -1


_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_MIB = 1024 * 1024


def inflate(data: bytes, path: str, budget: InflateBudget | None = None) -> bytes:
    """Gunzip a compressed stat payload, refusing to expand past the per-stat bound or past what is
    left of the file's ``budget`` (it never inflates more than that)."""
    limit = MAX_DECOMPRESSED_BYTES if budget is None else min(MAX_DECOMPRESSED_BYTES, budget.left)
    d = zlib.decompressobj(wbits=47)  # gzip or zlib header
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as err:
        raise TraceError(path, f"corrupt gzip payload in a compressed string stat ({err})") from None
    if len(out) > limit or d.unconsumed_tail:
        if limit < MAX_DECOMPRESSED_BYTES and budget is not None:
            raise TraceError(path, f"the compressed string stats expand beyond {budget.total // _MIB} MiB in "
                                   "total: refusing them")
        raise TraceError(path, f"a compressed string stat expands beyond {MAX_DECOMPRESSED_BYTES // _MIB} MiB: "
                               "refusing it")
    if budget is not None:
        budget.left -= len(out)
    return out


def _inflate_gzip_stats(pool, str_off, str_len, st_kind, st_value, path, budget: InflateBudget) -> np.ndarray:
    """Inflate the gzip string values and append them to the pool (one copy of each, no join)."""
    gz = np.flatnonzero(st_kind == kinds.KIND_GZIP)
    if not len(gz):
        return pool
    extra = []
    for row in gz.tolist():
        idx = int(st_value[row])
        o, n = int(str_off[idx]), int(str_len[idx])
        extra.append((idx, inflate(pool[o : o + n].tobytes(), path, budget)))
    start = pool.shape[0]
    out = np.empty(start + sum(len(e[1]) for e in extra), dtype=np.uint8)
    out[:start] = pool
    del pool
    extra.reverse()
    while extra:
        idx, data = extra.pop()  # released as soon as it is copied
        out[start : start + len(data)] = np.frombuffer(data, dtype=np.uint8)
        str_off[idx] = start
        str_len[idx] = len(data)
        start += len(data)
        del data
    st_kind[gz] = kinds.KIND_STR
    return out


def _append_strings(pool, str_off, str_len, extra: list[bytes]):
    start = pool.shape[0]
    lens = np.array([len(e) for e in extra], dtype=np.int64)
    offs = start + np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    pool = np.concatenate([pool, np.frombuffer(b"".join(extra), dtype=np.uint8)])
    return pool, np.concatenate([str_off, offs]), np.concatenate([str_len, lens])


def _pb_stat_value(s, st_lut, st_ids, extra_strings: list[bytes], first_index: int, path: str,
                   budget: InflateBudget | None = None) -> tuple[int, int]:
    """(kind, raw) for a metadata-level XStat; strings are queued in ``extra_strings``.

    A string's raw value is its index in the plane's string table once the queued
    strings are appended after the ``first_index`` strings the events already use.
    """
    which = s.WhichOneof("value")
    if which == "double_value":
        return kinds.KIND_DOUBLE, int(np.float64(s.double_value).view(np.int64))
    if which == "uint64_value":
        return kinds.KIND_UINT64, int(np.uint64(s.uint64_value).view(np.int64))
    if which == "int64_value":
        return kinds.KIND_INT64, int(s.int64_value)
    if which == "ref_value":
        return kinds.KIND_REF, _dense_id(st_lut, st_ids, int(s.ref_value))
    if which in ("str_value", "bytes_value", "compressed_str_value"):
        if which == "str_value":
            data = s.str_value.encode()
        elif which == "bytes_value":
            data = s.bytes_value
        else:
            data = inflate(s.compressed_str_value, path, budget)
        extra_strings.append(data)
        return kinds.KIND_STR, first_index + len(extra_strings) - 1
    return kinds.KIND_NONE, 0


def _pb_stat_python(s, xp, path: str, budget: InflateBudget | None = None):
    which = s.WhichOneof("value")
    if which == "ref_value":
        ref = int(s.ref_value)
        md = xp.stat_metadata.get(ref) if ref <= _I64_MAX else None  # map keys are int64
        return md.name if md is not None else ""
    if which == "compressed_str_value":
        return inflate(s.compressed_str_value, path, budget).decode("utf-8", "replace")
    if which == "bytes_value":
        return s.bytes_value
    return getattr(s, which) if which else None
