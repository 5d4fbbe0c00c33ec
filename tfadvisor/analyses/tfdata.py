"""The tf.data pipeline as TensorFlow ran it: its stages, where their time goes, and why input is slow.

Each ``Iterator::<chain>`` event is one call of a stage (``Iterator::Root::Prefetch::MapAndBatch::
TensorSlice``; ``[k]`` epoch indexes are dropped). TF's optimizer fuses and injects stages
(``MapAndBatch``, an injected ``Prefetch``...); the ``name`` stat keeps what the user wrote
(``fused(MapDataset:1,BatchDatasetV2:2)``).

A synchronous stage's own work is its call time minus its child stages'. An asynchronous stage
(``MapAndBatch``, ``ParallelMap*``, ``Prefetch``, ``ParallelInterleave*``...) works on its own
threads: its calls are the consumer *waiting* for it. Its own work is its ``<Kind>Produce`` events
(minus the child stages they call) plus the function bodies it launches: each ``FunctionRun`` on a
tf.data thread hands a body to the private threadpool, whose ``ExecutorState::Process`` events carry
the matching consumer id (``_p`` -> ``_c``). Table ``tfdata_stages``: ``self_ms`` is that work,
``elements`` the elements it produced (function runs for map stages, else calls), ``wait_ms`` the
consumers' wait. ``element_us``, time per element: the stage's work per element produced (its
function bodies' wall time on their threads, start to end, plus its producer/launch work; a mean);
``element_median_us``, the median function run per element, tells a cheap map from an expensive one
(preemption on a loaded host inflates the mean, not the median).
``batch_us``, time per batch: the wall time the stage
needs to produce one batch, ``element_us`` x the batch size (of the stage, or of the nearest
``Batch*`` above it; a map after ``batch()``: per function run) / ``concurrency``, how many of its
function bodies ran at once on average while any ran (at most its ``parallelism``). A ``Batch*``
stage's own ``batch_us`` is its own work per call (copying), its inputs' cost is on the stages below.
These are what the trace shows: under the profiler and beside a train step on the same cores they
can exceed the pipeline timed alone (see tests/test_tfdata_stage_costs.py).

Causes, each as ms per step and % of step time (``*_pct``): the most expensive map
(``tfdata_map_*``), a map running one element at a time, work redone every epoch that a cache would
keep (``tfdata_recompute_*``; ``tfdata_repeat_before_map`` for ``repeat().map()``; not for random or
py_function maps, nor for a map above a shuffle: its cache would freeze one epoch's order), Python-bound
generators (``tfdata_generator_*``), files read one after another (``tfdata_read_*``), and a cheap
per-element map that a batch-first vectorised map would replace (``tfdata_vectorizable_map``).
Iterators made inside the steps (``tfdata_iterator_*``: ``next(iter(ds))`` in the loop) and a filter
above an expensive map (``tfdata_filter_*``: the map's work on dropped elements) are causes too.
``tfdata_cause`` names the largest of these (None: no specific cause found), and
``tfdata_cause_ms_per_step``/``tfdata_cause_pct`` the step time its fix would save (``_cause_magnitude``).
A map after ``batch()`` maps whole batches: its elements are its function runs times the batch size.
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses import tfdata_graph as graph
from tfadvisor.analyses.activity import Activity
from tfadvisor.analyses.base import PS_PER_MS, PS_PER_US, AnalysisResult, Context, declare
from tfadvisor.analyses.steps import training_steps
from tfadvisor.model.table import Table, factorize, group_last, group_sum, to_float
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.model.values import to_int64
from tfadvisor.spans.intervals import line_rows, step_of, union

EXPENSIVE_MAP_US = 50.0
#: A map cheaper than this per element spends much of its time in per-element overhead.
VECTORIZE_MAX_US = 50.0
#: Flags need the stage's time to be at least this share of the step time.
MATERIAL_PCT = 5.0
STAGE_STATS = ("name", "parallelism", "autotune", "buffered_elements", "batch_size", "buffer_limit", "cpu_budget")
#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("_p", "_c") + STAGE_STATS
_MAP_RE = re.compile(r"^(Parallel)?Map(V\d)?$|^MapAndBatch$|^MapAndFilter$|^ParallelMapV\d$|^LegacyParallelMap$")
#: Stages that run ahead of their consumer on their own threads (they buffer).
_ASYNC_RE = re.compile(r"^(Prefetch|MapAndBatch|ParallelMap|LegacyParallelMap|ParallelBatch|ParallelInterleave|"
                       r"ParallelFilter|DataServiceDataset)")
_READER_RE = re.compile(r"^(TFRecord|TextLine|FixedLengthRecord|ParallelTFRecord)")
_SEQ_READ_PARENT_RE = re.compile(r"^(FlatMap|Interleave)$")
_RANDOM_OP_RE = re.compile(r":(Random\w*|Stateless\w*Random\w*|Multinomial|ParameterizedTruncatedNormal|"
                           r"TruncatedNormal|RandomShuffle)$")
_LAUNCH = "FunctionRun"
_BODY = "ExecutorState::Process"
#: An iterator made from Python (``iter(ds)``): the eager MakeIterator op.
_MAKE_ITERATOR = "EagerLocalExecute: MakeIterator"
_PY_OPS = ("PyFunc:PyFunc", "EagerPyFunc:EagerPyFunc", "PyFuncStateless:PyFuncStateless")


def _stage_kind(last: str) -> str:
    return last.split("(")[0]


def is_async_stage(last: str) -> bool:
    """Whether a stage (the last part of an iterator chain) runs ahead on its own threads."""
    return bool(_ASYNC_RE.match(_stage_kind(graph.EPOCH_RE.sub("", last))))


def _bool(v) -> bool | None:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    s = str(v).lower()
    if s in ("true", "1", "1.0"):
        return True
    if s in ("false", "0", "0.0"):
        return False
    return None


def _rows_named(p: Plane, names: tuple[str, ...], lines: np.ndarray | None = None) -> np.ndarray:
    rows = p.events_named(list(names))
    if lines is not None and rows.shape[0]:
        rows = rows[p.on_lines(rows, lines)]
    return rows


def _line_key(p: Plane, rows: np.ndarray) -> np.ndarray:
    """Sort key of ``rows``: by line, then start time (one int64)."""
    return p.ev_line[rows].astype(np.int64) * (np.int64(1) << np.int64(50)) + p.ev_start_ps[rows]


def _enclosing(p: Plane, outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """For each ``inner`` row, the ``outer`` row on the same line that contains it (the latest
    starting one before it), or -1."""
    if not outer.shape[0] or not inner.shape[0]:
        return np.full(inner.shape[0], -1, np.int64)
    ko = _line_key(p, outer)
    order = np.argsort(ko, kind="stable")
    outer, ko = outer[order], ko[order]
    ki = _line_key(p, inner)
    pos = np.searchsorted(ko, ki, side="right") - 1
    ok = pos >= 0
    cand = outer[np.maximum(pos, 0)]
    ok &= p.ev_line[cand] == p.ev_line[inner]
    ok &= p.ends(cand) >= p.ends(inner)
    return np.where(ok, cand, -1)


def _first_inside(p: Plane, outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """For each ``outer`` row, the first ``inner`` row on its line starting inside it, or -1."""
    if not outer.shape[0] or not inner.shape[0]:
        return np.full(outer.shape[0], -1, np.int64)
    ki = _line_key(p, inner)
    order = np.argsort(ki, kind="stable")
    inner, ki = inner[order], ki[order]
    ko = _line_key(p, outer)
    pos = np.searchsorted(ki, ko, side="left")
    ok = pos < inner.shape[0]
    cand = inner[np.minimum(pos, inner.shape[0] - 1)]
    ok &= p.ev_line[cand] == p.ev_line[outer]
    ok &= p.ev_start_ps[cand] < p.ends(outer)
    return np.where(ok, cand, -1)


def _bodies(p: Plane, launch: np.ndarray, tfd_lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Body time (ps) of each launch (``FunctionRun`` with ``_p``) from the ``ExecutorState::Process``
    events carrying the same id in ``_c``; and the body rows found."""
    out = np.zeros(launch.shape[0], np.float64)
    body = _rows_named(p, (_BODY,), tfd_lines)
    if not launch.shape[0] or not body.shape[0]:
        return out, np.empty(0, np.int64)
    lp = p.stat("_p", launch)
    bc = p.stat("_c", body)
    if not len(lp) or not len(bc):
        return out, np.empty(0, np.int64)
    pid = lp.values_at(launch, integer=True)
    cid = bc.values_at(body, integer=True)
    has = cid != 0
    ids, of = np.unique(cid[has], return_inverse=True)
    if ids.shape[0]:
        per = group_sum(of, p.ev_dur_ps[body][has], len(ids))  # body time per call id
        at = np.minimum(np.searchsorted(ids, pid), len(ids) - 1)
        out = np.where((pid != 0) & (ids[at] == pid), per[at], 0.0)
    linked = body[has][np.isin(cid[has], pid[pid != 0])]
    return out, linked


