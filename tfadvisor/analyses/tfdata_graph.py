"""The tf.data pipeline as the program built it, read back from the trace, and that pipeline changed by a fix.

The ``Iterator::Root::Prefetch::MapAndBatch::TensorSlice`` chains give the stages from the consumer
down to the source. Each stage's ``name`` stat keeps the dataset op built for a call the user wrote,
numbered in build order (``TensorSliceDataset:0``, ``RepeatDataset:1``, ``MapDataset:2``); a fused stage
names the calls it fused (``fused(MapDataset:3,BatchDatasetV2:4)``) and a stage TF added says so
(``inject/prefetch_...``: not the user's, left out). Without ``name`` stats (older TF, synthetic
traces) the stage kind stands for the call. So the main chain becomes the user's calls, source first
(:func:`calls`), and :func:`render` writes them as Python.

A call is *random* when it gives other elements each pass: a shuffle, or a map that TF's default
``map_parallelization`` left sequential although the user did not ask for it (it holds state: random
ops, a variable, a py_function; only where the trace shows the defaults ran, :func:`defaults_on`), or
any map when the pipeline's traced function bodies run random ops. Nothing is cached after a random
call: the cache would freeze one pass.

The fixes (:func:`cached`, :func:`parallel`, :func:`vectorized`, :func:`filter_first`,
:func:`prefetched`) return the changed pipeline, or None when the change does not apply (the stage is
already there, or it would change what the pipeline produces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from tfadvisor.model.values import as_int, as_number

#: a dataset op and its build index; only from a word's first letter (the lookbehind): tried at every letter, a
#: run of letters without ``Dataset`` took time quadratic in its length (an 8 MiB name stat hung, fuzz seed 59)
_OP_RE = re.compile(r"(?<![A-Za-z])([A-Za-z]+Dataset(?:V\d)?):(\d+)")
#: digits of the largest build index read (int64's 19 digits less one); more is no build index (and int()
#: refuses strings past 4300 digits)
_MAX_INDEX_DIGITS = 18
#: tf.data's epoch index in an iterator's name (``ForeverRepeat[2]``): dropped to compare stages
EPOCH_RE = re.compile(r"\[\d+\]")
#: stage kind (the iterator's last part) -> the dataset op it runs, where the trace has no name stat
_KIND_OPS = {
    "TensorSlice": "TensorSliceDataset", "FromTensor": "TensorDataset", "Range": "RangeDataset",
    "Generator": "GeneratorDataset", "TFRecord": "TFRecordDataset", "TextLine": "TextLineDataset",
    "ForeverRepeat": "RepeatDataset", "FiniteRepeat": "RepeatDataset", "Repeat": "RepeatDataset",
    "Map": "MapDataset", "ParallelMapV2": "ParallelMapDatasetV2", "ParallelMap": "ParallelMapDataset",
    "Filter": "FilterDataset", "ParallelFilter": "ParallelFilterDataset", "BatchV2": "BatchDatasetV2",
    "Batch": "BatchDataset", "PaddedBatchV2": "PaddedBatchDatasetV2", "Shuffle": "ShuffleDatasetV3",
    "MemoryCache": "CacheDatasetV2", "Cache": "CacheDatasetV2", "FileCache": "CacheDatasetV2",
    "Prefetch": "PrefetchDataset", "FlatMap": "FlatMapDataset", "Interleave": "InterleaveDataset",
    "ParallelInterleaveV4": "ParallelInterleaveDatasetV4", "Take": "TakeDataset", "Skip": "SkipDataset",
    "Unbatch": "UnbatchDataset",
}
#: dataset ops that are no call of the user's (options, TF's own wrappers)
_HIDDEN = ("OptionsDataset", "ModelDataset", "MaxIntraOpParallelismDataset", "PrivateThreadPoolDataset",
           "AssertCardinalityDataset", "AssertNextDataset", "ZipDataset")
_SOURCES = {"TensorSliceDataset": "tf.data.Dataset.from_tensor_slices(data)",
            "TensorDataset": "tf.data.Dataset.from_tensors(data)", "RangeDataset": "tf.data.Dataset.range(n)",
            "GeneratorDataset": "tf.data.Dataset.from_generator(gen, ...)",
            "TFRecordDataset": "tf.data.TFRecordDataset(files)", "TextLineDataset": "tf.data.TextLineDataset(files)"}
AUTOTUNE = "tf.data.AUTOTUNE"


@dataclass(frozen=True)
class Call:
    """One call of the pipeline as written: ``op`` (the dataset op), its build index, the function it
    runs (``f1``, ``pred1``), whether it is random, and its argument (a batch size)."""

    op: str
    index: int = -1
    fn: str = ""
    random: bool = False
    arg: str = ""
    parallel: bool = False  # runs in parallel (the user asked, or TF's defaults parallelised it)
    asked: bool = False  # num_parallel_calls written in the program
    note: str = ""

    @property
    def method(self) -> str:
        op = self.op
        for key, name in (("Shuffle", "shuffle"), ("Repeat", "repeat"), ("PaddedBatch", "padded_batch"),
                          ("Batch", "batch"), ("Cache", "cache"), ("Prefetch", "prefetch"), ("Filter", "filter"),
                          ("FlatMap", "flat_map"), ("Interleave", "interleave"), ("Map", "map"), ("Take", "take"),
                          ("Skip", "skip"), ("Unbatch", "unbatch")):
            if key in op:
                return name
        return "source" if op in _SOURCES else op


def _ops(name: str) -> list[tuple[str, int]]:
    """The (op, build index) a ``name`` stat names; [] for an injected stage."""
    if not name or name.startswith("inject/"):
        return []
    return [(op, int(k)) for op, k in _OP_RE.findall(name) if len(k) <= _MAX_INDEX_DIGITS]


def _value(v) -> str:
    """A stage's count (a batch size) as the program would write it; "" where the value is none (absent, NaN,
    inf, past int64, negative, not a number)."""
    n = as_int(v, lo=0)
    return "" if n is None else str(n)


def defaults_on(table) -> bool:
    """Whether TF's default tf.data optimizations ran on this pipeline: a fused or injected stage, or a
    map the user wrote plainly (``MapDataset``) running as a parallel one."""
    for kind, raw in zip(table["kind"], table["name"]):
        name = "" if raw is None else str(raw)
        if name.startswith(("fused(", "inject/")):
            return True
        if str(kind).startswith("ParallelMap") and any(op == "MapDataset" for op, _ in _ops(name)):
            return True
    return False


def made_by_tfdata(kind: str, name: str | None) -> bool | None:
    """Whether tf.data made the stage ``kind`` named ``name`` (its ``name`` stat) rather than the program: a stage it
    injected (``inject/prefetch_...``), one it fused (``fused(MapDataset:3,BatchDatasetV2:4)``), or a map the user
    wrote plainly running as a parallel one. None where the stage carries no dataset op's name (older TF,
    synthetic traces)."""
    name = "" if name is None or str(name) == "nan" else str(name)
    if name.startswith(("inject/", "fused(")):
        return True
    ops = _ops(name)
    if not ops:
        return None
    return str(kind).startswith("ParallelMap") and all(op == "MapDataset" for op, _ in ops)


def _stage_calls(table, i: int, depth: int, random_bodies: bool, defaults: bool = True) -> list[Call]:
    """The calls stage row ``i`` stands for, consumer side first (a fused stage: batch, then map)."""
    kind = str(table["kind"][i])
    raw = table["name"][i]
    name = "" if raw is None or str(raw) == "nan" else str(raw)
    if name.startswith("inject/"):
        return []
    ops = sorted(_ops(name), key=lambda t: -t[1])
    if not ops:
        if kind == "MapAndBatch":
            ops = [("BatchDatasetV2", -1), ("MapDataset", -1)]
        elif kind in _KIND_OPS:
            ops = [(_KIND_OPS[kind], -1)]
    par = as_number(table["parallelism"][i]) if "parallelism" in table else None
    par = float("nan") if par is None else par
    batch = _value(table["batch_size"][i]) if "batch_size" in table else ""
    out = []
    for op, k in ops:
        if op in _HIDDEN:
            continue
        c = Call(op=op, index=k, arg=batch if "Batch" in op else "")
        if c.method == "map":
            asked = op.startswith("Parallel")
            # left sequential by the defaults' map_parallelization: it holds state (unknown with them off)
            sequential = defaults and not asked and (kind in ("Map", "MapV2") or par == 1)
            c = replace(c, parallel=asked or par > 1, asked=asked, random=sequential or random_bodies)
        elif c.method == "shuffle":
            c = replace(c, random=True)
        out.append(c)
    return out


def _index(table, i: int) -> int:
    raw = table["name"][i]
    got = _ops("" if raw is None else str(raw))
    return max(k for _, k in got) if got else -1


def calls(table, random_bodies: bool = False) -> list[Call]:
    """The user's calls along the pipeline's main input path, source first, from the ``tfdata_stages``
    table: from the root stage down, at each stage to its input (for a ``flat_map``/``interleave``, the
    child built before it; the one built after is the dataset its function makes, written inside it).
    ``random_bodies``: random ops ran in the pipeline's function bodies (every map is then random)."""
    chains = [EPOCH_RE.sub("", str(c)) for c in table["iterator"]]
    if not chains:
        return []
    rows: dict[str, int] = {}
    for i, c in enumerate(chains):
        rows.setdefault(c, i)
    children: dict[str, list[str]] = {}
    for c in rows:
        if "::" in c:
            children.setdefault(c.rsplit("::", 1)[0], []).append(c)
    top = min(rows, key=lambda c: c.count("::"))
    defaults = defaults_on(table)
    out: list[Call] = []
    chain, depth = top, 0
    while chain is not None:
        i = rows[chain]
        last = chain.rsplit("::", 1)[-1]
        here = [] if last == "Root" or last.endswith("Impl") else _stage_calls(table, i, depth, random_bodies,
                                                                                  defaults)
        kids = children.get(chain, [])
        if here and here[-1].method in ("flat_map", "interleave") and kids:
            mine = _index(table, i)
            inner = [k for k in kids if _index(table, rows[k]) > mine]
            src = [_stage_calls(table, rows[k], depth + 1, random_bodies, defaults) for k in inner]
            text = next((_SOURCES.get(c[-1].op) for c in src if c and c[-1].op in _SOURCES), None)
            if any(c and c[-1].op == "GeneratorDataset" for c in src):
                here[-1] = Call(op="GeneratorDataset")  # from_generator: a flat_map over a generator
                out.extend(here)
                break
            if text:
                here[-1] = replace(here[-1], arg=text.replace("(files)", "(f)").replace("(data)", "(x)"))
            kids = [k for k in kids if k not in inner]
        out.extend(here)
        chain = min(kids, key=lambda k: _index(table, rows[k])) if kids else None
        depth += 1
    out.reverse()
    out = _readers(out)
    seen, maps, filters, uniq = set(), 0, 0, []
    for c in out:
        key = (c.op, c.index) if c.index >= 0 else None
        if key is not None and key in seen:
            continue
        if key is not None:
            seen.add(key)
        if c.method == "map":
            maps += 1
            c = replace(c, fn=f"f{maps}")
        elif c.method == "filter":
            filters += 1
            c = replace(c, fn=f"pred{filters}")
        uniq.append(c)
    return uniq


