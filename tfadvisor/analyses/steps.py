"""Training steps: where they are, how long they take, and what their time went to.

Steps come from the first marker kind the trace has, in this order (``steps_source``):

``trace_context``
    Events with a non-zero ``_r`` (root) stat or named ``TraceContext``, e.g.
    ``tf.profiler.experimental.Trace('train', step_num=i, _r=1)``. TF's own implicit roots
    (``FunctionRun``, ``SessionRun``, ``RunGraph``, ``ExecutorState::Process``) carry ``_r`` too;
    like xprof they never make a step by themselves. Where a Keras ``Profiled batch`` event
    wraps the marker, the outermost of the two is the step.
``profiled_batch``
    Keras 3's TensorBoard callback: ``Profiled batch`` events with ``step_num`` (no ``_r``, so
    xprof finds no steps in such profiles).
``device_steps``
    The ``Steps`` line of device planes (TPU; GPU profiles whose converter derived one):
    the device with the most steps.
``function_cadence``
    No markers: the calls of the repeating train function on the python thread
    (``EagerLocalExecute: __inference_<fn>_<n>``, e.g. Keras 3's
    ``__inference_multi_step_on_iterator_<n>``; the most called one, as Keras' evaluation runs
    a function of the same name); step *i* runs from call *i* to call *i+1*, or to the end of
    its own call when another Keras step function (validation) runs before call *i+1*.
``iterator_cadence``
    As above from the ``IteratorGetNext*`` calls.

Only the outermost marker of each nest counts. Steps are then made disjoint: markers of no
positive length are dropped, a marker that mostly repeats an earlier one (the same step
marked on two threads) is rejected, a smaller overlap is clipped; each with a note. So no
share of step or wall time can leave 0..100. The step time is the marker's duration
(what xprof calls the step time); ``period_ms`` (start to the next step's start) also counts
the time between steps.

A marker may hold several training steps (Keras ``steps_per_execution=k``: one call of the
train function, one ``Profiled batch``, runs k steps). k comes from the first source that
knows (``steps_per_execution_source``): ``run_file`` (``tfadvisor_run.json``
``steps.steps_per_execution``, written by the Keras callback), ``step_num_stride`` (Keras
numbers a marker by its first step, so consecutive markers' ``step_num`` jump by k), or
``loop_structure`` (Keras' multi-step loop calls ``IteratorGetNextAsOptional`` once per step
inside each call). ``steps_count`` counts training steps, ``executions_count`` markers; step
times are per training step (a marker's duration over its steps, ``ms_per_step``).

Each step is labelled with what ran before it when that was not training (``preceded_by``):
``validation`` (a Keras step function other than the train one ran in between) or
``epoch_end`` (a ``Profiled batch`` step number starting again; the run file's
``steps.epoch_ends_after_step``). The first step after one is never an outlier, and the time
before it is no gap (see ``gaps``).

Summary statistics follow xprof: with more than five steps the first and the last are left
out (``in_stats`` False): they are often cut or slowed by the profiler starting and stopping.
Outliers are steps slower than median + k * MAD (``Options.outlier_k``), over all steps.

Each step's wall time is split into exclusive categories by priority (interval arithmetic,
so overlapping threads are not counted twice):

* with a device plane: device compute > collectives > input (H2D copies and host waits for
  the next batch) > other (D2H/D2D copies, memsets) > kernel launch > host compute > idle.
* CPU-only: input (host waits in ``IteratorGetNext*``, as xprof counts it) > collectives >
  device compute (the TF ops on the training threads and eagerly executed kernels: the CPU
  is the device) > other (TF runtime: executor and function-call time not covered by an op) >
  host compute (Python-side TF API calls) > idle (nothing traced: pure Python, sleeping).

The module also holds the per-host activity model that ``gaps``, ``input``, ``eager`` and
``overhead`` share (:func:`activity`, cached in the context); interval arithmetic is in
:mod:`tfadvisor.analyses.intervals`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

import tfadvisor._native as _native
from tfadvisor.analyses import device_lines
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.intervals import (
    EMPTY,
    LazyUnion,
    Measure,
    Runs,
    contained,
    contains_any,
    line_runs,
    outermost,
    priority_split,
    rows_runs,
    union_of,
    union_runs,
)
from tfadvisor.runmeta import steps_per_execution
from tfadvisor.table import Table, factorize, group_sum
from tfadvisor.trace import Plane, StatColumn, Trace

#: ``_bucket_kernel(ev_line, ev_meta, line_cls, meta_cls, unknown, stride, ncodes)``: Class code per event (line
#: class * stride + metadata class) and the rows of each code. Every index is checked: an event whose line is out of
#: range, or whose code falls outside [0, ncodes), goes to the overflow bucket ``ncodes``; metadata out of range
#: counts as ``unknown``. Returns the rows ordered by code (ascending within a code) and the bounds of each code's
#: run (length ncodes + 2).
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
# The activity model of one host (and its devices)
# ------------------------------------------------------------------------------------------

#: A TF op event: ``scope/name:Type``.
TF_OP_RE = re.compile(r"^[^:\s]+:[A-Za-z_][A-Za-z0-9_]*$")
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
DERIVED_DEVICE_LINES = device_lines.DERIVED_LINE_NAMES  # kept for importers
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
            m = Measure.of_rows(self.host, r) if (r is not None and self.host is not None) else Measure.empty()
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
    arrays = [np.asarray(a, np.int64) for a in arrays if a is not None and len(a)]
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
    names = plane.event_names
    out = np.zeros(len(names) + 1, np.int64)
    out[-1] = M_UNKNOWN
    for i, nm in enumerate(names):
        nm = str(nm)
        cuda = nm.startswith("cu") or nm.startswith("hip")
        if nm.startswith("IteratorGetNext"):
            c = M_INPUT
        elif cuda and LAUNCH_RE.match(nm):
            c = M_LAUNCH
        elif cuda and H2D_API_RE.match(nm):
            c = M_H2D_API
        elif nm == "EagerExecute":
            c = M_EAGER
        elif nm == "EagerKernelExecute":
            c = M_EAGER_KERNEL
        elif nm.startswith("EagerLocalExecute: __inference_") or nm.startswith("__inference_"):
            c = M_FUNC_CALL
        elif nm in ("FunctionRun", "SessionRun", "RunGraph"):
            c = M_FUNC_RUN
        elif nm == "Profiled batch":
            c = M_PROFILED_BATCH
        elif nm == "TraceContext":
            c = M_TRACE_CONTEXT
        elif nm.startswith("Iterator::"):
            c = M_ITERATOR
        elif nm.endswith("Produce") and _PRODUCE_RE.match(nm):
            c = M_PRODUCE
        elif nm == "InstantiatedCapturedFunction::Run":
            c = M_CAPTURED_FN
        elif nm.startswith(PYTHON_FRAME_PREFIX):
            c = M_FRAME
        elif _maybe_collective(nm) and HOST_COLLECTIVE_RE.search(nm):
            c = M_COLL
        elif ":" in nm and TF_OP_RE.match(nm):
            c = M_WRAPPER if nm[nm.rfind(":") + 1:] in WRAPPER_OP_TYPES else M_OP
        else:
            c = M_NONE
        out[i] = c
    return out


def _copy_directions(p: Plane, cp: np.ndarray, by_name: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For copy rows ``cp`` (ascending): is each a host-to-device copy, is its direction known from
    ``memcpy_details`` kinds, and is its source pageable memory.

    Newer TF writes ``memcpy_details`` as ``kind_src:pageable kind_dst:device size:... dest:...``;
    TF 2.4 and older only ``size:112 dest:4 async:0``. Without the kinds the event name
    (``MemcpyH2D``) says what the copy is, and where the name gives no direction, the stream's
    name (``Stream #135(MemcpyH2D)``).
    """
    h2d = by_name.copy()
    names = p.event_names
    no_dir = np.array([DEVICE_DIRECTION_RE.search(str(n)[:96]) is None and not _is_memset(str(n)) for n in names]
                      + [False], bool)
    lnames = [str(n) + " " + str(r) for n, r in zip(p.line_names, p.lines["name"])]
    line_h2d = np.array([DEVICE_H2D_RE.search(n) is not None and DEVICE_OTHER_COPY_RE.search(n) is None
                         for n in lnames] + [False], bool)
    meta = p.ev_meta[cp]
    meta = np.where((meta >= 0) & (meta < len(names)), meta, len(names))
    ln = p.ev_line[cp].astype(np.int64)
    ln = np.where((ln >= 0) & (ln < len(lnames)), ln, len(lnames))
    undirected = no_dir[meta]
    h2d[undirected] = line_h2d[ln[undirected]]
    known = np.zeros(cp.shape[0], bool)
    pageable = np.zeros(cp.shape[0], bool)
    md = p.stat("memcpy_details", cp)
    if len(md):
        det = md.strings_at(md.rows)
        codes, uniq = factorize(np.array(["" if d is None else d for d in det], dtype=object))
        u_known = np.array(["kind_dst:" in d or "kind_src:" in d for d in uniq], bool)
        u_h2d = np.array(["kind_dst:device" in d and "kind_src:device" not in d for d in uniq], bool)
        u_pg = np.array(["kind_src:pageable" in d for d in uniq], bool)
        pos = np.searchsorted(cp, md.rows)
        ok = (pos < cp.shape[0]) & (cp[np.minimum(pos, cp.shape[0] - 1)] == md.rows)
        pos, c = pos[ok], codes[ok]
        kn = u_known[c]
        h2d[pos[kn]] = u_h2d[c[kn]]
        known[pos[kn]] = True
        pageable[pos] = u_pg[c] & u_h2d[c]
    return h2d, known, pageable


