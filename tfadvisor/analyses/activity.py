"""The activity model of one host: its CPU plane's and devices' events classified once per run.

:func:`activity` (cached in the context) sorts the host's events by thread (training, python,
tf.data, communication) and by kind (input waits, launches, H2D copies, collectives, TF ops,
eager execution, function calls, step markers, tf.data iterators...), and the devices' activity
lines into compute, H2D copies, other copies and collectives. :class:`Activity` keeps the event
rows of each class and builds their interval sets (:mod:`tfadvisor.spans.intervals`) on first
use: wall time (``get``, ``union``, ``lazy``) or thread time (``threads``). ``steps``, ``gaps``,
``input``, ``eager``, ``overhead``, ``capture_quality``, ``tfdata`` and ``timeline`` read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

import tfadvisor._native as _native
from tfadvisor.analyses import device_lines
from tfadvisor.analyses.base import Context
from tfadvisor.analyses.names import name_mask, name_test, name_values
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.spans import rowsets
from tfadvisor.spans.intervals import (
    EMPTY,
    LazyUnion,
    Measure,
    Runs,
    contained,
    first_last,
    line_runs,
    row_index,
    rows_runs,
    union_lengths,
    union_of,
)
from tfadvisor.spans.rowsets import line_sets, row_set

#: ``_bucket_kernel(ev_line, ev_meta, line_cls, meta_cls, unknown, stride, ncodes)``: Class code per event (line
#: class * stride + metadata class) and the rows of each code. Every index is checked: an event whose line is out of
#: range goes to the overflow bucket ``ncodes``; metadata out of range counts as ``unknown``. The classes are checked
#: before any event (ValueError): metadata classes and ``unknown`` in [0, stride), line classes in
#: [0, ncodes // stride), so that every code lies in [0, ncodes). Returns the rows ordered by code (ascending within a
#: code; int32 where every row fits, as :meth:`Plane.rows_with_meta` gives them) and the bounds of each code's run
#: (length ncodes + 2).
_bucket_kernel = _native.bucket_kernel


def _bucket(ev_line: np.ndarray, ev_meta: np.ndarray, line_cls: np.ndarray, meta_cls: np.ndarray, unknown: int,
            stride: int, n_line_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows bucketed by (line class, metadata class): ``order[bounds[c]:bounds[c + 1]]`` are the
    rows of code ``c = line class * stride + metadata class``, ascending.

    The classes are checked here (the kernel checks every index as well): line classes in
    [0, n_line_classes), metadata classes and ``unknown`` in [0, stride).
    """
    line_cls = np.ascontiguousarray(line_cls, np.int64)
    meta_cls = np.ascontiguousarray(meta_cls, np.int64)
    if line_cls.size and (line_cls.min() < 0 or line_cls.max() >= n_line_classes):
        raise ValueError("line class out of range")
    if meta_cls.size and (meta_cls.min() < 0 or meta_cls.max() >= stride):
        raise ValueError("metadata class out of range")
    if not 0 <= unknown < stride:
        raise ValueError("unknown metadata class out of range")
    if ev_line.shape[0] != ev_meta.shape[0]:
        raise ValueError("event columns of different lengths")
    return _bucket_kernel(np.ascontiguousarray(ev_line), np.ascontiguousarray(ev_meta), line_cls, meta_cls,
                          int(unknown), int(stride), int(n_line_classes * stride))


# ------------------------------------------------------------------------------------------
# Event classes
# ------------------------------------------------------------------------------------------

#: A TF op event: ``scope/name:Type`` (no spaces, one colon, an identifier after it). XLA's PjRt runtime
#: writes ``ThenExecuteCallback:<what>`` events of the same shape: not ops.
TF_OP_RE = re.compile(r"^(?!ThenExecuteCallback:)[^:\s]+:[A-Za-z_][A-Za-z0-9_]*$")
#: Op types whose event spans the ops they call.
WRAPPER_OP_TYPES = frozenset({
    "PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If", "StatelessIf", "Case",
    "StatelessCase", "RemoteCall", "FunctionRun",
})
#: Roots TF itself sets ``_r`` on: never a step marker by themselves (as in xprof).
IMPLICIT_ROOTS = frozenset({"FunctionRun", "SessionRun", "RunGraph", "ExecutorState::Process"})
HOST_COLLECTIVE_RE = re.compile(
    r"Collective(Reduce|Gather|Bcast|Permute|AllToAll|Assign)|^CollectiveExecutor|NcclAllReduce|Nccl[A-Z]|"
    r"Horovod(Allreduce|Allgather|Broadcast)|(?i:all-reduce|allreduce)")
