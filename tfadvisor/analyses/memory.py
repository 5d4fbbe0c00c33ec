"""Memory: peak bytes in use per allocator, capacity, fragmentation, and what was live.

Every ``MemoryAllocation`` / ``MemoryDeallocation`` event carries the allocator's state
*after* the event (``bytes_allocated`` = bytes in use, ``bytes_reserved``,
``bytes_available``, ``peak_bytes_in_use`` since the process started, ``fragmentation``)
and the buffer it concerns (``addr``, ``requested_bytes``, ``allocation_bytes``, ``tf_op``,
``shape``, ``region_type``, ``data_type``). TF records them for GPU allocators, and on the
CPU only with ``TF_CPU_ALLOCATOR_USE_BFC=true``.

The peak is the largest ``bytes_allocated`` seen in the profile. The buffers live at the
peak are found by pairing each allocation with the next event on the same address (sorted
by address, then time): a buffer is live when it was allocated at or before the peak and
freed after it. A deallocation with no allocation before it in the window is a buffer
allocated before the profile started; its event repeats the buffer's details, so it is
listed too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.placement import step_windows
from tfadvisor.analyses.tf_dtypes import DTYPE_NAMES
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.model.values import as_number, to_int64

if TYPE_CHECKING:
    import pandas as pd

ALLOC, DEALLOC = "MemoryAllocation", "MemoryDeallocation"
NUMERIC = ("index_on_host", "bytes_allocated", "bytes_reserved", "bytes_available", "peak_bytes_in_use",
           "requested_bytes", "allocation_bytes", "fragmentation", "data_type")
STRINGS = ("allocator_name", "tf_op", "shape", "region_type")
#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = NUMERIC + ("addr",) + STRINGS
#: Allocators of a device's memory (``GPU_0_bfc``); ``cuda_host_bfc`` and the CPU BFC are host memory.
DEVICE_ALLOCATOR = re.compile(r"(?i)^(gpu|tpu|xpu|device)[_:]?\d")
#: The timeline keeps at most about this many points per allocator.
TIMELINE_POINTS = 2000
TOP_LIVE = 50

METRICS = ("memory_peak_bytes", "memory_capacity_bytes", "memory_peak_pct", "memory_peak_time_ms",
           "memory_fragmentation", "memory_allocator", "memory_peak_bytes_lifetime", "memory_peak_step",
           "memory_live_at_peak_bytes", "memory_device_peaks")


def memory_events(trace: Trace, ctx: Context | None = None) -> pd.DataFrame | None:
    """One row per memory event of every plane, in time order (None when there is none; pandas is
    imported only when there are some).

    Built once per analysis run (:meth:`Context.once`) for the analyses that read it (precision, memory).
    """
    return _memory_events(trace) if ctx is None else ctx.once(_memory_events, trace)


def _memory_events(trace: Trace) -> pd.DataFrame | None:
    found = []
    for pi, p in enumerate(trace.planes):
        names = p.event_names
        if not ((names == ALLOC).any() or (names == DEALLOC).any()):
            continue
        rows = p.events_named([ALLOC, DEALLOC])
        if rows.size:
            found.append((pi, p, rows))
    return _events_frame(found) if found else None


def _events_frame(found: list[tuple[int, Plane, np.ndarray]]) -> pd.DataFrame:
    import pandas as pd

    parts = []
    for pi, p, rows in found:
        names = p.event_names
        df = pd.DataFrame({
            "plane": pi,
            "row": rows,
            "t": p.ev_start_ps[rows],
            "alloc": np.append(names == ALLOC, False)[p.ev_meta[rows]],
        })
        st = p.stat_columns(NUMERIC + ("addr",) + STRINGS, rows)
        for name in NUMERIC:
            df[name] = _sane(name, st[name].values_at(rows))
        df["addr"] = st["addr"].values_at(rows, integer=True)
        for name in STRINGS:
            df[name] = st[name].strings_at(rows, missing=np.nan)
        parts.append(df)
    out = pd.concat(parts, ignore_index=True)
    out["allocator_name"] = out["allocator_name"].fillna("<unnamed>")
    # PjRt (JAX, TPU) writes every chip's allocations on the host plane, unnamed, with the chip's index:
    # each chip's memory is its own allocator, never one merged total
    idx = out["index_on_host"]
    has = idx.notna()
    if has.any():
        label = out.loc[has, "allocator_name"].where(out.loc[has, "allocator_name"] != "<unnamed>", "device")
        out.loc[has, "allocator_name"] = label + ":" + pd.Series(to_int64(idx[has]), index=label.index).astype(str)
    out = out.sort_values(["t", "plane", "row"], kind="stable").reset_index(drop=True)
    out["seq"] = np.arange(len(out))
    return out


#: TF's DataType enum stays far below this; other values are not dtypes.
_MAX_DTYPE = 1000


def _sane(name: str, v: np.ndarray) -> np.ndarray:
    """Values a file may hold but no allocator writes (NaN, inf, negative sizes, a fractional or
    out-of-range ``data_type``) become NaN, i.e. unknown."""
    bad = ~np.isfinite(v) | (v < 0)
    if name == "data_type":
        bad |= (v != np.floor(np.where(bad, 0.0, v))) | (v >= _MAX_DTYPE)
    if bad.any():
        v = np.where(bad, np.nan, v)
    return v


def _downsample(t: np.ndarray, v: np.ndarray, n_max: int) -> np.ndarray:
    """Indexes keeping each chunk's min and max (so peaks survive), about n_max in all."""
    n = t.size
    if n <= n_max:
        return np.arange(n)
    chunks = max(1, n_max // 2)
    cid = (np.arange(n) * chunks) // n
    hi = np.lexsort((-v, cid))  # per chunk, largest first
    lo = np.lexsort((v, cid))
    firsts = np.flatnonzero(np.r_[True, cid[hi][1:] != cid[hi][:-1]])
    keep = np.unique(np.concatenate([hi[firsts], lo[firsts], [0, n - 1], [int(np.argmax(v))]]))
    return keep


def _live_at_peak(ev: pd.DataFrame, peak_seq: int) -> pd.DataFrame:
    """Buffers of one allocator live at event ``peak_seq`` (allocated at/before, freed after)."""
    ev = ev[ev["addr"] >= 0]
    if ev.empty:
        return ev
    order = np.lexsort((ev["seq"].to_numpy(), ev["addr"].to_numpy()))
    e = ev.iloc[order]
    addr = e["addr"].to_numpy()
    seq = e["seq"].to_numpy()
    alloc = e["alloc"].to_numpy(bool)
    n = len(e)
    same_next = np.zeros(n, bool)
    same_next[:-1] = addr[1:] == addr[:-1]
    same_prev = np.zeros(n, bool)
    same_prev[1:] = same_next[:-1]
    big = np.iinfo(np.int64).max
    next_seq = np.full(n, big, np.int64)
    next_seq[:-1] = np.where(same_next[:-1], seq[1:], big)
    prev_alloc = np.zeros(n, bool)
    prev_alloc[1:] = same_prev[1:] & alloc[:-1]
    # Allocated in the window and not yet freed at the peak.
    live_alloc = alloc & (seq <= peak_seq) & (next_seq > peak_seq)
    # Freed after the peak, never allocated in the window before: allocated before the profile.
    live_before = ~alloc & ~prev_alloc & (seq > peak_seq)
    out = e[live_alloc | live_before].copy()
    out["before_window"] = live_before[live_alloc | live_before]
    return out


def _capacity(row: pd.Series, trace: Trace, allocator: str) -> tuple[float | None, str]:
    import pandas as pd

    parts = [row.get("bytes_reserved"), row.get("bytes_allocated"), row.get("bytes_available")]
    vals = [float(x) for x in parts if x is not None and not pd.isna(x)]
    if row.get("bytes_available") is not None and not pd.isna(row.get("bytes_available")) and sum(vals) > 0:
        return sum(vals), "allocator limit (reserved + allocated + available)"
    m = re.match(r"(?i)^gpu[_:]?(\d+)", allocator)
    if m:
        for p in trace.device_planes:
            size = as_number(p.stats.get("memory_size"), lo=0) if p.name == f"/device:GPU:{m.group(1)}" else None
            if size:
                return size, f"{p.name} memory_size"
    return None, ""


def _plain_id(v):
    return v.item() if hasattr(v, "item") else v


DECLARED = declare(
    "memory",
    ("memory_present", "", "the trace has MemoryAllocation/MemoryDeallocation events"),
    ("memory_allocator", "", "the allocator the memory figures describe (a device allocator when there is one, else "
                             "the largest)"),
    ("memory_peak_bytes", "bytes", "largest bytes in use seen in the profile"),
    ("memory_peak_time_ms", "ms", "when the peak happened, from the profile start"),
    ("memory_peak_bytes_lifetime", "bytes", "the allocator's own peak since the process started (peak_bytes_in_use)"),
    ("memory_capacity_bytes", "bytes", "allocator limit (reserved + allocated + available)"),
    ("memory_peak_pct", "%", "peak bytes in use as % of capacity"),
    ("memory_fragmentation", "fraction", "allocator fragmentation (0-1) at the peak"),
    ("memory_device_peaks", "", "each device allocator's peak, largest first (`device:0 16.1 GB, ...`): devices "
                                "never share memory, so these are never added up"),
    ("memory_peak_step", "", "the step (``step`` of the step table) in which the peak happened"),
    ("memory_live_at_peak_bytes", "bytes", "bytes of the buffers found live at the peak (buffers allocated before "
                                           "the profile and never freed in it cannot be seen)"),
    doc="`memory_peak_bytes_lifetime` (the allocator's own `peak_bytes_in_use`, since process start), "
        "`memory_peak_step` (`step` of the step in which the peak happened), `memory_live_at_peak_bytes` (bytes of the "
        "buffers found live at the peak). `memory_fragmentation` is a fraction 0-1 at the peak",
    tables="`memory_timeline` (time_ms, bytes_in_use), `memory_live_at_peak` (tf_op, shape, region_type, bytes); "
           "`memory_allocators` (allocator, device, events, allocations, peak_bytes, peak_time_ms, "
           "lifetime_peak_bytes, capacity_bytes, capacity_source, peak_pct, fragmentation_at_peak); `memory_timeline` "
           "also has allocator, time_ps; `memory_live_at_peak` also has data_type, count, before_window",
)


def analyze(trace: Trace, ctx: Context, *, memory: pd.DataFrame | None, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("memory")
    ev = memory
    if ev is None:
        res.add("memory_present", False)
        res.missing(list(METRICS), "no MemoryAllocation/MemoryDeallocation events in the trace (on the CPU TF "
                                   "records them only with TF_CPU_ALLOCATOR_USE_BFC=true)")
        return res
    import pandas as pd

    res.add("memory_present", True)
    t0, _ = trace.time_span_ps()

    summaries = []
    timelines = []
    for name, g in ev.groupby("allocator_name", sort=False):
        inuse = g["bytes_allocated"].to_numpy(np.float64)
        ok = ~np.isnan(inuse)
        if not ok.any():
            continue
        gi = g[ok]
        v = inuse[ok]
        k = int(np.argmax(v))
        peak_row = gi.iloc[k]
        cap, cap_src = _capacity(peak_row, trace, str(name))
        life = g["peak_bytes_in_use"].max()
        summaries.append({
            "allocator": str(name),
            "device": bool(DEVICE_ALLOCATOR.match(str(name))),
            "events": int(len(g)),
            "allocations": int(g["alloc"].sum()),
            "peak_bytes": float(v[k]),
            "peak_time_ms": (int(peak_row["t"]) - t0) / PS_PER_MS,
            "peak_t_ps": int(peak_row["t"]),
            "peak_seq": int(peak_row["seq"]),
            "lifetime_peak_bytes": None if pd.isna(life) else float(life),
            "capacity_bytes": cap,
            "capacity_source": cap_src,
            "peak_pct": 100.0 * (float(v[k]) / cap) if cap else None,  # ratio first: no overflow near 1e308
            "fragmentation_at_peak": None if pd.isna(peak_row["fragmentation"]) else float(peak_row["fragmentation"]),
        })
        tt = gi["t"].to_numpy(np.int64)
        keep = _downsample(tt, v, TIMELINE_POINTS)
        timelines.append(pd.DataFrame({"allocator": str(name), "time_ms": (tt[keep] - t0) / PS_PER_MS,
                                       "time_ps": tt[keep], "bytes_in_use": v[keep]}))
    if not summaries:
        res.missing(list(METRICS), "memory events carry no bytes_allocated stat")
        return res

    alloc_tbl = pd.DataFrame(summaries)
    dev = alloc_tbl[alloc_tbl["device"]]
    if len(dev):
        top = dev.sort_values(["peak_bytes", "allocator"], ascending=[False, True])
        res.add("memory_device_peaks", ", ".join(f"{a} {b / 1e9:.3g} GB" for a, b in
                                                 zip(top["allocator"], top["peak_bytes"])))
    else:
        res.missing(["memory_device_peaks"], "no device allocator (GPU_0_bfc, device:N) among the memory events")
    pick = (dev if len(dev) else alloc_tbl).sort_values(["peak_bytes", "allocator"], ascending=[False, True]).iloc[0]
    res.add("memory_allocator", pick["allocator"])
    res.add("memory_peak_bytes", pick["peak_bytes"])
    res.add("memory_peak_time_ms", pick["peak_time_ms"])
    if pick["lifetime_peak_bytes"] is not None:
        res.add("memory_peak_bytes_lifetime", pick["lifetime_peak_bytes"])
    else:
        res.missing(["memory_peak_bytes_lifetime"], "memory events carry no peak_bytes_in_use stat")
    if pick["capacity_bytes"]:
        res.add("memory_capacity_bytes", pick["capacity_bytes"], doc=pick["capacity_source"])
        res.add("memory_peak_pct", pick["peak_pct"])
    else:
        res.missing(["memory_capacity_bytes", "memory_peak_pct"],
                    "the allocator reports no bytes_available and no device memory_size is known")
    if pick["fragmentation_at_peak"] is not None:
        res.add("memory_fragmentation", pick["fragmentation_at_peak"])
    else:
        res.missing(["memory_fragmentation"], "memory events carry no fragmentation stat")

    windows = step_windows(step_table)
    if windows is not None:
        tbl = step_table
        st = tbl.take(tbl["end_ps"] > tbl["start_ps"])
        s, e = st["start_ps"], st["end_ps"]
        inside = np.flatnonzero((s <= pick["peak_t_ps"]) & (pick["peak_t_ps"] < e))
        ids = st["step"]
        if inside.size:
            res.add("memory_peak_step", _plain_id(ids[inside[0]]))
        else:
            res.missing(["memory_peak_step"], "the memory peak happened outside every step")
    else:
        res.missing(["memory_peak_step"], "no step table: the peak is not attributed to a step")

    live = _live_at_peak(ev[ev["allocator_name"] == pick["allocator"]], int(pick["peak_seq"]))
    if len(live):
        b = live["allocation_bytes"].where(live["allocation_bytes"].notna(), live["requested_bytes"]).fillna(0.0)
        live = live.assign(bytes=b.to_numpy(),
                           data_type=[DTYPE_NAMES.get(int(d), str(int(d))) if not pd.isna(d) else None
                                      for d in live["data_type"]])
        res.add("memory_live_at_peak_bytes", float(live["bytes"].sum()))
        keys = ["tf_op", "shape", "region_type", "data_type"]
        tbl = live.assign(**{k: live[k].fillna("") for k in keys}).groupby(keys, as_index=False).agg(
            count=("bytes", "size"), bytes=("bytes", "sum"), before_window=("before_window", "sum"))
        # equal sizes (a dozen attention buffers) by op, shape, region and type: the same order on every CPU
        tbl = tbl.sort_values(["bytes", *keys], ascending=[False] + [True] * len(keys))
        tbl = tbl.head(TOP_LIVE).reset_index(drop=True)
        res.tables["memory_live_at_peak"] = tbl
    else:
        res.missing(["memory_live_at_peak_bytes"], "no buffer with an addr is live at the peak")

    res.tables["memory_timeline"] = pd.concat(timelines, ignore_index=True)
    res.tables["memory_allocators"] = alloc_tbl.drop(columns=["peak_seq", "peak_t_ps"]).sort_values(
        ["peak_bytes", "allocator"], ascending=[False, True]).reset_index(drop=True)
    return res