def _is_memset(name: str) -> bool:
    return "memset" in name.lower()


def _device_sets(devices: list[Plane], ctx: Context) -> dict[str, Measure]:
    """Device activity as wall-time sets (union over the devices of one host): compute, H2D copies,
    other copies, collectives; from each plane's activity lines only (streams, else XLA Ops, see
    :mod:`tfadvisor.analyses.device_lines`). Per-device figures go to ``ctx.cache``."""
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
        mc = np.zeros(len(names) + 1, np.int64)
        for i, nm in enumerate(names):
            nm = str(nm)[:96]  # kernel names are long C++ signatures: the kind is in the head
            if DEVICE_MEMCPY_RE.search(nm):
                mc[i] = 1 if DEVICE_H2D_RE.search(nm) else 2
            elif DEVICE_COLLECTIVE_RE.search(nm):
                mc[i] = 3
        mc[-1] = 4  # unknown metadata: skip
        order, bounds = _bucket(p.ev_line, p.ev_meta, line_cls, mc, 4, 8, 2)
        klass = {k: order[bounds[i]:bounds[i + 1]] for i, k in enumerate(keys)}
        # copies: direction from memcpy_details where it says, else from the names
        cp = np.sort(np.concatenate([klass["dev_h2d"], klass["dev_copy"]]), kind="stable")
        if cp.shape[0]:
            by_name = np.isin(cp, klass["dev_h2d"])
            h2d, known, pageable = _copy_directions(p, cp, by_name)
            klass["dev_h2d"], klass["dev_copy"] = cp[h2d], cp[~h2d]
            if klass["dev_h2d"].shape[0]:
                names = {str(n) for n in p.names_of(klass["dev_h2d"])}
                h2d_xprof_named |= any(n.lower().startswith(XPROF_H2D_PREFIX) for n in names)
            dur = p.ev_dur_ps[cp]
            h2d_known_ps += int(dur[h2d & known].sum())
            pageable_ps += int(dur[h2d & known & pageable].sum())
        dev_parts = {}
        for k in keys:
            r = klass[k]
            if r.shape[0]:
                dev_parts[k] = union_runs(rows_runs(p, r))  # ascending rows: no gathered copies
                parts[k].append(dev_parts[k])
        comp = klass["dev_compute"]
        info["kernels"] = int(comp.shape[0] + klass["dev_collective"].shape[0])
        info["copies"] = int(cp.shape[0])
        if "dev_compute" in dev_parts or "dev_collective" in dev_parts:
            cs, ce = union_runs([dev_parts[k] for k in ("dev_compute", "dev_collective") if k in dev_parts])
            info["compute_ps"] = int(np.sum(ce - cs))
        if dev_parts:
            bs, be = union_runs(list(dev_parts.values()))
            info["busy_ps"] = int(np.sum(be - bs))
            if bs.shape[0]:
                info["first_ps"], info["last_ps"] = int(bs[0]), int(be[-1])
    out = {}
    for k in keys:
        s, e = union_runs(parts[k])
        out[k] = Measure(s, e, disjoint=True)
    if h2d_known_ps:
        ctx.cache["tfadvisor.h2d_pageable_ps"] = (pageable_ps, h2d_known_ps)
    ctx.cache["tfadvisor.h2d_xprof_named"] = h2d_xprof_named
    ctx.cache["tfadvisor.device_activity"] = per_device
    return out