LAUNCH_RE = re.compile(r"^(cu|cuda|hip)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|LaunchKernelEx|"
                       r"ModuleLaunchKernel|ExtModuleLaunchKernel)")
H2D_API_RE = re.compile(r"^(cu|cuda|hip)Memcpy(HtoD|H2D|Async.*HtoD)|^(cu|cuda|hip)Memcpy.*HtoD")
DEVICE_MEMCPY_RE = re.compile(r"(?i)memcpy|memset|^\[?(HtoD|DtoH|DtoD)")
DEVICE_H2D_RE = re.compile(r"(?i)HtoD|H2D")
#: xprof knows a GPU event as a host-to-device copy only by this name prefix (any case): TF 2.4's
#: ``MemcpyH2D`` copies count as device work there, not input.
XPROF_H2D_PREFIX = "memcpyhtod"
DEVICE_OTHER_COPY_RE = re.compile(r"(?i)DtoH|D2H|DtoD|D2D|PtoP|P2P|MemcpyOther")
DEVICE_DIRECTION_RE = re.compile(r"(?i)HtoD|H2D|DtoH|D2H|DtoD|D2D|PtoP|P2P|HtoH|H2H")
DEVICE_COLLECTIVE_RE = re.compile(
    r"(?i)nccl|rccl|all-reduce|all_reduce|allreduce|all-gather|all_gather|allgather|reduce-scatter|reduce_scatter|"
    r"reducescatter|all-to-all|alltoall|collective-permute|collective_permute")
PYTHON_FRAME_PREFIX = "$"

# Metadata classes of host events.
(M_NONE, M_INPUT, M_H2D_API, M_LAUNCH, M_COLL, M_OP, M_WRAPPER, M_EAGER, M_EAGER_KERNEL, M_FUNC_CALL, M_FUNC_RUN,
 M_PROFILED_BATCH, M_TRACE_CONTEXT, M_FRAME, M_ITERATOR, M_PRODUCE, M_CAPTURED_FN) = range(17)
M_UNKNOWN = 31
N_META = 32
KNOWN_META = tuple(range(M_CAPTURED_FN + 1))
_PRODUCE_RE = re.compile(r"^(Parallel)?Map(AndBatch)?Produce$|^ParallelMapProduce$|^MapAndBatchProduce$")
# Line classes of host threads.
L_TRAIN, L_PYTHON, L_TFDATA, L_COMM = range(4)

STEP_STATS = ("_r", "step_num", "step_id", "iter_num", "is_func", "tf_function_call", "tracing_count")
#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = STEP_STATS + ("memcpy_details",)


