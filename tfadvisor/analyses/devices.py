"""Devices of one host against each other: the slow device the others wait for.

In synchronous data-parallel training every device of a host runs the same step and meets the others
in the all-reduce; one slow device (a throttling or faulty GPU, a worse PCIe/NVLink path, an uneven
shard) makes the others wait there. Per device, over the steps the statistics count (``in_stats``):

* its *work*: time with a compute kernel running (not a collective, not a copy), per step;
* its *collective* time per step: the all-reduce kernels, which last as long as the device waits
  for the slowest one.

The slowest device is a straggler when its work is more than
:data:`~tfadvisor.analyses.hosts.STRAGGLER_RATIO` x the median device's and the other devices spend
longer in collectives than it does (they wait for it); with no collective on the devices the ratio
alone decides. What it costs the others is their median collective time per step beyond its own.
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses.activity import Activity
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.hosts import STRAGGLER_RATIO
from tfadvisor.analyses.steps import step_spans, training_steps
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace

DECLARED = declare(
    "devices",
    ("device_slowest", "", "the device of this host with the most work (compute kernels) per step"),
    ("device_slowest_ratio", "x", "its work per step / the median device's"),
    ("device_straggler", "", f"a device whose work per step is > {STRAGGLER_RATIO}x the median device's while the "
                             "other devices spend longer in collectives (they wait for it)"),
    ("device_straggler_ratio", "x", "the device straggler's work per step / the median device's"),
    ("device_straggler_wait_ms", "ms", "what the device straggler costs the other devices per step: their median "
                                       "collective time beyond its own"),
    ("device_straggler_wait_pct", "%", "the same, % of step time"),
    ("device_imbalance_pct", "%", "(max - min) / median work per step over the host's devices"),
    doc="Devices of one host compared (two or more devices with work, over the steps the statistics count).",
    tables="`device_balance` (device, work_ms, collective_ms per step, work_ratio against the median device)",
)


def _per_step(sets: dict, kind: str, a: np.ndarray, b: np.ndarray, n: int) -> float:
    """Time per training step of this device's ``kind`` set inside the steps [a, b), which hold ``n`` training
    steps."""
    m = sets.get(kind)
    if m is None or not len(m) or n <= 0:
        return 0.0
    return float(m.within(a, b).sum()) / n / PS_PER_MS


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("devices")
    names = DECLARED.names()
    if step_table is None:
        res.missing(names, "")  # devices are compared per step (the steps analysis says why there are none)
        return res
    a, b, in_stats, _ = step_spans(step_table)
    a, b, n = a[in_stats], b[in_stats], training_steps(step_table, in_stats)
    devs = [d for d in act.per_device if d.get("sets")]
    work = np.array([_per_step(d["sets"], "dev_compute", a, b, n) for d in devs])
    coll = np.array([_per_step(d["sets"], "dev_collective", a, b, n) for d in devs])
    used = work > 0
    if used.sum() < 2 or not a.shape[0]:
        res.missing(names, "")  # nothing to compare
        return res
    names_d = [d["device"] for d in devs]
    med = float(np.median(work[used]))
    res.tables["device_balance"] = Table({
        "device": names_d, "work_ms": work, "collective_ms": coll,
        "work_ratio": work / med if med > 0 else np.full(work.shape, np.nan),
    })
    i = int(np.argmax(np.where(used, work, -1.0)))
    ratio = float(work[i] / med) if med > 0 else None
    res.add("device_slowest", names_d[i])
    res.add("device_slowest_ratio", ratio)
    res.add("device_imbalance_pct", 100.0 * float(work[used].max() - work[used].min()) / med if med > 0 else None)
    others = [j for j in np.flatnonzero(used) if j != i]
    straggler = ratio is not None and ratio > STRAGGLER_RATIO
    wait = None
    if straggler and coll[others].max(initial=0.0) > 0:
        wait = float(np.median(coll[others])) - float(coll[i])
        straggler = wait > 0
    step_ms = float(np.sum(b - a)) / max(n, 1) / PS_PER_MS  # per training step, as the wait
    res.add("device_straggler", names_d[i] if straggler else None)
    res.add("device_straggler_ratio", ratio if straggler else None)
    res.add("device_straggler_wait_ms", wait if straggler else None)
    res.add("device_straggler_wait_pct",
            min(100.0, 100.0 * wait / step_ms) if straggler and wait is not None and step_ms else None)
    return res


__all__ = ["DECLARED", "analyze"]
