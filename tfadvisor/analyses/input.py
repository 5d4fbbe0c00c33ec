"""Input pipeline cost per step: waiting for batches, host-to-device copies, tf.data CPU use.

* ``input_pct``: the steps analysis' ``input`` category: time in the step spent waiting for
  input that nothing of higher priority hides. CPU-only: the host waiting in
  ``IteratorGetNext*`` (exactly xprof's input time). With a device: H2D copies and host
  waits for the next batch while the device computes nothing.
* ``input_host_wait_pct``, ``input_h2d_pct``: the raw host wait and H2D copy time inside
  steps, overlapped or not; ``input_device_wait_pct``: device idle while the host waits for
  input; ``h2d_exposed_pct``: H2D copy time not overlapped by device compute.
* ``xprof_input_pct``: xprof's own figure over the same steps (xprof's step set, i.e. the
  first and last step left out when there are more than five): CPU-only the host wait in
  ``IteratorGetNext*``; with a device xprof counts only the device-side copies (host waits
  are not in its device steps), so an input-bound GPU job can show 0 % there while
  ``input_pct`` is high.
* ``input_severity``: xprof's thresholds on ``input_pct``: ``high`` >= 20 %, ``moderate``
  >= 5 %, else ``low``.
* tf.data CPU contention: ``tfdata_cpu_ratio`` is thread-busy time of the ``tf_data_*``
  threads divided by that of the training threads, inside steps; ``tfdata_cpu_pct`` is the
  tf.data thread-busy time as % of the step wall time times the cores (the intra-op Eigen
  threads). On a small host an expensive map slows every step without showing as a wait.
  ``tfdata_contention_*``: the step time that costs (see ``contention_lost``);
  ``tfdata_cost_*``: what the pipeline costs a step, wait plus contention;
  ``step_own_ms_per_step``: the step without either.
* ``numpy_feed_*``: tensors made from NumPy/Python data on the training thread inside the steps
  (``tf.constant`` events): a ``tf.function`` fed NumPy batches converts and copies each one before
  it runs, a cost no pipeline overlaps.
* ``h2d_pageable_pct``: share of H2D copy time from pageable host memory (``memcpy_details``
  ``kind_src:pageable``): such copies are synchronous and slower than from pinned memory.
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses import tfdata
from tfadvisor.analyses.activity import Activity
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.steps import step_spans, training_steps
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import Lanes, Measure, Runs, difference, line_rows, step_of, union, within_many

#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("threadpool_size", "cpu_budget")

HIGH_PCT = 20.0
#: The event of a tensor made from host data (NumPy arrays passed to a tf.function are converted so).
NUMPY_FEED = "tf.constant"
#: The tf.data threads' CPU figures: left out on a host compared only (:attr:`tfadvisor.analyses.base.Context.detail`:
#: no report reads them for such a host).
DETAIL_METRICS = ("tfdata_cpu_ratio", "tfdata_cpu_pct", "tfdata_contention_pct", "tfdata_contention_ms_per_step",
                  "tfdata_cost_ms_per_step", "tfdata_cost_pct", "step_own_ms_per_step", "tfdata_cores")
MODERATE_PCT = 5.0


def severity(pct: float | None) -> str | None:
    if pct is None:
        return None
    return "high" if pct >= HIGH_PCT else "moderate" if pct >= MODERATE_PCT else "low"


DECLARED = declare(
    "input",
    ("input_pct", "%", "share of step time waiting for input (host wait + H2D + device waiting for the host)"),
    ("input_host_wait_pct", "%", "host time in IteratorGetNext* inside steps, % of step time"),
    ("input_h2d_pct", "%", "host-to-device copy time inside steps, % of step time"),
    ("input_device_wait_pct", "%", "time the device idles while the host waits for input, % of step time"),
    ("h2d_pageable_pct", "%", "share of H2D copy time from pageable memory"),
    ("h2d_exposed_pct", "%", "H2D copy time not overlapped by device compute, % of step"),
    ("xprof_input_pct", "%", "xprof's input share (CPU-only: host wait in IteratorGetNext*) (xprof's own definition, "
                             "for comparison)"),
    ("input_severity", "", "xprof's input-bound levels: high >= 20 %, moderate >= 5 % (`high` >= 20, `moderate` >= "
                           "5, `low`)"),
    ("tfdata_cpu_ratio", "", "tf.data thread-busy time / training thread-busy time inside steps"),
    ("tfdata_cpu_pct", "%", "tf.data thread-busy time, % of step wall time x 2 cores"),
    ("tfdata_contention_pct", "%", "step time lost to CPU contention with the tf.data threads, % of step time "
                                   "(tf.data threads' compute while the step runs, over the cores; where the system "
                                   "sampler ran, bounded by the process's measured CPU and the idle cores)"),
    ("tfdata_contention_ms_per_step", "ms", "step time lost to CPU contention with the tf.data threads, per step"),
    ("tfdata_cost_ms_per_step", "ms", "what the input pipeline costs each step: the wait for input plus the "
                                      "contention loss"),
    ("tfdata_cost_pct", "%", "that cost, % of step time"),
    ("step_own_ms_per_step", "ms", "the step's own time without the pipeline: step time minus wait and contention "
                                   "loss"),
    ("tfdata_cores", "", "cores the train step and the tf.data threads share"),
    ("numpy_feed_per_step", "count", "tensors made from host (NumPy, Python) data inside the steps, per step "
                                     "(`tf.constant` events: a tf.function called with NumPy batches)"),
    ("numpy_feed_ms_per_step", "ms", "time making them, per step, on the training thread"),
    ("numpy_feed_pct", "%", "that time, % of step time"),
    doc="`xprof_input_pct` uses the statistics' steps; CPU-only it equals `input_pct`; with a device it is the H2D "
        "time not hidden by compute (xprof leaves the host wait out). `tfdata_cpu_pct` uses the Eigen intra-op thread "
        "count as the core count (None without Eigen threads)\n\nTf.data cost: `tfdata_cores` (cores the train step "
        "and the tf.data threads share), `tfdata_contention_pct` / `tfdata_contention_ms_per_step` (step time lost to "
        "CPU contention with the tf.data threads: their compute while the step runs, over the cores), "
        "`tfdata_cost_pct` / `tfdata_cost_ms_per_step` (what the pipeline costs each step: the input wait plus the "
        "contention loss), `step_own_ms_per_step` (step time without the pipeline: minus the wait and the contention "
        "loss)",
    tables="`input_per_step`; `input_per_step` (step, host_wait_ms, input_ms, h2d_ms, device_wait_ms, "
           "tfdata_busy_ms, training_busy_ms)",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("input")
    tbl = step_table
    all_names = ["input_pct", "input_host_wait_pct", "input_h2d_pct", "input_device_wait_pct", "xprof_input_pct",
                 "input_severity", "tfdata_cpu_ratio", "tfdata_cpu_pct", "h2d_pageable_pct", "h2d_exposed_pct",
                 "tfdata_contention_pct", "tfdata_contention_ms_per_step", "tfdata_cost_ms_per_step", "tfdata_cost_pct",
                 "step_own_ms_per_step", "tfdata_cores"]
    if tbl is None:
        res.missing(all_names, "no steps found: input time is measured per step")
        return res
    a, b, in_stats, tot = step_spans(tbl)
    n_train = training_steps(tbl, in_stats)  # what "per step" divides by: training steps, as the step time
    g = act.get

    def pct(v: np.ndarray) -> float | None:
        return 100.0 * float(np.asarray(v)[in_stats].sum()) / tot if tot > 0 else None

    # xprof's figure is of its step time: inside the markers (the steps' busy part)
    end = tbl["end_ps"]
    busy = float((end - a)[in_stats].sum())

    def xprof_share(v: np.ndarray) -> float | None:
        return 100.0 * float(np.asarray(v)[in_stats].sum()) / busy if busy > 0 else None

    input_ms = tbl["input_ms"]
    res.add("input_pct", pct(input_ms * PS_PER_MS))
    wait = g("input_wait").within(a, b)
    has_wait = len(g("input_wait")) > 0
    res.add("input_host_wait_pct", pct(wait))
    per = {"step": tbl["step"], "host_wait_ms": wait / PS_PER_MS, "input_ms": input_ms}
    if act.has_device:
        # every union over the steps and over xprof's steps (to their markers' ends) at once: a big device's
        # kernels, in all of them, are read in one pass (within_many)
        n = a.shape[0]
        sets = [g("dev_h2d"), act.lazy("input_wait", "dev_compute", "dev_h2d", "dev_copy", "dev_collective"),
                act.lazy("dev_compute", "dev_h2d", "dev_copy", "dev_collective"),
                act.lazy("dev_compute", "dev_collective", "dev_h2d"), act.lazy("dev_compute", "dev_collective")]
        got = within_many(sets, np.concatenate([a, a]), np.concatenate([b, end]))
        h2d, both, dev_busy, with_h2d, compute = (w[:n] for w in got)
        res.add("input_h2d_pct", pct(h2d))
        dev_wait = both - dev_busy  # device idle while the host waits for input
        res.add("input_device_wait_pct", pct(dev_wait))
        res.add("h2d_exposed_pct", pct(with_h2d - compute))
        if len(g("dev_h2d")) and not act.h2d_xprof_named:
            res.add("xprof_input_pct", 0.0 if tot > 0 else None)
            res.qualify(("xprof_input_pct",), "xprof_input_pct is 0: xprof does not take these copies' names (e.g. "
                        "TF 2.4's MemcpyH2D) for host-to-device copies; input_h2d_pct counts them")
        else:
            res.add("xprof_input_pct", xprof_share(got[3][n:] - got[4][n:]))
        if has_wait:
            res.qualify(("xprof_input_pct",), "xprof_input_pct leaves out the host's wait for the next batch (xprof "
                        "builds GPU steps from device events): input_pct counts it")
        pg = act.h2d_pageable_ps
        if pg and pg[1] > 0:
            res.add("h2d_pageable_pct", 100.0 * pg[0] / pg[1])
        elif len(g("dev_h2d")):
            res.missing(["h2d_pageable_pct"], "H2D copies carry no memcpy_details kinds (kind_src/kind_dst; TF 2.4 "
                                              "and older write only size and dest): pinned or pageable unknown")
        else:
            res.missing(["h2d_pageable_pct"], "no host-to-device copies in the trace")
        per.update({"h2d_ms": h2d / PS_PER_MS, "device_wait_ms": dev_wait / PS_PER_MS})
    else:
        res.missing(["input_h2d_pct", "input_device_wait_pct", "h2d_pageable_pct", "h2d_exposed_pct"],
                    "CPU-only trace: no device copies")
        res.add("xprof_input_pct", xprof_share(g("input_wait").within(a, end)))
    ip = res.metrics["input_pct"].value
    res.add("input_severity", severity(ip))
    if not has_wait and not act.has_device:
        res.notes.append("no IteratorGetNext events: the input pipeline is not traced or not tf.data")

    # tf.data CPU contention.
    tfd = tfdata_cpu_runs(act) if ctx.detail else None
    if tfd is None:
        res.without_detail(DETAIL_METRICS)
    elif len(tfd):
        trn = act.threads("training")
        tb = tfd.within(a, b).astype(np.float64)
        rb = trn.within(a, b).astype(np.float64) if trn is not None else np.zeros(a.shape[0])
        per.update({"tfdata_busy_ms": tb / PS_PER_MS, "training_busy_ms": rb / PS_PER_MS})
        rsum = float(rb[in_stats].sum())
        res.add("tfdata_cpu_ratio", float(tb[in_stats].sum()) / rsum if rsum > 0 else None)
        cores = act.n_cores or _pool_cores(act)
        if cores:
            cpu = 100.0 * float(tb[in_stats].sum()) / (tot * cores) if tot > 0 else None
            if cpu is not None and cpu > 100.0:
                res.qualify(("tfdata_cpu_pct",), f"tf.data threads were busy {cpu:.0f} % of {cores} cores' time: more "
                                 "tf.data threads than cores; tfdata_cpu_pct capped at 100")
                cpu = 100.0
            res.add("tfdata_cpu_pct", cpu, doc=f"tf.data thread-busy time, % of step wall time x {cores} cores")
        else:
            res.missing(["tfdata_cpu_pct"], "core count unknown (no Eigen threads, no tf.data threadpool size)")
        if cores:
            res.add("tfdata_cores", cores)
            w = act.get("input_wait").wall()
            own, lost = contention_lost(act, a, b, w, cores)
            bound = measured_bound(ctx, float(lost[in_stats].sum()) * cores, float(tb[in_stats].sum()),
                                   float(rb[in_stats].sum()), float(own[in_stats].sum()), tot, cores)
            if bound is not None:
                lost = lost * bound
                res.qualify(("tfdata_contention_pct", "tfdata_contention_ms_per_step"),
                            f"x{bound:.2f}: bounded by the measured CPU (idle cores, waits for a core)")
            lost_ps = float(lost[in_stats].sum())
            cost_ps = lost_ps + float(wait.astype(np.float64)[in_stats].sum())
            n = max(n_train, 1)
            how = "tf.data threads' compute while the step runs, over the cores"
            res.add("tfdata_contention_pct", 100.0 * lost_ps / tot if tot > 0 else None,
                    doc="step time lost to CPU contention with the tf.data threads, % of step time (" + how + ")")
            res.add("tfdata_contention_ms_per_step", lost_ps / PS_PER_MS / n)
            res.add("tfdata_cost_ms_per_step", cost_ps / PS_PER_MS / n)
            res.add("tfdata_cost_pct", 100.0 * cost_ps / tot if tot > 0 else None)
            res.add("step_own_ms_per_step", float((own - lost)[in_stats].sum()) / PS_PER_MS / n)
            per["contention_ms"] = lost / PS_PER_MS
        else:
            res.missing(["tfdata_contention_pct", "tfdata_contention_ms_per_step", "tfdata_cost_ms_per_step",
                         "tfdata_cost_pct", "step_own_ms_per_step", "tfdata_cores"],
                        "core count unknown (no Eigen threads, no tf.data threadpool size)")
    else:
        res.missing(["tfdata_cpu_ratio", "tfdata_cpu_pct", "tfdata_contention_pct", "tfdata_contention_ms_per_step",
                     "tfdata_cost_ms_per_step", "tfdata_cost_pct", "step_own_ms_per_step", "tfdata_cores"],
                    "no tf.data worker threads (tf_data_*) in the trace", tf_only=True)
    _numpy_feed(res, act, a, b, in_stats, tot, n_train)
    res.tables["input_per_step"] = Table(per)
    return res


def _numpy_feed(res: AnalysisResult, act: Activity, a, b, in_stats, tot: float, n: int) -> None:
    """NumPy arrays made tensors on the training thread inside the steps (``tf.constant`` events: a
    ``tf.function`` called with NumPy batches converts and copies them before it runs); per training step, of
    which the steps hold ``n``."""
    p = act.host
    names = ["numpy_feed_per_step", "numpy_feed_ms_per_step", "numpy_feed_pct"]
    if p is None:
        res.missing(names, "no host plane")
        return
    rows = p.events_named(NUMPY_FEED)
    a, b = np.asarray(a)[in_stats], np.asarray(b)[in_stats]
    if not rows.shape[0] or not n:
        res.add("numpy_feed_per_step", 0.0)
        res.missing(names[1:], "no tensor made from host data inside the steps")
        return
    _, inside = step_of(a, b, p.ev_start_ps[rows])
    ps = float(Measure.of_rows(p, rows[inside]).within(a, b).sum())  # inside the steps, where an event runs past one
    res.add("numpy_feed_per_step", float(inside.sum()) / n)
    res.add("numpy_feed_ms_per_step", ps / PS_PER_MS / n)
    res.add("numpy_feed_pct", 100.0 * ps / tot if tot > 0 else None)


def tfdata_cpu_runs(act) -> Runs:
    """Thread time of the tf.data threads when they compute: their events minus the calls in which a
    thread only waits for an asynchronous stage (``Iterator::...::MapAndBatch`` called from a
    prefetch thread blocks until the map's own threads deliver). Cached on ``act``."""
    key = "tfdata_cpu"
    if key in act.thread:
        return act.thread[key]
    p = act.host
    runs: list[tuple[np.ndarray, np.ndarray]] = []
    if p is not None and act.tfdata_lines.shape[0]:
        it = act.rows.get("iterator", np.empty(0, np.int64))
        names = p.event_names
        uniq = np.unique(p.ev_meta[it]) if it.shape[0] else np.empty(0, np.int64)
        waits_meta = [m for m in uniq if 0 <= m < len(names)
                      and tfdata.is_async_stage(str(names[m]).rsplit("::", 1)[-1])]
        waits = it[np.isin(p.ev_meta[it], waits_meta)] if waits_meta else np.empty(0, np.int64)
        inp = act.rows.get("input", np.empty(0, np.int64))
        waits = np.union1d(waits, inp)
        runs = _threads_minus_waits(p, act.tfdata_lines, waits)
    m = act.thread[key] = Runs(runs)
    return m


def _threads_minus_waits(p, lines: np.ndarray, waits: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each of ``lines`` (threads) with events: the union of its events minus that of its rows among
    ``waits``. All threads in one pass, each moved to its own lane (:class:`Lanes`); thread by thread where
    their times do not fit the lanes."""
    lines = np.asarray(lines, np.int64)
    rows = line_rows(p, lines)
    rows = rows[p.ev_meta[rows] >= 0]
    if not rows.shape[0]:
        return []
    w = waits[p.on_lines(waits, lines)] if waits.shape[0] else waits
    start, end = p.ev_start_ps, p.ends
    lanes = Lanes.fit(lines.shape[0], start[rows], end(rows), start[w], end(w))
    if lanes is None:
        out = []
        for li in lines:
            r = rows[p.ev_line[rows] == li]
            if not r.shape[0]:
                continue
            us, ue = union(start[r], end(r))
            wl = w[p.ev_line[w] == li]
            if wl.shape[0]:
                us, ue = difference(us, ue, *union(start[wl], end(wl)))
            out.append((us.astype(np.int64), ue.astype(np.int64)))
        return out
    order = np.argsort(lines, kind="stable")
    lane_of_line = np.full(len(p.lines) + 1, -1, np.int64)  # ev_line -1 (none) reads the last slot
    lane_of_line[lines[order]] = order  # a line listed twice: its last lane (its rows are read once)
    off = lanes.offsets()
    lane = lane_of_line[p.ev_line[rows]]
    us, ue = union(start[rows] + off[lane], end(rows) + off[lane])
    if w.shape[0]:
        wshift = off[lane_of_line[p.ev_line[w]]]
        us, ue = difference(us, ue, *union(start[w] + wshift, end(w) + wshift))
    used = np.unique(lane)  # the threads with events: one entry each, even if now empty
    bounds = np.searchsorted(us, used * lanes.span, side="left")
    ends = np.searchsorted(us, (used + 1) * lanes.span, side="left")
    return [(us[a:b] - off[k], ue[a:b] - off[k]) for k, a, b in zip(used.tolist(), bounds.tolist(), ends.tolist())]


def _pool_cores(act) -> int | None:
    """The core count tf.data sized its private threadpool for (``threadpool_size`` on the root
    iterator: by default the schedulable cores), else its ``cpu_budget``."""
    p = act.host
    rows = act.rows.get("iterator")
    if p is None or rows is None or not rows.shape[0]:
        return None
    for name in ("threadpool_size", "cpu_budget"):
        col = p.stat(name, rows)
        if len(col):
            v = col.numeric()
            v = v[np.isfinite(v) & (v > 0)]
            if v.size:
                return int(np.max(v))
    return None


def contention_lost(act, a: np.ndarray, b: np.ndarray, wait: Measure, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Per step (ps): the step's own time (its span minus the waits for input) and the step time
    lost there to CPU contention with the tf.data threads.

    The train step's ops are split over TF's intra-op pool, one thread per core, and an op ends
    when its slowest shard does: a core that a tf.data thread holds for ``t`` delays the step by
    about ``t / cores``. So the loss is the tf.data threads' compute time while the step runs
    (not while it waits for input), spread over the cores, at most the step's own time. Nothing
    is fitted: thread time, waits and the core count all come from the trace.
    """
    own_s, own_e = difference(a.astype(np.int64), b.astype(np.int64), wait.s, wait.e)
    k = np.searchsorted(a, own_s, side="right") - 1
    n = a.shape[0]
    own = np.bincount(k, weights=(own_e - own_s).astype(np.float64), minlength=n)
    busy = tfdata_cpu_runs(act).within(own_s, own_e).astype(np.float64)
    taken = np.bincount(k, weights=busy, minlength=n)
    return own, np.minimum(taken / cores, own)



def measured_bound(ctx: Context, taken: float, tfdata_busy: float, training_busy: float, own: float, wall: float,
                   cores: int) -> float | None:
    """Where the system sampler measured the CPU during the steps (``system_*``), the factor that bounds the
    contention loss by it; None without samples (the loss stays :func:`contention_lost`'s).

    ``taken`` is the tf.data threads' event time while the steps run, ``tfdata_busy`` / ``training_busy`` all their
    event time in the steps, ``own`` the steps' own time, ``wall`` the steps' (ps). Two measured facts bound it: a
    thread's event lasts while it waits for a core, so the threads' event time is at most the process's CPU time
    (``system_proc_cpu_pct``; the excess is waiting, each thread's in proportion); and the part of the pipeline's
    CPU that the cores left idle meanwhile could take (``system_cpu_util_pct``) took nothing from the step. The loss is
    what remains, over the cores as before."""
    machine, util, proc = (ctx.metric(n) for n in ("system_cpu_cores", "system_cpu_util_pct", "system_proc_cpu_pct"))
    if not (machine and util is not None and proc is not None and taken > 0 and wall > 0):
        return None
    events = tfdata_busy + training_busy
    cpu = taken * min(1.0, (proc / 100.0 * machine * wall) / events) if events > 0 else taken
    idle = max(0.0, 1.0 - util / 100.0) * machine * own
    return min(1.0, max(0.0, cpu - idle) / taken)


__all__ = ["analyze", "contention_lost", "measured_bound", "severity", "HIGH_PCT", "MODERATE_PCT"]
