"""What the profile cannot see: machine utilisation during the window, and start-up.

Reads the host's system samples (``tfadvisor_system.<host>.npz``, written by the capture
helpers beside the profile; format in :mod:`tfadvisor.io.system_samples`) and the start-up
milestones of ``tfadvisor_run.json`` (``startup``, written by the Keras callback).

Utilisation figures are means over the samples taken while the profiled steps ran (all
samples of the window when the steps cover fewer than three): ``system_cpu_util_pct`` (%
of all cores), ``system_gpu_util_pct`` (where a GPU sampler ran), ``system_disk_read_mbps``,
``system_net_recv_mbps`` (MB/s, 10^6 bytes), memory pressure (swap activity, RSS against
the memory limit), per-core idleness. Start-up: ``startup_to_first_step_s`` (process start
to the end of the first training step) and its split into before ``fit``, ``fit`` to the
first batch, and the first step, with what the process read before ``fit``.

A missing samples file or start-up record leaves these metrics None with a note; a bad
samples file gives a note naming the file and the problem, never an error.
"""

from __future__ import annotations

import math

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.io.system_samples import Samples, SamplesError, find_samples, load_samples
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.model.values import as_number

IDLE_CORE_PCT = 20.0  # a core busy less than this on average counts as idle
IDLE_GPU_PCT = 10.0
MIN_SAMPLES = 3
MB = 1e6

UTIL_METRICS = (
    ("system_samples_count", "count", "system samples used (taken while the profiled steps ran)"),
    ("system_sample_hz", "Hz", "achieved sampling rate"),
    ("system_window_s", "s", "time the samples cover"),
    ("system_cpu_cores", "count", "logical CPU cores"),
    ("system_cpu_util_pct", "%", "CPU busy, % of all cores, mean over the window"),
    ("system_cpu_util_p90_pct", "%", "CPU busy, 90th percentile of the samples"),
    ("system_cpu_busiest_core_pct", "%", "mean busy % of the busiest core"),
    ("system_cpu_idle_cores", "count", f"cores busy less than {IDLE_CORE_PCT:g} % on average"),
    ("system_cpu_idle_cores_pct", "%", "idle cores, % of all cores"),
    ("system_proc_cpu_pct", "%", "the training process's CPU use, % of all cores"),
    ("system_other_cpu_pct", "%", "CPU used by other processes, % of all cores"),
    ("system_mem_used_pct", "%", "host memory in use (not available), peak, % of the memory limit"),
    ("system_mem_available_min_bytes", "bytes", "least host memory available"),
    ("system_proc_rss_max_bytes", "bytes", "peak resident memory of the training process"),
    ("system_rss_limit_pct", "%", "peak RSS of the training process, % of the memory limit (cgroup or RAM)"),
    ("system_swap_used_bytes", "bytes", "peak swap in use"),
    ("system_swap_io_mbps", "MB/s", "swap-in + swap-out rate"),
    ("system_disk_read_mbps", "MB/s", "disk read rate, all disks"),
    ("system_disk_write_mbps", "MB/s", "disk write rate, all disks"),
    ("system_disk_busy_pct", "%", "busy time of the busiest disk (iostat %util)"),
    ("system_proc_read_mbps", "MB/s", "bytes the process read through syscalls (page cache included), per s"),
    ("system_net_recv_mbps", "MB/s", "network receive rate, all interfaces but loopback"),
    ("system_net_sent_mbps", "MB/s", "network send rate"),
    ("system_sampler_overhead_pct", "%", "CPU the sampler itself used, % of all cores"),
)
GPU_METRICS = (
    ("system_gpu_count", "count", "GPUs the GPU sampler read"),
    ("system_gpu_util_pct", "%", "GPU busy (NVML/amdsmi utilisation), mean over GPUs and the window"),
    ("system_gpu_util_min_pct", "%", "mean utilisation of the least busy GPU"),
    ("system_gpu_idle_count", "count", f"GPUs busy less than {IDLE_GPU_PCT:g} % on average"),
    ("system_gpu_mem_used_pct", "%", "peak GPU memory in use, % of the GPU's memory (fullest GPU)"),
    ("system_gpu_power_w", "W", "mean power draw per GPU"),
)
STARTUP_METRICS = (
    ("startup_to_first_step_s", "s", "process start to the end of the first training step"),
    ("startup_before_fit_s", "s", "process start to fit() (imports, data preparation, model build)"),
    ("startup_fit_to_first_batch_s", "s", "fit() to the first batch (iterator set-up)"),
    ("startup_first_step_s", "s", "the first step (tracing, compilation, first batch)"),
    ("startup_phase", "", "the longest start-up phase: before_fit, fit_to_first_batch or first_step"),
    ("startup_before_fit_read_calls", "count", "read system calls of the process before fit()"),
    ("startup_before_fit_read_mb", "MB", "bytes the process read before fit() (page cache included)"),
    ("startup_before_fit_cpu_pct", "%", "process CPU time before fit(), % of one core over that time"),
    ("startup_pct", "%", "start-up, % of the job's wall time (start-up + planned steps x median step time)"),
    ("startup_first_get_next_ms", "ms", "time in IteratorGetNext during the first step (when it was profiled)"),
)


