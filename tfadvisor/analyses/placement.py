"""Where the TF ops ran: host vs device op counts and time, and the top host ops.

On a CPU-only trace every TF op runs on the host (``device_present`` False). With a GPU
plane, the host plane still shows every op's host side (``scope/name:Type`` events, which
for a GPU op is the kernel launch); the ops whose name appears as a kernel's ``tf_op`` on a
device plane ran on the device, the others on the host.

The module also holds the small vectorised helpers the device analyses share (op names, step
windows, kernel selection, per-metadata totals); interval arithmetic is in
:mod:`tfadvisor.spans.intervals`.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import numpy as np

import tfadvisor._native as _native
import tfadvisor.model.kinds as kinds
from tfadvisor.analyses import device_lines as dl
from tfadvisor.analyses.activity import TF_OP_RE
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.names import name_mask, name_test
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.spans.intervals import Measure, line_rows, outermost

if TYPE_CHECKING:
    import pandas as pd

# ----------------------------------------------------------------------------------------
# Shared helpers (placement, precision, memory, collectives)
# ----------------------------------------------------------------------------------------


#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("memcpy_details", "tf_op")

#: An op dispatched eagerly from Python: ``EagerLocalExecute: <Type>``.
EAGER_OP_RE = re.compile(r"^EagerLocalExecute: ([A-Za-z_][A-Za-z0-9_]*)$")

#: Op types that only call or route other ops: their time contains the callees' time.
WRAPPER_TYPES = frozenset({
    "PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If", "StatelessIf",
    "Case", "StatelessCase", "RemoteCall", "__inference", "FunctionRun",
})

#: Op types that launch no kernel even when placed on a GPU (bookkeeping, resource reads).
NO_KERNEL_TYPES = frozenset({
    "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp", "Identity", "IdentityN", "NoOp", "Const",
    "_Arg", "_Retval", "_Recv", "_Send", "_HostRecv", "_HostSend", "Placeholder", "Shape", "ShapeN",
    "Size", "Rank", "StopGradient", "DestroyResourceOp", "_DeviceArg", "_DeviceRetval",
})

#: Lines on device planes that TF or xprof derive from other lines (see ``device_lines``).
DERIVED_DEVICE_LINES = dl.DERIVED_LINE_NAMES

_MEMCPY_RE = re.compile(r"(?i)^(memcpy|memset|cuda_memcpy|cudaMemcpy|cuMemcpy|cuMemset)|Memcpy[HD]to[HD]|MemcpyP2P")
_COLLECTIVE_KERNEL_RE = re.compile(
    r"(?i)nccl|all-reduce|all_reduce|allreduce|all-gather|all_gather|allgather|reduce-scatter|reduce_scatter|"
    r"reducescatter|all-to-all|alltoall|collective-permute|collective_permute|rccl"
)


def op_type(name: str) -> str:
    """``scope/name:Type`` (or ``EagerLocalExecute: Type``) -> ``Type`` ('' when untyped)."""
    i = name.rfind(":")
    return name[i + 1:].strip() if i >= 0 else ""


def op_name(name: str) -> str:
    """``scope/name:Type`` -> ``scope/name`` (``EagerLocalExecute: Type`` -> ``Type``)."""
    if name.startswith("EagerLocalExecute: "):
        return name[len("EagerLocalExecute: "):]
    i = name.rfind(":")
    return name[:i] if i >= 0 else name


def _is_function(t: str) -> bool:
    return t.startswith(("__inference", "__forward", "__backward")) or t in WRAPPER_TYPES


def tf_op_meta_mask(plane: Plane, *, exclude_wrappers: bool = True, eager: bool = True) -> np.ndarray:
    """Metadata mask of TF op events on a plane.

    Graph ops are ``scope/name:Type``; with ``eager`` also ops dispatched one by one from
    Python (``EagerLocalExecute: Type``, not function calls).
    """
    names = plane.event_names
    out = np.zeros(len(names), bool)
    for i, n in enumerate(names):
        if TF_OP_RE.match(n) is not None:
            out[i] = not (exclude_wrappers and op_type(n) in WRAPPER_TYPES)
        elif eager and n.startswith("EagerLocalExecute: "):
            m = EAGER_OP_RE.match(n)
            out[i] = m is not None and not _is_function(m.group(1))
    return out


def step_windows(tbl: Table | None) -> tuple[np.ndarray, np.ndarray] | None:
    """(start_ps, end_ps) of the steps of the ``steps`` analysis' table (its markers), or None."""
    if tbl is None or "start_ps" not in tbl or "end_ps" not in tbl:
        return None
    s = tbl["start_ps"]
    e = tbl["end_ps"]
    ok = e > s
    if not ok.any():
        return None
    return s[ok], e[ok]