@dataclass
class Activity:
    """Classified activity of one host's CPU plane and its devices, as interval sets (ps).

    Host sets are built on first use from ``rows`` (event rows per class) and cached;
    ``union(*names)`` caches unions too.
    """

    host: Plane | None
    devices: list[Plane]
    python_lines: np.ndarray
    tfdata_lines: np.ndarray
    sets: dict[str, Measure] = field(default_factory=dict)  # wall-time (union) sets
    thread: dict[str, Runs] = field(default_factory=dict)  # thread-time sets
    rows: dict[str, np.ndarray] = field(default_factory=dict)  # host event rows, ascending
    n_cores: int | None = None
    span: tuple[int, int] = (0, 0)
    #: per device plane: what its activity lines showed (kernels, copies, busy and compute time; ``runs``: per
    #: kind, ``dev_compute``, ``dev_collective``, ..., the union of its intervals)
    per_device: list[dict] = field(default_factory=list)
    #: (pageable, classified) H2D copy time, ps; None when no copy says its memory kinds
    h2d_pageable_ps: tuple[int, int] | None = None
    #: some H2D copy has a name xprof takes for one (``MemcpyH2D`` is TF 2.4's, which xprof does not)
    h2d_xprof_named: bool = False
    order: np.ndarray | None = None  # host rows bucketed by class code
    bounds: np.ndarray | None = None
    line_cls: np.ndarray | None = None
    _unions: dict = field(default_factory=dict)

    @property
    def has_device(self) -> bool:
        return any(len(self.sets.get(k, ())) for k in ("dev_compute", "dev_h2d", "dev_copy", "dev_collective"))

    def get(self, name: str) -> Measure:
        m = self.sets.get(name)
        if m is None and name == "train_threads":
            # every event on the training threads (TF ops, launches, the executor...), wall time
            m = self.sets[name] = self.threads("training").wall()
        if m is None:
            src = SET_ROWS.get(name, name)
            r = self.rows.get(src)
            m = row_set(self.host, r) if (r is not None and self.host is not None) else Measure.empty()
            self.sets[name] = m
        return m

    def union(self, *names: str) -> Measure:
        """The union of named sets, materialised (cached)."""
        key = tuple(sorted(names))
        if key not in self._unions:
            self._unions[key] = union_of(*[self.get(n) for n in names])
        return self._unions[key]

    def lazy(self, *names: str) -> LazyUnion:
        """The union of named sets for ``within`` queries, without copying the biggest (cached)."""
        key = ("lazy",) + tuple(sorted(names))
        if key not in self._unions:
            self._unions[key] = LazyUnion(*[self.get(n) for n in names])
        return self._unions[key]

    def threads(self, name: str) -> Runs:
        """Thread time of the tf.data workers (``tfdata``) or the training threads (``training``)."""
        m = self.thread.get(name)
        if m is None:
            p = self.host
            if p is None or self.line_cls is None:
                m = Runs([])
            elif name == "tfdata":
                ok = self.line_cls == L_TFDATA
                runs = line_runs(p, ok)
                # the consumer's own waits on those threads are not pipeline work
                inp = self.rows.get("input", EMPTY)
                if inp.shape[0] and np.any(ok[p.ev_line[inp]]):
                    rr = self.code_rows((L_TFDATA,), [mc for mc in KNOWN_META if mc != M_INPUT])
                    runs = rows_runs(p, rr[p.ev_dur_ps[rr] > 0])
                m = Runs(runs)
            else:
                ok = (self.line_cls == L_TRAIN) | (self.line_cls == L_COMM)
                runs = line_runs(p, ok)
                extra = union_rows(self.code_rows((L_PYTHON,), (M_OP,)), self.rows.get("eager_kernel", EMPTY))
                runs += rows_runs(p, extra)
                m = Runs(runs)
            self.thread[name] = m
        return m

    def code_rows(self, line_classes, meta_classes) -> np.ndarray:
        """Host rows whose line class and metadata class are in the given sets (ascending)."""
        if self.order is None:
            return EMPTY
        parts = []
        for lc in line_classes:
            for mc in meta_classes:
                c = lc * N_META + mc
                a, b = self.bounds[c], self.bounds[c + 1]
                if b > a:
                    parts.append(self.order[a:b])
        if not parts:
            return EMPTY
        if len(parts) == 1:
            return parts[0]
        return np.sort(np.concatenate(parts), kind="stable")


#: Wall-time set name -> the rows it is built from.
SET_ROWS = {"input_wait": "input"}


def union_rows(*arrays: np.ndarray) -> np.ndarray:
    """Sorted union of ascending row arrays (np.union1d hashes: slow on millions)."""
    arrays = [row_index(a) for a in arrays if a is not None and len(a)]
    if not arrays:
        return EMPTY
    if len(arrays) == 1:
        return arrays[0]
    r = np.sort(np.concatenate(arrays), kind="stable")
    if r.shape[0] > 1:
        keep = np.empty(r.shape[0], bool)
        keep[0] = True
        np.not_equal(r[1:], r[:-1], out=keep[1:])
        r = r[keep]
    return r


def host_trace(trace: Trace) -> tuple[Trace, str | None]:
    """The part of the trace from one host (the first), and a note when there were more."""
    hosts = trace.hosts
    if len(hosts) <= 1:
        return trace, None
    return trace.host(hosts[0]), (f"the trace holds {len(hosts)} hosts; analysed {hosts[0]} "
                                 "(analyse one host at a time)")


