"""The profiler's own cost (issue 53, point 3): a deliberately heavily traced model (tests/inflation_capture.py: a
layer of 150 tiny element-wise ops, a few thousand traced ops per training step), profiled by AdvisorCallback, whose
plain clock times the steps outside the window into tfadvisor_run.json ``clock``. The report's inflation (the trace's
median step over the clock's median unprofiled step) against the script's own clock (median step inside the window
over outside it)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CAPTURE_MARKS, ROOT, capture_env

import tfadvisor
from tfadvisor.analyses.throughput import EVENT_COST_US
from tfadvisor.io.runmeta import clock_facts

pytestmark = CAPTURE_MARKS


#: The script's own clock ratio a capture needs to be the inflated capture these tests are about, and the captures
#: taken at most to get one. On the quiet machine the ratio is 1.42-1.56 (2026-12-02, five captures, OPS 150 and 400);
#: in one CI run (2026-12-02) it was about 1.09, its unprofiled steps 2.3 ms against 1.4 quiet: something beside the
#: run slowed the steps outside the window. The report said so correctly (1.09, "as fast as outside"); what that
#: capture lacked was the premise, so it is taken again, not the assertions loosened.
PREMISE, ATTEMPTS = 1.2, 3


@pytest.fixture(scope="module")
def cap(tmp_path_factory) -> dict:
    for attempt in range(ATTEMPTS):
        out = tmp_path_factory.mktemp("inflation")
        p = subprocess.run([sys.executable, str(ROOT / "tests" / "inflation_capture.py"), str(out)],
                           env=capture_env(), capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        got = dict(json.loads((out / "clock.json").read_text()), attempts=attempt + 1)
        if got["ratio"] >= PREMISE:
            break
    return got


def test_run_file_holds_the_unprofiled_clock(cap):
    """Both sides of the window timed, each interval with its steps; the first step (tracing) left out."""
    md = json.loads((Path(cap["run_dir"]) / "tfadvisor_run.json").read_text())
    clock, notes = clock_facts(md)
    assert not notes
    # 70 steps, window 25-39: 24 before (step 0 left out), 30 after; inside, the window's 15 but the last (its interval
    # holds the profiler stopping and writing)
    assert len(clock["before"]["ms"]) == 24 and len(clock["after"]["ms"]) == 30
    assert len(clock["inside"]["ms"]) == 14
    assert set(clock["before"]["steps"]) == {1}
    assert clock["after"]["kind"] == [""] * 29 + ["epoch_end"]  # the last interval ends with fit: the epoch's end


def test_inflation_is_the_scripts_clock_ratio(cap):
    """The report's inflation within 15 % of the script's own clock ratio. Measured noise (9 captures on the shared
    2-core machine, 2026-12-02): report / script 0.96-1.03 at script ratios 1.25-2.73 under 3 other TF workers (6),
    0.99-1.00 at 1.37-1.50 after their load dropped (3)."""
    m = tfadvisor.analyze(cap["run_dir"]).metrics
    assert m["profiler_inflation_source"] == "clock"
    assert m["profiler_inflation"] == pytest.approx(cap["ratio"], rel=0.15), (m["profiler_inflation_text"], cap)
    assert m["profiler_inflation"] > 1.1, (m["profiler_inflation_text"], cap)
    assert "slower than outside" in m["profiler_inflation_text"] and "inflated" in m["profiler_inflation_text"]


def test_without_a_clock_the_inflation_is_an_estimate(cap, tmp_path):
    """The run file without its clock: an estimate, said as one, computed as documented (events x cost)."""
    run = tmp_path / "run"
    shutil.copytree(cap["run_dir"], run)
    md = json.loads((run / "tfadvisor_run.json").read_text())
    md.pop("clock")
    (run / "tfadvisor_run.json").write_text(json.dumps(md))
    m = tfadvisor.analyze(run).metrics
    assert m["profiler_inflation_source"] == "estimate" and m["profiler_inflation_text"].startswith("estimate:")
    step = m["step_time_median_ms"]
    cost = m["trace_events_per_step"] * EVENT_COST_US / 1000
    assert m["profiler_inflation"] == pytest.approx(step / max(step - cost, 0.1 * step))
    assert m["unprofiled_ms_per_step"] is None


def test_terminal_says_the_inflation(cap):
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", cap["run_dir"]], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "profiler steps inside the window" in text and "figures below are inflated" in text
    assert "unprofiled" in text and "throughput" in text