def profile_window(trace: Trace) -> tuple[int, int]:
    """(start, end) of the profiled activity, in ps, over every plane."""
    return trace.time_span_ps()


def memo(ctx: Context | None, fn, *args):
    """``fn(*args)``, once per analysis run when there is a context (:meth:`Context.once`)."""
    return fn(*args) if ctx is None else ctx.once(fn, *args)


#: A device plane of more events than this does not hold its kernel rows (8 bytes each) for the whole run: each
#: caller finds them again (a few passes over its lines, ~0.1 s in all on a 1 GB trace).
HOLD_ROWS_UP_TO = 1 << 22


def _rows_memo(ctx: Context | None, fn, plane: Plane, *args) -> np.ndarray:
    """:func:`memo` for a plane's rows, but on a plane above :data:`HOLD_ROWS_UP_TO` events (built every time)."""
    return fn(plane, *args) if plane.n_events > HOLD_ROWS_UP_TO else memo(ctx, fn, plane, *args)


def kernel_rows(plane: Plane, ctx: Context | None = None) -> np.ndarray:
    """Event rows of device activity on a device plane (kernels, memcpys, collectives).

    Stream lines when the plane has them, else every line that is not a derived one.
    """
    return _rows_memo(ctx, _kernel_rows, plane)


def _kernel_rows(plane: Plane) -> np.ndarray:
    lines = device_lines(plane)
    if lines.size == 0:
        return np.empty(0, np.int64)
    rows = line_rows(plane, lines)
    if rows.size and plane.ev_meta[rows].min() < 0:
        rows = rows[plane.ev_meta[rows] >= 0]
    return rows


def device_lines(plane: Plane) -> np.ndarray:
    """Line indexes with raw device activity: stream lines, else ``XLA Ops`` (TPU), else the lines
    of no known kind (:func:`tfadvisor.analyses.device_lines.activity_lines`)."""
    return dl.activity_lines(plane)


def _meta_pass(plane: Plane, ctx: Context | None) -> tuple[np.ndarray, np.ndarray]:
    """(events, total duration ps as float) per event metadata: one pass over the plane (C), the same
    figures as ``np.bincount`` of the metadata without and with the durations (negative ones as 0)."""
    return memo(ctx, _meta_pass_of, plane)


def _meta_pass_of(plane: Plane) -> tuple[np.ndarray, np.ndarray]:
    cnt, tot = _native.meta_totals(plane.ev_meta, plane.ev_dur_ps, len(plane.event_names))
    if not cnt.any() and not (plane.ev_meta >= 0).any():  # nothing to weigh: np.bincount gives int64
        tot = np.zeros(tot.shape[0], np.int64)
    return cnt, tot


def meta_counts(plane: Plane, ctx: Context | None = None) -> np.ndarray:
    """Number of events per event metadata of a plane."""
    return _meta_pass(plane, ctx)[0]


def meta_durations(plane: Plane, ctx: Context | None = None) -> np.ndarray:
    """Total duration (ps, float) per event metadata of a plane (negative durations count as 0)."""
    return _meta_pass(plane, ctx)[1]