def _host_plane(trace: Trace) -> Plane | None:
    hp = [p for p in trace.host_planes if p.n_events]
    if not hp:
        return None
    return max(hp, key=lambda p: p.n_events)


def _line_classes(plane: Plane) -> tuple[np.ndarray, int]:
    names = [str(n) for n in plane.line_names]
    raw = [str(n) for n in plane.lines["name"]] if len(plane.lines) else []
    out = np.full(len(names) + 1, L_TRAIN, np.int64)
    n_eigen = 0
    for i, (n, r) in enumerate(zip(names, raw)):
        if n == "python" or r == "python" or n.startswith("python") or n == "MainThread":
            out[i] = L_PYTHON
        elif n.startswith("tf_data") or r.startswith("tf_data"):
            out[i] = L_TFDATA
        elif n.startswith("collective_ops") or "grpc" in n.lower():
            out[i] = L_COMM
        if "Eigen" in n:
            n_eigen += 1
    return out, n_eigen


def _maybe_collective(nm: str) -> bool:
    low = nm.lower()
    return "collective" in low or "nccl" in low or "horovod" in low or "allreduce" in low or "all-reduce" in low


def _meta_classes(plane: Plane) -> np.ndarray:
    """Per event metadata of a host plane its class (``M_*``), and ``M_UNKNOWN`` last (read-only)."""
    return name_values(plane.event_names, _meta_class, np.int64, M_UNKNOWN)


@name_test
def _meta_class(nm: str) -> int:
    """The class (``M_*``) of a host event name."""
    cuda = nm.startswith("cu") or nm.startswith("hip")
    if nm.startswith("IteratorGetNext"):
        return M_INPUT
    if cuda and LAUNCH_RE.match(nm):
        return M_LAUNCH
    if cuda and H2D_API_RE.match(nm):
        return M_H2D_API
    if nm == "EagerExecute":
        return M_EAGER
    if nm == "EagerKernelExecute":
        return M_EAGER_KERNEL
    if nm.startswith("EagerLocalExecute: __inference_") or nm.startswith("__inference_"):
        return M_FUNC_CALL
    if nm in ("FunctionRun", "SessionRun", "RunGraph"):
        return M_FUNC_RUN
    if nm == "Profiled batch":
        return M_PROFILED_BATCH
    if nm == "TraceContext":
        return M_TRACE_CONTEXT
    if nm.startswith("Iterator::"):
        return M_ITERATOR
    if nm.endswith("Produce") and _PRODUCE_RE.match(nm):
        return M_PRODUCE
    if nm == "InstantiatedCapturedFunction::Run":
        return M_CAPTURED_FN
    if nm.startswith(PYTHON_FRAME_PREFIX):
        return M_FRAME
    if _maybe_collective(nm) and HOST_COLLECTIVE_RE.search(nm):
        return M_COLL
    if ":" in nm and TF_OP_RE.match(nm):
        return M_WRAPPER if nm[nm.rfind(":") + 1:] in WRAPPER_OP_TYPES else M_OP
    return M_NONE


