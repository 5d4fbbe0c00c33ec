"""The pipeline as built, read back from the trace, and the fixes written from it.

On captured samples whose scripts are known (``sample_traces/make_*_samples.py``): the calls come back in
the order the program made them, with what TF's defaults did to them (a plain ``map`` that TF ran in
parallel is still written ``map(f1)``). On small stage tables: each fix changes only what it should and
refuses what would change the data (a cache after a shuffle or a stateful map) or repeat a stage.
"""

from __future__ import annotations

import pytest
from conftest import SAMPLES

import tfadvisor
from tfadvisor.analyses import tfdata_graph as graph


def stages(*rows: tuple[str, str, float]) -> dict:
    """A ``tfdata_stages`` table from (iterator chain, name stat, parallelism) rows, consumer first."""
    return {"iterator": [r[0] for r in rows], "kind": [r[0].rsplit("::", 1)[-1] for r in rows],
            "name": [r[1] for r in rows], "parallelism": [r[2] for r in rows],
            "batch_size": [float("nan")] * len(rows)}


def methods(cs) -> list[str]:
    return [c.method for c in cs]


# from_tensor_slices(...).repeat().map(f1).map(f2).batch(32) under TF's defaults: f1 parallelised,
# f2 (random: a stateful op) left sequential and fused with the batch.
RANDOM_AFTER = stages(("Root", "fused(MapDataset:3,BatchDatasetV2:4)", float("nan")),
                      ("Root::MapAndBatch", "fused(MapDataset:3,BatchDatasetV2:4)", 1.0),
                      ("Root::MapAndBatch::ParallelMapV2", "MapDataset:2", 2.0),
                      ("Root::MapAndBatch::ParallelMapV2::ForeverRepeat", "RepeatDataset:1", float("nan")),
                      ("Root::MapAndBatch::ParallelMapV2::ForeverRepeat::TensorSlice", "TensorSliceDataset:0",
                       float("nan")))


def test_calls_come_back_in_build_order_with_what_the_defaults_did():
    cs = graph.calls(RANDOM_AFTER)
    assert methods(cs) == ["source", "repeat", "map", "map", "batch"]
    f1, f2 = cs[2], cs[3]
    assert (f1.fn, f1.parallel, f1.asked, f1.random) == ("f1", True, False, False)
    assert (f2.fn, f2.parallel, f2.random) == ("f2", False, True)  # the defaults kept it sequential: state


def test_cache_goes_after_the_deterministic_map_and_before_the_random_one():
    cs = graph.calls(RANDOM_AFTER)
    fixed = graph.cached(cs, 2)
    assert methods(fixed) == ["source", "map", "cache", "repeat", "map", "batch"]
    assert fixed[1].fn == "f1" and fixed[4].fn == "f2"
    assert graph.cached(cs, 3) is None  # the random map itself: never cached


def test_nothing_is_cached_after_a_shuffle():
    t = stages(("Root", "PrefetchDataset:4", float("nan")), ("Root::Prefetch", "PrefetchDataset:4", float("nan")),
               ("Root::Prefetch::MapAndBatch", "fused(ParallelMapDatasetV2:2,BatchDatasetV2:3)", 2.0),
               ("Root::Prefetch::MapAndBatch::Shuffle", "ShuffleDatasetV3:1", float("nan")),
               ("Root::Prefetch::MapAndBatch::Shuffle::TensorSlice", "TensorSliceDataset:0", float("nan")))
    cs = graph.calls(t)
    assert methods(cs) == ["source", "shuffle", "map", "batch", "prefetch"]
    assert graph.cached(cs, 2) is None
    assert graph.prefetched(cs) is None  # it has one
    assert graph.parallel(cs, 2, add_prefetch=True) is None  # asked for already


def test_with_the_defaults_off_a_sequential_map_is_not_taken_for_a_stateful_one():
    t = stages(("Root", "OptionsDataset:4", float("nan")), ("Root::ForeverRepeat", "RepeatDataset:3", float("nan")),
               ("Root::ForeverRepeat::BatchV2", "BatchDatasetV2:2", float("nan")),
               ("Root::ForeverRepeat::BatchV2::Map", "MapDataset:1", float("nan")),
               ("Root::ForeverRepeat::BatchV2::Map::TensorSlice", "TensorSliceDataset:0", float("nan")))
    assert not graph.defaults_on(t)
    cs = graph.calls(t)
    assert not cs[1].random
    fixed = graph.parallel(cs, 1, add_prefetch=True)
    assert methods(fixed) == ["source", "map", "batch", "repeat", "prefetch"] and fixed[1].asked


def test_vectorize_and_filter_first_move_one_call():
    t = stages(("Root", "PrefetchDataset:5", float("nan")), ("Root::Prefetch", "PrefetchDataset:5", float("nan")),
               ("Root::Prefetch::BatchV2", "BatchDatasetV2:4", float("nan")),
               ("Root::Prefetch::BatchV2::Filter", "FilterDataset:3", float("nan")),
               ("Root::Prefetch::BatchV2::Filter::ParallelMapV2", "MapDataset:2", 2.0),
               ("Root::Prefetch::BatchV2::Filter::ParallelMapV2::Range", "RangeDataset:0", float("nan")))
    cs = graph.calls(t)
    assert methods(graph.filter_first(cs, 2)) == ["source", "filter", "map", "batch", "prefetch"]
    assert graph.vectorized(cs, 2) is None  # a filter between the map and the batch: not the same batches


@pytest.mark.parametrize("sample,code", [
    ("tfdata_repeat_map", ["ds = (tf.data.Dataset.from_tensor_slices(data)", ".repeat()", ".map(f1)", ".batch(32))"]),
    ("tfdata_many_files", ["ds = (tf.data.TFRecordDataset(files)", ".map(f1)", ".batch(32)", ".repeat())"]),
    ("pipe_random_after_map", ["ds = (tf.data.Dataset.from_tensor_slices(data)", ".repeat()", ".map(f1)",
                               ".map(f2)", ".batch(32))"]),
])
def test_captured_pipelines_read_back_as_their_scripts_wrote_them(sample, code):
    """The scripts (make_input_samples.py, make_time_samples.py) wrote these pipelines; the trace gives them
    back call for call."""
    got = tfadvisor.analyze(SAMPLES / sample).metrics["tfdata_code"]
    assert [line.strip() for line in got.splitlines()] == code


def test_name_stats_are_read_in_time_linear_in_their_length():
    """A name stat of 8 MiB of letters (fuzz seed 59) is read at once: the op pattern was tried at every letter and
    took time quadratic in the run (40,000 letters 1.2 s); build indices past 18 digits are no build index."""
    import time

    t0 = time.process_time()
    assert graph._ops("A" * (8 << 20)) == []
    # the regex alone measured 0.08 s for 8 MiB here; quadratic, 8 MiB would take hours
    assert time.process_time() - t0 < 5
    assert graph._ops("x" * 1000 + "fused(MapDataset:3,BatchDatasetV2:4)") == [("MapDataset", 3), ("BatchDatasetV2", 4)]
    assert graph._ops("MapDataset:" + "9" * 5000) == []
    assert graph._ops("fooMapDataset:7") == [("fooMapDataset", 7)]  # the word's letters, as before
