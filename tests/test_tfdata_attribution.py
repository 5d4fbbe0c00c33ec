"""tf.data cost lands on the stage TF really ran (fused MapAndBatch, injected Prefetch), per element
as expensive as the map timed alone under the profiler: real captures with TF's default optimizations on."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_timed_child

pytest.importorskip("tensorflow")

import tfadvisor  # noqa: E402

HERE = Path(__file__).resolve().parent


def _capture_heavy(out):
    # TensorFlow captures timed against the script's own clock: no other test beside them once TensorFlow is
    # imported (conftest.run_timed_child; the import itself runs beside other tests)
    r = run_timed_child([sys.executable, str(HERE / "tfdata_capture.py"), str(out), "heavy_map"],
                        env=dict(os.environ, TFADVISOR_TEST_READY="1"), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return tfadvisor.analyze(out / "heavy_map"), json.loads((out / "heavy_map.json").read_text())


@pytest.fixture(scope="module")
def heavy(tmp_path_factory):
    return _capture_heavy(tmp_path_factory.mktemp("tfdata_attr"))


@pytest.fixture(scope="module")
def heavy_three(tmp_path_factory, heavy):
    """Three captures in fresh processes: on this 2-core machine one capture's per-element figures (traced
    and timed alone) each move up to 2x from process to process (2026-11-24, five captures: trace / alone
    0.69, 0.92, 1.12, 1.30, 1.68)."""
    return [heavy] + [_capture_heavy(tmp_path_factory.mktemp(f"tfdata_attr{i}")) for i in (1, 2)]


def test_fused_stage_holds_the_time(heavy):
    res, _ = heavy
    t = res.tables["tfdata_stages"].set_index("stage")
    assert "MapAndBatch" in t.index
    mab = t.loc["MapAndBatch"]
    # the fused map+batch stage, not its TensorSlice source, is where the work is. The bug this guards put the
    # map's work in the source (ratio below 1); on a loaded 2-core host preemption inflates the source's own
    # time: 14.9x in one CI run (25.4 against 1.70 ms), so 5x is asked
    assert mab["self_ms"] == t["self_ms"].max()
    assert mab["self_ms"] > 5 * t.loc["TensorSlice", "self_ms"]
    assert "MapDataset" in str(mab["name"])  # what the user wrote
    assert mab["function_runs"] > 0 and mab["elements"] == mab["function_runs"]
    assert res.metrics["tfdata_hot_stage"].startswith("MapAndBatch")
    # an asynchronous stage that buffers counts as prefetching
    assert res.metrics["tfdata_has_prefetch"] is True


def test_per_element_cost_matches_map_alone(heavy_three):
    ratios = []
    for res, info in heavy_three:
        assert info["map_alone_profiled_us"] > 0
        ratios.append(res.metrics["tfdata_map_element_us"] / info["map_alone_profiled_us"])
    # the capture whose ratio is the median of the three: each ratio is the trace against the map timed alone in
    # the same process, so a process that ran slow or fast moves both; one outlier of either side is left out
    mid = sorted(range(3), key=ratios.__getitem__)[1]
    res, info = heavy_three[mid]
    got = res.metrics["tfdata_map_element_us"]
    # The trace holds the function bodies and the stage's own events, not tf.data's per-element hand-offs
    # between its threads, which the alone-timing (the pipeline with the map minus without it) holds: the trace
    # reads below it. The reference is the map timed alone with the profiler recording, as it was for the trace:
    # timed without it, the trace read 1.15-1.67x the map alone (2026-11-28, four captures) because the
    # profiler's per-op events cost the map's 24 ops per element 1.15-1.3x.
    # Measured ratios (trace / profiled alone, one capture each): 0.52, 0.68, 0.70, 0.87, 1.01, 1.21
    # (2026-11-28); 0.72, 0.69, 0.70, 0.75, 0.52, 0.56 (2026-12-02, /tmp/tfd_probe.py, idle machine); a CI
    # run's median capture read 0.47 against the fastest alone-timing of its three (2026-12-02; the alone timings
    # move 104-308 us between processes on this 2-core machine). So 0.4-1.6 on the median ratio.
    # What this guards is the old bug (the map's cost read from the source stage, 20x too small) and any error
    # of 1.6x or more; tests/test_tfdata_stage_costs.py compares the committed samples whose reference holds.
    alone = info["map_alone_profiled_us"]
    assert 0.4 <= ratios[mid] <= 1.6, f"trace says {got:.0f} us per element, timed alone {alone:.0f} us"
    t = res.tables["tfdata_stages"].set_index("stage")
    # per batch: 32 elements' work over the bodies that ran at once (at most the stage's parallelism)
    conc = t.loc["MapAndBatch", "concurrency"]
    assert conc >= 1.0
    # TF writes the stage's parallelism as "unavailable" while autotune has not set it (the CI run on d1291f3
    # caught such a last call): then there is no bound to check, and the analysis sets none either
    par = pd.to_numeric(pd.Series([t.loc["MapAndBatch", "parallelism"]]), errors="coerce").iloc[0]
    if pd.isna(par):
        assert t.loc["MapAndBatch", "parallelism"] == "unavailable"
    else:
        assert conc <= max(1.0, par)
    assert t.loc["MapAndBatch", "batch_us"] == pytest.approx(got * 32 / conc, rel=0.01)
