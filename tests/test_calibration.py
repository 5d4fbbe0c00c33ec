"""Calibrated "to gain" (issue 52, point 5): every fix twin in ``sample_traces/`` checks the figure the report
promises against the gain its fix was measured to bring.

**The prediction** is the ``impact_pct`` of the finding that carries the rule whose fix the twin applied (the
problem's ``[findings] top``; the first finding where a sample names none): the one figure the report prints
beside that finding, "about X % of time at stake" in the text report (``impact_pct`` in JSON, the figure that
orders the findings). Where that rule is folded into another rule's finding (``finding.also``) the figure shown
is the leading finding's, so that is the prediction; the folded entry's own figure is printed beside it for
diagnosis only. A rule that did not fire (or a finding with no figure) promised nothing: 0 %.

**The measured gain** is ``[truth] planted_cost_pct`` of the problem's ``expected.toml`` (``measured.json``
``pair``): the capture script's own mean step time, problem minus twin, as a % of the problem's mean step time,
on the same clock the pair's steps were timed with (``step_clock``). ``impact_pct`` is a share of the same step
time (the attribution's basis is the steps' wall time), so the two are in the same unit: points of the
problem's step time.

Run ``pytest tests/test_calibration.py -s`` (or ``-rP``) to see the table: sample, rule, predicted %, measured %,
error in points, and what the twin's own report says of the same rule.
"""

from __future__ import annotations

import json
import statistics
from functools import cache

import pytest
from conftest import SAMPLES, analysed, expected, sample_dirs

PAIRS = sorted((p.name, expected(p)["fixed_by"]) for p in sample_dirs()
               if "fixed_by" in expected(p) and (SAMPLES / expected(p)["fixed_by"] / "expected.toml").exists())

# The bar (issue 52, point 5): median absolute error <= 8 points, max <= 20 points of the problem's step
# time. Measured on the 26 pairs: median 6.4 points, max 15.4 (gpu_jax_mlp_fp32's TF32 -> bfloat16, where the
# halved matrix time the rule assumes was 2.4x faster and the bfloat16 fusions and host waits shrank too);
# before the fully-eager and CPU-bfloat16 cases of eager_execution and compute_bound_matrix: median 7.1, max 22.0.
TOL_MEDIAN_ERR_POINTS = 8.0
TOL_MAX_ERR_POINTS = 20.0  # the bar; measured max 15.4 points (see above)
#: A twin's own figure for the fixed rule above this share of its step is listed as "still large" in the table.
TWIN_LARGE_PCT = 10.0


def findings(name: str) -> list:
    return analysed(SAMPLES / name).findings


def carrier(fs: list, rule: str):
    """The finding that shows ``rule``: the one it leads, or the one it is folded into (and the folded entry)."""
    for f in fs:
        if f.rule == rule:
            return f, None
        for a in f.also:
            if a.get("rule") == rule:
                return f, a
    return None, None


@cache
def row(problem: str, twin: str) -> dict:
    exp = expected(SAMPLES / problem)
    fs = findings(problem)
    rule = exp.get("findings", {}).get("top") or (fs[0].rule if fs else "")
    f, folded = carrier(fs, rule)
    shown = f.impact_pct if f is not None else None
    measured = float(exp["truth"]["planted_cost_pct"])
    pair = json.loads((SAMPLES / problem / "measured.json").read_text())["pair"]
    # both written to 0.1 (rounding: 0.05)
    assert pair["twin"] == twin and pair["planted_cost_pct"] == pytest.approx(measured, abs=0.05), pair
    tf, _ = carrier(findings(twin), rule)
    return {"problem": problem, "rule": rule, "lead": f.rule if f is not None else "-",
            "folded_pct": folded.get("impact_pct") if folded else None,
            "predicted": float(shown) if shown is not None else 0.0, "shown": shown, "measured": measured,
            "error": abs((float(shown) if shown is not None else 0.0) - measured),
            "twin_pct": tf.impact_pct if tf is not None else None}


def _pct(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def table(rows: list[dict]) -> str:
    head = ("sample", "rule", "predicted %", "measured %", "error pts", "shown by", "folded %", "twin %")
    body = [(r["problem"], r["rule"], _pct(r["shown"]), _pct(r["measured"]), f"{r['error']:.1f}",
             r["lead"] if r["lead"] != r["rule"] else "", _pct(r["folded_pct"]),
             _pct(r["twin_pct"]) + (" still large" if (r["twin_pct"] or 0) > TWIN_LARGE_PCT else ""))
            for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    fmt = "  ".join(f"{{:{'<' if i < 2 else '>'}{w}}}" for i, w in enumerate(widths))
    errs = [r["error"] for r in rows]
    return "\n".join([fmt.format(*head), *(fmt.format(*b) for b in body),
                      f"{len(rows)} pairs: median |error| {statistics.median(errs):.1f} points, max {max(errs):.1f} "
                      f"({max(rows, key=lambda r: r['error'])['problem']})"])


def test_pairs_to_calibrate():
    """Every fix twin takes part: the pairs are those of the closed loop (tests/test_closed_loop.py)."""
    assert len(PAIRS) >= 20, PAIRS


def test_predicted_gain_is_the_measured_one():
    """Predicted against measured gain over every fix twin: median absolute error <= 8 points, max <= 20."""
    rows = [row(p, t) for p, t in PAIRS]
    text = table(rows)
    print("\n" + text)
    errs = [r["error"] for r in rows]
    assert statistics.median(errs) <= TOL_MEDIAN_ERR_POINTS, text
    assert max(errs) <= TOL_MAX_ERR_POINTS, text


@pytest.mark.parametrize("problem,twin", [pytest.param(p, t, id=p) for p, t in PAIRS])
def test_rule_fires_on_the_problem(problem, twin):
    """The prediction is a figure the report shows: the fixed rule's finding is there, with its figure."""
    r = row(problem, twin)
    assert r["lead"] != "-" and r["shown"] is not None, r
