"""A finding never prints a number it does not have: no "unknown ms", "unknown %" or "nan" in any
finding of any sample, in its own text or in the reports that show it; a message template's
optional part (``[[...]]``) is left out when one of its values is unknown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import analysed

import tfadvisor
from tfadvisor.advice.expr import ExprError, Template
from tfadvisor.errors import TraceError
from tfadvisor.report.markdown import render_markdown

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
#: "unknown" standing for a number (followed by a unit), and NaN / infinity written out.
BAD = re.compile(r"unknown\s*(?:ms|µs|us|s|%|x|B|KiB|MiB|GiB|GB/s|files|steps)\b|\bnan\b|\binf\b", re.I)


#: Samples that are bad input on purpose: they must fail to load (and are checked to), never pass by it.
BAD_INPUT = ("bad_input",)


def _runs() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if p.is_dir() and any(p.rglob("*.xplane.pb"))
                  and p.name not in BAD_INPUT)


def test_bad_input_samples_fail_to_load():
    for name in BAD_INPUT:
        with pytest.raises(TraceError):
            tfadvisor.analyze(SAMPLES / name / "tpu_inference_2_mangled")


@pytest.mark.parametrize("sample", [p.name for p in _runs()])
def test_no_finding_prints_an_unknown_number(sample):
    result = analysed(SAMPLES / sample)  # a sample that stops loading fails here
    for f in result.findings:
        for part in ("title", "message", "fix"):
            text = getattr(f, part)
            assert not BAD.search(text), (f.rule, part, text)
    md = render_markdown(result)
    findings = md.split("## Findings", 1)[-1].split("\n## ", 1)[0]
    assert not BAD.search(findings), BAD.search(findings)


def test_optional_part_is_left_out_when_a_value_is_unknown():
    t = Template("map at {us:.0f} µs[[; about {ms:.1f} ms per step ({pct:.0f} % of step time) to gain]].")
    full = "map at 12 µs; about 3.2 ms per step (7 % of step time) to gain."
    assert t.render({"us": 12, "ms": 3.25, "pct": 7}) == full
    assert t.render({"us": 12, "ms": 3.25, "pct": None}) == "map at 12 µs."
    assert t.render({"us": 12, "ms": float("nan"), "pct": 7}) == "map at 12 µs."
    assert t.render({"us": None, "ms": 1, "pct": 1}).startswith("map at unknown µs;")  # outside: as before
    assert sorted(n for n, _ in t.names()) == ["ms", "pct", "us"]
    with pytest.raises(ExprError):
        Template("a [[{x]] b")


def test_every_gain_clause_of_the_rules_is_optional():
    """The rules' "about X ms per step (Y %) to gain" clauses all sit in optional parts."""
    from tfadvisor.advice import load_rules

    for rule in load_rules():
        for msg in [rule.message] + [c.message for c in rule.cases if c.message]:
            text = "".join(p for p in msg.parts if isinstance(p, str))
            assert "to gain" not in text, rule.id
