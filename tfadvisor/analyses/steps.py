"""Training steps: the step table, its statistics, and what each step's time went to.

The steps themselves (which markers, how many training steps each holds, what ran before each)
come from :mod:`tfadvisor.analyses.step_detect`. **Step time is wall-clock time per training
step**: from one step's start to the next step's start (``ms_per_step``, what Keras prints as
ms/step and what sets examples/s), so callbacks, logging and Python between the markers count.
Before a validation or epoch end, and for the last step, a step ends at its marker's end (those
are not training time). The busy part, the marker's duration per training step (what xprof calls
the step time), is ``busy_ms_per_step`` / ``step_busy_mean_ms``. ``steps_count`` counts training
steps, ``executions_count`` markers. The first step after a ``validation`` or ``epoch_end`` is
never an outlier, and the time before it is no gap (see ``gaps``).

Summary statistics follow xprof: with more than five steps the first and the last are left
out (``in_stats`` False): they are often cut or slowed by the profiler starting and stopping.
With two to five steps the last is left out: nothing after it marks where its wall time ends.
Outliers are steps slower than median + k * MAD (``Options.outlier_k``), over all steps.

Each step's wall time is split into exclusive categories by priority (interval arithmetic,
so overlapping threads are not counted twice; sets from :mod:`tfadvisor.analyses.activity`);
the categories sum to the step time:

* with a device plane: device compute > collectives > input (H2D copies and host waits for
  the next batch) > between steps (outside the marker: callbacks, logging, Python) > other
  (D2H/D2D copies, memsets) > kernel launch > host compute > idle.
* CPU-only: input (host waits in ``IteratorGetNext*``, as xprof counts it) > between steps >
  collectives > device compute (the TF ops on the training threads and eagerly executed
  kernels: the CPU is the device) > other (TF runtime: executor and function-call time not
  covered by an op) > host compute (Python-side TF API calls) > idle (nothing traced: pure
  Python, sleeping).
"""

from __future__ import annotations

import numpy as np

from tfadvisor.analyses.activity import (
    Activity,
    host_trace,
    union_rows,
)
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.step_detect import StepSet, executions, preceded_by, work_ends
from tfadvisor.model.categories import STEP_CATEGORIES
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import EMPTY, Measure, contained, contains_any, priority_split


def step_table(ctx: Context) -> Table | None:
    """The steps analysis' table of this run (a row per step, numpy columns), or None when it
    found no steps."""
    tbl = ctx.table("steps")
    return tbl if tbl is not None and len(tbl) else None