def _row_codes(rows: np.ndarray, codes: np.ndarray):
    """``code_of(q)``: the code given to each row ``q`` (the last one when a row is given twice), -1 for a
    row not in ``rows``; by binary search, not through a table over every event of the plane."""
    order = np.argsort(rows, kind="stable")
    srows = rows[order]
    scodes = np.asarray(codes, np.int64)[order]

    def code_of(q: np.ndarray) -> np.ndarray:
        q = np.asarray(q)
        if srows.shape[0] == 0:
            return np.full(q.shape, -1, np.int64)
        pos = np.searchsorted(srows, q, side="right") - 1
        at = np.maximum(pos, 0)
        return np.where((pos >= 0) & (srows[at] == q), scodes[at], -1)

    return code_of


def _stage_table(p: Plane, rows: np.ndarray, tfd_lines: np.ndarray) -> tuple[Table, np.ndarray]:
    """The per-stage table (see the module doc) and the function-body rows linked to stages."""
    meta = p.ev_meta[rows]
    uniq_meta, inv = np.unique(meta, return_inverse=True)
    chain_of_meta = np.array([graph.EPOCH_RE.sub("", str(p.event_names[m]))[len("Iterator::"):] for m in uniq_meta],
                             dtype=object)
    codes, chains = factorize(chain_of_meta[inv])
    chains = list(chains)
    n = len(chains)
    dur = p.ev_dur_ps[rows].astype(np.float64)
    calls = np.bincount(codes, minlength=n).astype(np.float64)
    total = np.bincount(codes, weights=dur, minlength=n)
    idx = {c: i for i, c in enumerate(chains)}
    parent = np.array([idx.get(c.rsplit("::", 1)[0], -1) if "::" in c else -1 for c in chains], np.int64)
    child_total = np.zeros(n)
    np.add.at(child_total, parent[parent >= 0], total[parent >= 0])
    kinds = [_stage_kind(c.split("::")[-1]) for c in chains]
    is_async = np.array([bool(_ASYNC_RE.match(k)) for k in kinds], bool)
    sync_self = np.maximum(total - child_total, 0.0)
    code_of_row = _row_codes(rows, codes)

    # Producer events (<Kind>Produce) -> their stage, through the child stage they call.
    produce = p.events_named(re.compile(r"^\w+Produce$"))
    produce = produce[p.on_lines(produce, tfd_lines)] if produce.shape[0] else produce
    prod_stage = np.full(produce.shape[0], -1, np.int64)
    if produce.shape[0]:
        child = _first_inside(p, produce, rows)
        ok = child >= 0
        prod_stage[ok] = parent[code_of_row(child[ok])]
        pnames = p.names_of(produce).astype(str)
        for i in np.flatnonzero(prod_stage < 0):
            k = pnames[i][: -len("Produce")]
            cand = [j for j, kk in enumerate(kinds) if kk.startswith(k) and is_async[j]]
            if len(cand) == 1:
                prod_stage[i] = cand[0]
    prod_self = np.zeros(n)
    if produce.shape[0]:
        ok = prod_stage >= 0
        np.add.at(prod_self, prod_stage[ok], p.ev_dur_ps[produce[ok]].astype(np.float64))
        # minus the child stages' calls made from the producers' lines
        on_prod_lines = p.on_lines(rows, np.unique(p.ev_line[produce[ok]]))
        enc = _enclosing(p, produce[ok], rows[on_prod_lines])
        inside = enc >= 0
        sub = np.zeros(n)
        kid = codes[on_prod_lines][inside]
        par = parent[kid]
        good = par >= 0
        np.add.at(sub, par[good], dur[on_prod_lines][inside][good])
        prod_self = np.maximum(prod_self - sub, 0.0)

    # Function runs launched from tf.data threads and their bodies on the threadpool.
    launch = _rows_named(p, (_LAUNCH,), tfd_lines)
    body_ps, body_rows = _bodies(p, launch, tfd_lines)
    launch_stage = np.full(launch.shape[0], -1, np.int64)
    if launch.shape[0]:
        enc = _enclosing(p, produce, launch) if produce.shape[0] else np.full(launch.shape[0], -1)
        pos = np.searchsorted(produce, enc) if produce.shape[0] else enc
        ok = enc >= 0
        if produce.shape[0]:
            order = np.argsort(produce, kind="stable")
            sorted_prod = produce[order]
            pos = np.searchsorted(sorted_prod, np.maximum(enc, 0))
            launch_stage[ok] = prod_stage[order[np.minimum(pos[ok], produce.shape[0] - 1)]]
        rest = ~ok
        if rest.any():  # a synchronous stage running its function inline
            enc2 = _enclosing(p, rows, launch[rest])
            st = np.where(enc2 >= 0, code_of_row(np.maximum(enc2, 0)), -1)
            launch_stage[rest] = st
    fn_runs = np.bincount(launch_stage[launch_stage >= 0], minlength=n).astype(np.float64)
    fn_body = np.bincount(launch_stage[launch_stage >= 0], weights=body_ps[launch_stage >= 0], minlength=n)
    # per stage: how many of its function bodies ran at once (their sum over the wall time covered by
    # at least one)
    fn_conc = np.ones(n)
    for i in np.unique(launch_stage[launch_stage >= 0]):
        sel = (launch_stage == i) & (body_ps > 0)
        if sel.any():
            fn_conc[i] = _concurrency(p, body_rows, launch[sel], fn_body[i])
    fn_launch = np.bincount(launch_stage[launch_stage >= 0],
                            weights=p.ev_dur_ps[launch[launch_stage >= 0]].astype(np.float64), minlength=n)
    has_prod = prod_self > 0
    work = np.where(is_async | has_prod, prod_self + fn_body, sync_self + np.maximum(fn_body - fn_launch, 0.0))
    wait = np.where(is_async, total, np.nan)
    is_map = np.array([bool(_MAP_RE.match(k)) for k in kinds], bool)
    elements = np.where(is_map & (fn_runs > 0), fn_runs, calls)
    par_of = _last_stat(p.stat_columns(("parallelism",), rows)["parallelism"], rows, codes, n)
    fn_conc = np.where(np.isfinite(par_of) & (par_of >= 1), np.minimum(fn_conc, par_of), fn_conc)
    st = p.stat_columns(STAGE_STATS, rows)
    batch_of = _last_stat(st["batch_size"], rows, codes, n)
    for i in np.flatnonzero(is_map & (fn_runs > 0) & (np.array(kinds) != "MapAndBatch")):
        below = _batch_below(chains, kinds, batch_of, i)
        if below:  # a map after batch(): each function run maps a whole batch
            elements[i] = fn_runs[i] * below
    for i in np.flatnonzero(np.array(kinds) == "MapAndBatch"):
        if fn_runs[i] == 0 and batch_of[i] > 0:  # no function runs seen: each call is one batch
            elements[i] = calls[i] * batch_of[i]

    table = Table({"stage": [c.split("::")[-1] for c in chains], "iterator": chains, "kind": kinds,
                   "calls": calls.astype(np.int64), "total_ms": total / PS_PER_MS,
                   "mean_us": total / np.maximum(calls, 1) / PS_PER_US, "self_ms": work / PS_PER_MS,
                   "elements": to_int64(elements),
                   "element_us": work / np.maximum(elements, 1) / PS_PER_US,
                   "wait_ms": wait / PS_PER_MS, "async": is_async, "function_runs": fn_runs.astype(np.int64)})
    for sn in ("parallelism", "autotune", "buffered_elements", "batch_size", "name"):
        col = st[sn]
        pos = col.positions(rows)
        has = pos >= 0
        if not has.any():
            table[sn] = None
            continue
        last = group_last(codes[has], n)  # only the last value of each stage is formatted
        got = last >= 0
        vals = np.full(n, None, dtype=object)
        vals[got] = col.strings_at(col.rows[pos[has][last[got]]])
        table[sn] = vals
    # per batch: MapAndBatch's elements are input elements; a Batch stage's calls are batches;
    # a map after batch() maps whole batches
    per_call_batch = np.array(["Batch" in k and k != "MapAndBatch" for k in kinds])
    above = np.array([_batch_above(chains, kinds, batch_of, i) for i in range(n)], np.float64)
    per = np.where(np.isfinite(batch_of) & (batch_of > 0), batch_of, above)
    batch_us = np.where(per_call_batch, table["element_us"], table["element_us"] * np.where(per > 0, per, np.nan))
    batch_us = np.where(is_map & (elements > fn_runs), work / np.maximum(fn_runs, 1) / PS_PER_US, batch_us)
    # function runs that overlapped produce a batch in less wall time than their sum
    table["batch_us"] = batch_us / np.where(is_map & (fn_runs > 0), fn_conc, 1.0)
    table["concurrency"] = np.where(fn_runs > 0, fn_conc, np.nan)
    # the median function run per element: what one element costs when the run is not preempted (the
    # mean above carries every wait for a core on a loaded host)
    med = np.full(n, np.nan)
    for i in np.flatnonzero(fn_runs > 0):
        runs = body_ps[(launch_stage == i) & (body_ps > 0)]
        if runs.shape[0]:
            med[i] = float(np.median(runs)) * fn_runs[i] / max(float(elements[i]), 1.0) / PS_PER_US
    table["element_median_us"] = med
    depth = np.array([c.count("::") for c in chains], np.int64)
    return table.take(np.argsort(depth, kind="stable")), body_rows


