"""The roofline, where the trace allows it: per device and op, the FLOP/s and bytes/s achieved against
the device's peaks, and whether the op is compute- or memory-bound.

Peaks come from the device plane's stats: ``peak_teraflops_per_second`` and
``peak_hbm_bw_gigabytes_per_second`` (TPU planes, as xprof writes them); a GPU plane's
``memory_bandwidth`` (bytes/s) gives its bandwidth, and no peak FLOP/s is read from a GPU plane
(it depends on the dtype and the unit: Tensor Cores or not). FLOPs and bytes per op come from the
op's stats ``flops`` and ``bytes_accessed`` (XLA's cost analysis, on the ``XLA Ops`` events of TPU
traces); GPU kernels carry none, so their roofline is not known and a note says so.

An op's arithmetic intensity is FLOPs / bytes; the ridge point is peak FLOP/s / peak bytes/s. Above the
ridge an op is compute-bound and its fraction of peak is achieved FLOP/s / peak FLOP/s; below it,
memory-bound, and the fraction is achieved bytes/s / peak bytes/s. Time is the op's summed duration
(outermost events of the op lines only). An async op's ``*-start`` only issues it: its bytes are
counted on its ``*-done``, whose time is the wait for the transfer (so a host-offload ``copy-done``
shows the host link's speed, far below the memory's).
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses import device_lines as dl
from tfadvisor.analyses.attribution import item_name
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.opcost import category
from tfadvisor.analyses.placement import device_op_rows
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.model.values import as_number

#: Ops listed per device.
TOP = 10

#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("flops", "bytes_accessed")

DECLARED = declare(
    "roofline",
    ("roofline_peak_tflops", "", "peak FLOP/s of the device (TFLOP/s, plane stat peak_teraflops_per_second)"),
    ("roofline_peak_gbps", "", "peak memory bandwidth of the device (GB/s: peak_hbm_bw_gigabytes_per_second, "
                               "or a GPU's memory_bandwidth)"),
    ("roofline_ridge", "", "the ridge point: peak FLOP/s / peak bytes/s (FLOPs per byte)"),
    ("roofline_covered_pct", "%", "share of the device op time whose ops carry FLOP and byte counts"),
    ("roofline_top_op", "", "the op with the most time among those with counts"),
    ("roofline_top_op_bound", "", "`compute` or `memory`: which roof bounds it"),
    ("roofline_top_op_pct_of_peak", "%", "its achieved FLOP/s (compute-bound) or bytes/s (memory-bound) as % of "
                                         "the peak"),
    ("roofline_top_op_intensity", "", "its arithmetic intensity (FLOPs per byte)"),
    doc="Per device and op: achieved FLOP/s and bytes/s against the device's peaks; compute- or memory-bound by "
        "the ridge point. Needs peaks in the plane stats and FLOP/byte counts on the ops (TPU traces).",
    tables="`roofline` (device, op, category, count, time_ms, gflop, gbyte, tflops, gbps, intensity, bound, "
           "pct_of_peak)",
)

METRICS = [n for n in DECLARED.names()]


def _peaks(p: Plane) -> tuple[float | None, float | None]:
    """(peak FLOP/s, peak bytes/s) of a device plane, None where its stats do not say."""
    def num(name: str) -> float | None:
        v = as_number(p.stats.get(name))
        return v if v is not None and v > 0 else None

    flops = num("peak_teraflops_per_second")
    bw = num("peak_hbm_bw_gigabytes_per_second")
    gpu_bw = num("memory_bandwidth")
    return (flops * 1e12 if flops else None), (bw * 1e9 if bw else gpu_bw)


def analyze(trace: Trace, ctx: Context) -> AnalysisResult:
    res = AnalysisResult("roofline")
    rows_out: list[dict] = []
    first: tuple[float | None, float | None] | None = None
    both: tuple[float, float] | None = None  # the first plane's peaks where it states both (its ops' ridge)
    op_ps_total = 0.0
    counted_ps = 0.0
    for p in trace.device_planes:
        peak_f, peak_b = _peaks(p)
        if first is None and (peak_f or peak_b):
            first = (peak_f, peak_b)
        if both is None and peak_f and peak_b:
            both = (peak_f, peak_b)
        rows = device_op_rows(p)
        if rows.size:  # an async op's start only issues it: its bytes move until its done
            start = np.array([str(n).split(" ", 1)[0].rstrip("0123456789.").endswith("-start")
                              for n in p.event_names], bool)
            rows = rows[~start[np.maximum(p.ev_meta[rows], 0)]]
        if not rows.size:
            continue
        cols = p.stat_columns(("flops", "bytes_accessed"), rows)
        fl = cols["flops"].values_at(rows)
        by = cols["bytes_accessed"].values_at(rows)
        dur = p.ev_dur_ps[rows].astype(np.float64)
        op_ps_total += float(dur.sum())
        has = ~np.isnan(fl) & ~np.isnan(by) & (by > 0)
        if not has.any() or not (peak_f and peak_b):
            continue
        counted_ps += float(dur[has].sum())
        names = [item_name(str(p.event_names[m]))[0] for m in p.ev_meta[rows[has]]]
        acc: dict[str, list[float]] = {}
        for n, d, f, b in zip(names, dur[has], fl[has], by[has]):
            a = acc.setdefault(n, [0.0, 0.0, 0.0, 0])
            a[0] += d
            a[1] += f
            a[2] += b
            a[3] += 1
        ridge = peak_f / peak_b
        for n, (d, f, b, c) in sorted(acc.items(), key=lambda kv: -kv[1][0])[:TOP]:
            secs = d / 1e12
            fps, bps = f / secs, b / secs
            intensity = f / b
            bound = "compute" if intensity >= ridge else "memory"
            pct = 100.0 * (fps / peak_f if bound == "compute" else bps / peak_b)
            rows_out.append({"device": dl.short_name(p), "op": n, "category": category(n), "count": int(c),
                             "time_ms": d / PS_PER_MS, "gflop": f / 1e9, "gbyte": b / 1e9, "tflops": fps / 1e12,
                             "gbps": bps / 1e9, "intensity": intensity, "bound": bound, "pct_of_peak": pct})
    if first is None:
        res.missing(METRICS, "no device plane states its peak FLOP/s or memory bandwidth")
        return res
    peak_f, peak_b = first
    if peak_f:
        res.add("roofline_peak_tflops", peak_f / 1e12)
    if peak_b:
        res.add("roofline_peak_gbps", peak_b / 1e9)
    if not rows_out:
        res.missing([m for m in METRICS if m not in res.metrics],
                    "the ops carry no FLOP and byte counts (GPU kernels never do; XLA's cost analysis is on TPU "
                    "traces' XLA Ops)")
        return res
    assert both is not None  # rows come only from planes that state both peaks
    res.add("roofline_ridge", both[0] / both[1])
    res.add("roofline_covered_pct", 100.0 * counted_ps / op_ps_total if op_ps_total else None)
    top = max(rows_out, key=lambda r: r["time_ms"])
    res.add("roofline_top_op", top["op"])
    res.add("roofline_top_op_bound", top["bound"])
    res.add("roofline_top_op_pct_of_peak", top["pct_of_peak"])
    res.add("roofline_top_op_intensity", top["intensity"])
    res.tables["roofline"] = Table({k: np.array([r[k] for r in rows_out], dtype=object if isinstance(
        rows_out[0][k], str) else None) for k in rows_out[0]}, n=len(rows_out))
    return res


__all__ = ["analyze"]