def meta_totals(plane: Plane, ctx: Context | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(event count, total duration ps) per event metadata of a plane."""
    return meta_counts(plane, ctx), meta_durations(plane, ctx)


def kernel_meta_totals(plane: Plane, ctx: Context | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(count, total duration ps) per event metadata over the device-activity rows."""
    return memo(ctx, _kernel_meta_totals, plane, ctx)


def _kernel_meta_totals(plane: Plane, ctx: Context | None) -> tuple[np.ndarray, np.ndarray]:
    rows = kernel_rows(plane, ctx)
    nm = len(plane.event_names)
    if rows.size == plane.n_events:
        return meta_totals(plane, ctx)
    m = plane.ev_meta[rows]
    return (np.bincount(m, minlength=nm)[:nm],
            np.bincount(m, weights=np.maximum(plane.ev_dur_ps[rows], 0), minlength=nm)[:nm])


def device_meta_classes(plane: Plane, ctx: Context | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per event metadata: (is memcpy/memset, is collective) by name."""
    return memo(ctx, _device_meta_classes, plane, ctx)


def _device_meta_classes(plane: Plane, ctx: Context | None) -> tuple[np.ndarray, np.ndarray]:
    names = plane.event_names
    memcpy = name_mask(names, _is_memcpy)
    coll = name_mask(names, _is_collective_kernel)
    if plane.has_stat("memcpy_details"):
        # Names that never matched the memcpy pattern but carry memcpy_details: one event
        # per such name is enough (memcpy_details marks a kind of activity, not an instance).
        rows = kernel_rows(plane, ctx)
        cand = kernel_meta_counts(plane, ctx) > 0
        cand &= ~memcpy & ~coll
        if cand.any():
            m = plane.ev_meta[rows]
            first = np.full(len(names), -1, np.int64)
            first[m[::-1]] = rows[::-1]  # the last write wins: the first row of each name
            sample = first[cand]
            col = plane.stat("memcpy_details", sample[sample >= 0]) if ctx is None else \
                ctx.stat_at(plane, "memcpy_details", sample[sample >= 0])
            if len(col):
                memcpy = memcpy.copy()  # name_mask's array is shared by every plane of these names
                memcpy[plane.ev_meta[col.rows]] = True
    return memcpy, coll


@name_test
def _is_memcpy(name: str) -> bool:
    return _MEMCPY_RE.search(name) is not None


@name_test
def _is_collective_kernel(name: str) -> bool:
    return _COLLECTIVE_KERNEL_RE.search(name) is not None


def kernel_meta_counts(plane: Plane, ctx: Context | None = None) -> np.ndarray:
    """Number of device-activity events per event metadata."""
    return kernel_meta_totals(plane, ctx)[0]


def compute_kernel_rows(plane: Plane, ctx: Context | None = None) -> np.ndarray:
    """Kernel rows that are computation: not memcpy/memset, not collectives."""
    return _rows_memo(ctx, _compute_kernel_rows, plane, ctx)


def _compute_kernel_rows(plane: Plane, ctx: Context | None) -> np.ndarray:
    rows = kernel_rows(plane, ctx)
    if rows.size == 0:
        return rows
    memcpy, coll = device_meta_classes(plane, ctx)
    bad = (memcpy | coll) & (kernel_meta_counts(plane, ctx) > 0)
    if not bad.any():
        return rows
    return rows[~bad[plane.ev_meta[rows]]]


def plane_stat_strings(plane: Plane, name: str, ctx: Context | None = None) -> list[str]:
    """Distinct string values of stat ``name`` on a plane (event- and metadata-level)."""
    return memo(ctx, _stat_strings, plane, name)


def _stat_strings(plane: Plane, name: str) -> list[str]:
    sid = plane.stat_index.get(name)
    if sid is None:
        return []
    col = plane.stat(name, metadata_level=False)
    kind, raw = col.kind, col.raw
    if raw.size and bool((kind == kinds.KIND_REF).all()) and len(plane.stat_names) < (1 << 24):
        present = np.flatnonzero(np.bincount(raw, minlength=len(plane.stat_names)))
        kind, raw = np.full(present.size, kinds.KIND_REF, np.uint8), present.astype(np.int64)
    md = plane.metadata_stat_values(sid)
    if md is not None:
        kind = np.concatenate([kind, md[1]])
        raw = np.concatenate([raw, md[2]])
    return sorted(set(plane.value_codes(kind, raw)[1]))


def gpu_planes(trace: Trace) -> list[Plane]:
    return [p for p in trace.device_planes if p.name.startswith("/device:GPU")]


def ms(ps) -> float:
    return float(ps) / PS_PER_MS


# ----------------------------------------------------------------------------------------
# The analysis
# ----------------------------------------------------------------------------------------

TOP_HOST_OPS = 25
DEVICE_OP_TIME_DOC = "compute kernel time per device (sum of kernel durations, mean over devices)"


def _device_tf_ops(trace: Trace, ctx: Context) -> tuple[list, bool, float, int]:
    """(device planes that tell which ops ran there: kernels with a ``tf_op`` stat or a
    ``TensorFlow Ops``/``Framework Ops`` line; whether any does; mean compute kernel time per
    device with kernels; compute kernels)."""
    planes = []
    has_tf_op = False
    busy = []
    n_kernels = 0
    for p in trace.device_planes:
        cnt, dur = kernel_meta_totals(p, ctx)
        memcpy, coll = device_meta_classes(p, ctx)
        comp = ~(memcpy | coll)
        k = int(cnt[comp].sum())
        n_kernels += k
        if k:
            busy.append(float(dur[comp].sum()))
        if p.has_stat("tf_op") or dl.lines_of(p, dl.OPS).size:
            has_tf_op = True
            planes.append(p)
    mean_busy = float(np.mean(busy)) if busy else 0.0
    return planes, has_tf_op, mean_busy, n_kernels


def _op_line_names(p: Plane) -> set[str]:
    """Names of the events on a plane's framework-op lines (``TensorFlow Ops``/``Framework Ops``)."""
    lines = dl.lines_of(p, dl.OPS)
    if not lines.size:
        return set()
    m = p.ev_meta[p.rows_on_lines(lines)]
    m = np.unique(m[(m >= 0) & (m < len(p.event_names))])
    return {str(x) for x in p.event_names[m]}


def _tf_op_names(p: Plane, ctx: Context | None) -> set[str]:
    """The TF op names a device plane's events name (its op lines and its ``tf_op`` stats)."""
    got = _op_line_names(p)
    sid = p.stat_index.get("tf_op")
    if sid is None:
        return got
    # The kind of the first tf_op value tells how they are stored.
    first = int(np.argmax(p.st_stat == sid)) if p.n_stats else 0
    if p.n_stats and p.st_stat[first] == sid and p.st_kind[first] == kinds.KIND_REF:
        return got | set(str(x) for x in p.stat_names)
    return got | set(plane_stat_strings(p, "tf_op", ctx))


def _on_device(names: list[str], dev_planes: list[Plane], ctx: Context) -> np.ndarray:
    """For host op names, whether a device kernel carries it as ``tf_op`` or a device's
    framework-op line names it.

    TF stores ``tf_op`` values as references to the plane's stat metadata, so a name is
    looked up among those strings (no pass over the kernels). Planes whose tf_op values are
    inline strings are scanned once for their distinct values.
    """
    known: set[str] = set()
    for p in dev_planes:
        known |= memo(ctx, _tf_op_names, p, ctx)
    out = np.zeros(len(names), bool)
    for i, n in enumerate(names):
        out[i] = (n in known or op_name(n) in known
                  or (n.startswith("EagerLocalExecute: ") and f"{op_name(n)}:{op_type(n)}" in known))
    return out


def device_op_rows(p: Plane) -> np.ndarray:
    """The op events of a device plane's op-attribution lines (``TensorFlow Ops``/``Framework Ops``, else
    ``XLA Ops``) with a duration, outermost of each nest only; empty when the plane has no such line."""
    lines = dl.op_lines(p)
    if not lines.size:
        return np.empty(0, np.int64)
    rows = p.timed_rows_on_lines(lines)
    return outermost(p, rows) if rows.size else rows


def device_op_parts(trace: Trace) -> list[Table]:
    """Device time per op event from the op-attribution lines (``TensorFlow Ops``/``Framework Ops``,
    else ``XLA Ops``) of every device plane, a table per plane (none when no plane has such a line).
    Only the outermost event of a nest counts, so nested ops are not counted twice."""
    parts = []
    for p in trace.device_planes:
        rows = device_op_rows(p)
        if not rows.size:
            continue
        parts.append(Table({"op": p.event_names[p.ev_meta[rows]].astype(str),
                            "total_ps": p.ev_dur_ps[rows].astype(np.float64), "count": np.ones(rows.size, np.int64),
                            "device": dl.short_name(p)}))
    return parts


def device_op_table(parts: list[Table]) -> pd.DataFrame:
    """The ``device_ops`` table: the top ops by device time over ``parts`` (of :func:`device_op_parts`)."""
    df = Table.concat(parts).to_pandas()
    tbl = df.groupby("op", as_index=False).agg(count=("count", "sum"), total_ps=("total_ps", "sum"),
                                                devices=("device", "nunique"))
    total = float(tbl["total_ps"].sum())
    tbl["type"] = [op_type(n) for n in tbl["op"]]
    tbl["total_ms"] = tbl["total_ps"] / PS_PER_MS
    tbl["pct"] = 100.0 * tbl["total_ps"] / total if total > 0 else np.nan
    tbl = tbl.sort_values(["total_ps", "op"], ascending=[False, True]).head(TOP_HOST_OPS)
    return tbl[["op", "type", "count", "devices", "total_ms", "pct"]].reset_index(drop=True)


DECLARED = declare(
    "placement",
    ("device_present", "", "the trace has a device (GPU/TPU) plane"),
    ("host_op_count", "count", "TF op executions that ran on the host"),
    ("device_op_count", "count", "TF op executions that ran on a device (host launch events of ops whose kernels "
                                 "carry their name)"),
    ("host_op_time_ms", "ms", "wall time with a host-placed TF op running (inside steps)"),
    ("device_op_time_ms", "ms", "compute kernel time per device (sum of kernel durations, mean over devices)"),
    ("host_op_time_pct", "%", "host TF op time as % of step time"),
    doc="`host_op_time_ms` (wall time with a host-placed TF op running, inside steps when there are steps), "
        "`device_op_time_ms` (compute kernel time per device: sum of kernel durations, mean over devices). CPU-only: "
        "`host_op_time_pct` is None (every op is on the host); eager ops (`EagerLocalExecute: <Type>`) count as ops",
    tables="`host_ops` (top host ops by time); `host_ops`: op, type, count, total_ms, mean_us, pct",
)


def analyze(trace: Trace, ctx: Context, *, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("placement")
    hosts = trace.host_planes
    devices = trace.device_planes
    device_present = bool(devices)
    res.add("device_present", device_present)
    if device_present:
        dev_parts = device_op_parts(trace)
        if dev_parts:
            res.tables["device_ops"] = functools.partial(device_op_table, dev_parts)

    # Host TF op events: counted per metadata (one bincount), rows gathered only for the
    # host-placed ops when a device exists.
    per_plane = []
    for p in hosts:
        mm = tf_op_meta_mask(p)
        if not mm.any():
            continue
        cnt = meta_counts(p, ctx)
        if cnt[mm].sum() == 0:
            continue
        per_plane.append((p, mm, cnt))
    if not per_plane:
        res.missing(["host_op_count", "device_op_count", "host_op_time_ms", "host_op_time_pct", "device_op_time_ms"],
                    "no TF op events (scope/name:Type) on a host plane: the host tracer level may be too low",
                    tf_only=True)
        if device_present:
            _, _, busy, nk = _device_tf_ops(trace, ctx)
            if nk:
                res.add("device_op_time_ms", ms(busy), doc=DEVICE_OP_TIME_DOC)
        return res

    windows = step_windows(step_table)
    if device_present:
        dev_planes, has_tf_op, busy_ps, _ = _device_tf_ops(trace, ctx)
    else:
        dev_planes, has_tf_op, busy_ps = [], False, 0.0

    placement_known = (not device_present) or has_tf_op
    host_rows_all = []
    host_count = 0
    dev_count = 0
    table_parts = []
    for p, mm, cnt in per_plane:
        names = p.event_names
        if device_present:
            # Per op metadata: does it run on the device (its name is a kernel's tf_op)?
            on_dev = np.zeros(len(names), bool)
            cheap = np.zeros(len(names), bool)
            idx = np.flatnonzero(mm & (cnt > 0))
            on_dev[idx] = _on_device([names[i] for i in idx], dev_planes, ctx)
            for i in idx:
                cheap[i] = op_type(names[i]) in NO_KERNEL_TYPES
            host_meta = mm & ~on_dev & ~cheap
            dev_meta = mm & on_dev
        else:
            host_meta = mm
            dev_meta = np.zeros(len(names), bool)
        n_host = int(cnt[host_meta].sum())
        host_count += n_host
        dev_count += int(cnt[dev_meta].sum())
        hr = p.rows_with_meta(host_meta) if n_host else np.empty(0, np.int64)
        host_rows_all.append((p, hr))
        idx = np.flatnonzero(host_meta & (cnt > 0))
        if idx.size:
            if device_present:  # few host-placed ops: sum their rows
                dur = np.bincount(p.ev_meta[hr], weights=np.maximum(p.ev_dur_ps[hr], 0), minlength=len(names))
            else:
                dur = meta_durations(p, ctx)
            table_parts.append(Table({"op": names[idx].astype(str), "count": cnt[idx], "total_ps": dur[idx]}))

    if not placement_known:
        res.missing(["host_op_count", "device_op_count", "host_op_time_ms", "host_op_time_pct"],
                    "device kernels carry no tf_op stat: cannot tell which ops ran on the host")
        res.add("device_op_time_ms", ms(busy_ps), doc=DEVICE_OP_TIME_DOC)
        return res

    res.add("host_op_count", host_count)
    res.add("device_op_count", dev_count if device_present else 0)

    # Host op time: wall time during which some host-placed op runs (any thread).
    # One union over every host plane: two planes' ops at the same instant are one instant.
    step_ps = None
    parts = [(p.ev_start_ps[hr], p.ends(hr)) for p, hr in host_rows_all if hr.size]
    host_ps = 0
    if parts:
        host = Measure.union(np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts]))
        host_ps = int(host.within(*windows).sum()) if windows is not None else host.total()
    if windows is not None:
        step_ps = int(np.sum(windows[1] - windows[0]))
    res.add("host_op_time_ms", ms(host_ps),
            doc="wall time with a host-placed TF op running" + (" (inside steps)" if windows is not None else ""))
    if device_present:
        res.add("device_op_time_ms", ms(busy_ps), doc=DEVICE_OP_TIME_DOC)
        if step_ps:
            res.add("host_op_time_pct", 100.0 * host_ps / step_ps)
        else:
            lo, hi = profile_window(trace)
            if hi > lo:
                res.add("host_op_time_pct", 100.0 * host_ps / (hi - lo))
                res.qualify(("host_op_time_pct",),
                            "no step table: host_op_time_pct is relative to the profiled wall time")
            else:
                res.missing(["host_op_time_pct"], "empty profile window")
    else:
        res.missing(["device_op_time_ms", "host_op_time_pct"],
                    "no device plane: every op runs on the host (host_op_time_pct is only meaningful when a "
                    "device exists)")

    if table_parts:
        res.tables["host_ops"] = functools.partial(host_op_table, table_parts)
    return res


def host_op_table(parts: list[Table]) -> pd.DataFrame:
    """The ``host_ops`` table: the top host-placed ops by time."""
    tbl = Table.concat(parts).to_pandas().groupby("op", as_index=False).sum()
    total = float(tbl["total_ps"].sum())
    tbl["type"] = [op_type(n) for n in tbl["op"]]
    tbl["total_ms"] = tbl["total_ps"] / PS_PER_MS
    tbl["mean_us"] = tbl["total_ps"] / tbl["count"] / 1e6
    tbl["pct"] = 100.0 * tbl["total_ps"] / total if total > 0 else np.nan
    tbl = tbl.sort_values(["total_ps", "op"], ascending=[False, True]).head(TOP_HOST_OPS)
    return tbl[["op", "type", "count", "total_ms", "mean_us", "pct"]].reset_index(drop=True)