def activity(trace: Trace, ctx: Context) -> Activity:
    """Classify the host's events (and its devices') once per analysis run."""
    key = "tfadvisor.activity"
    if key in ctx.cache:
        return ctx.cache[key]
    trace, _ = host_trace(trace)
    host = _host_plane(trace)
    devices = [p for p in trace.device_planes if p.n_events]
    act = Activity(host=host, devices=devices, python_lines=EMPTY, tfdata_lines=EMPTY)
    ctx.cache[key] = act
    lo, hi = None, None
    for p in ([host] if host is not None else []) + devices:
        a, b = int(p.ev_start_ps.min()), int(p.ev_end_ps.max())
        lo = a if lo is None else min(lo, a)
        hi = b if hi is None else max(hi, b)
    act.span = (lo or 0, hi or 0)
    act.sets.update(_device_sets(devices, ctx))
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
    start, end, dur = p.ev_start_ps, p.ev_end_ps, p.ev_dur_ps

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
    eager_rows = e0[~contained(func_m, start[e0], end[e0])]
    eager_m = Measure.of_rows(p, eager_rows)
    ek = cr(ALL, (M_EAGER_KERNEL,))
    ek = ek[contained(eager_m, start[ek], end[ek])]
    rows["func"], rows["eager"], rows["eager_kernel"] = func_rows, eager_rows, ek

    rows["python_all"] = cr((L_PYTHON,), KNOWN_META)
    rows["produce"] = cr(ALL, (M_PRODUCE,))
    rows["captured_fn"] = cr(ALL, (M_CAPTURED_FN,))

    act.sets["func"] = func_m
    act.sets["eager"] = eager_m
    return act


# ------------------------------------------------------------------------------------------
# Step detection
# ------------------------------------------------------------------------------------------

@dataclass
class StepSet:
    source: str
    start: np.ndarray
    end: np.ndarray
    number: np.ndarray
    name: np.ndarray
    marker_rows: np.ndarray = field(default_factory=lambda: EMPTY)  # host rows used as markers
    note: str | None = None


def _step_numbers(p: Plane, st: dict[str, StatColumn], rows: np.ndarray, inner: np.ndarray | None = None) -> np.ndarray:
    num = np.full(rows.shape, np.nan)
    for key in ("step_num", "step_id", "iter_num"):
        for rr in ([inner] if inner is not None else []) + [rows]:
            v = st[key].values_at(rr)
            fill = np.isnan(num) & np.isfinite(v) & (np.abs(v) < 2.0 ** 62)
            num[fill] = v[fill]
    missing = np.isnan(num)
    if missing.all():
        return np.arange(rows.shape[0], dtype=np.int64)
    if missing.any():
        num[missing] = -1
    return num.astype(np.int64)


