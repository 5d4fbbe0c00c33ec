"""The tool's view of a generated program against its ablation truth.

For each ablation key (``mapping.py`` says which of the tool's figures it is compared with):

* ``tool_ms`` against the measured ``truth_ms`` (full minus ablated, median of the interleaved runs): ``ok`` when
  within 25 % or 2 ms per step, whichever is larger (``mapping.tolerance_ms``); the runs' spread beside it;
* beside it, the same check against the fastest runs' difference (``truth_min_ms``, ``ok_min``: noise on a shared
  machine only adds time), a second reading of the same runs, not the score's;
* the first finding (the report's order) names the most costly ablated key (``first_hit``); counted only where that
  key costs at least the tolerance floor (2 ms per step), else ``None``;
* the first finding that names a key: its predicted gain (``impact_pct`` of the tool's step time) against the
  measured one (the key's cost over the full program's step time), in percentage points of the step.

    python benchmarks/ablation/compare.py DIR      # DIR holds truth.json and logdir (truth.py wrote them)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mapping  # noqa: E402

#: the calibration tolerance of a predicted gain (tests/test_calibration.py's max |error|), points of the step
GAIN_TOL_POINTS = 20.0


def tool_view(logdir: Path) -> dict[str, Any]:
    """What the tool says (tfadvisor.api): the components table, the parts, the findings in order."""
    from tfadvisor.api import analyze

    res = analyze(str(logdir))
    t = res.tables.get("components") if "components" in res.tables else None
    comps = [] if t is None else [
        {"component": str(c), "kind": str(k), "role": str(r), "ms_per_step": float(ms), "pct": float(p),
         "update_ms": float(u), "sgd_saves_ms": float(g)}
        for c, k, r, ms, p, u, g in zip(t["component"], t["kind"], t["role"], t["ms_per_step"], t["pct"],
                                        t["update_ms"], t["sgd_saves_ms"])]
    m = res.metrics
    keep = {k: m.get(k) for k in m.keys() if k.startswith(("attr_", "comp_", "step_time_", "outside_"))}
    keep = {k: v for k, v in keep.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    findings = [{"rule": f.rule, "node": f.node, "title": f.title, "message": f.message, "impact_pct": f.impact_pct,
                 "severity": f.severity} for f in res.findings]
    return {"components": comps, "metrics": keep, "findings": findings}


class _F:
    """A finding's fields as attributes (mapping.names reads them)."""

    def __init__(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)


def _columns(comps: list[dict[str, Any]]) -> dict[str, list]:
    keep = ("component", "kind", "ms_per_step", "update_ms", "sgd_saves_ms")
    return {c: [r.get(c, 0.0) for r in comps] for c in keep}


def compare(truth: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    """The comparison of one program (see the module's docstring)."""
    m = view["metrics"]
    cols = _columns(view["components"])
    step_ms = m.get("step_time_mean_ms") or float("nan")
    findings = [_F(f) for f in view["findings"]]
    rows = []
    for key, cost in truth["cost_ms"].items():
        tool = mapping.tool_ms(key, cols, m)
        tol = mapping.tolerance_ms(cost)
        named = next((i for i, f in enumerate(findings) if mapping.names(key, f, m)), None)
        row = {"key": key, "truth_ms": cost, "tool_ms": tool, "tol_ms": tol, "ok": abs(tool - cost) <= tol,
               "spread_pct": truth["spread_pct"].get(key), "named_by": named}
        runs = truth.get("variants_ms", {}).get(key)
        if runs and truth.get("full_runs_ms"):  # the timeit reading: noise only adds time, so the fastest runs
            low = min(truth["full_runs_ms"]) - min(runs)
            row.update(truth_min_ms=low, ok_min=abs(tool - low) <= mapping.tolerance_ms(low))
        if named is not None and findings[named].impact_pct is not None:
            pred = float(findings[named].impact_pct)
            meas = 100.0 * cost / truth["full_ms"]
            row.update(predicted_gain_pct=pred, measured_gain_pct=meas,
                       gain_ok=abs(pred - meas) <= GAIN_TOL_POINTS)
        rows.append(row)
    top = max(rows, key=lambda r: r["truth_ms"], default=None)
    first = findings[0] if findings else None
    if top is None or top["truth_ms"] < mapping.ABS_TOL_MS:
        hit = None  # nothing ablated costs enough to lead
    else:
        hit = first is not None and mapping.names(top["key"], first, m)
    return {
        "seed": truth["seed"],
        "full_ms": truth["full_ms"], "full_spread_pct": truth["full_spread_pct"], "tool_step_ms": step_ms,
        "rounds": truth.get("rounds", truth.get("repeats")), "other_cpu_pct": truth.get("other_cpu_pct"),
        "rows": rows,
        "largest": top["key"] if top else None,
        "first_finding": (f"{first.rule} [{first.node}] {first.title}" if first else "(none)"),
        "first_hit": hit,
    }


def compare_dir(d: Path) -> dict[str, Any]:
    truth = json.loads((d / "truth.json").read_text())
    return compare(truth, tool_view(d / "logdir"))


def main() -> None:
    p = argparse.ArgumentParser(description="Compare the tool's view of a generated program with its truth.")
    p.add_argument("dir", type=Path)
    a = p.parse_args()
    print(json.dumps(compare_dir(a.dir), indent=1, default=str))


if __name__ == "__main__":
    main()