def _readers(cs: list[Call]) -> list[Call]:
    """``TFRecordDataset(files)`` as written: TF builds it as the file names' dataset with a flat_map (an
    interleave with ``num_parallel_reads``) of one reader per file."""
    if len(cs) >= 2 and cs[0].op == "TensorSliceDataset" and cs[1].method in ("flat_map", "interleave") \
            and "TFRecordDataset" in cs[1].arg:
        par = "Parallel" in cs[1].op
        return [Call(op="TFRecordDataset", arg="parallel" if par else "")] + cs[2:]
    return cs


def render(cs: list[Call]) -> str:
    """The calls as Python (``ds = (...)``), one call per line."""
    if not cs:
        return ""
    lines = []
    for c in cs:
        m = c.method
        if m == "source":
            text = _SOURCES[c.op]
            if c.op == "TFRecordDataset" and c.arg == "parallel":
                text = f"tf.data.TFRecordDataset(files, num_parallel_reads={AUTOTUNE})"
        elif m == "map":
            text = f".map({c.fn}" + (f", num_parallel_calls={AUTOTUNE})" if c.asked else ")")
        elif m == "filter":
            text = f".filter({c.fn})"
        elif m in ("batch", "padded_batch"):
            text = f".{m}({c.arg or 'batch_size'})"
        elif m == "shuffle":
            text = ".shuffle(buffer_size)"
        elif m == "prefetch":
            text = f".prefetch({AUTOTUNE})"
        elif m in ("take", "skip"):
            text = f".{m}(n)"
        elif m in ("flat_map", "interleave"):
            par = f", num_parallel_calls={AUTOTUNE}" if "Parallel" in c.op else ""
            text = f".{m}(lambda f: {c.arg or 'read(f)'}{par})"
        elif m in ("repeat", "cache", "unbatch"):
            text = f".{m}()"
        else:
            text = f"# {c.op}"
        if c.note:
            text += f"  # {c.note}"
        lines.append(text)
    if lines[0].startswith("."):
        lines.insert(0, "ds")
    last, sep, note = lines[-1].partition("  # ")
    lines[-1] = last + ")" + (sep + note if sep else "")  # the closing parenthesis before a comment
    head, rest = lines[0], lines[1:]
    return "ds = (" + head + "".join("\n      " + x for x in rest)


