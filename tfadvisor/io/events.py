"""Read the TensorBoard event files beside a profile: what they say of the program, without TensorFlow.

The Keras ``TensorBoard`` callback writes ``<log_dir>/train/events.out.tfevents.*`` (and ``validation/``) and its
profile under ``<log_dir>/train/plugins/profile/<run>/``. From the files there (:func:`event_files`) this module
takes (:class:`~tfadvisor.model.program.EventFacts`):

* the Keras model's config: the summary of plugin ``graph_keras_model`` (``model.to_json()``: layers, their
  classes, units, dtype policies, nested models);
* the graphs' function libraries: ``graph_def`` events (``tf.summary.graph``) and the ``graph_run_metadata_graph``
  summaries of ``tf.summary.trace_export`` (a ``RunMetadata``): each function's nodes and op types, and which
  function each call node (``StatefulPartitionedCall`` and its ``f`` attribute) runs, so an op named
  ``StatefulPartitionedCall/...`` in the trace is known to come from ``__inference_train_function_1234``;
* the scalars' tags (``epoch_loss``, ``epoch_auc``, ...): the compiled loss's and metrics' names.

A file is TFRecord framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data), each record an
``Event`` protobuf, decoded with a minimal descriptor of the few fields used (:func:`_messages`; other fields are
skipped as unknown). Bounded: at most :data:`MAX_FILES` files, :data:`MAX_FILE_BYTES` of each and
:data:`MAX_TOTAL_BYTES` in all are read. A bad record (a wrong CRC, a file cut short, a record that is no Event)
is a note, never an error; nothing is written.
"""

from __future__ import annotations

import functools
import json
import os
import re
import struct
from typing import Any

import numpy as np

from tfadvisor.errors import one_line
from tfadvisor.io.discovery import filesystem, is_remote
from tfadvisor.model.program import EventFacts

#: Event files are named ``events.out.tfevents.<unix time>.<host>.<pid>.<n>[.v2]``.
PREFIX = "events.out.tfevents."
#: At most this many files are read (the nearest to the profile first) ...
MAX_FILES = 8
#: ... at most this many bytes of each (the rest is left, with a note) ...
MAX_FILE_BYTES = 16 << 20
#: ... and this many in all.
MAX_TOTAL_BYTES = 32 << 20
#: Directories listed while looking for the files: no more entries than this are read of each.
MAX_LISTED = 2000
#: Function bodies kept: at most this many nodes in all (a big model's library holds thousands per function).
MAX_NODES = 500_000
#: How deep calls inside called functions are followed.
MAX_CALL_DEPTH = 8
#: Scalar tags kept per directory.
MAX_TAGS = 1000
#: Records read of each file (the model's config and graphs come first; a scalar per batch makes many).
MAX_RECORDS = 50_000
#: Writer directories the Keras callback makes: from one of them the search goes up to the logdir and its others.
WRITER_DIRS = ("train", "validation")
#: Op types that call a function named by their ``f`` attribute.
CALL_ATTRS = ("f",)

KERAS_PLUGIN = "graph_keras_model"
RUN_METADATA_PLUGIN = "graph_run_metadata_graph"
SCALARS_PLUGIN = "scalars"


# --------------------------------------------------------------------------- CRC-32C (Castagnoli), vectorised