DECLARED = declare(
    "system",
    *UTIL_METRICS,
    *GPU_METRICS,
    ("system_gpu_sampler", "", "nvml, amdsmi or none"),
    *STARTUP_METRICS,
    doc="System samples `tfadvisor_system.<host>.npz` and `tfadvisor_run.json` `startup`; "
        "`tfadvisor/analyses/system.py`, file format in `tfadvisor/io/system_samples.py`; None without "
        "them.\n\nUtilisation: means over the samples taken while the profiled steps ran; `_mbps` = MB/s, "
        "10^6 bytes; `system_cpu_util_pct` % of all cores; `system_gpu_util_pct` only where a GPU sampler "
        "(NVML/amdsmi) ran, `system_gpu_sampler` says which or none.\n\nStart-up: process start -> fit() -> first "
        "batch -> end of the first step; `startup_pct` = start-up / (start-up + planned steps x median step time).",
    tables="`system_timeline` (time_s, time_ps since the profile start, cpu_pct, proc_cpu_pct, mem_used_pct, "
           "disk_read_mbps, disk_write_mbps, net_recv_mbps, net_sent_mbps, gpu_util_pct), `system_summary` (figure, "
           "metric, value, unit), `startup` (phase, seconds)",
)


def analyze(trace: Trace, ctx: Context, *, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("system")
    samples = _load(trace, res)
    if samples is not None:
        _utilisation(trace, step_table, samples, res)
    _startup(trace, ctx, step_table, res)
    for names in (UTIL_METRICS, GPU_METRICS, STARTUP_METRICS):
        for name, unit, doc in names:
            res.metrics.setdefault(name, _metric(None, unit, doc))
    res.metrics.setdefault("system_gpu_sampler", _metric(None, "", "nvml, amdsmi or none"))
    return res


def _metric(value, unit, doc):
    from tfadvisor.analyses.base import Metric

    return Metric(value, unit, doc)


# --------------------------------------------------------------------------- samples


def _load(trace: Trace, res: AnalysisResult) -> Samples | None:
    if not trace.run_dir:
        res.notes.append("no run directory: no system samples")
        return None
    found = find_samples(trace.run_dir, list(trace.files))
    if not found:
        res.notes.append("no system samples (tfadvisor_system.<host>.npz) beside the profile: capture with the "
                         "Keras callback, tfadvisor.profile or `tfadvisor capture run` to record CPU, GPU, disk "
                         "and network use")
        return None
    path = next(iter(found.values()))
    try:
        return load_samples(path)
    except SamplesError as err:
        res.notes.append(f"system samples ignored: {err}")
        return None


def _profile_start_s(trace: Trace, samples: Samples) -> float | None:
    for p in trace.planes:
        if p.name == "Task Environment":
            v = as_number(p.stats.get("profile_start_time"))
            if v is not None and v > 1e18:
                return v / 1e9
    v = samples.meta.get("profile_start_unix_s")
    return float(v) if isinstance(v, (int, float)) else None


def _select(trace: Trace, steps: Table | None, samples: Samples, t0: float | None) -> np.ndarray:
    """Indices of the samples whose interval overlaps the profiled steps (all, if too few)."""
    n = samples.n
    allrows = np.arange(n)
    if t0 is None or steps is None or not len(steps):
        return allrows
    lo = t0 + float(steps["start_ps"].min()) / 1e12
    hi = t0 + float(steps["end_ps"].max()) / 1e12
    t = samples.t
    prev = np.concatenate([[t[0] - 1.0 / max(samples.meta.get("hz") or 10, 0.5)], t[:-1]]) if n else t
    inside = allrows[(t >= lo) & (prev <= hi)]
    return inside if len(inside) >= MIN_SAMPLES else allrows


def _rate(col: np.ndarray, t: np.ndarray, rows: np.ndarray) -> float | None:
    """Mean rate (per second) of a cumulative counter over the samples ``rows`` (each covers the
    interval since the sample before it)."""
    if len(rows) < 1 or col.shape[0] < 2:
        return None
    a = max(int(rows[0]) - 1, 0)
    b = int(rows[-1])
    if b <= a or t[b] <= t[a]:
        return None
    d = col[b] - col[a]
    if not np.isfinite(d):
        return None
    return max(float(d), 0.0) / float(t[b] - t[a])


def _utilisation(trace: Trace, steps: Table | None, s: Samples, res: AnalysisResult) -> None:
    meta = s.meta
    t0 = _profile_start_s(trace, s)
    c = s.columns
    n_cores = int(c["cpu_core_pct"].shape[1])
    if s.n < MIN_SAMPLES:
        res.notes.append(f"{s.path}: only {s.n} system sample(s) (the window lasted "
                         f"{(s.t[-1] - s.t[0]) if s.n else 0:.2f} s at {meta.get('hz')} Hz): profile more steps for "
                         "utilisation figures")
        _gpu_sampler(s, res)
        return
    rows = _select(trace, steps, s, t0)
    t = s.t
    window = float(t[rows[-1]] - t[max(int(rows[0]) - 1, 0)])
    cpu = c["cpu_pct"][rows].astype(np.float64)
    cores = c["cpu_core_pct"][rows].astype(np.float64)
    core_mean = np.nanmean(cores, axis=0) if len(rows) else np.zeros(n_cores)
    idle = int((core_mean < IDLE_CORE_PCT).sum())
    proc = min(100.0, float(np.nanmean(c["proc_cpu_pct"][rows])) / n_cores) if len(rows) else None
    util = float(np.nanmean(cpu))
    def put(name: str, value) -> None:
        if value is not None and isinstance(value, float) and not np.isfinite(value):
            value = None
        res.add(name, value)

    put("system_samples_count", int(len(rows)))
    put("system_sample_hz", round((s.n - 1) / float(t[-1] - t[0]), 2) if t[-1] > t[0] else None)
    put("system_window_s", round(window, 3))
    put("system_cpu_cores", n_cores)
    put("system_cpu_util_pct", util)
    put("system_cpu_util_p90_pct", float(np.nanpercentile(cpu, 90)))
    put("system_cpu_busiest_core_pct", float(np.nanmax(core_mean)))
    put("system_cpu_idle_cores", idle)
    put("system_cpu_idle_cores_pct", 100.0 * idle / n_cores)
    put("system_proc_cpu_pct", proc)
    put("system_other_cpu_pct", max(0.0, util - proc) if proc is not None and np.isfinite(proc) else None)
    limit = meta.get("mem_limit_bytes") or meta.get("mem_total_bytes")
    total = meta.get("mem_total_bytes")
    avail = c["mem_available_bytes"][rows]
    rss = c["proc_rss_bytes"][rows]
    if isinstance(total, (int, float)) and total > 0 and np.isfinite(avail).any():
        used = total - np.nanmin(avail)
        put("system_mem_used_pct", float(100.0 * used / (limit or total)))
        put("system_mem_available_min_bytes", float(np.nanmin(avail)))
    if np.isfinite(rss).any():
        put("system_proc_rss_max_bytes", float(np.nanmax(rss)))
        if isinstance(limit, (int, float)) and limit > 0:
            put("system_rss_limit_pct", float(100.0 * np.nanmax(rss) / limit))
    swap = c["swap_used_bytes"][rows]
    if np.isfinite(swap).any():
        put("system_swap_used_bytes", float(np.nanmax(swap)))
    sin, sout = _rate(c["swap_in_bytes"], t, rows), _rate(c["swap_out_bytes"], t, rows)
    put("system_swap_io_mbps", (sin + sout) / MB if sin is not None and sout is not None else None)
    for name, col in (("system_disk_read_mbps", "disk_read_bytes"), ("system_disk_write_mbps", "disk_write_bytes"),
                      ("system_proc_read_mbps", "proc_read_chars"), ("system_net_recv_mbps", "net_recv_bytes"),
                      ("system_net_sent_mbps", "net_sent_bytes")):
        r = _rate(c[col], t, rows)
        put(name, r / MB if r is not None else None)
    busy = c["disk_busy_ms"]
    if busy.shape[1]:
        rates = [_rate(busy[:, k], t, rows) for k in range(busy.shape[1])]
        known = [r for r in rates if r is not None]
        put("system_disk_busy_pct", min(100.0, max(known) / 10.0) if known else None)  # ms per s -> %
    else:
        res.notes.append("no disk busy-time counters on this host")
    cpu_s = meta.get("sampler_cpu_s")
    span = float(t[-1] - t[0]) if s.n > 1 else 0.0
    if isinstance(cpu_s, (int, float)) and span > 0:
        put("system_sampler_overhead_pct", 100.0 * float(cpu_s) / (span * n_cores))
    _gpu(s, rows, res, put)
    res.tables["system_timeline"] = _timeline(s, t0)
    res.tables["system_summary"] = _summary_table(res)


def _gpu_sampler(s: Samples, res: AnalysisResult) -> None:
    name = s.gpu_sampler or "none"
    res.add("system_gpu_sampler", name)
    if name == "none":
        note = s.meta.get("gpu_note") or "no GPU sampler"
        res.notes.append(note if str(note).startswith("no GPU sampler") else f"no GPU sampler: {note}")


def _gpu(s: Samples, rows: np.ndarray, res: AnalysisResult, put) -> None:
    _gpu_sampler(s, res)
    if not s.gpu_count:
        return
    c = s.columns
    util = c["gpu_util_pct"][rows].astype(np.float64)
    if not np.isfinite(util).any():
        res.notes.append(f"{s.path}: the GPU sampler gave no utilisation readings")
        return
    per_gpu = np.nanmean(util, axis=0)
    put("system_gpu_count", int(s.gpu_count))
    put("system_gpu_util_pct", float(np.nanmean(per_gpu)))
    put("system_gpu_util_min_pct", float(np.nanmin(per_gpu)))
    put("system_gpu_idle_count", int((per_gpu < IDLE_GPU_PCT).sum()))
    totals = [g.get("memory_total_bytes") for g in s.meta.get("gpus") or []]
    mem = c["gpu_mem_used_bytes"][rows]
    if len(totals) == s.gpu_count and all(isinstance(x, (int, float)) and x > 0 for x in totals) \
            and np.isfinite(mem).any():
        put("system_gpu_mem_used_pct", float(np.nanmax(np.nanmax(mem, axis=0) / np.array(totals, float)) * 100.0))
    power = c["gpu_power_w"][rows]
    if np.isfinite(power).any():
        put("system_gpu_power_w", float(np.nanmean(power)))


def _timeline(s: Samples, t0: float | None) -> Table:
    """One row per sample: time since the profile start and the rates/utilisations."""
    c = s.columns
    t = s.t
    base = t0 if t0 is not None else (float(t[0]) if s.n else 0.0)
    dt = np.diff(t, prepend=np.nan)
    dt[dt <= 0] = np.nan

    def rate(col: np.ndarray) -> np.ndarray:
        return np.diff(col, prepend=np.nan) / dt / MB

    total = s.meta.get("mem_limit_bytes") or s.meta.get("mem_total_bytes") or np.nan
    df = Table({
        "time_s": t - base,
        "time_ps": (t - base) * 1e12,
        "cpu_pct": c["cpu_pct"].astype(np.float64),
        "proc_cpu_pct": c["proc_cpu_pct"].astype(np.float64) / max(1, c["cpu_core_pct"].shape[1]),
        "mem_used_pct": 100.0 * (1.0 - c["mem_available_bytes"] / float(total)),
        "disk_read_mbps": rate(c["disk_read_bytes"]),
        "disk_write_mbps": rate(c["disk_write_bytes"]),
        "net_recv_mbps": rate(c["net_recv_bytes"]),
        "net_sent_mbps": rate(c["net_sent_bytes"]),
    })
    if s.gpu_count:
        df["gpu_util_pct"] = np.nanmean(c["gpu_util_pct"].astype(np.float64), axis=1)
    return df


def _summary_table(res: AnalysisResult) -> Table:
    rows = []
    for name, label in (("system_cpu_util_pct", "CPU busy (all cores)"),
                        ("system_proc_cpu_pct", "training process CPU"),
                        ("system_other_cpu_pct", "other processes CPU"),
                        ("system_cpu_idle_cores", "idle cores"), ("system_gpu_util_pct", "GPU busy"),
                        ("system_gpu_mem_used_pct", "GPU memory peak"), ("system_mem_used_pct", "host memory peak"),
                        ("system_rss_limit_pct", "process RSS / limit"), ("system_swap_io_mbps", "swap I/O"),
                        ("system_disk_read_mbps", "disk read"), ("system_disk_write_mbps", "disk write"),
                        ("system_disk_busy_pct", "disk busy (busiest)"), ("system_net_recv_mbps", "network receive"),
                        ("system_net_sent_mbps", "network send")):
        m = res.metrics.get(name)
        if m is not None and m.value is not None:
            rows.append((label, name, m.value, m.unit))
    cols = ("figure", "metric", "value", "unit")
    return Table({c: [r[i] for r in rows] for i, c in enumerate(cols)}, n=len(rows))


# --------------------------------------------------------------------------- start-up


def _num(d: dict, key: str) -> float | None:
    """A finite number (as float) from the run's metadata, else None (other tools write odd values)."""
    v = d.get(key) if isinstance(d, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        x = float(v)
    except OverflowError:  # an int too large for a float
        return None
    return x if math.isfinite(x) else None


def _startup(trace: Trace, ctx: Context, steps: Table | None, res: AnalysisResult) -> None:
    st = (trace.run_metadata or {}).get("startup")
    if not isinstance(st, dict):
        res.notes.append("no start-up record (tfadvisor_run.json `startup`, written by the Keras callback)")
        return
    def put(name: str, value) -> None:
        res.add(name, value)

    p0 = _num(st, "process_start_unix_s")
    fit, batch, first = (st.get(k) if isinstance(st.get(k), dict) else {} for k in
                         ("fit_start", "first_batch", "first_step"))
    tf_, tb, ts = _num(fit, "t_unix_s"), _num(batch, "t_unix_s"), _num(first, "t_unix_s")
    if p0 is None or tf_ is None or not (p0 <= tf_ + 1.0):
        res.notes.append("the start-up record has no usable process start / fit start")
        return
    before = max(0.0, tf_ - p0)
    put("startup_before_fit_s", before)
    phases = {"before_fit": before}
    if tb is not None and tb >= tf_:
        phases["fit_to_first_batch"] = tb - tf_
        put("startup_fit_to_first_batch_s", tb - tf_)
    if ts is not None and tb is not None and ts >= tb:
        phases["first_step"] = ts - tb
        put("startup_first_step_s", ts - tb)
    if ts is not None and ts >= p0:
        total = ts - p0
        put("startup_to_first_step_s", total)
        planned = st.get("planned_steps")
        median = ctx.metric("step_time_median_ms")
        if isinstance(planned, int) and planned > 1 and isinstance(median, (int, float)) and median > 0:
            job = total + (planned - 1) * median / 1000.0
            put("startup_pct", 100.0 * total / job)
    else:
        res.notes.append("the start-up record has no first step")
    put("startup_phase", max(phases, key=phases.get))
    calls, rb, cpu = _num(fit, "read_calls"), _num(fit, "read_bytes"), _num(fit, "cpu_s")
    if calls is not None:
        put("startup_before_fit_read_calls", int(calls))
    if rb is not None:
        put("startup_before_fit_read_mb", rb / MB)
    if cpu is not None and before > 0:
        put("startup_before_fit_cpu_pct", 100.0 * cpu / before)
    _first_get_next(trace, steps, st, put, res)
    res.tables["startup"] = Table({"phase": list(phases), "seconds": np.array(list(phases.values()), np.float64)},
                                  n=len(phases))


def _first_get_next(trace: Trace, steps: Table | None, st: dict, put, res: AnalysisResult) -> None:
    """Time in IteratorGetNext inside the first step, from the trace when that step was profiled."""
    first = st.get("first_step_index")
    if not st.get("first_step_in_window") or steps is None or not len(steps) or not isinstance(first, int):
        res.notes.append("the first step was not profiled (profile from step 0, e.g. steps=(0, 20), to see its "
                         "IteratorGetNext time)")
        return
    at = np.flatnonzero(steps["step"] == first)
    if not at.shape[0]:
        return
    lo, hi = int(steps["start_ps"][at[0]]), int(steps["end_ps"][at[0]])
    total = 0
    for p in trace.host_planes:
        rows = p.events_named("IteratorGetNextOp::DoCompute")  # the host's wait; nested events would double-count
        if not len(rows):
            rows = p.events_named(None, prefix="IteratorGetNext")
        if not len(rows):
            continue
        s, e = p.ev_start_ps[rows], p.ends(rows)
        keep = (s < hi) & (e > lo)
        total += int((np.minimum(e[keep], hi) - np.maximum(s[keep], lo)).sum())
    put("startup_first_get_next_ms", total / PS_PER_MS)
