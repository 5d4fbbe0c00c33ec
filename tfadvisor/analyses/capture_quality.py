"""Capture quality: does the profiled window show steady-state training at all?

A profile can be read correctly and still be the wrong evidence: one partial step, most
devices idle, a window that is almost all waiting. Step-based verdicts (input-bound, idle
time, step outliers, batch size) built on such a window are noise, so this analysis says
what the window holds; findings on a window that is not steady state carry that as a caveat.

Figures (the window is the analysed host's span: first to last event over its CPU plane and
its device planes):

* ``devices_total``: device planes of the host (GPU/TPU), empty ones included;
  ``devices_active``: those that ran kernels (TPU: XLA ops), copies alone do not count;
  ``devices_active_list`` / ``devices_idle`` (names, comma-separated), ``devices_idle_count``.
* ``device_busy_pct``: for each active device, the union of its kernels, copies and
  collectives as % of the window; the mean over the active devices.
  ``device_busy_union_pct``: the union over all devices, % of the window.
* ``complete_steps``: the steps the steps analysis found (disjoint, positive length);
  ``steps_window_pct``: share of the window inside them.
* ``step_skew_ms``: with ``Steps`` lines on several devices, the largest difference between
  the start times of the same step (by step number) on different devices.
* ``capture_steady_state``: False when the window holds fewer than
  :data:`MIN_STEPS` steps, when steps are present but the devices were busy less than
  :data:`MIN_BUSY_PCT` % of the window while the steps cover less than :data:`COVERED_PCT` % of it
  (many whole steps with idle devices are a host-bound run, not a fragment), or when the same step ran more than
  max(:data:`MAX_SKEW_MS`, 2 x the median step) apart on two devices.
  ``capture_issues`` lists those reasons (and idle devices, which alone do not make a
  window unsteady: a one-device job on a multi-device host is a fine capture).
* ``capture_phase``: a one-time phase of training the window is in, which later windows will not
  show: ``cache_fill`` when a tf.data cache stage still calls the stages below it (the first pass
  writes the cache, later passes read it; :data:`CACHE_FILL_RE`) and the stages below it take at least
  :data:`CACHE_FILL_MIN_PCT` % of the window. It is a caveat on the input's findings, not unsteadiness.
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses.activity import Activity, host_trace
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.device_lines import short_name
from tfadvisor.analyses.step_detect import device_steps
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import Measure, union_length

MIN_STEPS = 3
MIN_BUSY_PCT = 2.0
#: Steps covering this share of the window make it a steady capture whatever the devices did: a run whose
#: host does all the work (real: gpu_jax_input_numpy, 20 steps over 98.8 % of the window, GPU busy 0.74 %).
COVERED_PCT = 80.0
MAX_SKEW_MS = 50.0


def _skew_ms(per_device: list[tuple[str, np.ndarray, np.ndarray]]) -> tuple[float | None, str]:
    """Largest start-time spread of one step number over the devices, and the devices involved."""
    if len(per_device) < 2:
        return None, ""
    dev = np.array([d for d, nums, _ in per_device for _ in range(len(nums))], dtype=object)
    step = np.concatenate([np.asarray(nums, np.int64) for _, nums, _ in per_device])
    start = np.concatenate([np.asarray(starts, np.int64) for _, _, starts in per_device])
    steps, of = np.unique(step, return_inverse=True)
    hi = np.full(len(steps), np.iinfo(np.int64).min)
    lo = np.full(len(steps), np.iinfo(np.int64).max)
    np.maximum.at(hi, of, start)
    np.minimum.at(lo, of, start)
    seen = np.bincount(of, minlength=len(steps)) >= 2
    if not seen.any():
        return None, ""
    spread = np.where(seen, hi - lo, -1)
    i = int(np.argmax(spread))  # the first step number of the largest spread
    sub = np.flatnonzero(of == i)
    sub = sub[np.lexsort((dev[sub], start[sub]))]  # by start, then device name
    return float(spread[i]) / PS_PER_MS, f"{dev[sub[0]]} and {dev[sub[-1]]}"


DECLARED = declare(
    "capture_quality",
    ("capture_window_ms", "ms", "the analysed host's capture window: first to last event over its CPU and device "
                                "planes"),
    ("devices_total", "count", "device planes (GPU/TPU) of the host, empty ones included"),
    ("devices_active", "count", "devices that ran kernels (TPU: XLA ops) in the window"),
    ("devices_active_list", "", "the devices that ran kernels"),
    ("devices_idle", "", "the devices that ran no kernel (copies alone do not count) (names, comma-separated)"),
    ("devices_idle_count", "count", "devices that ran no kernel"),
    ("device_busy_pct", "%", "per active device, its kernels, copies and collectives (union) as % of the window; mean"),
    ("device_busy_union_pct", "%", "time any device was busy, % of the window"),
    ("complete_steps", "count", "steps in the window (disjoint, positive length)"),
    ("steps_window_pct", "%", "share of the window inside steps"),
    ("step_skew_ms", "ms", "largest start-time difference of the same step on two devices"),
    ("capture_steady_state", "", "the window shows steady-state training: >= 3 steps, devices busy >= 2 % of it, "
                                 "devices in step with each other (False: fewer than 3 steps, devices busy < 2 % of "
                                 "the window with steps present, or the same step > max(50 ms, 2 x median step) apart "
                                 "on two devices; findings on such a window carry it as a caveat)"),
    ("capture_issues", "", "what keeps the window from showing steady-state training (the reasons, plus idle devices)"),
    ("capture_issue_count", "count", "number of capture issues"),
    ("capture_phase", "", "a one-time phase the window is in (`cache_fill`: a tf.data cache is still being written, "
                          "the stages below it run for every element and take >= 5 % of the window); None: none "
                          "seen"),
    tables="`devices` (per device: activity lines, kernels, copies, busy_ms, compute_ms, first/last activity)",
)


#: A cache stage that still calls a stage below it (``...::MemoryCacheImpl::ParallelMapV2``): the cache
#: is being written. Once full, the cache's events have no child stage.
CACHE_FILL_RE = re.compile(r"^Iterator::.*::\w*Cache\w*(\[\d+\])?::")


#: The stages below a cache being written must take at least this share of the window for the window to be in
#: the cache's first pass: a cache over in-memory tensors, written for next to nothing, changes no figure.
CACHE_FILL_MIN_PCT = 5.0


def _phase(host: Trace, window_ps: int) -> str | None:
    """The one-time phase of training the host's events show, if any: ``cache_fill`` when the stages below a
    cache being written take at least :data:`CACHE_FILL_MIN_PCT` % of the window (their events' union)."""
    if window_ps <= 0:
        return None
    below = 0
    for p in host.host_planes:
        rows = p.events_named(CACHE_FILL_RE) if p.n_events else np.zeros(0, np.int64)
        if rows.shape[0]:
            below += Measure.of_rows(p, rows).total()
    return "cache_fill" if 100.0 * below / window_ps >= CACHE_FILL_MIN_PCT else None


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("capture_quality")
    host, _ = host_trace(trace)
    lo, hi = act.span
    window = hi - lo
    per_dev = act.per_device
    info = {d["plane"]: d for d in per_dev}
    names, active, idle, busy_pct = [], [], [], []
    for p in host.device_planes:
        nm = short_name(p)
        names.append(nm)
        d = info.get(p.name)
        if d is not None and d["kernels"] > 0:
            active.append(nm)
            if window > 0:
                busy_pct.append(100.0 * min(d["busy_ps"], window) / window)
        else:
            idle.append(nm)
    res.add("capture_window_ms", window / PS_PER_MS if window > 0 else None)
    res.add("devices_total", len(names))
    res.add("devices_active", len(active))
    res.add("devices_active_list", ", ".join(active))
    res.add("devices_idle", ", ".join(idle))
    res.add("devices_idle_count", len(idle))
    if busy_pct:
        res.add("device_busy_pct", float(np.mean(busy_pct)))
        # its length only, walked without building the union (act.union would keep it for the run)
        u = union_length(*[act.get(n) for n in ("dev_compute", "dev_h2d", "dev_copy", "dev_collective")])
        res.add("device_busy_union_pct", 100.0 * min(u, window) / window)
    else:
        res.missing(["device_busy_pct", "device_busy_union_pct"],
                    "no device ran kernels in the window" if names else "no device plane (CPU-only trace)")

    tbl = step_table
    n_steps = 0 if tbl is None else int(len(tbl))
    res.add("complete_steps", n_steps)
    med_ms = None
    if tbl is not None and window > 0:
        s = tbl["start_ps"]
        e = tbl["end_ps"]
        inside = Measure.union(np.maximum(s, lo), np.minimum(e, hi)).total()
        res.add("steps_window_pct", 100.0 * min(inside, window) / window)
        med_ms = float(np.median((e - s) / PS_PER_MS))
    else:
        res.missing(["steps_window_pct"], "no steps in the window")

    dev_steps = [(short_name(d), nums, d.ev_start_ps[rows]) for d, rows, nums in device_steps(act, ctx)]
    skew, pair = _skew_ms(dev_steps)
    if skew is not None:
        res.add("step_skew_ms", skew)
    else:
        res.missing(["step_skew_ms"], "fewer than two devices with a Steps line: no step skew")

    issues: list[str] = []
    steady = True
    if n_steps == 0:
        steady = False
        issues.append("no training steps in the window (no step markers, no device Steps line, no repeating "
                      "train function)")
    elif n_steps < MIN_STEPS:
        steady = False
        issues.append(f"only {n_steps} step{'s' if n_steps > 1 else ''} in the window "
                      f"(at least {MIN_STEPS} are needed to see steady state)")
    covered = res.metrics.get("steps_window_pct")
    covered_pct = float(covered.value) if covered is not None and covered.value is not None else 0.0
    if n_steps and busy_pct and float(np.mean(busy_pct)) < MIN_BUSY_PCT and (
            n_steps < MIN_STEPS or covered_pct < COVERED_PCT):
        steady = False
        issues.append(f"the active devices were busy only {float(np.mean(busy_pct)):.2g} % of the "
                      f"{window / PS_PER_MS:,.0f} ms window")
    if skew is not None and skew > max(MAX_SKEW_MS, 2 * (med_ms or 0.0)):
        steady = False
        issues.append(f"the same step started {skew:,.0f} ms apart on {pair}")
    phase = _phase(host, window)
    res.add("capture_phase", phase)
    if phase == "cache_fill":  # a caveat on the input's findings (tfadvisor.advice.explain), not unsteadiness
        issues.append("a tf.data cache is still being written (the first pass over the data): the stages below it "
                      "run for every element now, later passes read the cache")
    if len(names) >= 2 and idle:
        issues.append(f"{len(idle)} of {len(names)} devices ran no kernel ({', '.join(idle)})")
    res.add("capture_steady_state", steady,
            doc=f"the window shows steady-state training: >= {MIN_STEPS} steps, devices busy >= {MIN_BUSY_PCT:g} % of "
            "it, devices in step with each other")
    res.add("capture_issues", "; ".join(issues))
    res.add("capture_issue_count", len(issues))
    if per_dev:
        res.tables["devices"] = Table({
            "device": [d["device"] for d in per_dev],
            "activity_lines": [d["activity_lines"] or "" for d in per_dev],
            "kernels": np.array([d["kernels"] for d in per_dev]),
            "copies": np.array([d["copies"] for d in per_dev]),
            "busy_ms": np.array([d["busy_ps"] / PS_PER_MS for d in per_dev], np.float64),
            "compute_ms": np.array([d["compute_ps"] / PS_PER_MS for d in per_dev], np.float64),
            "first_ms": np.array([(d["first_ps"] - lo) / PS_PER_MS if d["first_ps"] is not None else np.nan
                                  for d in per_dev], np.float64),
            "last_ms": np.array([(d["last_ps"] - lo) / PS_PER_MS if d["last_ps"] is not None else np.nan
                                 for d in per_dev], np.float64),
        })
    return res


__all__ = ["COVERED_PCT", "MAX_SKEW_MS", "MIN_BUSY_PCT", "MIN_STEPS", "analyze"]