def device_steps(act: Activity, ctx: Context) -> list[tuple[Plane, np.ndarray, np.ndarray]]:
    """Per device plane with a ``Steps`` line: (plane, event rows of its steps by start, step
    numbers). Step numbers come from ``step_num``/``group_id`` stats or numeric event names, so
    that the same step can be matched across devices; else they count from 0."""
    key = "tfadvisor.device_steps"
    if key in ctx.cache:
        return ctx.cache[key]
    out = []
    for d in act.devices:
        lr = device_lines.step_lines(d)
        if not lr.shape[0]:
            continue
        rows = np.flatnonzero(d.line_event_mask(lr) & (d.ev_dur_ps > 0) & (d.ev_meta >= 0))
        if not rows.shape[0]:
            continue
        rows = rows[np.argsort(d.ev_start_ps[rows], kind="stable")]
        num = np.full(rows.shape[0], np.nan)
        for key_ in ("step_num", "group_id", "step_id"):
            v = d.stat(key_, rows).values_at(rows)
            fill = np.isnan(num) & np.isfinite(v) & (np.abs(v) < 2.0 ** 62)  # castable to int64
            num[fill] = v[fill]
        if np.isnan(num).any():
            names = [str(n) for n in d.names_of(rows)]
            if all(n.isdigit() and len(n) < 18 for n in names):
                num = np.array([int(n) for n in names], np.float64)
        if np.isnan(num).any() or np.unique(num).shape[0] != num.shape[0]:
            num = np.arange(rows.shape[0], dtype=np.float64)
        out.append((d, rows, num.astype(np.int64)))
    ctx.cache[key] = out
    return out


def _clean_steps(steps: StepSet) -> StepSet:
    """Steps as disjoint intervals of positive length, by start.

    Markers of no positive duration are dropped; a marker that mostly repeats an earlier one
    (overlap of at least half the shorter: the same step marked on two threads) is rejected;
    a smaller overlap is clipped (the later step starts where the earlier ends). Each is noted.
    """
    s, e = steps.start, steps.end
    n = int(s.shape[0])
    if n == 0:
        return steps
    keep = np.flatnonzero(e > s)
    keep = keep[np.argsort(s[keep], kind="stable")]
    new_s = s[keep].copy()
    dropped_len = n - keep.shape[0]
    ok = np.ones(keep.shape[0], bool)
    rejected = clipped = 0
    last_s, last_e = None, None
    for i in range(keep.shape[0]):
        a, b = int(new_s[i]), int(e[keep[i]])
        if last_e is not None and a < last_e:
            if min(b, last_e) - a >= 0.5 * min(b - a, last_e - last_s) or b <= last_e:
                ok[i] = False
                rejected += 1
                continue
            new_s[i] = a = last_e
            clipped += 1
        last_s, last_e = a, b
    if dropped_len == 0 and rejected == 0 and clipped == 0:
        return steps
    idx = keep[ok]
    notes = [steps.note] if steps.note else []
    if dropped_len:
        notes.append(f"{dropped_len} step marker(s) with no positive duration ignored")
    if rejected:
        notes.append(f"{rejected} step marker(s) overlapping an earlier one (the same step marked twice) rejected")
    if clipped:
        notes.append(f"{clipped} step(s) overlapping the one before clipped to start where it ends")
    marker_rows = steps.marker_rows[idx] if steps.marker_rows.shape[0] == n else steps.marker_rows
    return StepSet(steps.source, new_s[ok], e[idx], steps.number[idx], steps.name[idx], marker_rows,
                   note="; ".join(notes))


def detect_steps(trace: Trace, ctx: Context) -> StepSet:
    """The run's steps (see the module docstring), as disjoint intervals of positive length."""
    return _clean_steps(_detect_steps(trace, ctx))