@functools.cache
def _table() -> np.ndarray:
    t = np.zeros(256, np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        t[i] = c
    return t


#: Long segments are cut into rows of this many bytes, each row's CRC found side by side with the others.
_ROW = 1024
#: Rows are worked this many byte cells at a time.
_CELLS = 1 << 21


def _raw(rows: np.ndarray) -> np.ndarray:
    """The CRC register (from 0, no final XOR) of each row of ``rows`` (n x P bytes), one numpy step per column."""
    t = _table()
    cols = np.ascontiguousarray(rows.T)
    r = np.zeros(rows.shape[0], np.uint32)
    for j in range(cols.shape[0]):
        r = t[(r ^ cols[j]) & 0xFF] ^ (r >> 8)
    return r


@functools.cache
def _shift_tables() -> np.ndarray:
    """The register after :data:`_ROW` zero bytes (a linear map), as four byte tables: ``T[k][b]`` is the image of
    byte ``b`` in position ``k`` of the register."""
    t = _table()
    r = np.array([1 << k for k in range(32)], np.uint32)
    for _ in range(_ROW):
        r = t[r & 0xFF] ^ (r >> 8)
    bits = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(bool)  # byte -> its bits
    tables = np.zeros((4, 256), np.uint32)
    for k in range(4):
        cols = r[8 * k:8 * k + 8]
        tables[k] = np.bitwise_xor.reduce(np.where(bits, cols[None, :], np.uint32(0)), axis=1)
    return tables


def _crc_small(data: bytes) -> int:
    t, c = _table(), 0xFFFFFFFF
    for b in data:
        c = int(t[(c ^ b) & 0xFF]) ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def crc32c_many(buf: bytes | memoryview, segments: list[tuple[int, int]] | np.ndarray) -> np.ndarray:
    """The CRC-32C of each ``buf[off:off + n]`` for ``(off, n)`` in ``segments`` (uint32).

    The CRC is linear: leading zero bytes leave a zero register as it is, and the usual initial register
    (``0xFFFFFFFF``) is the same as flipping the data's first four bytes. So each segment is right-aligned in a row
    of zeros, its first four bytes flipped, and the rows of a length class are worked side by side (one numpy step
    per byte column); a long segment is cut into rows of :data:`_ROW` bytes whose registers are then chained (each
    shifted over the next row's bytes: a linear map, applied by byte tables)."""
    data = np.frombuffer(buf, np.uint8)
    seg = np.asarray(segments, np.int64).reshape(-1, 2)
    out = np.zeros(seg.shape[0], np.uint32)
    off, n = seg[:, 0], seg[:, 1]
    for i in np.flatnonzero(n < 4).tolist():
        out[i] = _crc_small(bytes(data[off[i]:off[i] + n[i]]))
    # rows: (segment, offset, length); a long segment's first row holds what is left over a whole number of rows
    long = np.flatnonzero(n > _ROW)
    first = np.where(n % _ROW == 0, _ROW, n % _ROW)
    k = 1 + (n - first) // _ROW  # rows per segment (1 up to _ROW bytes)
    rseg = np.flatnonzero(n >= 4)
    rseg = np.repeat(rseg, k[rseg])
    within = np.arange(rseg.shape[0]) - np.repeat(np.cumsum(k[n >= 4]) - k[n >= 4], k[n >= 4])
    roff = np.where(within == 0, off[rseg], off[rseg] + first[rseg] + (within - 1) * _ROW)
    rlen = np.where(within == 0, first[rseg], _ROW)
    width = np.where(n[rseg] > _ROW, _ROW, np.maximum(8, 1 << np.ceil(np.log2(np.maximum(rlen, 1))).astype(np.int64)))
    raw = np.zeros(rseg.shape[0], np.uint32)
    for w in np.unique(width).tolist():
        every = np.flatnonzero(width == w)
        col = np.arange(w)[None, :]
        for lo in range(0, every.shape[0], max(1, _CELLS // w)):  # a few MiB of cells at a time
            rows = every[lo:lo + max(1, _CELLS // w)]
            full = rlen[rows] == w
            mat = np.zeros((rows.shape[0], w), np.uint8)
            mat[full] = data[roff[rows[full]][:, None] + col]
            part = np.flatnonzero(~full)
            if part.shape[0]:  # rows shorter than the width: right-aligned
                lead = (w - rlen[rows[part]])[:, None]
                idx = roff[rows[part]][:, None] + col - lead
                mat[part] = np.where(col >= lead, data[np.clip(idx, 0, data.shape[0] - 1)], 0)
            head = np.flatnonzero(roff[rows] < off[rseg[rows]] + 4)  # rows holding a segment's first four bytes
            if head.shape[0]:  # flipped: the initial register
                lead = (w - rlen[rows[head]])[:, None]
                idx = roff[rows[head]][:, None] + col - lead
                flip = (col >= lead) & (idx < off[rseg[rows[head]]][:, None] + 4)
                mat[head] ^= np.where(flip, 0xFF, 0).astype(np.uint8)
            raw[rows] = _raw(mat)
    single = np.flatnonzero(n[rseg] <= _ROW)
    out[rseg[single]] = raw[single] ^ np.uint32(0xFFFFFFFF)
    if long.shape[0]:
        t0, t1, t2, t3 = (t.tolist() for t in _shift_tables())
        starts = np.cumsum(k[n >= 4]) - k[n >= 4]  # each segment's first row, among the rows
        at = dict(zip(np.flatnonzero(n >= 4).tolist(), starts.tolist()))
        for i in long.tolist():
            acc = 0
            for x in raw[at[i]:at[i] + int(k[i])].tolist():
                acc = t0[acc & 0xFF] ^ t1[(acc >> 8) & 0xFF] ^ t2[(acc >> 16) & 0xFF] ^ t3[acc >> 24] ^ x
            out[i] = acc ^ 0xFFFFFFFF
    return out


def masked(crc: int | np.ndarray) -> int | np.ndarray:
    """TFRecord's masked CRC: rotated right by 15 bits plus a constant."""
    if isinstance(crc, np.ndarray):
        c = crc.astype(np.uint64)
        return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    crc = int(crc)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(buf: bytes, name: str, notes: list[str], complete: bool = True) -> list[tuple[int, int]]:
    """The ``(offset, length)`` of each good record's data in ``buf`` (a TFRecord file or its first part), at most
    :data:`MAX_RECORDS`; what is wrong is added to ``notes``: a length whose CRC is wrong ends the file (what follows
    cannot be framed), a data CRC that is wrong leaves that record out. ``complete``: ``buf`` is the whole file (an
    end cut short is said)."""
    heads: list[int] = []
    pos, size = 0, len(buf)
    cut = ""
    overlong = -1  # a header whose length runs past the end
    unpack = struct.unpack_from
    while pos < size and len(heads) < MAX_RECORDS:
        if size - pos < 12:
            cut = f"{size - pos} byte(s) after the last record (a record cut short)"
            break
        (n,) = unpack("<Q", buf, pos)
        heads.append(pos)
        if n > size - pos - 16:
            overlong = pos
            break
        pos += 16 + n
    if len(heads) >= MAX_RECORDS and pos < size:
        notes.append(f"{name}: only its first {MAX_RECORDS:,} records read")
    h = np.array(heads, np.int64)
    view = np.frombuffer(buf, np.uint8)

    def u32(at: np.ndarray) -> np.ndarray:
        if not at.shape[0]:
            return np.zeros(0, np.uint64)
        b = view[at[:, None] + np.arange(4)[None, :]].astype(np.uint64)
        return b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16) | (b[:, 3] << 24)

    lengths = u32(h) | (u32(h + 4) << np.uint64(32)) if h.shape[0] else np.zeros(0, np.uint64)
    ok = masked(crc32c_many(buf, np.stack([h, np.full_like(h, 8)], 1))) == u32(h + 8)
    bad = np.flatnonzero(~ok)
    if bad.shape[0]:
        notes.append(f"{name}: record at byte {int(h[bad[0]]):,}: its length's CRC is wrong (a corrupt file): the "
                     "rest of the file is not read")
        h, lengths, cut = h[:bad[0]], lengths[:bad[0]], ""
    elif overlong >= 0:
        h, lengths = h[:-1], lengths[:-1]
        if complete:
            cut = f"a record at byte {overlong:,} runs past the end (a record cut short)"
    if cut and complete:
        notes.append(f"{name}: {cut}: the records before it are read")
    n = lengths.astype(np.int64)
    good = masked(crc32c_many(buf, np.stack([h + 12, n], 1))) == u32(h + 12 + n)
    wrong = np.flatnonzero(~good)
    if wrong.shape[0]:
        notes.append(f"{name}: {wrong.shape[0]} record(s) with a wrong data CRC left out (the first at byte "
                     f"{int(h[wrong[0]]):,})")
    return list(zip((h[good] + 12).tolist(), n[good].tolist()))


# --------------------------------------------------------------------------- the Event protobuf, minimal


@functools.cache
def _messages() -> dict[str, Any]:
    """Message classes for the fields read of TensorFlow's ``Event``, ``Summary``, ``TensorProto``, ``GraphDef``,
    ``FunctionDefLibrary`` and ``RunMetadata`` (field numbers as in TensorFlow's ``.proto`` files), in a pool of
    their own (package ``tfadvisor.events``: no clash with TensorFlow's modules in one process). Strings are read as
    bytes (a name that is not UTF-8 is no decode error)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    msgs = {
        "Event": [("wall_time", 1, F.TYPE_DOUBLE, one, ""), ("step", 2, F.TYPE_INT64, one, ""),
                  ("file_version", 3, F.TYPE_BYTES, one, ""), ("graph_def", 4, F.TYPE_BYTES, one, ""),
                  ("summary", 5, F.TYPE_MESSAGE, one, "Summary"),
                  ("tagged_run_metadata", 8, F.TYPE_MESSAGE, one, "TaggedRunMetadata")],
        "TaggedRunMetadata": [("tag", 1, F.TYPE_BYTES, one, ""), ("run_metadata", 2, F.TYPE_BYTES, one, "")],
        "Summary": [("value", 1, F.TYPE_MESSAGE, many, "Value")],
        "Value": [("tag", 1, F.TYPE_BYTES, one, ""), ("simple_value", 2, F.TYPE_FLOAT, one, ""),
                  ("node_name", 7, F.TYPE_BYTES, one, ""), ("tensor", 8, F.TYPE_MESSAGE, one, "TensorProto"),
                  ("metadata", 9, F.TYPE_MESSAGE, one, "SummaryMetadata")],
        "SummaryMetadata": [("plugin_data", 1, F.TYPE_MESSAGE, one, "PluginData")],
        "PluginData": [("plugin_name", 1, F.TYPE_BYTES, one, ""), ("content", 2, F.TYPE_BYTES, one, "")],
        "TensorProto": [("dtype", 1, F.TYPE_INT32, one, ""), ("string_val", 8, F.TYPE_BYTES, many, "")],
        "GraphDef": [("node", 1, F.TYPE_MESSAGE, many, "NodeDef"),
                     ("library", 2, F.TYPE_MESSAGE, one, "FunctionDefLibrary")],
        "NodeDef": [("name", 1, F.TYPE_BYTES, one, ""), ("op", 2, F.TYPE_BYTES, one, ""),
                    ("attr", 5, F.TYPE_MESSAGE, many, "AttrEntry")],
        "AttrEntry": [("key", 1, F.TYPE_BYTES, one, ""), ("value", 2, F.TYPE_MESSAGE, one, "AttrValue")],
        "AttrValue": [("func", 10, F.TYPE_MESSAGE, one, "NameAttrList")],
        "NameAttrList": [("name", 1, F.TYPE_BYTES, one, "")],
        "FunctionDefLibrary": [("function", 1, F.TYPE_MESSAGE, many, "FunctionDef")],
        "FunctionDef": [("signature", 1, F.TYPE_MESSAGE, one, "OpDef"),
                        ("node_def", 3, F.TYPE_MESSAGE, many, "NodeDef")],
        "OpDef": [("name", 1, F.TYPE_BYTES, one, "")],
        "RunMetadata": [("partition_graphs", 3, F.TYPE_MESSAGE, many, "GraphDef"),
                        ("function_graphs", 4, F.TYPE_MESSAGE, many, "FunctionGraphs")],
        "FunctionGraphs": [("partition_graphs", 1, F.TYPE_MESSAGE, many, "GraphDef"),
                           ("pre_optimization_graph", 2, F.TYPE_MESSAGE, one, "GraphDef"),
                           ("post_optimization_graph", 3, F.TYPE_MESSAGE, one, "GraphDef")],
    }
    pkg = "tfadvisor.events"
    fd = descriptor_pb2.FileDescriptorProto(name="tfadvisor/events_min.proto", package=pkg, syntax="proto2")
    for name, fields in msgs.items():
        m = fd.message_type.add(name=name)
        for fname, number, typ, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=typ, label=label)
            if type_name:
                f.type_name = f".{pkg}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{pkg}.{name}")) for name in msgs}


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


# --------------------------------------------------------------------------- finding the files


def _join(d: str, name: str) -> str:
    return f"{d.rstrip('/')}/{name}" if is_remote(d) else os.path.join(d, name)


def _parent(d: str) -> str:
    return d.rstrip("/").rsplit("/", 1)[0] if is_remote(d) else os.path.dirname(os.path.normpath(d))


def _base(d: str) -> str:
    return d.rstrip("/").rsplit("/", 1)[-1] if is_remote(d) else os.path.basename(os.path.normpath(d))


def _listdir(d: str) -> list[tuple[str, bool, float]]:
    """(name, is a directory, modification time or 0) of at most :data:`MAX_LISTED` entries of ``d``."""
    out: list[tuple[str, bool, float]] = []
    try:
        if is_remote(d):
            for e in filesystem(d).ls(d, detail=True)[:MAX_LISTED]:
                out.append((str(e.get("name", "")).rstrip("/").rsplit("/", 1)[-1], e.get("type") == "directory", 0.0))
            return out
        with os.scandir(d) as it:
            for e in it:
                if len(out) >= MAX_LISTED:
                    break
                try:
                    out.append((e.name, e.is_dir(), e.stat().st_mtime if e.is_file() else 0.0))
                except OSError:
                    continue
    except Exception:  # noqa: BLE001 - a directory that cannot be listed holds no file we can read
        return []
    return out


def _stamp(name: str) -> float | None:
    """The unix time in an event file's name (when its writer was made), None where it has none."""
    m = re.match(re.escape(PREFIX) + r"(\d+(?:\.\d+)?)", name)
    return float(m.group(1)) if m else None


def _newest(names: list[str], before: float | None) -> str | None:
    """The event file of a directory that belongs to the profile: the newest made before it was written (a writer
    made later wrote another run's)."""
    stamped = [(_stamp(n), n) for n in names]
    if before is not None and all(s is not None for s, _ in stamped):
        stamped = [(s, n) for s, n in stamped if s is not None and s <= before + 1]
    if not stamped:
        return None
    return max(stamped, key=lambda x: (x[0] or 0.0, x[1]))[1]


def event_files(run_dir: str, profile_time: float | None = None) -> list[tuple[str, str]]:
    """``(path, directory label)`` of the event files that belong to the profile in ``run_dir``, nearest first.

    The directory the profile's ``plugins/profile/<run>`` lies in (the Keras callback's ``<log_dir>/train``, or the
    logdir itself), its subdirectories (``train``, ``validation``), and where that directory is a Keras writer's
    (``train``) the logdir above it and its other subdirectories; one file per directory, the newest made before
    ``profile_time`` (unix seconds) where the names say when."""
    d = run_dir.rstrip("/") if is_remote(run_dir) else os.path.normpath(run_dir)
    base = d
    if _base(_parent(d)) == "profile" and _base(_parent(_parent(d))) == "plugins":
        base = _parent(_parent(_parent(d)))
    dirs: list[tuple[str, str]] = [(base, _base(base) or ".")]
    listing = _listdir(base)
    dirs += [(_join(base, n), n) for n, is_dir, _ in sorted(listing) if is_dir and n != "plugins"][:32]
    if _base(base) in WRITER_DIRS:
        top = _parent(base)
        if top and top != base:
            dirs.append((top, "."))
            dirs += [(_join(top, n), n) for n, is_dir, _ in sorted(_listdir(top))
                     if is_dir and n != _base(base) and n != "plugins"][:32]
    out: list[tuple[str, str]] = []
    for where, label in dirs:
        names = [n for n, is_dir, _ in (listing if where == base else _listdir(where))
                 if not is_dir and n.startswith(PREFIX)]
        chosen = _newest(names, profile_time)
        if chosen is not None:
            out.append((_join(where, chosen), label))
        if len(out) >= MAX_FILES:
            break
    return out


def _read(path: str, limit: int) -> tuple[bytes, bool]:
    """The first ``limit`` bytes of ``path`` and whether that is the whole file."""
    if is_remote(path):
        with filesystem(path).open(path, "rb") as fh:
            data = fh.read(limit + 1)
    else:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    return data[:limit], len(data) <= limit


# --------------------------------------------------------------------------- what the events say


def read_events(run_dir: str, profile_time: float | None = None) -> EventFacts:
    """The program's facts in the event files beside the profile in ``run_dir`` (:func:`event_files`); an empty
    :class:`EventFacts` where there are none. Never raises for a bad file: its problems are ``notes``."""
    facts = EventFacts()
    try:
        found = event_files(run_dir, profile_time)
    except Exception as err:  # noqa: BLE001 - finding no file is never a reason to fail the profile
        facts.notes.append(f"event files: not searched ({type(err).__name__}: {one_line(err)[:200]})")
        return facts
    left = MAX_TOTAL_BYTES
    for path, label in found:
        name = f"{label}/{path.replace(os.sep, '/').rsplit('/', 1)[-1]}"
        if left <= 0:
            facts.notes.append(f"{name}: not read (the event files' {MAX_TOTAL_BYTES >> 20} MiB were read)")
            continue
        limit = min(MAX_FILE_BYTES, left)
        try:
            buf, whole = _read(path, limit)
        except Exception as err:  # noqa: BLE001
            facts.notes.append(f"{name}: unreadable ({type(err).__name__}: {one_line(err)[:200]})")
            continue
        left -= len(buf)
        if not whole:
            facts.notes.append(f"{name}: only its first {limit >> 20} MiB read")
        facts.files.append(name)
        _scan(buf, name, label, facts, whole)
    return facts


def _scan(buf: bytes, name: str, label: str, facts: EventFacts, whole: bool) -> None:
    """Add what the records of one file say to ``facts``."""
    msgs = _messages()
    not_events = 0
    tags = facts.scalar_tags.setdefault(label, [])
    for off, n in records(buf, name, facts.notes, complete=whole):
        try:
            ev = msgs["Event"].FromString(buf[off:off + n])
        except Exception:  # noqa: BLE001 - DecodeError, or a nesting too deep: not an Event
            not_events += 1
            continue
        if ev.HasField("graph_def"):
            _graph_bytes(ev.graph_def, name, facts)
        if ev.HasField("tagged_run_metadata"):
            _run_metadata(ev.tagged_run_metadata.run_metadata, name, facts)
        if not ev.HasField("summary"):
            continue
        for v in ev.summary.value:
            plugin = _text(v.metadata.plugin_data.plugin_name)
            if plugin == KERAS_PLUGIN:
                if facts.model_config is None and v.tensor.string_val:
                    _keras_config(v.tensor.string_val[0], name, facts)
            elif plugin == RUN_METADATA_PLUGIN:
                for s in v.tensor.string_val[:1]:
                    _run_metadata(s, name, facts)
            elif (plugin == SCALARS_PLUGIN or v.HasField("simple_value")) and len(tags) < MAX_TAGS:
                tag = _text(v.tag)
                if tag and tag not in tags:
                    tags.append(tag)
    if not tags:
        facts.scalar_tags.pop(label, None)
    if not_events:
        facts.notes.append(f"{name}: {not_events} record(s) that are no Event protobuf left out")


def _keras_config(raw: bytes, name: str, facts: EventFacts) -> None:
    try:
        cfg = json.loads(raw)
    except (ValueError, RecursionError) as err:
        facts.notes.append(f"{name}: the Keras model's config is not JSON ({type(err).__name__}): left out")
        return
    if isinstance(cfg, dict):
        facts.model_config = cfg
        facts.model_config_file = name
    else:
        facts.notes.append(f"{name}: the Keras model's config is not a JSON object: left out")


def _graph_bytes(raw: bytes, name: str, facts: EventFacts) -> None:
    try:
        graph = _messages()["GraphDef"].FromString(raw)
    except Exception:  # noqa: BLE001
        facts.notes.append(f"{name}: a graph that is no GraphDef protobuf left out")
        return
    _graph(graph, facts)


def _run_metadata(raw: bytes, name: str, facts: EventFacts) -> None:
    if not raw:
        return
    try:
        rm = _messages()["RunMetadata"].FromString(raw)
    except Exception:  # noqa: BLE001
        facts.notes.append(f"{name}: a run metadata graph that is no RunMetadata protobuf left out")
        return
    for fg in rm.function_graphs:
        if fg.HasField("pre_optimization_graph"):
            _graph(fg.pre_optimization_graph, facts)
        for g in fg.partition_graphs:
            _graph(g, facts, calls=False)
    for g in rm.partition_graphs:
        _graph(g, facts, calls=False)


def _callee(node: Any) -> str | None:
    for entry in node.attr:
        if _text(entry.key) in CALL_ATTRS and entry.value.HasField("func"):
            return _text(entry.value.func.name) or None
    return None


def _graph(graph: Any, facts: EventFacts, calls: bool = True) -> None:
    """A graph's function library into ``facts.functions``, and (``calls``: a graph as the program wrote it, its
    call nodes not yet inlined) the call prefixes of its nodes and, through them, of the functions they call."""
    kept = sum(len(b) for b in facts.functions.values())
    for fn in graph.library.function:
        fname = _text(fn.signature.name)
        if not fname or fname in facts.functions:
            continue
        body: dict[str, str] = {}
        for node in fn.node_def:
            if kept >= MAX_NODES:
                break
            body[_text(node.name)] = _text(node.op)
            kept += 1
        facts.functions[fname] = body
    if not calls:
        return
    lib = {_text(fn.signature.name): fn for fn in graph.library.function}

    def walk(nodes: Any, prefix: str, depth: int) -> None:
        for node in nodes:
            callee = _callee(node)
            if callee is None:
                continue
            at = f"{prefix}{_text(node.name)}"
            called = facts.calls.setdefault(at, [])
            if callee in called:
                continue
            called.append(callee)
            if depth < MAX_CALL_DEPTH and callee in lib and len(facts.calls) < MAX_NODES:
                walk(lib[callee].node_def, at + "/", depth + 1)

    walk(graph.node, "", 0)


__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "MAX_TOTAL_BYTES", "crc32c_many", "event_files", "masked", "read_events",
           "records"]