def has(cs: list[Call], method: str) -> bool:
    return any(c.method == method for c in cs)


def map_index(name: str) -> int | None:
    """The build index of the map a stage's ``name`` stat names (a fused stage: its map)."""
    got = [k for op, k in _ops(name or "") if "Map" in op and "FlatMap" not in op]
    return got[0] if got else None


def _map_at(cs: list[Call], index: int | None) -> int | None:
    """Position in ``cs`` of the map with build index ``index`` (None: the costliest map unknown)."""
    for i, c in enumerate(cs):
        if c.method == "map" and (index is None or c.index == index):
            return i
    return None


def cached(cs: list[Call], map_index: int | None) -> list[Call] | None:
    """Cache after the expensive map (build index ``map_index``) and repeat after the cache; None when
    a random call comes before that map (the cache would freeze it), when the map is random, or when
    the pipeline already caches."""
    at = _map_at(cs, map_index)
    if at is None or has(cs, "cache") or any(c.random for c in cs[:at + 1]):
        return None
    reps = [c for c in cs if c.method == "repeat"]
    head = [c for c in cs[:at + 1] if c.method != "repeat"]
    tail = [c for c in cs[at + 1:] if c.method != "repeat"]
    cache = Call(op="CacheDatasetV2", note=f"{cs[at].fn} once, read back after")
    moved = [replace(r, note="after the cache") for r in reps]
    return head + [cache] + moved + tail