def _detect_steps(trace: Trace, ctx: Context) -> StepSet:
    act = activity(trace, ctx)
    p = act.host
    none = StepSet("none", EMPTY, EMPTY, EMPTY, np.empty(0, object))
    if p is not None:
        st = ctx.stats(p, STEP_STATS)
        roots, pb = act.rows.get("roots", EMPTY), act.rows.get("profiled_batch", EMPTY)
        if roots.shape[0]:
            outer_roots = outermost(p, roots)
            rows = outer_roots
            inner = None
            if pb.shape[0]:
                both = outermost(p, union_rows(outer_roots, pb))
                # keep the outermost marker of each nest that holds a root marker
                rm = Measure(p.ev_start_ps[outer_roots], p.ev_end_ps[outer_roots])
                holds = rm.within(p.ev_start_ps[both], p.ev_end_ps[both]) > 0
                rows = both[holds]
                # the root marker inside each (for the step number)
                idx = np.searchsorted(p.ev_start_ps[outer_roots], p.ev_start_ps[rows], side="left")
                inner = outer_roots[np.minimum(idx, outer_roots.shape[0] - 1)]
            return StepSet("trace_context", p.ev_start_ps[rows], p.ev_end_ps[rows],
                           _step_numbers(p, st, rows, inner), p.names_of(rows), rows)
        if pb.shape[0]:
            rows = outermost(p, pb)
            return StepSet("profiled_batch", p.ev_start_ps[rows], p.ev_end_ps[rows], _step_numbers(p, st, rows),
                           p.names_of(rows), rows)
    dev = device_steps(act, ctx)
    if dev:
        best = max(dev, key=lambda x: x[1].shape[0])  # the device with the most steps (the first on ties)
        d, rows = best[0], best[1]
        # Like xprof, a step takes as long as its slowest device: the same step number elsewhere.
        dur = d.ev_dur_ps[rows].copy()
        pos = {int(n): i for i, n in enumerate(best[2])}
        for other, orows, onum in dev:
            if other is d:
                continue
            for n, r in zip(onum.tolist(), orows.tolist()):
                i = pos.get(n)
                if i is not None and other.ev_dur_ps[r] > dur[i]:
                    dur[i] = other.ev_dur_ps[r]
        return StepSet("device_steps", d.ev_start_ps[rows], d.ev_start_ps[rows] + dur, best[2], d.names_of(rows),
                       note=(f"steps from the Steps line of {device_lines.short_name(d)}"
                             + (f" ({len(dev)} devices have one)" if len(dev) > 1 else "")))
    if p is None:
        return none
    # Cadence of the repeating train function on the python thread.
    cand = act.code_rows((L_PYTHON,), (M_FUNC_CALL,))
    if cand.shape[0] >= 2:
        cand = outermost(p, cand)
        names = np.array([str(n).split(": ", 1)[-1] for n in p.names_of(cand)], dtype=object)
        fn_names, fn_of = np.unique(names, return_inverse=True)
        fn_count = np.bincount(fn_of, minlength=len(fn_names))
        fn_sum = group_sum(fn_of, p.ev_dur_ps[cand], len(fn_names))
        repeated = np.flatnonzero(fn_count >= 2)
        if repeated.shape[0]:
            pref = np.array([TRAIN_FN_RE.search(str(fn_names[i])) is not None for i in repeated], bool)
            pool = repeated[pref] if pref.any() else repeated
            # the most called (Keras' evaluation runs the same kind of function, fewer times), then the
            # most time; ties: the first name in sorted order
            best = fn_names[pool[np.lexsort((-fn_sum[pool], -fn_count[pool]))[0]]]
            rows = cand[names == best]
            rows = rows[np.argsort(p.ev_start_ps[rows], kind="stable")]
            s = p.ev_start_ps[rows]
            e = np.append(s[1:], p.ev_end_ps[rows[-1]])
            # a step followed by validation (other Keras step functions) ends with its own call
            other = cand[(names != best) & np.array([KERAS_STEP_FN_RE.search(n) is not None for n in names], bool)]
            if other.shape[0] and rows.shape[0] > 1:
                t = np.sort(p.ev_start_ps[other])
                held = np.searchsorted(t, s[1:], side="left") > np.searchsorted(t, s[:-1], side="left")
                e[:-1][held] = p.ev_end_ps[rows[:-1][held]]
            return StepSet("function_cadence", s, e, np.arange(rows.shape[0], dtype=np.int64),
                           np.full(rows.shape[0], str(best), dtype=object),
                           note=f"no step markers: steps follow the calls of {best}")
    it = act.rows.get("input", EMPTY)
    if it.shape[0] >= 2:
        it = outermost(p, it)
        line_ids, line_n = np.unique(p.ev_line[it], return_counts=True)
        it = it[p.ev_line[it] == line_ids[np.argmax(line_n)]]  # the line with the most calls
        if it.shape[0] >= 2:
            s = p.ev_start_ps[it]
            e = np.append(s[1:], p.ev_end_ps[it[-1]])
            return StepSet("iterator_cadence", s, e, np.arange(it.shape[0], dtype=np.int64),
                           np.full(it.shape[0], "IteratorGetNext", dtype=object),
                           note="no step markers or repeating function: steps follow the IteratorGetNext calls")
    return none


# ------------------------------------------------------------------------------------------
# Training steps per marker (Keras steps_per_execution)
# ------------------------------------------------------------------------------------------

#: Stride evidence is believed only when markers follow each other this closely (the median
#: time between two markers, as a share of the median marker): a loop that marks every 10th
#: step shows stride 10 too, but with 9 unmarked steps between its markers.
STRIDE_MAX_GAP_FRACTION = 0.5
#: Events of the input iterator that Keras' multi-step loop calls once per step.
_LOOP_INPUT_PREFIX = "IteratorGetNextAsOptional"


@dataclass
class Executions:
    """How many training steps each step marker (an execution) holds."""
    k: int  # steps per execution
    source: str  # run_file / step_num_stride / loop_structure / none
    per_row: np.ndarray  # training steps of each marker (the last of an epoch may hold fewer)
    note: str | None = None


def _stride(steps: StepSet) -> tuple[int | None, np.ndarray]:
    """(k, step-number difference to the next marker per row, 0 where unknown) from the
    ``step_num`` of consecutive markers (Keras numbers a marker by its first step)."""
    n = steps.number.shape[0]
    diff = np.zeros(n, np.int64)
    if n < 2 or steps.source not in ("trace_context", "profiled_batch") or (steps.number < 0).any():
        return None, diff
    d = np.diff(steps.number)
    diff[:-1] = np.where(d > 0, d, 0)
    pos = d[d > 0]
    if not pos.shape[0]:
        return None, diff
    vals, counts = np.unique(pos, return_counts=True)
    k = int(vals[counts.argmax()])
    if k < 2 or counts.max() < 0.5 * pos.shape[0]:
        return None, diff
    pairs = np.flatnonzero(d == k)
    gap = np.median(steps.start[pairs + 1] - steps.end[pairs])
    if gap > STRIDE_MAX_GAP_FRACTION * np.median(steps.end - steps.start):
        return None, diff
    return k, diff


def _loop_counts(act: Activity, steps: StepSet) -> np.ndarray | None:
    """Per marker, the calls of Keras' multi-step loop into its iterator (one per step), or None
    when the trace shows no such loop."""
    p = act.host
    if p is None:
        return None
    rows = act.rows.get("input", EMPTY)
    if not rows.shape[0]:
        return None
    names = p.event_names
    loop = np.fromiter((str(n).startswith(_LOOP_INPUT_PREFIX) for n in names), bool, len(names))
    rows = rows[loop[np.maximum(p.ev_meta[rows], 0)] & (p.ev_meta[rows] >= 0)]
    if not rows.shape[0] or not any("multi_step_on_iterator" in str(n) for n in names):
        return None
    rows = outermost(p, rows)
    t = np.sort(p.ev_start_ps[rows])
    return np.searchsorted(t, steps.end, side="left") - np.searchsorted(t, steps.start, side="left")


