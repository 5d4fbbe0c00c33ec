"""On every captured problem sample of the tf.data and time/structure pairs (``tfdata_*``, ``steps_*``,
``phase_*``, ``pipe_*``) whose twin closed the loop, the first finding names the planted cause with a
magnitude within 25 % of the measured cost (problem mean step - twin mean step, measured.json's
``pair``), and the twin gets no finding that undoes the problem's fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomllib

import tfadvisor

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
PAIRS = sorted(d.name for pattern in ("tfdata_*", "steps_*", "phase_*", "pipe_*") for d in SAMPLES.glob(pattern)
               if (d / "expected.toml").exists() and tomllib.loads((d / "expected.toml").read_text()).get("fixed_by"))
#: The figure each cause's finding gives for what its fix saves per step, first found wins.
MAGNITUDES = ("tfdata_cause_ms_per_step", "tfdata_contention_ms_per_step", "periodic_ms_per_step",
              "tfdata_iterator_cost_ms_per_step", "tfdata_filter_waste_ms_per_step", "numpy_feed_ms_per_step",
              "work_excess_ms_per_step",
              "tfdata_cost_ms_per_step")
#: what each cause's fix undoes: a finding on the twin must not advise it again
UNDONE = {"tfdata_sequential_reads": "num_parallel_reads", "tfdata_sequential_map": "num_parallel_calls=None"}


def _magnitude_ms(f) -> float | None:
    return next((f.evidence[k] for k in MAGNITUDES if f.evidence.get(k) is not None), None)


@pytest.mark.parametrize("name", PAIRS)
def test_first_finding_and_magnitude(name):
    exp = tomllib.loads((SAMPLES / name / "expected.toml").read_text())
    pair = json.loads((SAMPLES / name / "measured.json").read_text())["pair"]
    res = tfadvisor.analyze(SAMPLES / name)
    top = res.findings[0]
    assert top.rule == exp["findings"]["top"], [f.rule for f in res.findings]
    got, want = _magnitude_ms(top), pair["planted_cost_ms"]
    assert got is not None and abs(got - want) <= 0.25 * want, f"{name}: {got:.2f} ms vs measured {want:.2f} ms"


@pytest.mark.parametrize("name", PAIRS)
def test_twin_not_advised_back(name):
    exp = tomllib.loads((SAMPLES / name / "expected.toml").read_text())
    twin = tfadvisor.analyze(SAMPLES / exp["fixed_by"])
    rules = {f.rule for f in twin.findings}
    assert exp["findings"]["top"] not in rules
    undo = UNDONE.get(exp["findings"]["top"])
    for f in twin.findings:
        assert not undo or undo not in (f.fix or "")
