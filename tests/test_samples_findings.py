"""The rules on the sample traces: each sample's expected.toml says which finding must come
first (``top`` or one of ``top_any``), which must fire (``present``: a finding of its own, or folded into
another finding of the same cost as ``also``) and which must not (``absent``). The expected files are the
planted truth; rules are tuned to them, never the other way round.
"""

from __future__ import annotations

import pytest
from conftest import analysed, expected, sample_dirs

SAMPLES = [p for p in sample_dirs() if "findings" in expected(p)]


def _describe(result) -> str:
    rows = [f"  {f.severity:<8} {f.rule:<24} impact={f.impact_pct}  {f.message}"
            + "".join(f"\n    also {a['rule']}" for a in f.also) for f in result.findings]
    return "findings:\n" + ("\n".join(rows) or "  (none)")


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_findings(sample):
    want = expected(sample)["findings"]
    result = analysed(sample)
    ids = [f.rule for f in result.findings]
    fired = ids + [a["rule"] for f in result.findings for a in f.also]  # a rule folded into another's finding fired
    problems = []
    if want.get("top"):
        if not ids or ids[0] != want["top"]:
            problems.append(f"top finding should be {want['top']!r}, got {ids[:1]}")
    if want.get("top_any"):
        if not ids or ids[0] not in want["top_any"]:
            problems.append(f"top finding should be one of {want['top_any']}, got {ids[:1]}")
    for rid in want.get("present", []):
        if rid not in fired:
            problems.append(f"{rid!r} should fire")
    for rid in want.get("absent", []):
        if rid in fired:
            problems.append(f"{rid!r} must not fire")
    assert not problems, f"{sample.name}: " + "; ".join(problems) + "\n" + _describe(result)


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.name for p in SAMPLES])
def test_sample_findings_are_actionable(sample):
    result = analysed(sample)
    for f in result.findings:
        assert f.message and "```" in f.fix and f.docs, f.rule
        assert f.evidence, f"{f.rule}: no evidence on {sample.name}"