def _last_stat(col, rows: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """Per stage, the last numeric value of a stat on its calls (NaN where none)."""
    out = np.full(n, np.nan)
    pos = col.positions(rows)
    has = pos >= 0
    if has.any():
        v = to_float(col.strings_at(col.rows[pos[has]]))
        ok = np.isfinite(v)  # the last value that is a number
        last = group_last(codes[has][ok], n)
        out[last >= 0] = v[ok][last[last >= 0]]
    return out


def _batch_above(chains: list[str], kinds: list[str], batch_of: np.ndarray, i: int) -> int:
    """The batch size of the nearest ``Batch*`` stage consuming stage ``i``'s elements (0: none)."""
    parts = chains[i].split("::")
    for k in range(len(parts) - 1, 0, -1):
        up = "::".join(parts[:k])
        j = next((j for j, c in enumerate(chains) if c == up), None)
        if j is not None and "Batch" in kinds[j] and np.isfinite(batch_of[j]) and batch_of[j] > 0:
            return int(batch_of[j])
    return 0


def _concurrency(p: Plane, body_rows: np.ndarray, launches: np.ndarray, total_ps: float) -> float:
    """How many of these launches' bodies ran at once on average while any ran: their summed body
    time over the wall time covered by at least one (1: one at a time)."""
    pid = p.stat("_p", launches).values_at(launches, integer=True)
    cid = p.stat("_c", body_rows).values_at(body_rows, integer=True)
    rows = body_rows[np.isin(cid, pid[pid != 0])]
    if not rows.shape[0] or total_ps <= 0:
        return 1.0
    starts, ends = union(p.ev_start_ps[rows], p.ends(rows))
    covered = float((ends - starts).sum())
    return max(total_ps / covered, 1.0) if covered > 0 else 1.0


def _batch_below(chains: list[str], kinds: list[str], batch_of: np.ndarray, i: int) -> int:
    """The batch size of the nearest ``Batch*`` stage feeding stage ``i`` (0: none)."""
    pre = chains[i] + "::"
    below = [j for j, c in enumerate(chains) if c.startswith(pre) and "Batch" in kinds[j]
             and np.isfinite(batch_of[j]) and batch_of[j] > 0]
    if not below:
        return 0
    j = min(below, key=lambda j: chains[j].count("::"))
    return int(batch_of[j])


def _ahead_stage(kinds: list[str], names: list, ahead: list[bool]) -> tuple[str | None, str | None]:
    """The stage that produces ahead of the consumer (see ``tfdata_prefetch_stage``) and who made it
    (``program``, ``tf.data``, None unknown); (None, None) when none does."""
    rows = [i for i, k in enumerate(kinds) if str(k).startswith("Prefetch")] or [i for i, a in enumerate(ahead) if a]
    if not rows:
        return None, None
    made = {i: graph.made_by_tfdata(kinds[i], names[i]) for i in rows}
    i = next((i for i in rows if made[i] is False), next((i for i in rows if made[i]), rows[0]))
    return str(kinds[i]), None if made[i] is None else ("tf.data" if made[i] else "program")


DECLARED = declare(
    "tfdata",
    ("tfdata_present", "", "the trace shows a tf.data pipeline (Iterator::* events)"),
    ("tfdata_has_prefetch", "", "the pipeline produces ahead of the consumer: a Prefetch stage (injected ones too) "
                                "or an asynchronous stage that buffers (MapAndBatch, ParallelMap, "
                                "ParallelInterleave...)"),
    ("tfdata_prefetch_stage", "", "the stage that produces ahead of the consumer: a Prefetch stage (the program's "
                                  "own before one tf.data injected), else the first asynchronous stage with "
                                  "elements buffered (MapAndBatch, ParallelMapV2, ...)"),
    ("tfdata_prefetch_by", "", "who put that stage there: `program` (the program's own call), `tf.data` (its default "
                               "optimizations injected it, as an autotuned prefetch, or fused or parallelised the "
                               "program's calls into it); None where the stages carry no dataset names"),
    ("tfdata_has_cache", "", "the pipeline has a cache (or snapshot) stage"),
    ("tfdata_sequential_map", "", "a map stage runs one element at a time (no num_parallel_calls that TF kept, or "
                                  "parallelism 1 without autotune) and takes at least 5 % of the step time (a map "
                                  "stage with parallelism 1 / autotune off)"),
    ("tfdata_map_element_us", "us", "time to produce one element in the costliest map stage (its function bodies "
                                    "included) (mean time per element in map stages)"),
    ("tfdata_expensive_map", "", "map work of at least 50 us per element adding up to at least 5 % of the step time "
                                 "(bool)"),
    ("tfdata_repeated_source_no_cache", "", "a repeated pipeline recomputes an expensive deterministic map every "
                                            "epoch (no cache, no random ops) and that map is at least 5 % of the step "
                                            "time (bool)"),
    ("tfdata_pipeline", "", "the deepest stage chain (root first) (the chain as text, e.g. "
                            "`Root::Prefetch::MapAndBatch::TensorSlice`)"),
    ("tfdata_cause", "", "the largest specific cause found in the pipeline (None: none found)"),
    ("tfdata_code", "", "the pipeline as the program built it, read back from the trace (Python; maps are f1, f2... "
                        "in build order)"),
    ("tfdata_code_cached", "", "that pipeline with a cache after the costliest map and the repeat after the cache "
                               "(None: a random call comes before it, or it caches already)"),
    ("tfdata_code_parallel", "", "that pipeline with the costliest map parallel (and a prefetch where none is)"),
    ("tfdata_code_vectorized", "", "that pipeline with the costliest map after the batch above it"),
    ("tfdata_code_filter_first", "", "that pipeline with the filter above the costliest map moved before it"),
    ("tfdata_code_prefetched", "", "that pipeline with a prefetch at the end (None: it has one)"),
    ("tfdata_iterators_per_step", "count", "tf.data iterators made per step inside the steps (MakeIterator called "
                                           "from Python: `next(iter(ds))` in the loop); 0: made outside them"),
    ("tfdata_iterator_make_ms_per_step", "ms", "time spent making those iterators, per step (shuffle buffers "
                                               "filled, prefetch threads started)"),
    ("tfdata_iterator_cost_ms_per_step", "ms", "what an iterator made in every step costs it: making it plus the "
                                               "pipeline's cost (the wait for a pipeline that starts empty, and "
                                               "contention)"),
    ("tfdata_iterator_cost_pct", "%", "that cost, % of step time"),
    ("tfdata_filter_stage", "", "a filter stage above an expensive map (the map's work on the elements the filter "
                                "drops is thrown away)"),
    ("tfdata_filter_kept_pct", "%", "share of its input elements that filter stage keeps"),
    ("tfdata_filter_waste_ms_per_step", "ms", "the pipeline's cost per step times the share the filter drops: what "
                                              "filtering before the map saves when the predicate does not read "
                                              "the map's output"),
    ("tfdata_filter_waste_pct", "%", "that saving, % of step time"),
    ("tfdata_work_ms", "ms", "work of all tf.data stages over the profile (function bodies included)"),
    ("tfdata_work_ms_per_step", "ms", "tf.data work per step (on its own threads; may overlap)"),
    ("tfdata_work_pct", "%", "tf.data work as % of step time (may exceed what it costs when it overlaps)"),
    ("tfdata_hot_stage", "", "the stage with the most work, with the name of what the user wrote"),
    ("tfdata_hot_stage_ms", "ms", "work of that stage over the profile"),
    ("tfdata_sequential_map_pct", "%", "work of the one-at-a-time map stages, % of step time"),
    ("tfdata_sequential_map_ms_per_step", "ms", "work of the one-at-a-time map stages per step"),
    ("tfdata_map_random", "", "the pipeline's functions run random ops (augmentation): their output differs every "
                              "epoch, so it must not be cached"),
    ("tfdata_map_stage", "", "the costliest map stage"),
    ("tfdata_map_batch_ms", "ms", "its cost per batch"),
    ("tfdata_map_ms", "ms", "time spent in map functions over the profile"),
    ("tfdata_map_ms_per_step", "ms", "map work per step"),
    ("tfdata_map_pct", "%", "map work as % of step time"),
    ("tfdata_vectorizable_map", "", "a map runs per element before batching at under 50 us each and adds up to at "
                                    "least 5 % of step time: batching first and mapping once per batch removes the "
                                    "per-element overhead"),
    ("tfdata_repeat_before_map", "", "the source is repeated before the expensive map (repeat().map()): every epoch "
                                     "maps the same elements again"),
    ("tfdata_map_python", "", "the pipeline's functions call Python (py_function, numpy_function): their output is "
                              "not known to be deterministic"),
    ("tfdata_recompute_pct", "%", "map work a cache after the map would remove, % of step time"),
    ("tfdata_recompute_ms_per_step", "ms", "that work per step"),
    ("tfdata_generator", "", "a from_generator source runs Python per element (it holds the GIL) for at least 5 % of "
                             "the step time"),
    ("tfdata_sequential_reads", "", "files are read one after another (no num_parallel_reads / parallel interleave) "
                                    "for at least 5 % of the step time"),
    ("tfdata_cause_ms_per_step", "ms", "step time the named cause's fix would save, per step"),
    ("tfdata_cause_pct", "%", "step time the named cause's fix would save, % of step time"),
    ("tfdata_generator_pct", "%", "time in from_generator sources, % of step time"),
    ("tfdata_generator_ms_per_step", "ms", "time in from_generator sources per step"),
    ("tfdata_generator_element_us", "us", "time per element of the from_generator sources"),
    ("tfdata_vectorizable_map_pct", "%", "work of that map, % of step time"),
    ("tfdata_pyfunc_pct", "%", "time in which a py_function/numpy_function body of the pipeline runs, % of step "
                           "time"),
    ("tfdata_pyfunc_element_us", "us", "time per py_function call"),
    ("tfdata_files_opened", "", "files opened by TFRecord readers in the profile"),
    ("tfdata_files_per_step", "", "files opened per step"),
    ("tfdata_read_pct", "%", "time reading files (readers and the interleave opening them), % of step"),
    ("tfdata_read_ms_per_step", "ms", "that time per step"),
    ("tfdata_file_switch_ms_per_step", "ms", "time per step the sequential interleave spends going from file to file "
                                             "(opening each)"),
    doc="`tfdata_map_ms` (time in map functions over the profile); `tfdata_sequential_map`, `tfdata_expensive_map` "
        "(>= 50 us per element) and `tfdata_repeated_source_no_cache` hold only when that stage's time is at least 5 % "
        "of the step time\n\nWork and causes: `tfdata_work_ms`, `tfdata_work_ms_per_step`, `tfdata_work_pct` (work of "
        "all stages, function bodies included, on tf.data threads: it may exceed the step time on several cores), "
        "`tfdata_hot_stage` / `tfdata_hot_stage_ms` (the stage with the most work), `tfdata_map_stage` (the most "
        "expensive map stage), `tfdata_map_batch_ms` (its cost per batch), `tfdata_map_ms_per_step` / `tfdata_map_pct` "
        "(map work per step), `tfdata_map_random` (its functions run random ops), `tfdata_map_python` (they call "
        "Python: py_function, numpy_function), `tfdata_sequential_map_ms_per_step` / `tfdata_sequential_map_pct` (work "
        "of the one-at-a-time maps), `tfdata_repeat_before_map` (`repeat()` under a map and no cache), "
        "`tfdata_recompute_ms_per_step` / `tfdata_recompute_pct` (map work a cache after the map would remove), "
        "`tfdata_vectorizable_map` (a cheap per-element map; batch first) / `tfdata_vectorizable_map_pct`, "
        "`tfdata_generator` (a from_generator source takes material time) / `tfdata_generator_ms_per_step` / "
        "`tfdata_generator_pct` / `tfdata_generator_element_us`, `tfdata_pyfunc_pct` / `tfdata_pyfunc_element_us` "
        "(time in py_function calls), `tfdata_files_opened` / `tfdata_files_per_step` (TFRecord files opened), "
        "`tfdata_read_ms_per_step` / `tfdata_read_pct` (time reading files), `tfdata_file_switch_ms_per_step` (time "
        "opening the next file), `tfdata_sequential_reads` (files read one after another), `tfdata_cause` (the largest "
        "specific cause: `sequential_map`, `recompute`, `repeat_before_map`, `generator`, `sequential_reads`, "
        "`vectorizable_map`; None when none is found), `tfdata_cause_ms_per_step` / `tfdata_cause_pct` (step time the "
        "cause's fix would save)",
    tables="`tfdata_stages` (stage, iterator, calls, total_ms, mean_us, parallelism, autotune, buffered_elements, "
           "batch_size); `tfdata_stages` also has `self_ms`, `name`; `tfdata_stages` also has `kind`, `elements`, "
           "`element_us`, `element_median_us`, `batch_us`, `wait_ms`, `async`, `function_runs`",
)


def analyze(trace: Trace, ctx: Context, *, act: Activity, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("tfdata")
    p = act.host
    names = ["tfdata_has_prefetch", "tfdata_prefetch_stage", "tfdata_prefetch_by", "tfdata_has_cache",
             "tfdata_sequential_map", "tfdata_map_element_us", "tfdata_expensive_map",
             "tfdata_repeated_source_no_cache", "tfdata_pipeline", "tfdata_cause"]
    rows = act.rows.get("iterator", np.empty(0, np.int64)) if p is not None else np.empty(0, np.int64)
    if p is None or rows.shape[0] == 0:
        res.add("tfdata_present", False)
        res.missing(names, "no tf.data iterator events (Iterator::*) in the trace", tf_only=True)
        return res
    res.add("tfdata_present", True)
    tfd_lines = act.tfdata_lines
    table, body_rows = _stage_table(p, rows, tfd_lines)
    res.tables["tfdata_stages"] = table
    chains = table["iterator"].tolist()
    kinds = table["kind"].tolist()

    # a Prefetch stage, or a background stage that keeps produced elements buffered ahead of the
    # consumer (a MapAndBatch that only produces while the step waits has 0 buffered: no prefetch)
    buffered = to_float(table["buffered_elements"]) if "buffered_elements" in table else None
    ahead = table["async"] & (np.isnan(buffered) | (buffered > 0)) if buffered is not None else table["async"]
    has_prefetch = any(k.startswith("Prefetch") for k in kinds) or bool(ahead.any())
    has_cache = any(k.startswith("Cache") or k.startswith("MemoryCache") or k == "DiskCache" or k.startswith("Snapshot")
                    for k in kinds)
    deepest = max(chains, key=lambda c: c.count("::"))
    res.add("tfdata_pipeline", deepest)
    res.add("tfdata_has_prefetch", has_prefetch)
    stage, by = _ahead_stage(kinds, table["name"].tolist(), ahead.tolist())
    if stage is not None:
        res.add("tfdata_prefetch_stage", stage)
        res.add("tfdata_prefetch_by", by)
    else:
        res.missing(["tfdata_prefetch_stage", "tfdata_prefetch_by"], "")
    res.add("tfdata_has_cache", has_cache)

    # Reference: the steps' wall time, start to next start, as the step time (else the traced span), and their
    # training steps. Not the markers' own durations: a Keras loop's time between them is step time too.
    tbl = step_table
    if tbl is not None and len(tbl):
        ref_ms, n_steps = float(tbl["wall_ms"].sum()), training_steps(tbl)
    else:
        lo, hi = act.span
        ref_ms, n_steps = (hi - lo) / PS_PER_MS, None
    material_ms = MATERIAL_PCT / 100.0 * ref_ms

    def per_step(ms: float) -> tuple[float | None, float | None]:
        if ref_ms <= 0:
            return None, None
        return (ms / n_steps if n_steps else None), 100.0 * ms / ref_ms

    work_ms = float(table["self_ms"].sum())
    wps, wpct = per_step(work_ms)
    res.add("tfdata_work_ms", work_ms)
    if wps is not None:
        res.add("tfdata_work_ms_per_step", wps)
    res.add("tfdata_work_pct", wpct)
    hot = table.row(int(np.argmax(table["self_ms"])))
    res.add("tfdata_hot_stage", f"{hot['stage']} ({hot['name']})" if hot["name"] else str(hot["stage"]))
    res.add("tfdata_hot_stage_ms", float(hot["self_ms"]))

    # Map stages.
    is_map = np.array([bool(_MAP_RE.match(k)) for k in kinds], bool)
    maps = table.take(is_map)
    seq_ms = 0.0
    for r in (maps.row(i) for i in range(len(maps))):
        par = to_float([r["parallelism"]])[0]
        if r["kind"] in ("Map", "MapV2", "MapAndFilter") or (par == 1 and not _bool(r["autotune"])):
            seq_ms += float(r["self_ms"])
    sps, spct = per_step(seq_ms)
    res.add("tfdata_sequential_map", bool(seq_ms > 0 and seq_ms >= material_ms),
            doc="a map stage runs one element at a time (no num_parallel_calls that TF kept, or parallelism 1 "
            f"without autotune) and takes at least {MATERIAL_PCT:g} % of the step time")
    if seq_ms > 0:
        res.add("tfdata_sequential_map_pct", spct)
        if sps is not None:
            res.add("tfdata_sequential_map_ms_per_step", sps)

    random_map = _runs_random_ops(p, tfd_lines)
    code = _code(res, table, is_map, random_map, has_prefetch)
    res.add("tfdata_map_random", random_map)
    if len(maps) and float(maps["self_ms"].max()) > 0:
        top = maps.row(int(np.argmax(maps["self_ms"])))
        map_ms = float(maps["self_ms"].sum())
        elem_us = float(top["element_us"])
        # cheap or expensive by the median run: a loaded host's preemptions inflate the mean many times
        # (a 17 us map measured 17-32 us by median, 36-268 us by mean, in four captures on 2 busy cores)
        med_us = top["element_median_us"]
        size_us = float(med_us) if med_us is not None and np.isfinite(med_us) else elem_us
        mps, mpct = per_step(map_ms)
        res.add("tfdata_map_element_us", elem_us)
        res.add("tfdata_map_stage", f"{top['stage']} ({top['name']})" if top["name"] else str(top["stage"]))
        if not np.isnan(top["batch_us"]):
            res.add("tfdata_map_batch_ms", float(top["batch_us"]) / 1000.0)
        res.add("tfdata_map_ms", map_ms)
        if mps is not None:
            res.add("tfdata_map_ms_per_step", mps)
        res.add("tfdata_map_pct", mpct)
        res.add("tfdata_expensive_map", bool(size_us >= EXPENSIVE_MAP_US and map_ms >= material_ms),
                doc=f"map work of at least {EXPENSIVE_MAP_US:g} us per element adding up to at least "
                f"{MATERIAL_PCT:g} % of the step time")
        # A cheap per-element map (before any batch): overhead per element dominates.
        below_batch = "Batch" in str(top["iterator"]).rsplit(str(top["stage"]), 1)[-1]
        per_elem = top["kind"] == "MapAndBatch" or (not below_batch and any(
            "Batch" in c.split("::")[-1] for c in chains if len(c) < len(str(top["iterator"]))
            and str(top["iterator"]).startswith(c)))
        vec = bool(per_elem and size_us < VECTORIZE_MAX_US and map_ms >= material_ms)
        res.add("tfdata_vectorizable_map", vec,
                doc=f"a map runs per element before batching at under {VECTORIZE_MAX_US:g} us each and adds up to at "
                f"least {MATERIAL_PCT:g} % of step time: batching first and mapping once per batch removes the "
                "per-element overhead")
        if vec:
            res.add("tfdata_vectorizable_map_pct", mpct)
        # Work redone every epoch: an expensive deterministic map with a repeat and no cache.
        repeats = [c for c, k in zip(chains, kinds) if "Repeat" in k]
        before = any(r.startswith(str(top["iterator"]) + "::") for r in repeats)
        res.add("tfdata_repeat_before_map", bool(before and not has_cache))
        # a py_function body may fetch outside data (a remote read): not known to be deterministic
        python_map = bool(_rows_named(p, _PY_OPS, tfd_lines).shape[0])
        res.add("tfdata_map_python", python_map)
        # a random call before the map (a shuffle, a map that holds state): a cache would freeze one pass
        # (its work redone each epoch is counted either way: tfdata_recompute_*)
        redone = bool(repeats and not has_cache and not random_map and not python_map
                      and size_us >= EXPENSIVE_MAP_US and map_ms >= material_ms)
        cacheable = code is None or code["cached"] is not None
        res.add("tfdata_repeated_source_no_cache", redone and cacheable,
                doc="a repeated pipeline recomputes an expensive deterministic map every epoch (no cache, no random "
                f"ops, nothing random before it) and that map is at least {MATERIAL_PCT:g} % of the step time")
        if redone:
            res.add("tfdata_recompute_pct", mpct)
            if mps is not None:
                res.add("tfdata_recompute_ms_per_step", mps)
    else:
        why = "map stages without per-element timing in the trace" if len(maps) else \
            "no map stage ran in the profiled window"
        res.missing(["tfdata_map_element_us"], why)
        res.add("tfdata_expensive_map", None if len(maps) else False, doc=why)
        res.add("tfdata_vectorizable_map", False, doc=why)
        res.add("tfdata_repeat_before_map", False, doc=why)
        res.add("tfdata_repeated_source_no_cache", False, doc=why)

    # Python-bound sources: from_generator (a Generator stage).
    gen = table.take(np.array([k == "Generator" for k in kinds], bool))
    gen_ms = float(gen["self_ms"].sum())
    gps, gpct = per_step(gen_ms)
    res.add("tfdata_generator", bool(len(gen) and gen_ms >= material_ms),
            doc="a from_generator source runs Python per element (it holds the GIL) for at least "
            f"{MATERIAL_PCT:g} % of the step time")
    if len(gen):
        res.add("tfdata_generator_pct", gpct)
        if gps is not None:
            res.add("tfdata_generator_ms_per_step", gps)
        res.add("tfdata_generator_element_us", float(gen["self_ms"].sum()) * 1000.0 / max(int(gen["calls"].sum()), 1))
    py = _rows_named(p, _PY_OPS, tfd_lines)
    if py.shape[0]:
        py_ms = float(p.ev_dur_ps[py].sum()) / PS_PER_MS
        # the wall time some body runs (they hold the GIL: one at a time; a duplicated line would count twice)
        us, ue = union(p.ev_start_ps[py], p.ev_start_ps[py] + np.maximum(p.ev_dur_ps[py], 0))
        res.add("tfdata_pyfunc_pct", per_step(float((ue - us).sum()) / PS_PER_MS)[1])
        res.add("tfdata_pyfunc_element_us", py_ms * 1000.0 / py.shape[0])

    # File reads: reader stages and the (sequential) FlatMap/Interleave above them.
    readers = [i for i, k in enumerate(kinds) if _READER_RE.match(k)]
    read_ms, open_ms, seq_read = 0.0, 0.0, False
    for i in readers:
        read_ms += float(table["self_ms"][i])
        up = chains[i].rsplit("::", 1)[0]
        up_kind = up.split("::")[-1]
        if _SEQ_READ_PARENT_RE.match(_stage_kind(up_kind)):
            seq_read = True
            # the interleave's own time: moving from file to file (opening each)
            open_ms += float(table["self_ms"][table["iterator"] == up].sum())
            read_ms += open_ms
        elif not _ASYNC_RE.match(_stage_kind(up_kind)) and "ParallelInterleave" not in up:
            seq_read = True
    opens = _rows_named(p, ("TFRecordDatasetOp::Iterator::SetupStreamsLocked",), tfd_lines).shape[0]
    if readers:
        rps, rpct = per_step(read_ms)
        res.add("tfdata_files_opened", opens)
        if n_steps:
            res.add("tfdata_files_per_step", opens / n_steps)
        res.add("tfdata_read_pct", rpct)
        if rps is not None:
            res.add("tfdata_read_ms_per_step", rps)
        ops_, _ = per_step(open_ms)
        if ops_ is not None and open_ms > 0:
            res.add("tfdata_file_switch_ms_per_step", ops_)
    res.add("tfdata_sequential_reads", bool(readers and seq_read and read_ms >= material_ms),
            doc="files are read one after another (no num_parallel_reads / parallel interleave) for at least "
            f"{MATERIAL_PCT:g} % of the step time")

    _iterators(res, ctx, p, step_table)
    _filter_after_map(res, ctx, table, is_map, material_ms)
    # The named cause: the largest specific one.
    m = res.metrics
    cands = []
    if m["tfdata_sequential_map"].value:
        cands.append(("sequential_map", spct or 0.0))
    if m["tfdata_repeated_source_no_cache"].value:
        before = m.get("tfdata_repeat_before_map") is not None and m["tfdata_repeat_before_map"].value
        if before or not m["tfdata_sequential_map"].value:
            cands.append(("repeat_before_map" if before else "recompute", m["tfdata_recompute_pct"].value or 0.0))
    if m["tfdata_generator"].value:
        cands.append(("generator", gpct or 0.0))
    if m["tfdata_sequential_reads"].value:
        cands.append(("sequential_reads", m["tfdata_read_pct"].value or 0.0))
    if m.get("tfdata_vectorizable_map") and m["tfdata_vectorizable_map"].value:
        cands.append(("vectorizable_map", m["tfdata_vectorizable_map_pct"].value or 0.0))
    # causes whose saving is their own figure: an iterator made every step, a filter above an expensive map
    own = {}
    for cause_name, metric in (("iterator_per_step", "tfdata_iterator_cost"), ("filter_after_map",
                                                                              "tfdata_filter_waste")):
        pct, ms = m.get(metric + "_pct"), m.get(metric + "_ms_per_step")
        if pct is not None and pct.value is not None and pct.value >= MATERIAL_PCT:
            cands.append((cause_name, float(pct.value)))
            own[cause_name] = (ms.value if ms is not None else None, float(pct.value))
    cause = max(cands, key=lambda c: c[1])[0] if cands else None
    res.add("tfdata_cause", cause)
    if cause in own:
        res.add("tfdata_cause_ms_per_step", own[cause][0])
        res.add("tfdata_cause_pct", own[cause][1])
        return res
    rm = m.get("tfdata_file_switch_ms_per_step")
    _cause_magnitude(res, ctx, cause, sps, rm.value if rm is not None else None)
    return res


def _code(res: AnalysisResult, table: Table, is_map: np.ndarray, random_map: bool,
          has_prefetch: bool) -> dict | None:
    """The pipeline as built (``tfdata_code``) and as each fix changes it (``tfdata_code_*``)."""
    cs = graph.calls(table, random_bodies=random_map)
    if not cs:
        res.missing(["tfdata_code"] + [f"tfdata_code_{k}" for k in _FIXES], "no stage of the pipeline recorded")
        return None
    res.add("tfdata_code", graph.render(cs))
    idx = None
    if is_map.any():
        maps = table.take(is_map)
        top = maps.row(int(np.argmax(maps["self_ms"])))
        idx = graph.map_index(str(top["name"]) if top["name"] is not None else "")
    fixed = {"cached": graph.cached(cs, idx), "parallel": graph.parallel(cs, idx, not has_prefetch),
             "vectorized": graph.vectorized(cs, idx), "filter_first": graph.filter_first(cs, idx),
             "prefetched": None if has_prefetch else graph.prefetched(cs)}
    for k in _FIXES:
        res.add(f"tfdata_code_{k}", graph.render(fixed[k]) if fixed[k] else None)
    return fixed


_FIXES = ("cached", "parallel", "vectorized", "filter_first", "prefetched")


def _input_figures(ctx: Context, *names: str) -> tuple[float | None, ...]:
    """The input analysis' figures ``names`` (None where unknown): ``tfdata_cost_*`` is what the pipeline
    costs a step."""
    inp = ctx.result("input")
    m = inp.metrics if inp is not None else {}
    got = [m.get(n) for n in names]
    return tuple(None if x is None or x.value is None else float(x.value) for x in got)


def _iterators(res: AnalysisResult, ctx: Context, p: Plane, tbl: Table | None) -> None:
    """Iterators made inside the steps (``next(iter(ds))`` in the loop): each starts the pipeline from
    empty (shuffle buffer refilled, parallel stages and prefetch restarted)."""
    names = ["tfdata_iterators_per_step", "tfdata_iterator_make_ms_per_step", "tfdata_iterator_cost_ms_per_step",
             "tfdata_iterator_cost_pct"]
    if tbl is None or not len(tbl):
        res.missing(names, "no steps: iterators are counted per step")
        return
    keep = np.asarray(tbl["in_stats"], bool)
    a, b = np.asarray(tbl["start_ps"])[keep], np.asarray(tbl["wall_end_ps"])[keep]
    rows = p.events_named(_MAKE_ITERATOR)
    _, inside = step_of(a, b, p.ev_start_ps[rows])
    n = training_steps(tbl, keep)
    res.add("tfdata_iterators_per_step", float(inside.sum()) / n if n else None)
    make_ms = float(p.ev_dur_ps[rows[inside]].sum()) / PS_PER_MS / n if n else 0.0
    res.add("tfdata_iterator_make_ms_per_step", make_ms)
    cost, pct = _input_figures(ctx, "tfdata_cost_ms_per_step", "tfdata_cost_pct")
    if cost is None or not inside.any():
        res.missing(names[2:], "no iterator made inside the steps" if not inside.any() else
                    "the pipeline's cost per step is unknown")
        return
    total = cost + make_ms
    res.add("tfdata_iterator_cost_ms_per_step", total)
    res.add("tfdata_iterator_cost_pct", min(100.0, pct * total / cost) if cost > 0 else None)


def _filter_after_map(res: AnalysisResult, ctx: Context, table: Table, is_map: np.ndarray, material_ms: float) -> None:
    """A filter above an expensive map (at least EXPENSIVE_MAP_US per element by the median run, and
    MATERIAL_PCT of step time): the map's work on the elements it drops is thrown away."""
    names = ["tfdata_filter_stage", "tfdata_filter_kept_pct", "tfdata_filter_waste_ms_per_step",
             "tfdata_filter_waste_pct"]
    chains = [str(c) for c in table["iterator"]]
    kinds = [str(k) for k in table["kind"]]
    med = to_float(table["element_median_us"]) if "element_median_us" in table else None
    size = [float(med[i]) if med is not None and np.isfinite(med[i]) else float(table["element_us"][i])
            for i in range(len(table))]
    maps = [i for i in np.flatnonzero(is_map)
            if float(table["self_ms"][i]) >= material_ms and size[i] >= EXPENSIVE_MAP_US]
    for f, kind in enumerate(kinds):
        if not kind.startswith(("Filter", "ParallelFilter")):
            continue
        below = [i for i in maps if chains[i].startswith(chains[f] + "::")]
        if not below:
            continue
        m = below[0]
        made, kept = float(table["elements"][m]), float(table["calls"][f])
        if made <= 0 or kept >= made:
            continue
        kept_share = kept / made
        name = table["name"][f]
        res.add("tfdata_filter_stage", f"{kind} ({name})" if name else kind)
        res.add("tfdata_filter_kept_pct", 100.0 * kept_share)
        cost, pct = _input_figures(ctx, "tfdata_cost_ms_per_step", "tfdata_cost_pct")
        if cost is None or pct is None:
            res.missing(names[2:], "the pipeline's cost per step is unknown")
        else:
            res.add("tfdata_filter_waste_ms_per_step", cost * (1.0 - kept_share))
            res.add("tfdata_filter_waste_pct", pct * (1.0 - kept_share))
        return
    res.missing(names, "no filter above an expensive map")


def _cause_magnitude(res: AnalysisResult, ctx: Context, cause: str | None, seq_ms_per_step: float | None,
                     switch_ms_per_step: float | None) -> None:
    """The step time the named cause's fix would save, per step and as % of step time.

    The input analysis gives what the pipeline costs a step (``tfdata_cost_*``: the wait for input
    plus the step time lost to tf.data's CPU use) and the step's own time without it. Caching,
    vectorising and moving a generator's Python into TF ops remove that cost. A one-at-a-time map
    made parallel still does its work, ``W`` per step, on the same cores (AUTOTUNE runs at most one
    call per core): spread over them it still costs ``W / cores`` of each step, as wait or as
    contention, so the saving is the cost less that. Packing many small files into large ones
    removes the time spent going from file to file (the sequential interleave's own time), at most
    the cost; reading the records stays.
    """
    cost, cost_pct, cores = _input_figures(ctx, "tfdata_cost_ms_per_step", "tfdata_cost_pct", "tfdata_cores")
    names = ["tfdata_cause_ms_per_step", "tfdata_cause_pct"]
    if cause is None or cost is None or cost_pct is None:
        res.missing(names, "no specific cause found" if cause is None else "the pipeline's cost per step is unknown")
        return
    saving = cost
    if cause == "sequential_map" and seq_ms_per_step is not None and cores:
        saving = max(cost - seq_ms_per_step / cores, 0.0)
    elif cause == "sequential_reads" and switch_ms_per_step is not None:
        saving = min(cost, switch_ms_per_step)
    res.add("tfdata_cause_ms_per_step", saving)
    res.add("tfdata_cause_pct", cost_pct * saving / cost if cost > 0 else 0.0)


def _runs_random_ops(p: Plane, lines: np.ndarray) -> bool:
    """Whether a random op (``name:RandomUniform``...) ran on the given (tf.data) lines."""
    if not lines.shape[0]:
        return False
    metas = np.unique(p.ev_meta[line_rows(p, lines)])
    names = p.event_names
    return any(_RANDOM_OP_RE.search(str(names[m])) for m in metas if 0 <= m < len(names))


__all__ = ["analyze", "is_async_stage", "EXPENSIVE_MAP_US", "MATERIAL_PCT", "VECTORIZE_MAX_US"]
