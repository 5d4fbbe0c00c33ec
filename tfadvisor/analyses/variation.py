"""Step-to-step variation: the work that runs in some steps only, how often and what it costs.

Steps are grouped by what runs in them. Every traced event of the training thread (the host lines
that hold the step markers) and of the devices is placed in the step whose wall span (its start to
the next step's start) holds the event's start; names are compared
without tf.data's epoch indexes (``[k]``). Over the steps the statistics count (``in_stats``, at
least :data:`MIN_STEPS`), a name present in at most half of them is *occasional*, and the names
present in exactly the same steps form one *pattern* (a checkpoint's ``SaveV2`` and
``MergeV2Checkpoints`` come together). A pattern's cost is the excess of its steps over the median
of the other steps; the pattern with the largest total excess is reported when each of its steps is
clearly slower (:data:`MIN_EXCESS_REL` of the median, and :data:`MIN_EXCESS_MADS` robust deviations
of the other steps) and its own events cover at least :data:`MIN_TRACED` of that excess.

Slow steps that no traced name sets apart (Python in a callback: h5py writing weights, logging)
form an *untraced* pattern when there are at least :data:`MIN_UNTRACED` of them, evenly spaced over
the whole window (none left out before the first or after the last) and alike (the largest excess at
most :data:`UNTRACED_ALIKE` x the smallest): slow steps that line up by chance, a warm-up step beside
two unrelated stalls, are not periodic work.

What a pattern is, ``periodic_kind``, comes from its names, weighted by their time in its steps:
:data:`NAMED_KINDS` (checkpoint, summary writing, evaluation, a dataset built, compilation), recognised by any of its
names, else :data:`KINDS` (metrics sync, logging, iterator creation, weights read out eagerly) by
the time their names hold; ``other`` when none match. A dataset built again costs its steps' excess less
what starting its iterator takes there (made, its first batch waited for): a program that builds it
once starts an iterator each epoch too. ``periodic_every_steps`` is the period in training steps
when its steps are evenly spaced.
"""

from __future__ import annotations

import re

import numpy as np

import tfadvisor._native as _native
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.tfdata_graph import EPOCH_RE
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace

MIN_STEPS = 5
#: A pattern's steps must be slower than the others' median by this share of it ...
MIN_EXCESS_REL = 0.2
#: ... and by this many median absolute deviations of the other steps.
MIN_EXCESS_MADS = 3.0
#: The pattern's own events must cover this share of its excess (else it is a coincidence).
MIN_TRACED = 0.1
#: Slow steps with nothing traced in common: at least this many, evenly spaced ...
MIN_UNTRACED = 3
#: ... and alike: the largest one's excess at most this many times the smallest one's.
UNTRACED_ALIKE = 2.0
#: Work that varies step to step: step times this spread (coefficient of variation, %) ...
WORK_CV_PCT = 15.0
#: ... and this correlated with the time of the ops each step runs.
WORK_CORR = 0.8
#: ... and the 90th percentile step this many times the 10th: CPU contention and preemption spread steps
#: by tens of %, a batch padded to one long sequence by several times.
WORK_SPREAD = 2.0

#: The suggested period keeps the occasional work under this share of step time.
SUGGESTED_PCT = 2.0

