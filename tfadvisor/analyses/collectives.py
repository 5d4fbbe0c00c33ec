"""Collectives: all-reduce time per step, its overlap with compute, and what it should cost.

Measured from, in order of preference:

* device kernels on GPU streams: NCCL (``ncclDevKernel_AllReduce_*``,
  ``ncclKernel_AllReduce_*``) and XLA ``all-reduce`` ops;
* host TF ops: ``CollectiveReduceV2`` / ``CollectiveReduce`` / ``CollectiveReduceV3`` /
  ``NcclAllReduce`` (on the CPU the op event spans the transfer, on the collective_ops
  thread) and Horovod ``HorovodAllreduce*``.

Time is the union of the all-reduce intervals on each plane (overlapping all-reduces count
once) inside each step, averaged over the steps the step statistics use (``in_stats``, so
``allreduce_pct`` x ``step_time_mean_ms`` / 100 = ``allreduce_ms_per_step``) and over the
planes that ran them (GPUs work in parallel). Without a step table the totals are given over
the profiled wall time.

One figure for the collectives' share of the step: the step breakdown's ``collective``
category (``step_collective_pct``: collective ops and kernels plus the collective runtime's
own events, e.g. ``CollectiveExecutor::*`` on the ``collective_ops`` threads).
``collective_exposed_pct`` is the part of it not hidden behind compute, what overlapping or
shrinking the collectives can recover: on devices the category already leaves out the time a
kernel runs (device compute comes first in the split), on the host the all-reduce time that
overlaps host compute (``allreduce_overlap_pct``) is taken off it.

The expectation is the bandwidth cost of moving the gradients once: ``param_count x 4
bytes / bandwidth`` (gradients travel in fp32 even under mixed precision), and for a ring
all-reduce over N replicas ``x 2(N-1)/N``. Inputs come from ``ctx.options`` (command line
or the run's ``tfadvisor_run.json``); the link may be named (see :mod:`tfadvisor.model.interconnects`).
"""

from __future__ import annotations

import functools
import re

import numpy as np

import tfadvisor.model.interconnects as links
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, Metric, declare
from tfadvisor.analyses.names import name_test, name_values
from tfadvisor.analyses.placement import (
    NO_KERNEL_TYPES,
    device_lines,
    device_meta_classes,
    op_type,
    profile_window,
    step_windows,
    tf_op_meta_mask,
)
from tfadvisor.analyses.steps import training_steps
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.spans.intervals import Measure, intersect, rows_touching, union

GRADIENT_BYTES = 4  # fp32 gradients

#: Device kernels / HLO ops that all-reduce.
ALLREDUCE_KERNEL = re.compile(r"(?i)nccl\w*all_?reduce|rccl\w*all_?reduce|all-reduce|all_reduce|allreduce")
#: Any device collective.
COLLECTIVE_KERNEL = re.compile(
    r"(?i)nccl|rccl|all-reduce|all_reduce|allreduce|all-gather|all_gather|allgather|reduce-scatter|"
    r"reduce_scatter|reducescatter|all-to-all|alltoall|collective-permute|collective_permute"
)
#: TF op types that all-reduce.
ALLREDUCE_OP_TYPES = frozenset({"CollectiveReduce", "CollectiveReduceV2", "CollectiveReduceV3", "NcclAllReduce",
                                "CollectiveAllReduce", "XlaAllReduce"})
#: Other collective op types (listed in the table, not counted as all-reduce).
OTHER_COLLECTIVE_TYPES = frozenset({
    "CollectiveGather", "CollectiveGatherV2", "CollectiveBcastSend", "CollectiveBcastSendV2",
    "CollectiveBcastRecv", "CollectiveBcastRecvV2", "CollectiveAllToAllV2", "CollectiveAllToAllV3",
    "CollectiveReduceScatterV3", "NcclReduce", "NcclBroadcast",
})