def _copy_directions(p: Plane, cp: np.ndarray, by_name: np.ndarray,
                     ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For copy rows ``cp`` (ascending): is each a host-to-device copy, is its direction known from
    ``memcpy_details`` kinds, and is its source pageable memory.

    Newer TF writes ``memcpy_details`` as ``kind_src:pageable kind_dst:device size:... dest:...``;
    TF 2.4 and older only ``size:112 dest:4 async:0``. Without the kinds the event name
    (``MemcpyH2D``) says what the copy is, and where the name gives no direction, the stream's
    name (``Stream #135(MemcpyH2D)``).
    """
    h2d = by_name.copy()
    names = p.event_names
    no_dir = name_mask(names, _no_direction, extra=False)
    if no_dir.any():  # some name gives no direction: its copies take their line's
        n_lines = len(p.lines)
        line_h2d = np.array([_h2d_line(str(n) + " " + str(r)) for n, r in zip(p.line_names, p.lines["name"])]
                            + [False], bool)
        meta = p.ev_meta[cp]
        meta = np.where((meta >= 0) & (meta < len(names)), meta, len(names))
        ln = p.ev_line[cp].astype(np.int64)
        ln = np.where((ln >= 0) & (ln < n_lines), ln, n_lines)
        undirected = no_dir[meta]
        h2d[undirected] = line_h2d[ln[undirected]]
    flags = _copy_flags(p, cp)
    if flags is not None:  # the same answer as below, read in one pass
        known = (flags & 1).astype(bool)
        by_kinds = (flags & 2).astype(bool)
        h2d[known] = by_kinds[known]
        return h2d, known, (flags & 4).astype(bool) & by_kinds
    known = np.zeros(cp.shape[0], bool)
    pageable = np.zeros(cp.shape[0], bool)
    md = ctx.stat_at(p, "memcpy_details", cp)
    if len(md):
        codes, uniq = md.codes()  # each distinct value formatted once
        u_known, u_h2d, u_pg = (np.array(v, bool) for v in zip(*map(_copy_kinds, uniq)))
        pos = np.searchsorted(cp, md.rows)  # stat_at gives the rows asked only: each is found
        kn = u_known[codes]
        h2d[pos[kn]] = u_h2d[codes[kn]]
        known[pos[kn]] = True
        pageable[pos] = u_pg[codes] & u_h2d[codes]
    return h2d, known, pageable


def _copy_flags(p: Plane, cp: np.ndarray) -> np.ndarray | None:
    """Per copy row (ascending), what its event-level ``memcpy_details`` string says (``_native.copy_kinds``: bit 0
    kinds named, bit 1 host-to-device by them, bit 2 from pageable memory; 0 without a value); None where that one
    pass does not apply (values at the metadata level, stats out of event order, a value that is not an inline
    string...): :func:`_copy_directions` then reads the values as any stat."""
    sid = p.stat_index.get("memcpy_details")
    if sid is None or (p.kept_stats is not None and "memcpy_details" not in p.kept_stats) or not p.stats_by_event \
            or p.metadata_stat_values(sid) is not None:
        return None
    flags = np.empty(cp.shape[0], np.uint8)
    ok = _native.copy_kinds(p.st_event, p.st_stat, p.st_kind, p.st_value, p.str_off, p.str_len, p.str_pool, cp, sid,
                            flags)
    return flags if ok else None


@name_test
def _copy_kinds(details: str | None) -> tuple[bool, bool, bool]:
    """A ``memcpy_details`` value: (says the copy's kinds, is host-to-device by them, is from pageable memory)."""
    d = details or ""
    return ("kind_dst:" in d or "kind_src:" in d, "kind_dst:device" in d and "kind_src:device" not in d,
            "kind_src:pageable" in d)


def _is_memset(name: str) -> bool:
    return "memset" in name.lower()


@name_test
def _device_class(name: str) -> int:
    """A device event's class by name: 0 compute, 1 H2D copy, 2 other copy, 3 collective."""
    nm = name[:96]  # kernel names are long C++ signatures: the kind is in the head
    if DEVICE_MEMCPY_RE.search(nm):
        return 1 if DEVICE_H2D_RE.search(nm) else 2
    return 3 if DEVICE_COLLECTIVE_RE.search(nm) else 0


@name_test
def _h2d_line(name: str) -> bool:
    """A line (its display and raw name, joined) that carries host-to-device copies: ``Stream #135(MemcpyH2D)``."""
    return DEVICE_H2D_RE.search(name) is not None and DEVICE_OTHER_COPY_RE.search(name) is None


@name_test
def _no_direction(name: str) -> bool:
    return DEVICE_DIRECTION_RE.search(name[:96]) is None and not _is_memset(name)


def _device_sets(act: Activity, devices: list[Plane], ctx: Context) -> dict[str, Measure]:
    """Device activity as wall-time sets (union over the devices of one host): compute, H2D copies,
    other copies, collectives; from each plane's activity lines only (streams, else XLA Ops, see
    :mod:`tfadvisor.analyses.device_lines`). Per-device figures and the H2D copies' kinds go onto ``act``."""
    keys = ("dev_compute", "dev_h2d", "dev_copy", "dev_collective")
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in keys}
    pageable_ps, h2d_known_ps = 0, 0
    h2d_xprof_named = False
    per_device = []
    for p in devices:
        info = {"device": device_lines.short_name(p), "plane": p.name, "activity_lines": None, "kernels": 0,
                "copies": 0, "busy_ps": 0, "compute_ps": 0, "first_ps": None, "last_ps": None}
        per_device.append(info)
        if not p.n_events or not len(p.lines):
            continue
        act_lines = device_lines.activity_lines(p)
        if not act_lines.size:
            continue
        info["activity_lines"] = device_lines.activity_kind(p)
        line_cls = np.ones(len(p.lines) + 1, np.int64)  # 1: not activity
        line_cls[act_lines] = 0
        names = p.event_names
        mc = name_values(names, _device_class, np.int64, 4)  # 4: unknown metadata, skipped
        order, bounds = _bucket(p.ev_line, p.ev_meta, line_cls, mc, 4, 8, 2)
        klass = {k: order[bounds[i]:bounds[i + 1]] for i, k in enumerate(keys)}
        # copies: direction from memcpy_details where it says, else from the names
        # the copies in row order, each marked with whether its name says host-to-device (the two classes'
        # rows are distinct: a stable sort of both, labelled, is their merge)
        both = np.concatenate([klass["dev_h2d"], klass["dev_copy"]])
        cp = both
        if cp.shape[0]:
            o = np.argsort(both, kind="stable")
            cp = both[o]
            by_name = o < klass["dev_h2d"].shape[0]
            h2d, known, pageable = _copy_directions(p, cp, by_name, ctx)
            klass["dev_h2d"], klass["dev_copy"] = cp[h2d], cp[~h2d]
            if klass["dev_h2d"].shape[0]:
                metas = np.unique(p.ev_meta[klass["dev_h2d"]]).tolist()
                names = {str(p.event_names[m]) if 0 <= m < len(p.event_names) else "<unknown>" for m in metas}
                h2d_xprof_named |= any(n.lower().startswith(XPROF_H2D_PREFIX) for n in names)
            dur = p.ev_dur_ps[cp]
            h2d_known_ps += int(dur[h2d & known].sum())
            pageable_ps += int(dur[h2d & known & pageable].sum())
        info["kernels"] = int(klass["dev_compute"].shape[0] + klass["dev_collective"].shape[0])
        info["copies"] = int(cp.shape[0])
        if p.n_events > rowsets.ROWSET_MIN_ROWS:  # a big device's sets: read over its lines, by a byte of kind a row
            kind = np.full(p.n_events, -1, np.int8)
            for i, k in enumerate(keys):
                kind[klass[k]] = i
            del klass, order, cp
            built = line_sets(p, act_lines, kind, list(range(len(keys))))
        else:
            built = [Measure.of_rows(p, klass[k]) if klass[k].shape[0] else None for k in keys]
        dev_sets = {k: m for k, m in zip(keys, built) if m is not None}
        for k, m in dev_sets.items():
            parts[k].append(m)
        info["sets"] = dev_sets  # per kind: this device's wall-time set (the devices analysis reads them)
        # lengths of unions, walked without building them (a big device's sets hold millions of intervals)
        compute = [dev_sets[k] for k in ("dev_compute", "dev_collective") if k in dev_sets]
        if dev_sets:
            info["compute_ps"], info["busy_ps"] = union_lengths([compute, list(dev_sets.values())])
            ran = [first_last(v) for v in dev_sets.values() if len(v)]
            if ran:
                info["first_ps"], info["last_ps"] = min(a for a, _ in ran), max(b for _, b in ran)
    out = {k: union_of(*parts[k]) for k in keys}
    if h2d_known_ps:
        act.h2d_pageable_ps = (pageable_ps, h2d_known_ps)
    act.h2d_xprof_named = h2d_xprof_named
    act.per_device = per_device
    return out


def activity(trace: Trace, ctx: Context) -> Activity:
    """Classify the host's events (and its devices') once per analysis run."""
    return ctx.once(_activity, trace, ctx)


def _activity(trace: Trace, ctx: Context) -> Activity:
    trace, _ = host_trace(trace)
    host = _host_plane(trace)
    devices = [p for p in trace.device_planes if p.n_events]
    act = Activity(host=host, devices=devices, python_lines=EMPTY, tfdata_lines=EMPTY)
    lo, hi = None, None
    for p in ([host] if host is not None else []) + devices:
        a, b = int(p.ev_start_ps.min()), p.max_end()
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    act.span = (lo or 0, hi or 0)
    act.sets.update(_device_sets(act, devices, ctx))
    if host is None:
        return act
    p = host
    line_cls, n_eigen = _line_classes(p)
    act.line_cls = line_cls
    act.python_lines = np.flatnonzero(line_cls[:-1] == L_PYTHON)
    act.tfdata_lines = np.flatnonzero(line_cls[:-1] == L_TFDATA)
    act.n_cores = n_eigen or None
    act.order, act.bounds = _bucket(p.ev_line, p.ev_meta, line_cls, _meta_classes(p), M_UNKNOWN, N_META, 4)
    cr = act.code_rows
    ALL = (L_TRAIN, L_PYTHON, L_TFDATA, L_COMM)
    TRAIN_PY = (L_TRAIN, L_PYTHON)
    start, end, dur = p.ev_start_ps, p.ends, p.ev_dur_ps

    rows = act.rows
    rows["input"] = cr(ALL, (M_INPUT,))
    rows["h2d_api"] = cr(ALL, (M_H2D_API,))
    rows["launch"] = cr(ALL, (M_LAUNCH,))
    rows["collective"] = union_rows(cr(TRAIN_PY, (M_COLL,)), cr((L_COMM,), [m for m in KNOWN_META if m != M_INPUT]))
    rows["op"] = cr(TRAIN_PY, (M_OP,))
    rows["iterator"] = cr(ALL, (M_ITERATOR,))
    rows["frame"] = cr((L_PYTHON,), (M_FRAME,))

    st = ctx.stats(p, STEP_STATS)
    # Step marker candidates: user roots (_r, TraceContext) and Keras' Profiled batch.
    r = st["_r"]
    roots = EMPTY
    if len(r):
        v = r.numeric()
        roots = r.rows[(v != 0) & ~np.isnan(v)]
        roots = roots[~np.isin(p.names_of(roots).astype(str), list(IMPLICIT_ROOTS))]
    rows["roots"] = union_rows(roots, cr(ALL, (M_TRACE_CONTEXT,)))
    rows["profiled_batch"] = cr(ALL, (M_PROFILED_BATCH,))

    # TF runtime on the training threads: what is not an op, a launch, an input wait... (nor a marker)
    rt = union_rows(cr((L_TRAIN,), (M_NONE, M_WRAPPER, M_EAGER, M_EAGER_KERNEL, M_FUNC_CALL, M_FUNC_RUN, M_FRAME,
                                    M_ITERATOR, M_PRODUCE, M_CAPTURED_FN)),
                    cr((L_PYTHON,), (M_WRAPPER,)))
    rt = rt[dur[rt] > 0]
    if rows["roots"].shape[0]:
        rt = rt[~np.isin(rt, rows["roots"])]
    rows["runtime"] = rt

    # Eager execution: EagerExecute with is_func 0 (op by op) or 1 (a function).
    ee = cr(ALL, (M_EAGER,))
    is_func = st["is_func"].values_at(ee)
    func_rows = union_rows(ee[is_func == 1], union_rows(cr(ALL, (M_FUNC_CALL,)), cr((L_PYTHON,), (M_FUNC_RUN,))))
    func_m = Measure.of_rows(p, func_rows)
    e0 = ee[is_func == 0]
    eager_rows = e0[~contained(func_m, start[e0], end(e0))]
    eager_m = Measure.of_rows(p, eager_rows)
    ek = cr(ALL, (M_EAGER_KERNEL,))
    ek = ek[contained(eager_m, start[ek], end(ek))]
    rows["func"], rows["eager"], rows["eager_kernel"] = func_rows, eager_rows, ek

    rows["python_all"] = cr((L_PYTHON,), KNOWN_META)
    rows["produce"] = cr(ALL, (M_PRODUCE,))
    rows["captured_fn"] = cr(ALL, (M_CAPTURED_FN,))

    act.sets["func"] = func_m
    act.sets["eager"] = eager_m
    return act


__all__ = ["Activity", "KNOWN_META", "L_COMM", "L_PYTHON", "L_TFDATA", "L_TRAIN", "M_FRAME", "M_FUNC_CALL", "M_INPUT",
           "M_OP", "STEP_STATS", "activity", "host_trace", "union_rows"]
