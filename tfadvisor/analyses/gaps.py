"""Idle time: between steps and inside them, and what the host did meanwhile.

"Busy" is the device's activity (kernels, copies, collectives on any GPU plane) or, on a
CPU-only trace, the TF activity of the training threads (ops, the runtime, eager kernels,
input waits, collectives: every traced event except bare Python-side API calls).

* Between steps: the part of each gap between one step's end and the next step's start
  during which nothing is busy (the host may still be running Python: logging, callbacks,
  checkpoints, sleeping).
* Inside steps: the steps analysis' ``idle`` category (nothing traced at all: with a
  device, the device idles while the host is not feeding, launching or computing; CPU-only,
  time on the python thread outside any TF call, i.e. pure Python).

Shares are of the profiled wall time, from the first step's start to the last step's end
(the whole trace span when there are no steps), less the time between steps that is not
training: a gap before a step that the steps analysis labels ``validation`` or ``epoch_end``
(``preceded_by``: Keras' evaluation, epoch-end callbacks and checkpoints, the next epoch's
iterator) is kept in the gaps table with that ``kind`` and counted in ``non_train_ms``, never
as an idle gap. The host activity in each gap is the
class covering most of it: ``python`` (python-thread events, python-tracer frames),
``callbacks`` (summary writing, Keras callback frames), ``input`` (tf.data threads busy),
``ops`` (TF ops on the host), else ``idle``.
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses.activity import Activity
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.names import name_mask, name_test
from tfadvisor.model.table import Table, group_sum
from tfadvisor.model.trace import Trace
from tfadvisor.spans.intervals import LazyUnion, Measure

CALLBACK_RE = re.compile(r"(?i)callback|on_(train|test|epoch)_batch|on_epoch|WriteSummary|FlushSummaryWriter|"
                         r"summary|checkpoint|SaveV2|MergeV2Checkpoints|progbar|log_metrics")

#: A gap counts (gaps_count) when its idle time is at least this share of the median step.
GAP_MIN_FRACTION = 0.05
GAP_MIN_PS = 100 * 1_000_000  # 100 us


def busy_set(act, ctx: Context) -> LazyUnion:
    """What keeps the device (CPU-only: the training threads) busy."""
    return ctx.once(_busy, act)


def _busy(act) -> LazyUnion:
    if act.has_device:
        return act.lazy("dev_compute", "dev_h2d", "dev_copy", "dev_collective")
    return act.lazy("train_threads", "func", "input_wait")


@name_test
def _is_callback(name: str) -> bool:
    return CALLBACK_RE.search(name) is not None


def _host_classes(act, ctx: Context, gs: np.ndarray, ge: np.ndarray) -> dict[str, Measure]:
    """What the host ran, as sets whose coverage of the gaps ``[gs, ge)`` (ascending, disjoint) is the whole set's:
    of the Python threads' events, those that touch a gap only (a long run has millions, the gaps a few)."""
    p = act.host
    out: dict[str, Measure] = {}
    if p is None:
        return out
    rows = act.rows.get("python_all", np.empty(0, np.int64))
    if rows.shape[0]:
        k = np.searchsorted(ge, p.ev_start_ps[rows], side="right")  # the first gap ending after each start
        near = k < ge.shape[0]
        near[near] = p.ends(rows[near]) > gs[k[near]]
        rows = rows[near]
    if rows.shape[0]:
        names = p.event_names
        cb_meta = name_mask(names, _is_callback, extra=False)
        em = np.where(p.ev_meta[rows] >= 0, p.ev_meta[rows], len(names))
        is_cb = cb_meta[em]
        out["callbacks"] = Measure.union(p.ev_start_ps[rows[is_cb]], p.ends(rows[is_cb]))
        out["python"] = Measure.union(p.ev_start_ps[rows], p.ends(rows))
    out["input"] = LazyUnion(act.threads("tfdata").wall(), act.get("input_wait"))
    out["ops"] = act.get("train_threads")
    return out


