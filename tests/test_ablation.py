"""The tool against ablation truth on three generated programs (benchmarks/ablation, issue 56).

Each ``tests/data/ablation/<seed>/`` holds a program ``benchmarks/ablation/generate.py --seed <seed> --small`` wrote
(at commit b393c5f; the generator has changed its draws since, the stored ``program.py`` is the one measured),
its profile (one real capture: tfadvisor's Keras callback, or TF's step markers in a custom loop, TF defaults) and
its truth (``truth.py --repeats 5``: the full program and the program with each ablation key's components removed
or made cheap, timed interleaved by the program's own clock; a key's cost = median(full) - median(without it)).
No TensorFlow runs here: the tool reads the stored profile and ``benchmarks/ablation/compare.py`` compares. What the
keys map to in the tool's output is written once, in ``benchmarks/ablation/mapping.py``. Remeasure with
``python benchmarks/ablation/run.py --programs 1 --seed <seed> --small --repeats 5``.

Where the tool misses today the assert is ``xfail(strict=True)`` with the engine's reason: it starts failing when
the engine is fixed (then drop the mark).
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "ablation"
BENCH = ROOT / "benchmarks" / "ablation"


def _load(name: str):
    """A module of benchmarks/ablation under its own name (benchmarks/compare.py is another ``compare``)."""
    spec = importlib.util.spec_from_file_location(f"ablation_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


mapping = _load("mapping")
compare = _load("compare")

SEEDS = (1, 2, 3)
# The comparison's tolerance (issue 56): a component's ms per step within 25 % of the truth or 2 ms, whichever is
# larger. Measured noise beside it (the stored truth's runs, (max - min) / median of 5 interleaved runs on a shared
# 2-core machine): the full programs 25 %, 34 % and 29 % (seeds 1, 2, 3); the ablated variants 4-190 %; on a key of
# 2-6 ms that spread is 1-4 ms, which is why the floor is 2 ms.
TOL_REL = 0.25
TOL_ABS_MS = 2.0

#: today's misses, each with what it says about the engine (seed 1's metric and loss rows passed once the
#: attribution's ms per step counted training steps, not steps_per_execution markers)
CALLBACK_IN_MARKER = ("between_steps holds Keras's own loop after each train function call (its iterator checks, "
                      "about 1 ms per marker here) beside the callback's hooks, and the profiler's inflation (its "
                      "step 18.3 ms vs 16.8 unprofiled): tool 6.8 ms vs 4.2 measured by removing the callback")
ROW_XFAIL = {
    (1, "between_steps"): CALLBACK_IN_MARKER,
    (2, "layer"): ("the costly block's share of the matrix part, 0.7 ms, against 4.5 ms measured (the ablated runs' "
                   "spread 190 %: the truth is noisy here)"),
}
FIRST_XFAIL = {
    1: ("the time between steps (31.7 % of the step, recovered whole: rules/90_cost.toml) leads the loss (31.0 %) "
        "within a point; measured, the loss costs more (6.4 ms vs 4.2): the between-steps row over-reads ("
        + CALLBACK_IN_MARKER + ")"),
    2: "the first finding is component_optimizer (3.7 ms per step, measured 2.4); the costly layer (4.5 ms measured, "
       "0.7 by the tool) is not named first",
}


@pytest.fixture(scope="module")
def results() -> dict[int, dict]:
    return {s: compare.compare_dir(DATA / str(s)) for s in SEEDS}


def test_the_tolerance_is_the_benchmarks():
    assert (mapping.REL_TOL, mapping.ABS_TOL_MS) == (TOL_REL, TOL_ABS_MS)


@pytest.mark.parametrize("seed", SEEDS)
def test_stored_truth_is_the_runs_medians(seed):
    """A key's cost is median(full) - median(without it), its spread recorded; the program is the seed's."""
    t = json.loads((DATA / str(seed) / "truth.json").read_text())
    d = json.loads((DATA / str(seed) / "draw.json").read_text())
    assert t["seed"] == d["seed"] == seed and set(t["cost_ms"]) == set(d["ablations"])
    assert len(t["full_runs_ms"]) == t["repeats"] == 5
    for k, runs in t["variants_ms"].items():
        assert t["cost_ms"][k] == pytest.approx(statistics.median(t["full_runs_ms"]) - statistics.median(runs),
                                                rel=1e-12)
        assert t["spread_pct"][k] >= 0


def _row_cases():
    for s in SEEDS:
        for k in json.loads((DATA / str(s) / "truth.json").read_text())["cost_ms"]:
            why = ROW_XFAIL.get((s, k))
            yield pytest.param(s, k, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [],
                               id=f"{s}-{k}")


@pytest.mark.parametrize("seed, key", list(_row_cases()))
def test_component_cost_within_tolerance(results, seed, key):
    row = next(r for r in results[seed]["rows"] if r["key"] == key)
    assert abs(row["tool_ms"] - row["truth_ms"]) <= max(TOL_REL * abs(row["truth_ms"]), TOL_ABS_MS), row


@pytest.mark.parametrize("seed", [pytest.param(s, marks=[pytest.mark.xfail(strict=True, reason=FIRST_XFAIL[s])]
                                               if s in FIRST_XFAIL else []) for s in SEEDS])
def test_first_finding_names_the_largest_ablated_component(results, seed):
    r = results[seed]
    assert r["first_hit"] is True, (r["largest"], r["first_finding"])