def parallel(cs: list[Call], map_index: int | None, add_prefetch: bool) -> list[Call] | None:
    """The map ``map_index`` run in parallel (and a prefetch at the end when there is none)."""
    at = _map_at(cs, map_index)
    if at is None or cs[at].parallel:
        return None
    out = list(cs)
    out[at] = replace(cs[at], parallel=True, asked=True, note="parallel")
    return prefetched(out) or out if add_prefetch else out


def vectorized(cs: list[Call], map_index: int | None) -> list[Call] | None:
    """The map ``map_index`` moved after the batch above it (one call per batch); None without one."""
    at = _map_at(cs, map_index)
    if at is None:
        return None
    b = next((i for i in range(at + 1, len(cs)) if cs[i].method in ("batch", "padded_batch")), None)
    if b is None or any(c.method != "repeat" for c in cs[at + 1:b]):
        return None
    m = replace(cs[at], note=f"on whole batches: {cs[at].fn} must take a batch")
    return cs[:at] + cs[at + 1:b + 1] + [m] + cs[b + 1:]


def filter_first(cs: list[Call], map_index: int | None) -> list[Call] | None:
    """The first filter above the map ``map_index`` moved right before it."""
    at = _map_at(cs, map_index)
    if at is None:
        return None
    f = next((i for i in range(at + 1, len(cs)) if cs[i].method == "filter"), None)
    if f is None:
        return None
    moved = replace(cs[f], note="before the map")
    return cs[:at] + [moved] + cs[at:f] + cs[f + 1:]


def prefetched(cs: list[Call]) -> list[Call] | None:
    """A prefetch at the end; None when the pipeline has one."""
    if has(cs, "prefetch"):
        return None
    return cs + [Call(op="PrefetchDataset", note="added")]


__all__ = ["EPOCH_RE", "Call", "cached", "calls", "defaults_on", "filter_first", "has", "made_by_tfdata", "map_index",
           "parallel", "prefetched", "render", "vectorized"]