#: (kind, names): what occasional work is. A *named* kind is recognised by any of its names (a checkpoint's
#: small ``ShardedFilename`` says as much as its large ``SaveV2``), the first in this order; else the
#: other kinds by the time their names hold.
NAMED_KINDS = (
    ("checkpoint", re.compile(r"SaveV2|SaveSlices|MergeV2Checkpoints|RestoreV2|ShardedFilename|[Cc]heckpoint")),
    ("summary", re.compile(r"WriteSummary|Write\w*Summary|FlushSummaryWriter|SummaryWriter")),
    ("evaluation", re.compile(r"test_step|test_function|evaluate|predict_step|predict_function|eval_step|"
                              r"[Vv]alidation")),
    ("dataset_build", re.compile(r"^(TensorSlice|Tensor|Range|Map|ParallelMap|Batch|PaddedBatch|Shuffle|Repeat|"
                                 r"Prefetch|Cache|Filter|FlatMap|Interleave|Generator|TFRecord)Dataset(V\d)?$")),
    ("compilation", re.compile(r"XlaCompile|TraceFunction|Retracing|__inference_.*_traced|graph_building")),
)
KINDS = (
    ("metrics_sync", re.compile(r"Collective|NcclAllReduce|AllReduce|all-reduce")),
    ("logging", re.compile(r"PrintV2|StringFormat|AsString")),
    ("iterator", re.compile(r"MakeIterator|AnonymousIterator|DeleteIterator")),
    ("weights_read", re.compile(r"ReadVariableOp|VarHandleOp|AssignVariableOp|DisableCopyOnRead")),
)
#: a traced function's id (``__inference_test_step_1070``): one function whatever the trace numbered it
_FN_ID_RE = re.compile(r"(__inference_\w+?)_\d+$")
#: a TF op event on the host (``dense/MatMul:_MklMatMul``): the work a step does, not its dispatch
_OP_RE = re.compile(r"^[^\s:]+:[A-Za-z_]\w*$")
_EAGER = "EagerLocalExecute: "
_ITER_MAKE_RE = re.compile(r"^EagerLocalExecute: (MakeIterator|AnonymousIterator\w*)$")
_ITER_WAIT_RE = re.compile(r"^EagerLocalExecute: IteratorGetNext\w*$")

DECLARED = declare(
    "variation",
    ("periodic_kind", "", "what the work in some steps only is: checkpoint, summary, evaluation, compilation, "
                          "dataset_build, metrics_sync, logging, iterator, weights_read, other, or untraced (nothing "
                          "traced sets those steps apart)"),
    ("periodic_names", "", "the names that hold most of that work's time (up to three)"),
    ("periodic_steps_count", "count", "steps of the window (statistics' steps) that hold it (step markers: under "
                                      "steps_per_execution, calls of the train function)"),
    ("periodic_every_steps", "count", "its period in training steps when those steps are evenly spaced"),
    ("periodic_ms_each", "ms", "what it adds each time it runs: the mean excess of the steps that hold it over "
                               "the median of the others (under steps_per_execution, of the call: all its steps)"),
    ("periodic_ms_per_step", "ms", "what it adds per training step on average (the excess of its steps over "
                                   "all statistics' steps)"),
    ("periodic_pct", "%", "the same, % of mean step time"),
    ("periodic_between_steps", "", "most of its traced time lies between the step markers (a callback or the "
                                   "loop after the step), not in the step"),
    ("periodic_traced_pct", "%", "share of its excess that its own events cover"),
    ("one_off_step", "count", "the one step of the window that holds work no other step does, when it is clearly "
                              "slower (the largest such); none where its marker gives no step number"),
    ("one_off_kind", "", "what that work is (compilation: tracing or XLA; checkpoint, evaluation...; other)"),
    ("one_off_names", "", "the names that hold most of its time"),
    ("one_off_ms", "ms", "what it adds to that step (under steps_per_execution, to that call: all its steps): its "
                         "excess over the median of the others"),
    ("one_off_pct", "%", "that excess, % of the window's step time"),
    ("work_varies", "", f"step times vary (coefficient of variation >= {WORK_CV_PCT:g} %, p90 / p10 >= "
                        f"{WORK_SPREAD:g}) with the ops' own time in each step (correlation >= {WORK_CORR:g}): the "
                        "steps do different amounts of work"),
    ("work_spread", "x", "90th percentile step time / 10th percentile"),
    ("work_cv_pct", "%", "coefficient of variation of step time over the statistics' steps"),
    ("work_corr", "", "correlation of each step's time with the time its ops (TF ops, device kernels) take"),
    ("work_excess_ms_per_step", "ms", "mean step time above the 10th percentile step (what the steps above it "
                                "would save at its time, per step)"),
    ("work_excess_pct", "%", "mean step time above the 10th percentile step, % of the mean: what steps as small as "
                             "the smaller ones would save at most"),
    ("periodic_suggested_every", "count", f"the period (10, 20, 50, 100, ...) at which it would cost at most "
                                          f"{SUGGESTED_PCT:g} % of step time"),
    doc="Steps grouped by what runs in them: the work present in some steps only (checkpoints, summaries, "
        "evaluation...), its period and its cost per occurrence and per step.",
    tables="`step_patterns` (pattern, kind, names, steps, every_steps, ms_each, ms_per_step, traced_ms_each, "
           "between_steps_share; the patterns with their steps clearly slower, largest first)",
)