DECLARED = declare(
    "gaps",
    ("non_train_ms", "ms", "time between steps spent on validation or an epoch end (left out of the wall time and "
                           "the gaps)"),
    ("non_train_gaps_count", "count", "validation / epoch-end intervals between steps (validation and epoch ends "
                                      "between steps: left out of the wall time and the gaps)"),
    ("idle_pct", "%", "share of the profiled wall time (first step start to last step end) in which the training "
                      "threads ran nothing (idle share of profiled wall time of the device, or CPU-only of the "
                      "training threads)"),
    ("idle_between_steps_pct", "%", "idle time between steps (the training threads idle), % of wall time"),
    ("idle_within_steps_pct", "%", "idle time inside steps (nothing traced), % of wall time"),
    ("gaps_count", "count", "gaps between steps with at least max(100 us, 5% of the median step) idle"),
    ("gap_threshold_ms", "ms", "the idle a gap between steps needs to count: max(100 us, 5% of the median step)"),
    ("gap_mean_ms", "ms", "mean idle time of the gaps between steps (none)"),
    ("gap_max_ms", "ms", "longest idle gap between steps (none)"),
    ("gap_host_python_pct", "%", "share of the time between steps with python-thread events"),
    ("gap_host_activity", "", "what the host ran in the gaps between steps, weighted by gap length (what the host "
                              "ran in the gaps most: `python`, `callbacks`, `input`, `idle`, ...)"),
    doc="`idle_pct` = between + within; between: the part of each gap between steps in which the device (CPU-only: "
        "TF activity of the training threads) is idle, whatever the host's Python does; within: the `idle` step "
        "category. Shares of `profile_wall_ms`. `gap_host_activity` values: `python`, `callbacks`, `input`, `ops`, "
        "`idle`",
    tables="`gaps` (start_ps, end_ps, duration_ms, between_steps, kind (`between_steps`, `validation`, `epoch_end`, "
           "`batch_end`: a Keras step marker's end after its train function's work, the batch-end hooks), "
           "host_activity); `gaps` also has `idle_ms`, `counted` (the gaps `gaps_count` counts) and `marked` (those "
           "and the batch ends: what the `gaps` mark selects)",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("gaps")
    names = ["idle_pct", "idle_between_steps_pct", "idle_within_steps_pct", "gaps_count", "gap_threshold_ms",
             "gap_mean_ms", "gap_max_ms", "gap_host_activity", "gap_host_python_pct"]
    if act.host is None and not act.devices:
        res.missing(names, "the trace has no host or device events")
        return res
    busy = busy_set(act, ctx)
    tbl = step_table
    what = "the device" if act.has_device else "the training threads"
    if tbl is None:
        lo, hi = act.span
        if hi <= lo:
            res.missing(names, "empty trace")
            return res
        idle = (hi - lo) - int(busy.within(np.array([lo]), np.array([hi]))[0])
        res.add("idle_pct", 100.0 * idle / (hi - lo),
                doc=f"share of the profiled wall time in which {what} ran nothing (no steps: whole trace span)")
        res.missing(names[1:], "no steps found: idle time cannot be split between and within steps")
        return res

    s = tbl["start_ps"]
    e = tbl["end_ps"]
    after = tbl["preceded_by"]
    wall_lo, wall_hi = int(s.min()), int(e.max())
    within_ps = int(tbl["idle_ms"].sum() * PS_PER_MS)

    # Gaps between consecutive steps; those holding validation or an epoch end are not training time.
    order = np.argsort(s, kind="stable")
    s, e, after, work = s[order], e[order], after[order], np.asarray(tbl["work_end_ps"], np.int64)[order]
    gs = e[:-1]
    ge = s[1:]
    ok = ge > gs
    gs, ge = gs[ok], ge[ok]
    kind = np.where(after[1:][ok] == "", "between_steps", after[1:][ok]).astype(object)
    train = kind == "between_steps"
    gap_len = ge - gs
    gap_idle = gap_len - busy.within(gs, ge) if gs.shape[0] else np.empty(0, np.int64)
    non_train_ps = int(gap_len[~train].sum())
    wall = wall_hi - wall_lo - non_train_ps
    between_ps = int(gap_idle[train].sum())
    res.add("non_train_ms", non_train_ps / PS_PER_MS)
    res.add("non_train_gaps_count", int((~train).sum()))

    res.add("idle_pct", 100.0 * (between_ps + within_ps) / wall if wall > 0 else None,
            doc=f"share of the profiled wall time (first step start to last step end) in which {what} ran nothing")
    res.add("idle_between_steps_pct", 100.0 * between_ps / wall if wall > 0 else None,
            doc=f"idle time between steps ({what} idle), % of wall time")
    res.add("idle_within_steps_pct", 100.0 * within_ps / wall if wall > 0 else None)

    med = float(np.median(e - s))
    thr = max(GAP_MIN_PS, GAP_MIN_FRACTION * med)
    sig = (gap_idle >= thr) & train
    src = ctx.metric("steps_source")
    cadence = src is not None and str(src).endswith("_cadence")
    res.add("gap_threshold_ms", thr / PS_PER_MS)
    res.add("gaps_count", int(sig.sum()))
    if sig.any():
        res.add("gap_mean_ms", float(gap_idle[sig].mean() / PS_PER_MS))
        res.add("gap_max_ms", float(gap_idle[sig].max() / PS_PER_MS))
    else:
        res.add("gap_mean_ms", 0.0)
        res.add("gap_max_ms", 0.0)
    if cadence:
        res.qualify(("idle_within_steps_pct",), "steps follow a call cadence: each step runs until the next one "
                    "starts, so the time between steps is inside them (idle_within_steps_pct)")

    # What the host did in the gaps.
    activity_col = np.full(gs.shape[0], "idle", dtype=object)
    py_cov = np.zeros(gs.shape[0], np.int64)
    if train.any():
        cov = {k: m.within(gs, ge) for k, m in _host_classes(act, ctx, gs, ge).items() if len(m)}
        py_cov = cov.get("python", py_cov)
        keys = [k for k in ("callbacks", "input", "ops", "python") if k in cov]
        if keys:
            mat = np.stack([cov[k] for k in keys], axis=1)
            best = mat.argmax(axis=1)
            frac = mat[np.arange(gs.shape[0]), best] / np.maximum(gap_len, 1)
            # callbacks are python too: name them when they cover a fair share of the python time
            activity_col = np.where(frac >= 0.1, np.array(keys, dtype=object)[best], "idle")
            if "callbacks" in cov and "python" in cov:
                cbm = (cov["callbacks"] >= 0.5 * cov["python"]) & (cov["python"] > 0) & (activity_col == "python")
                activity_col[cbm] = "callbacks"
        tot = float(gap_len[train].sum())
        res.add("gap_host_python_pct", 100.0 * float(py_cov[train].sum()) / tot if tot > 0 else None)
        acts, of = np.unique(activity_col[train].astype(str), return_inverse=True)  # sorted, as groupby
        weights = group_sum(of, gap_len[train], len(acts))
        res.add("gap_host_activity", str(acts[int(np.argmax(weights))]) if len(acts) else "idle")
    else:
        res.missing(["gap_host_activity", "gap_host_python_pct"], "no time between steps")
    # a Keras step marker's end after its train function's work (the steps table's work_end_ps: the batch-end
    # hooks): the attribution's between_steps too; rows of the table (kind ``batch_end``), never counted as gaps
    held = work < e
    hs, he = work[held], e[held].astype(np.int64)
    h_idle = (he - hs) - busy.within(hs, he) if hs.shape[0] else np.empty(0, np.int64)
    order = np.argsort(np.concatenate([gs, hs]), kind="stable")
    res.tables["gaps"] = Table({
        "start_ps": np.concatenate([gs, hs])[order],
        "end_ps": np.concatenate([ge, he])[order],
        "duration_ms": np.concatenate([gap_len, he - hs])[order] / PS_PER_MS,
        "idle_ms": np.concatenate([gap_idle, h_idle]).astype(np.float64)[order] / PS_PER_MS,
        "between_steps": np.ones(order.shape[0], bool),
        "counted": np.concatenate([sig, np.zeros(hs.shape[0], bool)])[order],
        "marked": np.concatenate([sig, np.ones(hs.shape[0], bool)])[order],  # what the ``gaps`` mark selects
        "kind": np.concatenate([kind, np.full(hs.shape[0], "batch_end", object)])[order],
        "host_activity": np.concatenate([activity_col, np.full(hs.shape[0], "python", object)])[order],
    })
    return res


__all__ = ["analyze", "busy_set"]