#: Keras' step functions (train, test, predict; Keras 3 names them all multi_step_on_iterator).
#: The functions a training step calls (preferred over others repeating on the python thread).
TRAIN_FN_RE = re.compile(r"multi_step_on_iterator|train_step|train_function|one_step_on|step_on_iterator")
KERAS_STEP_FN_RE = re.compile(r"multi_step_on_iterator|one_step_on|step_on_iterator|train_function|train_step|"
                              r"test_function|test_step|predict_function|predict_step")


def preceded_by(trace: Trace, act: Activity, steps: StepSet) -> np.ndarray:
    """What ran between each step and the one before it, when it was not training:
    ``validation`` (a Keras step function other than the one the steps run: Keras'
    evaluation at an epoch end), ``epoch_end`` (the marker's step number starts again, or the
    run file's ``steps.epoch_ends_after_step`` falls between the two markers), else ``""``."""
    n = steps.start.shape[0]
    out = np.full(n, "", dtype=object)
    p = act.host
    if n < 2 or p is None:
        return out
    if steps.source == "profiled_batch":  # Keras numbers batches from 0 in each epoch
        out[1:][np.diff(steps.number) <= 0] = "epoch_end"
    meta = (trace.run_metadata or {}).get("steps")
    ends = meta.get("epoch_ends_after_step") if isinstance(meta, dict) else None
    if steps.source == "trace_context" and isinstance(ends, list) and (steps.number >= 0).all():
        last = np.array([v for v in ends if isinstance(v, int) and not isinstance(v, bool)], np.int64)
        if last.shape[0]:
            k = np.searchsorted(np.sort(last), steps.number, side="left")  # epoch ends before each marker's first step
            out[1:][np.diff(k) > 0] = "epoch_end"
    calls = outermost(p, act.code_rows((L_PYTHON,), (M_FUNC_CALL,)))
    if not calls.shape[0]:
        return out
    cs = p.ev_start_ps[calls]
    names = np.array([str(x) for x in p.names_of(calls)], dtype=object)
    inside = Measure(steps.start, steps.end, disjoint=True).within(cs, cs + 1) > 0
    train = set(names[inside].tolist())
    val = ~inside & np.array([x not in train and KERAS_STEP_FN_RE.search(x) is not None for x in names], bool)
    if val.any():
        t = np.sort(cs[val])
        held = np.searchsorted(t, steps.start[1:], side="left") > np.searchsorted(t, steps.end[:-1], side="left")
        out[1:][held] = "validation"
    return out


def executions(trace: Trace, act: Activity, steps: StepSet) -> Executions:
    """Training steps per marker, from the first source that knows: the run file's
    ``steps_per_execution``, the ``step_num`` stride of consecutive markers, or the iterator calls
    of Keras' multi-step loop inside each marker. A marker's own count is its step-number
    difference to the next marker (or its loop's count) when that is between 1 and k, else k."""
    n = steps.start.shape[0]
    one = Executions(1, "none", np.ones(n, np.int64))
    if n == 0:
        return one
    k_run, _ = steps_per_execution(trace.run_metadata or {})
    k_stride, diff = _stride(steps)
    loop = _loop_counts(act, steps) if steps.source in ("trace_context", "profiled_batch",
                                                        "function_cadence") else None
    k_loop = None
    if loop is not None and (loop > 0).any():
        k_loop = int(np.median(loop[loop > 0]))
        k_loop = k_loop if k_loop >= 2 else None
    if k_run is not None:
        k, source = k_run, "run_file"
    elif k_stride is not None:
        k, source = k_stride, "step_num_stride"
    elif k_loop is not None:
        k, source = k_loop, "loop_structure"
    else:
        return one
    if k == 1:
        return Executions(1, source, np.ones(n, np.int64))
    per = np.full(n, k, np.int64)
    if loop is not None:
        ok = (loop >= 1) & (loop <= k)
        per[ok] = loop[ok]
    ok = (diff >= 1) & (diff <= k)
    per[ok] = diff[ok]
    note = None
    if k_run is not None and k_stride is not None and k_stride != k_run:
        note = (f"steps_per_execution: tfadvisor_run.json says {k_run}, the step_num stride of the markers "
                f"{k_stride}: {k_run} used")
    return Executions(k, source, per, note)


# ------------------------------------------------------------------------------------------
# Per-step categories
# ------------------------------------------------------------------------------------------

def step_table(ctx: Context) -> Table | None:
    """The steps analysis' table of this run (a row per step, numpy columns), or None when it
    found no steps."""
    tbl = ctx.table("steps")
    return tbl if tbl is not None and len(tbl) else None