def _kind(names: list[str], weights: np.ndarray) -> str:
    bare = [n[len(_EAGER):] if n.startswith(_EAGER) else n for n in names]
    for kind, rx in NAMED_KINDS:
        if any(rx.search(n) for n in bare):
            return kind
    best: dict[str, float] = {}
    for name, w in zip(bare, weights):
        for kind, rx in KINDS:
            if rx.search(name):
                best[kind] = best.get(kind, 0.0) + float(w)
                break
    if not best:
        return "other"
    kind, w = max(best.items(), key=lambda t: t[1])
    return kind if w >= 0.25 * float(weights.sum()) else "other"


def _per_plane(trace: Trace, a: np.ndarray, b: np.ndarray, ends: np.ndarray):
    """One pass over every plane's events (``_native.step_tally``): each event placed in its step (its start in
    the step's wall span, known metadata). Returns ``name -> (steps present bool[n], time ps per step [n],
    time between the markers ps)`` (:func:`_merge_presence`; on a host plane only the training thread's events,
    :func:`_marker_lines`) and the time of the ops each step runs, ms (host TF op events not on tf.data's
    threads, which run its functions' ops, and every device event)."""
    n = a.shape[0]
    pres: dict[str, list] = {}
    ops = np.zeros(n)
    for p in trace.planes:
        if not p.n_events:
            continue
        n_meta = len(p.event_names)
        cnt = np.zeros(n_meta * n, np.int64)
        tim = np.zeros(n_meta * n)
        aft = np.zeros(n_meta)
        op_ps = np.zeros(n)
        train_lines = _marker_lines(p, a) if p.is_host else None
        op_meta, op_lines = _op_masks(p) if p.is_host else (None, None)
        _native.step_tally(p.ev_start_ps, p.ev_dur_ps, p.ev_meta, p.ev_line, a, b, ends, train_lines, op_meta,
                           op_lines, cnt, tim, aft, op_ps)
        _merge_presence(p, cnt.reshape(n_meta, n), tim.reshape(n_meta, n), aft, pres)
        ops += op_ps / PS_PER_MS
    return pres, ops


def _marker_lines(p: Plane, a: np.ndarray) -> np.ndarray:
    """The training thread: the lines (uint8 per line) that hold the step markers (work on other threads,
    tf.data's or a user's pool, runs beside the steps; it does not make one step longer than another)."""
    return _native.starts_at(p.ev_start_ps, p.ev_line, np.unique(a), len(p.lines))


def _merge_presence(p: Plane, cnt, tim, aft, out: dict[str, list]) -> None:
    """name -> (steps present bool[n], time ps per step [n], time between the markers ps), names compared
    without epoch indexes and function ids."""
    for m in np.flatnonzero(cnt.any(axis=1)):
        name = _FN_ID_RE.sub(r"\1", EPOCH_RE.sub("", str(p.event_names[m])))
        got = out.get(name)
        if got is None:
            out[name] = [cnt[m] > 0, tim[m].copy(), float(aft[m])]
        else:
            got[0] |= cnt[m] > 0
            got[1] += tim[m]
            got[2] += float(aft[m])


def _op_masks(p: Plane) -> tuple[np.ndarray, np.ndarray]:
    """On a host plane: which metadata are TF ops (``name:Type``), which lines are not tf.data's threads."""
    is_op = np.fromiter((bool(_OP_RE.match(str(x))) for x in p.event_names), bool, len(p.event_names))
    not_data = np.fromiter((not str(x).startswith("tf_data") for x in p.line_names), bool, len(p.line_names))
    return is_op, not_data