def step_spans(tbl: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(start_ps, wall_end_ps, in_stats) of each step of a step table (start to the next step's
    start: its wall time), and the step time (ps) the statistics count (the ``in_stats`` steps)."""
    a = tbl["start_ps"]
    b = tbl["wall_end_ps"]
    in_stats = tbl["in_stats"]
    return a, b, in_stats, float((b - a)[in_stats].sum())


def marker_steps(tbl: Table) -> np.ndarray:
    """The training steps each row (a step marker) of a step table holds: its ``train_steps`` (Keras
    ``steps_per_execution``; an epoch's last may hold fewer); one each in a table without the column."""
    if "train_steps" not in tbl:
        return np.ones(len(tbl), np.int64)
    return np.asarray(tbl["train_steps"], np.int64)


def training_steps(tbl: Table | None, rows: np.ndarray | None = None) -> int:
    """Training steps in a step table's ``rows`` (a mask; all when None), :func:`marker_steps` summed. What an
    analysis says "per step" is per training step, as the step time: its sums over markers are divided by this."""
    if tbl is None or not len(tbl):
        return 0
    ts = marker_steps(tbl)
    return int((ts if rows is None else ts[np.asarray(rows, bool)]).sum())


def wall_ends(start: np.ndarray, end: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Where each step's wall time ends: the next step's start; its own end before a validation or
    an epoch end (``after`` of the next step) and for the last step."""
    w = np.append(start[1:], end[-1:]) if start.shape[0] else end.copy()
    cut = np.append(np.asarray(after[1:], dtype=object) != "", True) if start.shape[0] else np.zeros(0, bool)
    return np.maximum(np.where(cut, end, w), end)


CATEGORIES = STEP_CATEGORIES


def python_host_activity(act: Activity, ctx: Context, steps: StepSet) -> Measure:
    """Python-thread events that are host work: not step markers, not wrappers around whole steps,
    not function-execution waits."""
    return ctx.once(_python_host, act, steps)


def _python_host(act: Activity, steps: StepSet) -> Measure:
    p = act.host
    if p is None:
        return Measure.empty()
    rows = act.rows.get("python_all", EMPTY)
    s, e = p.ev_start_ps[rows], p.ends(rows)
    drop = np.zeros(rows.shape[0], bool)
    mk = union_rows(act.rows.get("roots", EMPTY), act.rows.get("profiled_batch", EMPTY))
    if mk.shape[0]:
        drop |= np.isin(rows, mk)
    drop |= contains_any(s, e, steps.start, steps.end)  # wrappers: events that hold a whole step
    func = act.get("func")
    if len(func):
        drop |= contained(func, s, e)
    keep = rows[~drop & (e > s)]
    return Measure.of_rows(p, keep)


def step_layers(act: Activity, ctx: Context, steps: StepSet,
                between: Measure | None = None) -> list[tuple[str, Measure]]:
    """The priority layers of the step-time split (``between``: the time between the markers)."""
    g = act.get
    between = Measure.empty() if between is None else between
    py = python_host_activity(act, ctx, steps)
    # a category given in several parts: each part takes what the ones before left over
    if act.has_device:
        return [
            ("device_compute", g("dev_compute")),
            ("collective", g("dev_collective")), ("collective", g("collective")),
            ("input", g("dev_h2d")), ("input", g("input_wait")), ("input", g("h2d_api")),
            ("between_steps", between),
            ("other", g("dev_copy")),
            ("kernel_launch", g("launch")),
            # host ops, the executor and everything else on the TF threads (the ones above took theirs)
            ("host_compute", g("train_threads")), ("host_compute", g("eager")), ("host_compute", py),
            ("idle", g("func")),  # the python thread waits for a function while nothing runs
        ]
    return [
        ("input", g("input_wait")),
        ("between_steps", between),
        ("collective", g("collective")),
        ("device_compute", g("op")), ("device_compute", g("eager_kernel")),
        ("kernel_launch", g("launch")),
        ("other", g("runtime")), ("other", g("func")),
        ("host_compute", g("eager")), ("host_compute", py),
    ]


def _stats_mask(n: int) -> np.ndarray:
    """The steps the statistics use: with more than five, not the first and the last (as xprof); with two
    to five, not the last: nothing after it marks where its wall time ends."""
    m = np.ones(n, bool)
    if n > 5:
        m[0] = False
    if n > 1:
        m[-1] = False
    return m


DECLARED = declare(
    "steps",
    ("steps_source", "", "where the steps came from (`trace_context`, `profiled_batch`, `device_steps`, "
                         "`function_cadence`, `iterator_cadence`, `none`)"),
    ("steps_count", "count", "training steps found"),
    ("executions_count", "count", "step markers (each runs steps_per_execution training steps)"),
    ("steps_per_execution", "count", "training steps per step marker (Keras steps_per_execution)"),
    ("step_markers_word", "", "what a step marker is, as messages count them: `steps`, or under "
                              "steps_per_execution `calls of K steps` (`calls of up to K steps` where some hold "
                              "fewer)"),
    ("steps_per_execution_source", "", "where steps_per_execution came from (run_file, step_num_stride, "
                                       "loop_structure; none: one step each)"),
    ("steps_in_stats_count", "count", "steps the statistics use (with more than 5 markers the first and last are "
                                      "left out, as in xprof; with 2 to 5, the last)"),
    ("step_time_mean_ms", "ms", "mean step time: wall clock per training step, start to the next step's start "
                                "(what Keras prints as ms/step)"),
    ("step_time_median_ms", "ms", "median step time (wall clock)"),
    ("step_time_p90_ms", "ms", "90th percentile step time (wall clock)"),
    ("step_time_min_ms", "ms", "fastest step (wall clock)"),
    ("step_time_max_ms", "ms", "slowest step (wall clock)"),
    ("step_time_std_ms", "ms", "step time standard deviation (wall clock)"),
    ("step_busy_mean_ms", "ms", "mean busy part of a step: the marker's duration per training step (what xprof "
                                "calls the step time)"),
    ("step_busy_median_ms", "ms", "median busy part of a step"),
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
    ("step_between_steps_pct", "%", "share of step time: between the step markers (callbacks, logging, Python)"),
    ("step_idle_pct", "%", "share of step time: idle"),
    ("step_other_pct", "%", "share of step time: other"),
    doc="`step_time_*` (wall clock per training step: start to the next step's start, callbacks and Python between "
        "the markers included; before a validation, an epoch end and for the last step, to the marker's end), "
        "`step_busy_*` (the marker's duration per training step, as xprof's step time), `step_period_mean_ms` (mean "
        "time from one step's start to the next one's, every pair), `steps_in_stats_count` (steps the statistics "
        "use: with more than 5 steps the first and last are left out, as xprof does), `profile_wall_ms` (first step "
        "start to last step end; without steps the traced span). Category split of the wall time by priority: "
        "with a device: device compute > collective > input > between steps > other (D2H/D2D/memset) > kernel "
        "launch > host compute > idle; CPU-only: input (IteratorGetNext wait, as xprof) > between steps > "
        "collective > device compute (TF ops on the training threads, eager kernels) > other (TF runtime) > host "
        "compute (Python-side TF calls) > idle (nothing traced: pure Python). "
        "`step_kernel_launch_pct` is None CPU-only",
    tables="`steps` (step, start_ps, end_ps, wall_end_ps, work_end_ps (where the step's own work ends: "
           ":func:`~tfadvisor.analyses.step_detect.work_ends`), duration_ms, wall_ms, train_steps, ms_per_step (wall "
           "clock), busy_ms_per_step, preceded_by (`validation`, "
           "`epoch_end` or empty), one `<category>_ms` column per category, outlier flag); `steps` also has `name`, "
           "`period_ms`, `in_stats`",
)


#: The step time figures a note on how the steps were found qualifies (:meth:`AnalysisResult.qualify`).
STEP_TIME = ("steps_count", "step_time_mean_ms", "step_time_median_ms", "step_time_p90_ms", "step_time_min_ms",
             "step_time_max_ms", "step_period_mean_ms", "steps_in_stats_count")


def analyze(trace: Trace, ctx: Context, *, act: Activity, steps: StepSet) -> AnalysisResult:
    res = AnalysisResult("steps")
    _, note = host_trace(trace)
    if note:
        res.notes.append(note)
    res.add("steps_source", steps.source)
    if steps.note:  # how the steps were found (or fixed): what a step and its time are on this trace
        res.qualify(STEP_TIME, steps.note)
    n = int(steps.start.shape[0])
    names = ["steps_count", "step_time_mean_ms", "step_time_median_ms", "step_time_p90_ms", "step_time_min_ms",
             "step_time_max_ms", "step_time_std_ms", "step_outliers_count", "step_outlier_max_ratio",
             "step_period_mean_ms", "steps_in_stats_count", "steps_wall_pct", "step_busy_mean_ms",
             "step_busy_median_ms"] + \
            [f"step_{c}_pct" for c in CATEGORIES]
    lo, hi = act.span
    if n == 0:
        res.add("steps_count", 0)
        res.add("executions_count", 0)
        res.add("profile_wall_ms", (hi - lo) / PS_PER_MS if hi > lo else None)
        res.missing(names[1:], "no steps found: no step markers (_r / TraceContext / Profiled batch), no device "
                               "Steps line and no repeating train function or IteratorGetNext calls")
        return res
    ex = executions(trace, act, steps)
    if ex.note:
        res.qualify(STEP_TIME, ex.note)
    nsteps = ex.per_row
    dur = steps.end - steps.start
    dur_ms = dur / PS_PER_MS
    busy_ms = dur_ms / nsteps  # per training step (a marker runs ``nsteps`` of them)
    after = preceded_by(trace, act, steps)
    w_end = wall_ends(steps.start, steps.end, after)
    step_wall = w_end - steps.start
    step_ms = step_wall / PS_PER_MS / nsteps
    period = np.append(np.diff(steps.start), np.nan) / PS_PER_MS / nsteps
    in_stats = _stats_mask(n)
    d = step_ms[in_stats]
    med_all = float(np.median(step_ms))
    mad = float(np.median(np.abs(step_ms - med_all)))
    k = float(ctx.options.outlier_k)
    thr = med_all + k * max(mad, 0.01 * med_all)
    # the first step after an epoch end restarts the input pipeline: an epoch cost, not a slow step
    outlier = (step_ms > thr) & (after == "")

    between = Measure.union(steps.end, w_end)
    layers = step_layers(act, ctx, steps, between)
    split = priority_split((steps.start, w_end), layers)
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
        "wall_end_ps": w_end,
        "work_end_ps": work_ends(act.host, steps.start, steps.end),
        "duration_ms": dur_ms,
        "wall_ms": step_wall / PS_PER_MS,
        "train_steps": nsteps,
        "ms_per_step": step_ms,
        "busy_ms_per_step": busy_ms,
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
    most = int(nsteps.max())
    res.add("step_markers_word", "steps" if most == 1 else
            f"calls of {most} steps" if int(nsteps.min()) == most else f"calls of up to {most} steps")
    res.add("steps_per_execution_source", ex.source)
    res.add("steps_in_stats_count", int(nsteps[in_stats].sum()))
    res.add("step_time_mean_ms", float(step_wall[in_stats].sum() / PS_PER_MS / nsteps[in_stats].sum()))
    res.add("step_busy_mean_ms", float(dur_ms[in_stats].sum() / nsteps[in_stats].sum()))
    res.add("step_busy_median_ms", float(np.median(busy_ms[in_stats])))
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
    total = float(step_wall[in_stats].sum())
    for c in CATEGORIES:
        if c == "kernel_launch" and not act.has_device:
            res.missing(["step_kernel_launch_pct"], "CPU-only trace: no kernel launches")
            continue
        res.add(f"step_{c}_pct", 100.0 * float(cat_ps[c][in_stats].sum()) / total if total > 0 else None)
    return res


__all__ = ["CATEGORIES", "analyze", "python_host_activity", "step_layers", "step_spans", "step_table", "wall_ends"]