MEASURED = ("allreduce_ms_per_step", "allreduce_pct", "allreduce_overlap_pct", "allreduce_count_per_step",
            "allreduce_total_ms", "collective_exposed_pct")


def _op_kind(name: str) -> str | None:
    t = op_type(name)
    if t in ALLREDUCE_OP_TYPES or t.startswith("HorovodAllreduce") or t.startswith("HorovodGroupedAllreduce"):
        return "allreduce"
    if t in OTHER_COLLECTIVE_TYPES or t.startswith("Horovod"):
        return "collective"
    if "HorovodAllreduce" in name:
        return "allreduce"
    return None


@name_test
def _kernel_kind(name: str) -> str | None:
    if ALLREDUCE_KERNEL.search(name):
        return "allreduce"
    if COLLECTIVE_KERNEL.search(name):
        return "collective"
    return None


def _device_collectives(p: Plane, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """(rows, kind per row: 1 all-reduce, 2 other) of collective kernels on a device plane."""
    kinds = _meta_kinds(p)
    empty = np.empty(0, np.int64)
    if not kinds.any():
        return empty, np.empty(0, np.int8)
    # the collective kernels among the device's kernels: found by their names' metadata, then their lines (not every
    # kernel's row first: a big device's number tens of millions)
    rows = p.rows_with_meta(kinds > 0).astype(np.int64)
    on = np.zeros(len(p.lines) + 1, bool)
    on[device_lines(p)] = True
    rows = rows[on[p.ev_line[rows]]]
    if rows.size:
        return rows, kinds[p.ev_meta[rows]]
    # No stream kernels: XLA ops lines may still name all-reduces.
    ev_k = np.append(kinds, 0)[p.ev_meta]
    all_rows = np.flatnonzero(ev_k > 0)
    return all_rows, ev_k[all_rows]


def _meta_kinds(p: Plane) -> np.ndarray:
    """Per event metadata of a device plane: 1 all-reduce kernel, 2 other collective, 0 neither (read-only)."""
    return name_values(p.event_names, _kernel_kind_code, np.int8)


@name_test
def _kernel_kind_code(name: str) -> int:
    k = _kernel_kind(name)
    return 1 if k == "allreduce" else (2 if k == "collective" else 0)


def _host_collectives(p: Plane) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, kinds, metadata mask of compute ops) of collective TF ops on a host plane."""
    mm = tf_op_meta_mask(p, eager=True)
    kinds = np.zeros(len(p.event_names), np.int8)
    compute = mm.copy()
    for i in np.flatnonzero(mm):
        n = p.event_names[i]
        k = _op_kind(n)
        if k is not None:
            kinds[i] = 1 if k == "allreduce" else 2
            compute[i] = False
        elif op_type(n) in NO_KERNEL_TYPES:
            compute[i] = False
    if not kinds.any():
        return np.empty(0, np.int64), np.empty(0, np.int8), compute
    ev_k = np.append(kinds, 0)[p.ev_meta]
    rows = np.flatnonzero(ev_k > 0)
    return rows, ev_k[rows], compute


def _expectation(res: AnalysisResult, ctx: Context, explain: bool = True) -> float | None:
    """Add the expectation metrics; return the expected per-step ms (ring form when possible).

    ``explain``: add notes saying which option to pass for a missing input (only useful
    when the trace has an all-reduce to check).
    """
    quiet = AnalysisResult("collectives")  # scratch: the same declarations
    out = _expectation_into(res if explain else quiet, ctx)
    if not explain:
        for k, m in quiet.metrics.items():
            res.metrics.setdefault(k, m)
    return out


def _expectation_into(res: AnalysisResult, ctx: Context) -> float | None:
    o = ctx.options
    params = o.param_count
    bw = o.bandwidth_gbps
    bw_src = "--bandwidth" if bw is not None else ""
    if bw is None and o.link:
        try:
            bw = links.bandwidth_gbps(o.link)
            bw_src = links.describe(o.link)
        except ValueError as err:
            res.notes.append(str(err))
    n = o.replicas
    if params:
        res.add("param_count", int(params))
    else:
        res.missing(["param_count"], "parameter count unknown: pass --params N (or param_count in the run's "
                                     "tfadvisor_run.json) to check the all-reduce against the link bandwidth")
    if n:
        res.add("replicas", int(n))
    else:
        res.missing(["replicas"], "replica count unknown: pass --replicas N (or replicas in tfadvisor_run.json) "
                                  "for the ring all-reduce expectation")
    if bw:
        res.add("link_bandwidth_gbps", float(bw), doc=f"per-GPU link bandwidth per direction ({bw_src})")
    else:
        res.missing(["link_bandwidth_gbps"], "link bandwidth unknown: pass --bandwidth GB/s, or a link name as "
                                             f"--bandwidth NAME ({', '.join(links.LINKS)})")
    if not (params and bw):
        res.missing(["allreduce_expected_ms", "allreduce_expected_ring_ms", "allreduce_ratio"],
                    "no all-reduce expectation without both --params and --bandwidth (or link in "
                    "tfadvisor_run.json)")
        return None
    expected = params * GRADIENT_BYTES / (bw * 1e9) * 1e3
    res.add("allreduce_expected_ms", expected)
    if n and n > 1:
        ring = expected * 2.0 * (n - 1) / n
        res.add("allreduce_expected_ring_ms", ring)
        return ring
    if n == 1:
        res.missing(["allreduce_expected_ring_ms"], "one replica: a ring all-reduce moves nothing")
        return None
    res.missing(["allreduce_expected_ring_ms"], "replica count unknown: pass --replicas N for the ring form; "
                                                "allreduce_ratio uses params x 4 / bandwidth")
    return expected


#: Left out on a host compared only (:attr:`tfadvisor.analyses.base.Context.detail`): no report reads it there.
DETAIL_METRICS = ("allreduce_overlap_pct",)

DECLARED = declare(
    "collectives",
    ("allreduce_present", "", "the trace has all-reduce kernels or ops"),
    ("allreduce_ms_per_step", "ms", "all-reduce time per step (union of all-reduce intervals, mean over steps and "
                                    "devices)"),
    ("allreduce_pct", "%", "all-reduce time as % of step time (% of step time, over the steps the statistics use)"),
    ("allreduce_overlap_pct", "%", "share of all-reduce time during which compute runs on the same device/host "
                                   "(share overlapped by compute)"),
    ("allreduce_count_per_step", "count", "all-reduce kernels/ops started per step (per device)"),
    ("allreduce_total_ms", "ms", "all-reduce time over the whole profile, per host"),
    ("collective_exposed_pct", "%", "the step breakdown's collective share not hidden behind compute, % of step time"),
    ("param_count", "count", "trainable parameters (from options / tfadvisor_run.json)"),
    ("replicas", "count", "data-parallel replicas taking part in the all-reduce"),
    ("link_bandwidth_gbps", "GB/s", "per-GPU link bandwidth per direction (nvlink3 (300 GB/s: NVLink 3 (A100 SXM): "
                                    "12 links x 25 GB/s per direction))"),
    ("allreduce_expected_ms", "ms", "param_count x 4 bytes / link bandwidth"),
    ("allreduce_expected_ring_ms", "ms", "ring all-reduce: expected x 2(N-1)/N"),
    ("allreduce_ratio", "x", "measured all-reduce per step / expected from parameters and link bandwidth (measured / "
                             "expected)"),
    ("allreduce_source", "", "where the all-reduce time was measured: device kernels or host ops"),
    doc="`allreduce_source` (`device`: NCCL/XLA kernels, `host`: CollectiveReduce*/NcclAllReduce/Horovod op events), "
        "`allreduce_total_ms` (all-reduce time over the whole profile, per device; given when there are no steps)",
    tables="`collective_ops`; `collective_ops`: plane, host, name, kind (allreduce/collective), count, total_ms, "
           "mean_us",
)


def analyze(trace: Trace, ctx: Context, *, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("collectives")

    # Where the all-reduces are: device kernels first, else host TF ops.
    sources = []  # (plane, allreduce rows, other collective rows, compute rows)
    for p in trace.device_planes:
        rows, k = _device_collectives(p, ctx)
        if rows.size:
            comp = None
            if ctx.detail:  # the compute the all-reduces overlap (see DETAIL_METRICS)
                memcpy, coll = device_meta_classes(p, ctx)
                comp = ~(memcpy | coll)
            sources.append((p, rows[k == 1], rows[k == 2], comp))
    where = "device"
    if not any(s[1].size for s in sources):
        host_sources = []
        for p in trace.host_planes:
            rows, k, comp_meta = _host_collectives(p)
            if rows.size:
                host_sources.append((p, rows[k == 1], rows[k == 2], comp_meta))
        if any(s[1].size for s in host_sources) or not sources:
            sources, where = host_sources, "host"

    parts = _table_parts(sources)
    if parts:  # built when read (a run of many hosts reads it for a few only)
        res.tables["collective_ops"] = functools.partial(_table, parts)

    ar = [s for s in sources if s[1].size]
    res.add("allreduce_present", bool(ar))
    expected = _expectation(res, ctx, explain=bool(ar))
    if not ar:
        res.missing(list(MEASURED), "no all-reduce (NCCL kernels, CollectiveReduce*/NcclAllReduce/Horovod ops, "
                                    "XLA all-reduce) in the trace")
        res.metrics["allreduce_ratio"] = res.metrics.get("allreduce_ratio") or Metric(None, "x")
        return res
    res.add("allreduce_source", where)

    # The overlap with compute: left out on a host compared only (DETAIL_METRICS), but where the all-reduces are
    # host ops, which hide part of it (collective_exposed_pct).
    overlap = ctx.detail or where == "host"
    windows = _stats_windows(step_table)
    steps_union = union(*windows[:2]) if windows is not None else None
    per_plane_ms, per_plane_pct, per_plane_count, per_plane_total, ov_num, ov_den = [], [], [], [], 0, 0
    for p, rows, _, comp in ar:
        us, ue = union(p.ev_start_ps[rows], p.ends(rows))
        compute = None
        if overlap:  # only the compute intervals that touch an all-reduce matter for the overlap: found by
            # binary search per line (comp is a metadata mask of compute events)
            lines = device_lines(p) if where == "device" else np.arange(len(p.lines))
            near = rows_touching(p, lines, us, ue, comp)
            compute = Measure.union(p.ev_start_ps[near], p.ends(near))
        if windows is not None:
            ws, we, n_train = windows
            in_step = Measure(us, ue, disjoint=True).within(ws, we)
            per_plane_ms.append(float(in_step.sum()) / n_train / PS_PER_MS)
            per_plane_pct.append(100.0 * float(in_step.sum()) / float(np.sum(we - ws)))
            starts = np.sort(p.ev_start_ps[rows])
            counts = np.searchsorted(starts, we, side="left") - np.searchsorted(starts, ws, side="left")
            per_plane_count.append(float(counts.sum()) / n_train)
            if compute is not None:  # overlap with compute, inside steps
                a_s, a_e = intersect(us, ue, *steps_union, False)
                ov_den += int(np.sum(a_e - a_s))
                ov_num += int(compute.within(a_s, a_e).sum())
        elif compute is not None:
            ov_den += int(np.sum(ue - us))
            ov_num += int(compute.within(us, ue).sum())
        per_plane_total.append(float(np.sum(ue - us)) / PS_PER_MS)

    res.add("allreduce_total_ms", float(np.mean(per_plane_total)),
            doc=f"all-reduce time over the whole profile, per {'device' if where == 'device' else 'host'}")
    if not overlap:
        res.without_detail(DETAIL_METRICS)
    elif ov_den > 0:
        res.add("allreduce_overlap_pct", 100.0 * ov_num / ov_den)
    else:
        res.missing(["allreduce_overlap_pct"], "no all-reduce time inside steps")

    measured = None
    if windows is not None:
        measured = float(np.mean(per_plane_ms))
        res.add("allreduce_ms_per_step", measured)
        res.add("allreduce_pct", float(np.mean(per_plane_pct)))
        res.add("allreduce_count_per_step", float(np.mean(per_plane_count)))
    else:
        lo, hi = profile_window(trace)
        res.missing(["allreduce_ms_per_step", "allreduce_count_per_step"],
                    "no step table: all-reduce time is given over the profiled wall time (allreduce_total_ms)")
        if hi > lo:
            res.add("allreduce_pct", 100.0 * float(np.mean(per_plane_total)) * PS_PER_MS / (hi - lo))
        else:
            res.missing(["allreduce_pct"], "empty profile window")

    if expected is not None and expected > 0 and measured is not None:
        res.add("allreduce_ratio", measured / expected)
    elif "allreduce_ratio" not in res.metrics:
        res.missing(["allreduce_ratio"], "allreduce_ratio needs the per-step all-reduce time and the expectation")
    _exposed(res, ctx, where)
    return res


def _stats_windows(tbl: Table | None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(start, wall end) of the steps the step statistics use (``in_stats``; all steps if the table has
    no such column): each step from its start to the next one's, so that per-step figures share the step
    time's denominator and an all-reduce between the markers still counts; and the training steps they hold (a
    marker under Keras ``steps_per_execution=k`` holds k: figures per step are per training step)."""
    windows = step_windows(tbl)
    if windows is None or tbl is None:
        return None
    keep = tbl["end_ps"] > tbl["start_ps"]
    if "in_stats" in tbl and (keep & tbl["in_stats"]).any():
        keep = keep & tbl["in_stats"]
        windows = tbl["start_ps"][keep], tbl["wall_end_ps"][keep]
    n = training_steps(tbl, keep)
    return windows[0], windows[1], max(n, 1)


