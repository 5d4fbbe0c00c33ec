"""The tf.data pipeline as the trace shows it: its stages, their time, and common mistakes.

Each ``Iterator::<chain>`` event is one call of a stage (its name is the chain from the
root, e.g. ``Iterator::Root::Prefetch::MapAndBatch::TensorSlice``; ``[k]`` epoch indexes
of repeats are dropped). Per stage: calls, total and mean time, time without its child
stage (self), and the stats TF attaches (``parallelism``, ``autotune``,
``buffered_elements``, ``batch_size``...; the last value seen).

Flags:

* ``tfdata_has_prefetch``: a ``Prefetch`` stage exists (Keras adds one).
* ``tfdata_sequential_map``: a map stage runs one element at a time: ``Map`` (no
  ``num_parallel_calls``), or ``ParallelMap``/``MapAndBatch`` with parallelism 1 and
  autotune off.
* ``tfdata_has_cache`` / ``tfdata_repeated_source_no_cache``: a ``Cache``/``MemoryCache``
  stage; a ``Repeat`` over a pipeline that has no cache recomputes every epoch.
* ``tfdata_map_element_us``: mean time to produce one element in the map stages (self
  time of a synchronous ``Map`` call; else the ``*MapProduce``/``MapAndBatchProduce``
  producer events; else the captured-function runs); ``tfdata_expensive_map`` when it is at
  least ``EXPENSIVE_MAP_US``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tfadvisor.analyses.base import PS_PER_MS, PS_PER_US, AnalysisResult, Context
from tfadvisor.analyses.steps import activity, step_table
from tfadvisor.trace import Trace

EXPENSIVE_MAP_US = 50.0
#: Flags need the stage's time to be at least this share of the step time.
MATERIAL_PCT = 5.0
STAGE_STATS = ("name", "parallelism", "autotune", "buffered_elements", "batch_size", "buffer_limit", "cpu_budget")
_EPOCH_RE = re.compile(r"\[\d+\]")
_MAP_RE = re.compile(r"^(Parallel)?Map(V\d)?$|^MapAndBatch$|^ParallelMapV\d$|^LegacyParallelMap$")


def _stage_kind(last: str) -> str:
    return last.split("(")[0]


def _bool(v) -> bool | None:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return None
    s = str(v).lower()
    if s in ("true", "1", "1.0"):
        return True
    if s in ("false", "0", "0.0"):
        return False
    return None


def analyze(trace: Trace, ctx: Context) -> AnalysisResult:
    res = AnalysisResult("tfdata")
    act = activity(trace, ctx)
    p = act.host
    names = ["tfdata_has_prefetch", "tfdata_has_cache", "tfdata_sequential_map", "tfdata_map_element_us",
             "tfdata_expensive_map", "tfdata_repeated_source_no_cache", "tfdata_pipeline"]
    rows = act.rows.get("iterator", np.empty(0, np.int64)) if p is not None else np.empty(0, np.int64)
    if p is None or rows.shape[0] == 0:
        res.add("tfdata_present", False, "", "the trace shows a tf.data pipeline (Iterator::* events)")
        res.missing(names, "no tf.data iterator events (Iterator::*) in the trace")
        return res
    res.add("tfdata_present", True, "", "the trace shows a tf.data pipeline (Iterator::* events)")

    meta = p.ev_meta[rows]
    uniq_meta, inv = np.unique(meta, return_inverse=True)
    chain_of_meta = np.array([_EPOCH_RE.sub("", str(p.event_names[m]))[len("Iterator::"):] for m in uniq_meta],
                             dtype=object)
    chain_codes, chains = pd.factorize(pd.Series(chain_of_meta[inv]))
    dur = p.ev_dur_ps[rows].astype(np.float64)
    calls = np.bincount(chain_codes, minlength=len(chains))
    total = np.bincount(chain_codes, weights=dur, minlength=len(chains))

    st = p.stat_columns(STAGE_STATS, rows)
    table = pd.DataFrame({"stage": [c.split("::")[-1] for c in chains], "iterator": list(chains), "calls": calls,
                          "total_ms": total / PS_PER_MS, "mean_us": total / np.maximum(calls, 1) / PS_PER_US})
    # self time: minus the direct child stage(s)
    child_total = np.zeros(len(chains))
    idx = {c: i for i, c in enumerate(chains)}
    for c, i in idx.items():
        parent = c.rsplit("::", 1)[0] if "::" in c else None
        if parent in idx:
            child_total[idx[parent]] += total[i]
    table["self_ms"] = np.maximum(total - child_total, 0.0) / PS_PER_MS
    for sn in ("parallelism", "autotune", "buffered_elements", "batch_size", "name"):
        col = st[sn]
        pos = col.positions(rows)
        has = pos >= 0
        if not has.any():
            table[sn] = None
            continue
        last = pd.Series(pos[has]).groupby(chain_codes[has]).last()  # only the last value is formatted
        strs = col.strings_at(col.rows[last.to_numpy(np.int64)])
        got = dict(zip(last.index.tolist(), strs))
        table[sn] = [got.get(i) for i in range(len(chains))]
    table = table.sort_values("iterator", key=lambda s: s.str.count("::")).reset_index(drop=True)
    res.tables["tfdata_stages"] = table

    kinds = [_stage_kind(s) for s in table["stage"]]
    has_prefetch = any(k.startswith("Prefetch") for k in kinds)
    has_cache = any(k in ("Cache", "MemoryCache", "MemoryCacheImpl", "DiskCache", "CacheDataset") or
                    k.startswith("Cache") for k in kinds)
    has_repeat = any("Repeat" in k for k in kinds)
    deepest = max(chains, key=lambda c: c.count("::"))
    res.add("tfdata_pipeline", deepest, "", "the deepest stage chain (root first)")
    res.add("tfdata_has_prefetch", has_prefetch, "", "the pipeline has a prefetch stage")
    res.add("tfdata_has_cache", has_cache, "", "the pipeline has a cache stage")

    # What is material: a share of the step time (all steps), else of the traced span.
    tbl = step_table(ctx)
    if tbl is not None:
        ref_ms = float(tbl["duration_ms"].sum())
    else:
        lo, hi = act.span
        ref_ms = (hi - lo) / PS_PER_MS
    material_ms = MATERIAL_PCT / 100.0 * ref_ms

    repeat_ms = float(table.loc[[("Repeat" in k) for k in kinds], "total_ms"].sum())
    res.add("tfdata_repeated_source_no_cache", bool(has_repeat and not has_cache and repeat_ms >= material_ms), "",
            f"a repeat without a cache under it whose work is at least {MATERIAL_PCT:g} % of the step time: "
            "every epoch recomputes it")

    # Map stages.
    is_map = np.array([bool(_MAP_RE.match(k)) for k in kinds], bool)
    map_rows = table[is_map]
    seq_ms = 0.0
    for _, r in map_rows.iterrows():
        k = _stage_kind(r["stage"])
        par = pd.to_numeric(pd.Series([r["parallelism"]]), errors="coerce").iloc[0]
        auto = _bool(r["autotune"])
        if k in ("Map", "MapV2"):  # dataset.map without num_parallel_calls
            seq_ms += float(r["self_ms"])
        elif par == 1 and not auto:
            seq_ms += float(r["total_ms"])
    res.add("tfdata_sequential_map", bool(seq_ms > 0 and seq_ms >= material_ms), "",
            "a map stage runs one element at a time (no num_parallel_calls, or parallelism 1 without autotune) "
            f"and takes at least {MATERIAL_PCT:g} % of the step time")

    elem_us = None
    work_ms = 0.0
    sync = map_rows[[_stage_kind(s) in ("Map", "MapV2") for s in map_rows["stage"]]]
    if len(sync) and sync["calls"].sum() > 0:
        work_ms = float(sync["self_ms"].sum())
        elem_us = work_ms * 1000.0 / float(sync["calls"].sum())
    if len(map_rows):
        pr = act.rows.get("produce", np.empty(0, np.int64))
        if pr.shape[0]:
            w = float(p.ev_dur_ps[pr].sum() / PS_PER_MS)
            if elem_us is None or w > work_ms:
                work_ms = w
                elem_us = w * 1000.0 / pr.shape[0]
        if elem_us is None:
            fr = act.rows.get("captured_fn", np.empty(0, np.int64))
            if fr.shape[0]:
                work_ms = float(p.ev_dur_ps[fr].sum() / PS_PER_MS)
                elem_us = work_ms * 1000.0 / fr.shape[0]
    if elem_us is None:
        if len(map_rows):
            res.missing(["tfdata_map_element_us"], "map stages without per-element timing in the trace")
            res.add("tfdata_expensive_map", None, "", "")
        else:
            res.missing(["tfdata_map_element_us"], "no map stage ran in the profiled window")
            res.add("tfdata_expensive_map", False, "", "no map stage ran in the profiled window")
    else:
        res.add("tfdata_map_element_us", elem_us, "us", "mean time to produce one element in the map stages")
        res.add("tfdata_map_ms", work_ms, "ms", "time spent in map functions over the profile")
        res.add("tfdata_expensive_map", bool(elem_us >= EXPENSIVE_MAP_US and work_ms >= material_ms), "",
                f"map work of at least {EXPENSIVE_MAP_US:g} us per element adding up to at least "
                f"{MATERIAL_PCT:g} % of the step time")
    return res


__all__ = ["analyze", "EXPENSIVE_MAP_US", "MATERIAL_PCT"]
