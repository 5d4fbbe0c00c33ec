"""Per-stage tf.data costs on the committed captures against the pipeline timed alone.

The truth comes from each sample's ``measured.json`` (``make_input_samples.py``, see its
``alone_method``), not from the tool: ``map_element_ms_alone`` (the per-element function as tf.data
runs it, one element at a time, no profiler) and ``pipeline_batch_ms_alone`` (the pipeline's
throughput, ms per batch, no profiler). The tool reads the same quantities from the trace:
``tfdata_map_element_us`` (the typical function run of the costliest map stage, per element) and
``tfdata_map_batch_ms`` (that stage's time to produce one batch); for a ``from_generator`` source,
the Generator stage's ``element_us``/``batch_us``.

Checked: the (sample, figure) pairs whose trace matches the pipeline timed alone within ``TOL``
(25 %: between two timings of one pipeline alone on this 2-core host, ``measured.json``
``pipeline_batch_ms_alone_retimed`` against the capture's own, the samples checked here moved 9 % and 12 %,
the others 14-118 %). The other nine pairs are not
checked here, because their reference is not the truth of the trace: their trace / alone ratios (0.25-2.18, in
``NOT_COMPARABLE``) come from the conditions, not from the tool. A trace is taken under the profiler, during
training, on 2 cores. A figure 1.5x off could not be told from that spread. What guards the per-element
arithmetic instead is ``tests/test_tfdata_attribution.py::test_per_element_cost_matches_map_alone``
(fresh captures, median of three).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tfadvisor

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TOL = 0.25
CASES = ["seq_map", "repeat_map", "contention", "py_function_latency", "generator", "vectorizable_map"]

#: (case, figure) not compared, why, and the trace / alone ratio measured on the committed sample.
NOT_COMPARABLE = {
    ("vectorizable_map", "element"): "a 7 us function: tf.data's per-element hand-offs between its threads are not "
                                     "traced events, only its function runs are (0.25)",
    ("vectorizable_map", "batch"): "same: the untraced per-element hand-offs are most of the batch's time (0.36)",
    # the profiler slows the map's MatMul kernels 2-3x (the seq_map pipeline alone: 7.6 -> 15.1 ms per batch
    # under the profiler in one process) and the train step shares the 2 cores
    ("seq_map", "element"): "profiler overhead and the train step on the same cores (1.93)",
    ("seq_map", "batch"): "profiler overhead and the train step on the same cores (2.18)",
    ("repeat_map", "batch"): "profiler overhead and model.fit on the same cores (1.72)",
    ("contention", "batch"): "profiler overhead and model.fit on the same cores, the case's point (1.63)",
    ("contention", "element"): "the re-timed alone figure was taken under another load (0.54)",
    ("generator", "element"): "the generator's Python competes for the GIL with model.fit's Python thread (1.61)",
    ("generator", "batch"): "the generator's Python competes for the GIL with model.fit's Python thread (1.27)",
}
COMPARED = [(c, f) for c in CASES for f in ("element", "batch") if (c, f) not in NOT_COMPARABLE]


def _figures(name: str) -> tuple[dict, dict]:
    res = tfadvisor.analyze(SAMPLES / name)
    m = json.loads((SAMPLES / name / "measured.json").read_text())
    t = res.tables["tfdata_stages"]
    if res.metrics.get("tfdata_map_element_us") is not None:
        got = dict(element=res.metrics["tfdata_map_element_us"], batch=res.metrics.get("tfdata_map_batch_ms"))
    else:
        gen = t[t["kind"] == "Generator"].iloc[0]
        got = dict(element=float(gen["element_us"]), batch=float(gen["batch_us"]) / 1000.0)
    want = dict(element=1000.0 * m["map_element_ms_alone"] if "map_element_ms_alone" in m else None,
                batch=m.get("pipeline_batch_ms_alone"))
    return got, want


@pytest.mark.parametrize(("case", "figure"), COMPARED)
def test_stage_cost_matches_alone(case, figure):
    name = "tfdata_" + case
    m = json.loads((SAMPLES / name / "measured.json").read_text())
    assert "alone_method" in m, f"{name}: measured.json does not say how its *_alone figures were timed"
    got, want = _figures(name)
    assert want[figure] is not None and want[figure] > 0
    assert got[figure] is not None and got[figure] > 0
    assert abs(got[figure] / want[figure] - 1.0) <= TOL, \
        f"{name} {figure}: trace {got[figure]:.4g}, alone {want[figure]:.4g}"


def test_every_case_is_compared_or_says_why():
    assert set(COMPARED) | set(NOT_COMPARABLE) == {(c, f) for c in CASES for f in ("element", "batch")}
    assert len(COMPARED) >= 3