def _exposed(res: AnalysisResult, ctx: Context, where: str) -> None:
    """``collective_exposed_pct`` from the breakdown's collective share (see the module docstring)."""
    share = ctx.metric("step_collective_pct")
    if share is None or "allreduce_pct" not in res.metrics or res.metrics["allreduce_pct"].value is None:
        res.missing(["collective_exposed_pct"], "needs the step breakdown and the all-reduce time per step")
        return
    hidden = 0.0
    ov = res.metrics.get("allreduce_overlap_pct")
    if where == "host" and ov is not None and ov.value is not None:
        hidden = float(res.metrics["allreduce_pct"].value) * float(ov.value) / 100.0
    res.add("collective_exposed_pct", max(0.0, float(share) - hidden))


def _table_parts(sources) -> list[tuple]:
    """What the ``collective_ops`` table is made of, per plane and kind: (plane, host, kind, the plane's
    names, the rows' metadata and durations); copies, so that the table holds no plane."""
    return [(p.name, p.host, kind, p.event_names, p.ev_meta[rows], p.ev_dur_ps[rows])
            for p, ar_rows, other_rows, _ in sources
            for kind, rows in (("allreduce", ar_rows), ("collective", other_rows)) if rows.size]


def _table(parts: list[tuple]) -> Table:
    tables = []
    for plane, host, kind, names, m, dur in parts:
        tot = np.bincount(m, weights=dur.astype(np.float64), minlength=len(names))
        cnt = np.bincount(m, minlength=len(names))
        idx = np.flatnonzero(cnt)
        tables.append(Table({"plane": plane, "host": host, "name": names[idx].astype(str), "kind": kind,
                             "count": cnt[idx], "total_ms": tot[idx] / PS_PER_MS,
                             "mean_us": tot[idx] / cnt[idx] / 1e6}))
    return Table.concat(tables).sort("total_ms", descending=True)
