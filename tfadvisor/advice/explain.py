"""The cost tree proposes, the rules explain: one finding per part of the wall time, caveats instead of gates.

The attribution splits the run's wall time into parts (``attr_<part>_pct``: device work by op category, input,
between steps, runtime, host ops, Python, idle, outside the steps). A rule that declares ``explains =
"part.<part>[.<cause>...]"`` explains that part; a ``generic`` one explains it when nothing more specific holds
(the generic rules fire on every part of at least :data:`NODE_MIN_PCT` % of the wall time, so a large part is never
silent). Of the findings that explain one part, the most specific of the most severe leads: the severity its rule
gave says how sure it is (a tf.data cause the analysis named is critical, a condition of the pipeline it did not
name stays info, beneath the input wait itself); then the deepest ``explains``, the larger impact, the rules'
order. The others fold into it as ``also`` (two fixes for one cost are one finding), a generic one is dropped,
and the winner takes the highest severity among them.

Conditions that make a verdict uncertain (:data:`CAVEATS`: a window that is not steady state, a tf.data cache
still being written, a competing load) never remove a finding: each is a caveat on the findings it touches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfadvisor.advice.expr import Expr, Template
from tfadvisor.advice.rules import SEVERITY_RANK, Rule

#: A part of at least this share of the wall time is a node that gets a finding (the generic rules' threshold).
NODE_MIN_PCT = 10.0


@dataclass(frozen=True)
class Caveat:
    """A condition of the capture that makes findings uncertain: when it holds (``when``), ``text`` is said on
    the findings of the parts in ``parts`` (every finding when empty) but those of the rules that report the
    condition itself (``own``)."""

    id: str
    label: str  # a few words, for each finding it touches
    when: str
    text: str  # the whole condition, said once at the top of a report
    parts: tuple[str, ...] = ()
    own: tuple[str, ...] = ()

    def holds(self, metrics: Mapping[str, Any]) -> bool:
        return Expr(self.when).test(metrics)

    def render(self, metrics: Mapping[str, Any]) -> str:
        return Template(self.text).render(metrics)


CAVEATS = (
    Caveat("not_steady", "window not steady state", "capture_steady_state == false",
           "the window is not steady-state training ({capture_issues}): its figures may not hold for the rest of "
           "the run", own=("capture_not_steady_state", "capture_no_steps", "phase_cache_fill")),
    Caveat("cache_fill", "tf.data cache being written", "capture_phase == 'cache_fill'",
           "a tf.data cache is still being written in this window: the input pipeline's cost here is the first "
           "pass's, later passes read the cache", parts=("input",), own=("phase_cache_fill",)),
    Caveat("competing_load", "competing load", "system_other_cpu_pct >= 20",
           "other processes used {system_other_cpu_pct:.0f} % of the CPU during the capture: times may be "
           "inflated by them", own=("system_competing_load",)),
)


def explain(hits: list[tuple[Any, int]], rules: Mapping[str, Rule],
            metrics: Mapping[str, Any]) -> list[tuple[Any, int]]:
    """One finding per part explained: ``hits`` (finding, rule position) with the findings that explain the same
    part folded into the most specific, generic ones dropped where a specific one holds; then the caveats."""
    by_part: dict[str, list[tuple[Any, int]]] = {}
    out: list[tuple[Any, int]] = []
    for f, i in hits:
        part = rules[f.rule].part(metrics)
        if part:
            f.node = part
            by_part.setdefault(part, []).append((f, i))
        else:
            out.append((f, i))
    for part, group in by_part.items():
        group.sort(key=lambda fi: (rules[fi[0].rule].generic, -SEVERITY_RANK.get(fi[0].severity, 0),
                                   -rules[fi[0].rule].depth, -(fi[0].impact_pct or 0.0), fi[1]))
        (win, pos), rest = group[0], group[1:]
        for f, _ in rest:
            if rules[f.rule].generic:
                continue
            win.also.append({"rule": f.rule, "severity": f.severity, "title": f.title, "message": f.message,
                             "impact_pct": f.impact_pct, "evidence": dict(f.evidence), "fix": f.fix})
            if SEVERITY_RANK.get(f.severity, 0) > SEVERITY_RANK.get(win.severity, 0):
                win.severity = f.severity
            for attr in ("marks", "plots", "lanes"):  # what the folded explanations point at, the finding shows
                setattr(win, attr, list(dict.fromkeys(getattr(win, attr) + getattr(f, attr))))
        if win.impact_pct is None:  # what is at stake: the part's cost as the folded explanations measured it
            win.impact_pct = max((a["impact_pct"] for a in win.also if a["impact_pct"] is not None), default=None)
        win.node_pct = _number(metrics.get(f"attr_{part}_pct"))
        for name in (f"attr_{part}_pct", f"attr_{part}_ms", f"comp_{part}_top"):  # the part, in the program's words
            v = metrics.get(name)
            if v is not None and v == v and name not in win.evidence:
                win.evidence[name] = v
        out.append((win, pos))
    for c in CAVEATS:
        if not c.holds(metrics):
            continue
        said = {"id": c.id, "label": c.label, "text": c.render(metrics)}
        for f, _ in out:
            if f.rule not in c.own and (not c.parts or f.node in c.parts):
                f.caveats.append(dict(said))
    return out


def _number(v: Any) -> float | None:
    return round(float(v), 2) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


__all__ = ["CAVEATS", "NODE_MIN_PCT", "Caveat", "explain"]
