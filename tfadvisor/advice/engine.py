"""Evaluate rules over metrics: ``evaluate(metrics, rules) -> list[Finding]``, most important first."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tfadvisor.advice.expr import ExprError
from tfadvisor.advice.rules import (
    FIX_PLACEHOLDER,
    FIX_SECTION,
    SEVERITIES,
    SEVERITY_RANK,
    Rule,
    RuleError,
    expr_problem,
)
from tfadvisor.units import finite_number


@dataclass
class Finding:
    """One problem found: what, how bad, the evidence, and the change to make."""

    rule: str
    severity: str  # critical | warning | info
    title: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)  # metric -> value (known values only)
    impact_pct: float | None = None  # share of step/wall time at stake, %
    fix: str = ""
    docs: list[str] = field(default_factory=list)  # URLs
    why: str = ""
    marks: list[str] = field(default_factory=list)  # what it marks in the trace (its rule's marks)
    scope: str = "run"  # whose spans: run, none, host:<metric> (its rule's scope)
    plots: list[str] = field(default_factory=list)  # the plots that show its evidence (its rule's plots)
    lanes: list[str] = field(default_factory=list)  # the timeline lanes it lights up (its rule's lanes)
    node: str = ""  # the part of the wall time it explains (tfadvisor.advice.explain), "" for none
    node_pct: float | None = None  # that part's share of the wall time, %
    also: list[dict[str, Any]] = field(default_factory=list)  # findings of the same part folded into this one
    caveats: list[dict[str, str]] = field(default_factory=list)  # conditions that make it uncertain: id, label, text

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": self.title,
            "message": self.message,
            "impact_pct": self.impact_pct,
            "evidence": dict(self.evidence),
            "fix": self.fix,
            "why": self.why,
            "docs": list(self.docs),
            "marks": list(self.marks),
            "scope": self.scope,
            "plots": list(self.plots),
            "lanes": list(self.lanes),
            "node": self.node,
            "node_pct": self.node_pct,
            "also": [dict(a) for a in self.also],
            "caveats": [dict(c) for c in self.caveats],
        }


def severity_at_least(severity: str, threshold: str) -> bool:
    """``severity_at_least('critical', 'warning')`` is True; unknown names rank lowest."""
    if threshold not in SEVERITY_RANK:
        raise ValueError(f"unknown severity {threshold!r}; one of {', '.join(SEVERITIES)}")
    return SEVERITY_RANK.get(severity, 0) >= SEVERITY_RANK[threshold]


def evaluate_rule(rule: Rule, metrics: Mapping[str, Any]) -> Finding | None:
    """The finding ``rule`` gives on ``metrics``, or None when its condition does not hold."""

    def fail(err: ExprError, what: str, line: int | None) -> RuleError:
        problem, detail = expr_problem(err)
        return RuleError(rule.path, line or rule.line, f"rule {rule.id!r}: {what}: {problem}", rule.id, detail)

    try:
        fires = rule.when.test(metrics)
    except ExprError as err:
        raise fail(err, "when", rule.line) from None
    if not fires:
        return None
    severity, title, message, impact, fix, evidence = (rule.severity, rule.title, rule.message, rule.impact,
                                                       rule.fix, rule.evidence)
    for j, case in enumerate(rule.cases):
        try:
            hit = case.when.test(metrics)
        except ExprError as err:
            raise fail(err, f"case {j + 1}: when", case.line) from None
        if hit:
            severity = case.severity or severity
            title = case.title or title
            message = case.message or message
            impact = case.impact or impact
            fix = case.fix or fix
            evidence = case.evidence if case.evidence is not None else evidence
            break
    try:
        impact_pct = finite_number(impact.evaluate(metrics)) if impact is not None else None
    except ExprError as err:
        raise fail(err, "impact", rule.line) from None
    if impact_pct is not None:
        impact_pct = round(max(0.0, min(100.0, impact_pct)), 2)
    try:
        text = message.render(metrics)
    except ExprError as err:
        raise fail(err, "message", rule.line) from None
    ev = {}
    for name in evidence:
        v = metrics.get(name)
        if hasattr(v, "item") and getattr(v, "shape", None) == ():
            v = v.item()
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        ev[name] = v
    return Finding(rule=rule.id, severity=severity, title=title, message=text, evidence=ev, impact_pct=impact_pct,
                   fix=fill_fix(fix, metrics), docs=[d.url for d in rule.docs], why=rule.why,
                   marks=list(rule.marks), scope=rule.scope, plots=list(rule.plots), lanes=list(rule.lanes))


def _known(v: Any) -> bool:
    return not (v is None or (isinstance(v, float) and math.isnan(v)) or v == "")


def fill_fix(fix: str, metrics: Mapping[str, Any]) -> str:
    """Put the run's own figures into a fix: ``{{name}}`` -> the metric's value (``<name>`` if unknown);
    ``[[if name: ...]]`` / ``[[unless name: ...]]`` kept when the metric is known / unknown."""

    def section(m: re.Match) -> str:
        known = _known(metrics.get(m.group(2)))
        return m.group(3) if known == (m.group(1) == "if") else ""

    def value(m: re.Match) -> str:
        v = metrics.get(m.group(1))
        if not _known(v):
            return f"<{m.group(1)}>"
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    text = FIX_SECTION.sub(section, fix)
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    return FIX_PLACEHOLDER.sub(value, text)


#: What a generic explanation is expected to recover of its part unless its rule says (``recovers``): its figure is
#: the size of a part nothing explained, not a gain a fix was shown to bring (the design's "node ms x recovers", a
#: stated estimate): half of it. A specific explanation's impact is its gain already (1 unless its rule says).
GENERIC_RECOVERS = 0.5


def expected_gain(f: Finding, rule: Rule | None = None) -> float:
    """What a finding is expected to recover, % of the wall time: its impact times its rule's ``recovers`` (a generic
    rule's default :data:`GENERIC_RECOVERS`); unknown: -1 (last)."""
    if f.impact_pct is None:
        return -1.0
    if rule is None or rule.recovers is None:
        return f.impact_pct * (GENERIC_RECOVERS if rule is not None and rule.generic else 1.0)
    return f.impact_pct * rule.recovers


def sort_key(f: Finding, position: int = 0, rule: Rule | None = None) -> tuple:
    """Severity (critical first), then the expected gain (largest first; unknown last), then rule order."""
    return (-SEVERITY_RANK.get(f.severity, 0), -expected_gain(f, rule), position)


def evaluate(metrics: Mapping[str, Any], rules: list[Rule]) -> list[Finding]:
    """Every rule whose condition holds, one finding per part of the wall time explained
    (:func:`tfadvisor.advice.explain.explain`: the most specific explanation, the others folded into it, caveats
    attached), ordered by severity (critical first), then what each is expected to recover (:func:`expected_gain`:
    its impact times what its rule says its fix recovers; a generic part's by default at half), largest first.

    Ties keep the order of the rules (files by name, tables in file order), so the cheaper
    fix of a group comes first (prefetch before re-sharding the data).
    """
    from tfadvisor.advice.explain import explain

    by_id = {r.id: r for r in rules}
    hits = [(f, i) for i, f in enumerate(evaluate_rule(r, metrics) for r in rules) if f is not None]
    hits = explain(hits, by_id, metrics)
    hits.sort(key=lambda fi: sort_key(*fi, rule=by_id[fi[0].rule]))
    return [f for f, _ in hits]


__all__ = ["GENERIC_RECOVERS", "Finding", "evaluate", "evaluate_rule", "expected_gain", "severity_at_least",
           "sort_key"]
