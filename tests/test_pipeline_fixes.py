"""Fixes respect the pipeline the program built: on every sample, no printed fix adds a tf.data stage the
recorded pipeline already has (a prefetch, a cache, a shuffle), and none caches after a random call.

The recorded pipeline is the ``tfdata_stages`` table read back as calls
(:func:`tfadvisor.analyses.tfdata_graph.calls`: TF's own injected prefetch counts as present). Each
```python block of each finding's fix is read as a chain of tf.data calls in order. A block that builds
a pipeline from a source (``from_tensor_slices``, ``TFRecordDataset``...), or that is the recorded
pipeline as the analysis writes it (``tfdata_code*``), adds the calls it has beyond the recorded ones;
a block that continues an existing ``ds`` adds every call it makes. A cache is
after a random call when a shuffle, or a map whose function is random (a recorded map the trace shows
to hold state, or one named augment/random), comes before it in the block.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

import pytest
from conftest import analysed as shared_analysis
from conftest import sample_dirs

from tfadvisor.analyses import tfdata_graph as graph
from tfadvisor.errors import TraceError

STAGES = ("prefetch", "cache", "shuffle")
_CALL = re.compile(r"\.(map|filter|batch|padded_batch|shuffle|repeat|cache|prefetch|interleave|flat_map|unbatch)\(")
_SOURCE = re.compile(r"from_tensor_slices\(|TFRecordDataset\(|Dataset\.range\(|from_generator\(|list_files\(|"
                     r"Dataset\.load\(|TextLineDataset\(|from_tensors\(")
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _args(text: str, start: int) -> str:
    depth, i = 1, start
    while i < len(text) and depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start:i - 1]


def chain(block: str) -> list[tuple[str, str]]:
    """(method, arguments) of each tf.data call in a code block, in order; comments dropped."""
    code = "\n".join(line.split("#", 1)[0] for line in block.splitlines())
    return [(m.group(1), _args(code, m.end())) for m in _CALL.finditer(code)]


@cache
def analysed(name: str):
    path = next(p for p in sample_dirs() if p.name == name)
    try:
        return shared_analysis(path)
    except TraceError:
        return None


def _recorded(res) -> tuple[Counter, set[str], set[str]]:
    """(calls by method, the methods present (TF's injected prefetch too), random map functions)."""
    table = res.tables.get("tfdata_stages")
    if table is None or not len(table):
        return Counter(), set(), set()
    cs = graph.calls(table, random_bodies=bool(res.metrics.get("tfdata_map_random")))
    present = {c.method for c in cs}
    if any(str(k).startswith("Prefetch") for k in table["kind"]):
        present.add("prefetch")
    if any("Cache" in str(k) for k in table["kind"]):
        present.add("cache")
    return Counter(c.method for c in cs), present, {c.fn for c in cs if c.random and c.fn}


def problems(res) -> list[str]:
    counts, present, random_fns = _recorded(res)
    generated = {str(v).strip() for k, v in res.metrics.items() if k.startswith("tfdata_code") and v}
    out = []
    for f in res.findings:
        for block in _BLOCK.findall(f.fix or ""):
            calls = chain(block)
            if not calls:
                continue
            made = Counter(m for m, _ in calls)
            # the whole pipeline: built from a source, or the recorded one as the analysis wrote it
            whole = _SOURCE.search(block) or block.strip() in generated
            added = made - counts if whole else made
            for stage in STAGES:
                if added.get(stage) and stage in present:
                    out.append(f"{f.rule}: adds .{stage}() to a pipeline that has one")
            seen_random = False
            for m, args in calls:
                fn = args.split(",", 1)[0].strip()
                if m == "shuffle" or (m == "map" and (fn in random_fns or re.search(r"augment|random", fn))):
                    seen_random = True
                if m == "cache" and seen_random:
                    out.append(f"{f.rule}: caches after a random call")
    return out


NAMES = [p.name for p in sample_dirs()]


@pytest.mark.parametrize("name", NAMES)
def test_fixes_respect_the_recorded_pipeline(name):
    res = analysed(name)
    if res is None:
        pytest.skip("bad input sample")
    assert not problems(res), problems(res)


def test_the_check_finds_what_it_looks_for():
    """The block reader on known blocks: an added prefetch, a cache after a shuffle, a source-built chain."""
    assert chain("ds = ds.batch(32).prefetch(AUTOTUNE)  # .cache()") == [("batch", "32"), ("prefetch", "AUTOTUNE")]
    assert [m for m, _ in chain("ds = (tf.data.Dataset.range(9)\n  .shuffle(8)\n  .map(f, 2)\n  .cache())")] == \
        ["shuffle", "map", "cache"]