def step_spans(tbl: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(start_ps, end_ps, in_stats) of each step of a step table, and the step time (ps) the
    statistics count (the ``in_stats`` steps)."""
    a = tbl["start_ps"]
    b = tbl["end_ps"]
    in_stats = tbl["in_stats"]
    return a, b, in_stats, float((b - a)[in_stats].sum())


CATEGORIES = ("device_compute", "input", "host_compute", "kernel_launch", "collective", "idle", "other")


def python_host_activity(act: Activity, ctx: Context, steps: StepSet) -> Measure:
    """Python-thread events that are host work: not step markers, not wrappers around whole steps,
    not function-execution waits."""
    key = "tfadvisor.python_host"
    if key in ctx.cache:
        return ctx.cache[key]
    p = act.host
    if p is None:
        ctx.cache[key] = Measure.empty()
        return ctx.cache[key]
    rows = act.rows.get("python_all", EMPTY)
    s, e = p.ev_start_ps[rows], p.ev_end_ps[rows]
    drop = np.zeros(rows.shape[0], bool)
    mk = union_rows(act.rows.get("roots", EMPTY), act.rows.get("profiled_batch", EMPTY))
    if mk.shape[0]:
        drop |= np.isin(rows, mk)
    drop |= contains_any(s, e, steps.start, steps.end)  # wrappers: events that hold a whole step
    func = act.get("func")
    if len(func):
        drop |= contained(func, s, e)
    keep = rows[~drop & (e > s)]
    m = Measure.of_rows(p, keep)
    ctx.cache[key] = m
    ctx.cache["tfadvisor.python_host_rows"] = keep
    return m


def step_layers(act: Activity, ctx: Context, steps: StepSet) -> list[tuple[str, Measure]]:
    """The priority layers of the step-time split."""
    g = act.get
    py = python_host_activity(act, ctx, steps)
    # a category given in several parts: each part takes what the ones before left over
    if act.has_device:
        return [
            ("device_compute", g("dev_compute")),
            ("collective", g("dev_collective")), ("collective", g("collective")),
            ("input", g("dev_h2d")), ("input", g("input_wait")), ("input", g("h2d_api")),
            ("other", g("dev_copy")),
            ("kernel_launch", g("launch")),
            # host ops, the executor and everything else on the TF threads (the ones above took theirs)
            ("host_compute", g("train_threads")), ("host_compute", g("eager")), ("host_compute", py),
            ("idle", g("func")),  # the python thread waits for a function while nothing runs
        ]
    return [
        ("input", g("input_wait")),
        ("collective", g("collective")),
        ("device_compute", g("op")), ("device_compute", g("eager_kernel")),
        ("kernel_launch", g("launch")),
        ("other", g("runtime")), ("other", g("func")),
        ("host_compute", g("eager")), ("host_compute", py),
    ]


def _stats_mask(n: int) -> np.ndarray:
    m = np.ones(n, bool)
    if n > 5:
        m[0] = False
        m[-1] = False
    return m


DECLARED = declare(
    "steps",
    ("steps_source", "", "where the steps came from (`trace_context`, `profiled_batch`, `device_steps`, "
                         "`function_cadence`, `iterator_cadence`, `none`)"),
    ("steps_count", "count", "training steps found"),
    ("executions_count", "count", "step markers (each runs steps_per_execution training steps)"),
    ("steps_per_execution", "count", "training steps per step marker (Keras steps_per_execution)"),
    ("steps_per_execution_source", "", "where steps_per_execution came from (run_file, step_num_stride, "
                                       "loop_structure; none: one step each)"),
    ("steps_in_stats_count", "count", "steps the statistics use (with more than 5 markers the first and last are "
                                      "left out, as in xprof)"),
    ("step_time_mean_ms", "ms", "mean step time (marker duration per training step)"),
    ("step_time_median_ms", "ms", "median step time"),
    ("step_time_p90_ms", "ms", "90th percentile step time"),
    ("step_time_min_ms", "ms", "fastest step"),
    ("step_time_max_ms", "ms", "slowest step"),
    ("step_time_std_ms", "ms", "step time standard deviation"),
    ("step_outliers_count", "count", "steps slower than median + 3 x MAD (all steps; not the first after an epoch "
                                     "end)"),
    ("step_outlier_max_ratio", "", "slowest step / median step (not counting the first after an epoch end) (slowest "
                                   "outlier / median)"),
    ("step_period_mean_ms", "ms", "mean time from one step's start to the next step's start (step time + time "
                                  "between steps)"),
    ("profile_wall_ms", "ms", "wall time from the first step's start to the last step's end"),
    ("steps_wall_pct", "%", "share of that wall time inside steps (less validation and epoch ends between steps) "
                            "(share of wall time inside steps)"),
    ("step_device_compute_pct", "%", "share of step time: device compute"),
    ("step_input_pct", "%", "share of step time: input"),
    ("step_host_compute_pct", "%", "share of step time: host compute"),
    ("step_kernel_launch_pct", "%", "share of step time: kernel launch"),
    ("step_collective_pct", "%", "share of step time: collective"),
    ("step_idle_pct", "%", "share of step time: idle"),
    ("step_other_pct", "%", "share of step time: other"),
    doc="`step_period_mean_ms` (mean time from one step's start to the next one's: step time + time between steps; "
        "the step *time* metrics are the marker duration, as xprof's), `steps_in_stats_count` (steps the statistics "
        "use: with more than 5 steps the first and last are left out, as xprof does), `profile_wall_ms` (first step "
        "start to last step end; without steps the traced span). Category split by priority: with a device: device "
        "compute > collective > input > other (D2H/D2D/memset) > kernel launch > host compute > idle; CPU-only: input "
        "(IteratorGetNext wait, as xprof) > collective > device compute (TF ops on the training threads, eager "
        "kernels) > other (TF runtime) > host compute (Python-side TF calls) > idle (nothing traced: pure Python). "
        "`step_kernel_launch_pct` is None CPU-only",
    tables="`steps` (step, start_ps, end_ps, duration_ms, train_steps, ms_per_step, preceded_by (`validation`, "
           "`epoch_end` or empty), one `<category>_ms` column per category, outlier flag); `steps` also has `name`, "
           "`period_ms`, `in_stats`",
)


def analyze(trace: Trace, ctx: Context) -> AnalysisResult:
    res = AnalysisResult("steps")
    _, note = host_trace(trace)
    if note:
        res.notes.append(note)
    act = activity(trace, ctx)
    steps = detect_steps(trace, ctx)
    ctx.cache["tfadvisor.steps"] = steps
    res.add("steps_source", steps.source)
    if steps.note:
        res.notes.append(steps.note)
    n = int(steps.start.shape[0])
    names = ["steps_count", "step_time_mean_ms", "step_time_median_ms", "step_time_p90_ms", "step_time_min_ms",
             "step_time_max_ms", "step_time_std_ms", "step_outliers_count", "step_outlier_max_ratio",
             "step_period_mean_ms", "steps_in_stats_count", "steps_wall_pct"] + \
            [f"step_{c}_pct" for c in CATEGORIES]
    lo, hi = act.span
    if n == 0:
        res.add("steps_count", 0)
        res.add("profile_wall_ms", (hi - lo) / PS_PER_MS if hi > lo else None)
        res.missing(names[1:], "no steps found: no step markers (_r / TraceContext / Profiled batch), no device "
                               "Steps line and no repeating train function or IteratorGetNext calls")
        return res
    ex = executions(trace, act, steps)
    ctx.cache["tfadvisor.executions"] = ex
    if ex.note:
        res.notes.append(ex.note)
    nsteps = ex.per_row
    dur = steps.end - steps.start
    dur_ms = dur / PS_PER_MS
    step_ms = dur_ms / nsteps  # per training step (a marker runs ``nsteps`` of them)
    period = np.append(np.diff(steps.start), np.nan) / PS_PER_MS / nsteps
    in_stats = _stats_mask(n)
    d = step_ms[in_stats]
    med_all = float(np.median(step_ms))
    mad = float(np.median(np.abs(step_ms - med_all)))
    k = float(ctx.options.outlier_k)
    thr = med_all + k * max(mad, 0.01 * med_all)
    after = preceded_by(trace, act, steps)
    # the first step after an epoch end restarts the input pipeline: an epoch cost, not a slow step
    outlier = (step_ms > thr) & (after == "")

    layers = step_layers(act, ctx, steps)
    split = priority_split((steps.start, steps.end), layers)
    cat_ps = {c: np.zeros(n, np.int64) for c in CATEGORIES}
    for c, v in split.items():
        if c == "_rest":
            cat_ps["idle"] += v
        else:
            cat_ps[c] += v

    tbl = Table({
        "step": steps.number,
        "name": steps.name.astype(str) if steps.name.shape[0] else steps.name,
        "start_ps": steps.start,
        "end_ps": steps.end,
        "duration_ms": dur_ms,
        "train_steps": nsteps,
        "ms_per_step": step_ms,
        "preceded_by": after,
        "period_ms": period,
        "in_stats": in_stats,
        "outlier": outlier,
    }, n=n)
    for c in CATEGORIES:
        tbl[f"{c}_ms"] = cat_ps[c] / PS_PER_MS
    res.tables["steps"] = tbl

    res.add("steps_count", int(nsteps.sum()))
    res.add("executions_count", n)
    res.add("steps_per_execution", ex.k)
    res.add("steps_per_execution_source", ex.source)
    res.add("steps_in_stats_count", int(nsteps[in_stats].sum()))
    res.add("step_time_mean_ms", float(dur_ms[in_stats].sum() / nsteps[in_stats].sum()))
    res.add("step_time_median_ms", float(np.median(d)))
    res.add("step_time_p90_ms", float(np.percentile(d, 90)))
    res.add("step_time_min_ms", float(d.min()))
    res.add("step_time_max_ms", float(d.max()))
    res.add("step_time_std_ms", float(d.std(ddof=1)) if d.shape[0] > 1 else 0.0)
    res.add("step_outliers_count", int(outlier.sum()),
            doc=f"steps slower than median + {k:g} x MAD (all steps; not the first after an epoch end)")
    plain = step_ms[after == ""] if (after == "").any() else step_ms
    res.add("step_outlier_max_ratio", float(plain.max() / med_all) if med_all > 0 else None)
    per = period[~np.isnan(period)]
    if per.shape[0]:
        res.add("step_period_mean_ms", float(per.mean()))
    else:
        res.missing(["step_period_mean_ms"], "a single step: no step period")
    wall_lo, wall_hi = int(steps.start.min()), int(steps.end.max())
    wall = wall_hi - wall_lo
    res.add("profile_wall_ms", wall / PS_PER_MS)
    inside = Measure.union(steps.start, steps.end).total()
    # validation and epoch ends between steps are not training time (steps are disjoint and sorted)
    gap = np.maximum(steps.start[1:] - steps.end[:-1], 0)
    train_wall = wall - int(gap[after[1:] != ""].sum())
    res.add("steps_wall_pct", 100.0 * inside / train_wall if train_wall > 0 else None)
    total = float(dur[in_stats].sum())
    for c in CATEGORIES:
        if c == "kernel_launch" and not act.has_device:
            res.missing(["step_kernel_launch_pct"], "CPU-only trace: no kernel launches")
            continue
        res.add(f"step_{c}_pct", 100.0 * float(cat_ps[c][in_stats].sum()) / total if total > 0 else None)
    return res


__all__ = ["Activity", "CATEGORIES", "Executions", "StepSet", "activity", "analyze", "detect_steps", "executions",
           "python_host_activity", "step_layers", "step_spans", "step_table", "union_rows"]