def _period(rows: np.ndarray, train: np.ndarray) -> int | None:
    if rows.shape[0] < 2:
        return None
    at = np.cumsum(train) - train  # training step index of each row
    d = np.diff(at[rows])
    return int(d[0]) if (d == d[0]).all() and d[0] >= 2 else None


def _whole(rows: np.ndarray, train: np.ndarray, period: int) -> bool:
    """Steps ``rows``, ``period`` training steps apart, leave no occurrence out at either end of the window:
    the first within one period of its start, the last within one period of its end."""
    at = np.cumsum(train) - train  # training step index of each row
    last = int(np.count_nonzero(train)) - 1
    return int(at[rows[0]]) < period and int(at[rows[-1]]) + period > last


def analyze(trace: Trace, ctx: Context, *, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("variation")
    names = DECLARED.names()
    if step_table is None:
        res.missing(names, "")
        return res
    keep = np.asarray(step_table["in_stats"], bool)
    if int(keep.sum()) < MIN_STEPS:
        res.missing(names, f"fewer than {MIN_STEPS} steps in the statistics: no step-to-step comparison")
        return res
    a = np.asarray(step_table["start_ps"])[keep]
    b = np.asarray(step_table["wall_end_ps"])[keep]
    ends = np.asarray(step_table["end_ps"])[keep]
    ms = np.asarray(step_table["ms_per_step"], float)[keep]
    train = np.asarray(step_table["train_steps"], float)[keep]
    n = a.shape[0]
    pres, ops = _per_plane(trace, a, b, ends)
    groups: dict[bytes, list[str]] = {}
    for name, (present, _, _) in pres.items():
        k = int(present.sum())
        if 1 <= k <= n // 2:
            groups.setdefault(present.tobytes(), []).append(name)
    rows = []
    for key, members in groups.items():
        present = np.frombuffer(key, bool)
        rows.append(_pattern(present, members, pres, ms, train))
    rows = [r for r in rows if r is not None]
    waits = np.asarray(step_table["input_ms"], float)[keep] / train if "input_ms" in step_table else None
    untraced = _untraced(ms, train, rows, waits)
    if untraced is not None:
        rows.append(untraced)
    rows.sort(key=lambda r: -r["ms_per_step"])
    numbers = np.asarray(step_table["step"])[keep]
    for r in rows:
        r["steps"] = ", ".join(str(int(numbers[i])) for i in r["steps"])
    if rows:
        res.tables["step_patterns"] = Table({k: [r[k] for r in rows] for k in (
            "kind", "names", "steps", "every_steps", "ms_each", "ms_per_step", "traced_ms_each",
            "between_steps_share")}, n=len(rows))
    total_ms = float((ms * train).sum() / train.sum())
    periodic = [r for r in rows if r["count"] >= 2]
    one_off = [r for r in rows if r["count"] == 1]
    _add_periodic(res, periodic[0] if periodic else None, ms, total_ms)
    _add_one_off(res, one_off[0] if one_off else None, total_ms * train.sum())
    _add_work(res, ops, ms)
    return res


def _add_periodic(res: AnalysisResult, top: dict | None, ms: np.ndarray, total_ms: float) -> None:
    names = [n for n in DECLARED.names() if n.startswith("periodic_")]
    if top is None:
        res.missing(names, "no work in some steps only (at least two) makes them clearly slower")
        return
    res.add("periodic_kind", top["kind"])
    res.add("periodic_names", top["names"])
    res.add("periodic_steps_count", top["count"])
    res.add("periodic_every_steps", top["every_steps"])
    res.add("periodic_ms_each", top["ms_each"])
    res.add("periodic_ms_per_step", top["ms_per_step"])
    res.add("periodic_pct", 100.0 * top["ms_per_step"] / total_ms if total_ms > 0 else None)
    res.add("periodic_suggested_every", _suggested(top["ms_each"], float(np.median(ms))))
    res.add("periodic_between_steps", top["between_steps_share"] >= 0.5 if top["kind"] != "untraced" else None)
    res.add("periodic_traced_pct", min(100.0, 100.0 * top["traced_ms_each"] / top["ms_each"])
            if top["ms_each"] > 0 else None)


def _add_one_off(res: AnalysisResult, top: dict | None, window_ms: float) -> None:
    names = [n for n in DECLARED.names() if n.startswith("one_off_")]
    if top is None:
        res.missing(names, "no single step holds work no other step does and is clearly slower")
        return
    step = int(top["steps"])
    if step >= 0:
        res.add("one_off_step", step)
    else:  # step_detect's -1: a marker without a step number (fuzz seed 59: an op renamed TraceContext)
        res.missing(["one_off_step"], "the one-off step's marker gives no step number")
    res.add("one_off_kind", top["kind"])
    res.add("one_off_names", top["names"])
    res.add("one_off_ms", top["ms_each"])
    res.add("one_off_pct", 100.0 * top["ms_each"] / window_ms if window_ms > 0 else None)


def _add_work(res: AnalysisResult, ops: np.ndarray, ms: np.ndarray) -> None:
    """Steps that differ in how much work they do: their times spread and follow their ops' time (``ops``:
    per step, ms)."""
    mean = float(ms.mean())
    cv = 100.0 * float(ms.std(ddof=1)) / mean if mean > 0 and ms.shape[0] > 1 else 0.0
    corr = float(np.corrcoef(ms, ops)[0, 1]) if ops.std() > 0 and ms.std() > 0 else None
    res.add("work_cv_pct", cv)
    res.add("work_corr", corr)
    p10 = float(np.percentile(ms, 10))
    spread = float(np.percentile(ms, 90)) / p10 if p10 > 0 else None
    res.add("work_spread", spread)
    res.add("work_varies", bool(corr is not None and spread is not None and cv >= WORK_CV_PCT and corr >= WORK_CORR
                                and spread >= WORK_SPREAD and res.metrics["periodic_kind"].value is None))
    # what the steps above the 10th percentile would save at its time; mean - p10 also took the steps below it off
    # and was negative where a few steps are much shorter (a short last step; fuzz seed 59: one of 14 steps 2.8 ms)
    excess = float(np.maximum(ms - p10, 0.0).mean())
    res.add("work_excess_pct", 100.0 * excess / mean if mean > 0 else None)
    res.add("work_excess_ms_per_step", excess)


def held_steps(patterns) -> list[set[int]]:
    """The step numbers each row of a ``step_patterns`` table holds, largest pattern first."""
    if patterns is None or not len(patterns):
        return []
    return [{int(x) for x in str(v).split(", ") if x} for v in list(patterns["steps"])]


def _excess(present: np.ndarray, ms: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """(median of the other steps, their MAD, each pattern step's excess) or None when too few others."""
    others = ms[~present]
    if others.shape[0] < 2:
        return None
    base = float(np.median(others))
    mad = float(np.median(np.abs(others - base)))
    return base, mad, ms[present] - base


def _suggested(ms_each: float, base_ms: float) -> int | None:
    """The first of 10, 20, 50, 100, 200, 500, ... at which ``ms_each`` is at most SUGGESTED_PCT % of
    the steps it is spread over."""
    if base_ms <= 0:
        return None
    need = ms_each / (SUGGESTED_PCT / 100.0 * base_ms)
    every = 10
    while every < need:
        every = every * 5 // 2 if str(every).startswith("2") else every * 2
    return every


def _per_step(excess: np.ndarray, present: np.ndarray, train: np.ndarray) -> float:
    """The excess of the pattern's steps spread over every training step of the statistics."""
    return float((np.clip(excess, 0, None) * train[present]).sum() / train.sum())


def _clear(base: float, mad: float, each: float) -> bool:
    return each >= MIN_EXCESS_REL * base and each >= MIN_EXCESS_MADS * mad


def _pattern(present, members, pres, ms, train) -> dict | None:
    got = _excess(present, ms)
    if got is None:
        return None
    base, mad, excess = got  # per training step, as ms (a marker under steps_per_execution holds several)
    k = train[present]
    each = float((excess * k).mean())  # what it adds each time it runs: to a marker, all its training steps
    if not _clear(base, mad, float(excess.min())):
        return None  # every step that holds it must be clearly slow, not one outlier among ordinary steps
    times = np.array([pres[m][1][present].sum() for m in members]) / PS_PER_MS
    order = np.argsort(-times, kind="stable")
    # the pattern's own time (nested names may count the same time twice: at most the excess)
    traced_each = min(float(times.sum()) / int(present.sum()), each)
    if traced_each < MIN_TRACED * each:
        return None
    after = sum(pres[m][2] for m in members) / PS_PER_MS
    rows = np.flatnonzero(present)
    kind = _kind(members, times)
    if kind == "dataset_build":
        # building the dataset again is the cost; starting its iterator (made, its buffers filled, its first
        # batch waited for) a program pays each epoch with the dataset built once as well
        start = _iterator_start_ms(pres, present)  # per marker
        excess = np.maximum(excess - start / k, 0.0)
        each = float((excess * k).mean())
    return dict(kind=kind, names=", ".join(members[j] for j in order[:3]),
                steps=rows.tolist(), count=int(rows.shape[0]), every_steps=_period(rows, train),
                ms_each=each, ms_per_step=_per_step(excess, present, train), traced_ms_each=min(traced_each, each),
                between_steps_share=float(after / times.sum()) if times.sum() > 0 else 0.0)


def _iterator_start_ms(pres: dict, present: np.ndarray) -> np.ndarray:
    """Per step of a pattern, the time starting an iterator takes there: making it, and the wait for its first
    batch beyond the other steps' median wait."""
    out = np.zeros(int(present.sum()))
    for name, (_, tim, _) in pres.items():
        t = tim / PS_PER_MS
        if _ITER_MAKE_RE.search(name):
            out += t[present]
        elif _ITER_WAIT_RE.search(name):
            out += np.maximum(t[present] - float(np.median(t[~present])), 0.0)
    return out


def _untraced(ms, train, rows, waits) -> dict | None:
    """Slow steps no traced name sets apart (at least MIN_UNTRACED, evenly spaced, not already a pattern's,
    their excess not mostly a wait for input: a pipeline whose work comes at an epoch's start, a shuffle
    buffer filling, is input, not untraced work)."""
    base = float(np.median(ms))
    mad = float(np.median(np.abs(ms - base)))
    slow = (ms - base >= MIN_EXCESS_REL * base) & (ms - base >= MIN_EXCESS_MADS * mad)
    if int(slow.sum()) < MIN_UNTRACED or int(slow.sum()) > ms.shape[0] // 2:
        return None
    for r in rows:
        if set(r["steps"]) & set(np.flatnonzero(slow).tolist()):
            return None
    got = _excess(slow, ms)
    if got is None:
        return None
    _, _, excess = got
    if waits is not None:
        extra_wait = waits[slow] - float(np.median(waits[~slow]))
        if float(extra_wait.sum()) >= 0.5 * float(excess.sum()):
            return None
    rows_s = np.flatnonzero(slow)
    period = _period(rows_s, train)
    if period is None or not _whole(rows_s, train, period):
        return None  # irregular slow steps with nothing traced in common: noise, not periodic work
    if float(excess.max()) > UNTRACED_ALIKE * float(excess.min()):
        return None  # unlike costs: unrelated stalls that happen to line up
    return dict(kind="untraced", names="", steps=rows_s.tolist(), count=int(rows_s.shape[0]),
                every_steps=period, ms_each=float((excess * train[slow]).mean()),
                ms_per_step=_per_step(excess, slow, train), traced_ms_each=0.0,
                between_steps_share=0.0)


__all__ = ["DECLARED", "KINDS", "NAMED_KINDS", "analyze", "held_steps"]
