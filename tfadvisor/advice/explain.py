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

Conditions that make a verdict uncertain (:data:`tfadvisor.advice.caveats.CAVEATS`: a window that is not steady
state, a tf.data cache still being written, a competing load) never remove a finding: each is a caveat on the
findings it touches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfadvisor.advice.caveats import CAVEATS
from tfadvisor.advice.rules import SEVERITY_RANK, Rule

#: A part of at least this share of the wall time is a node that gets a finding (the generic rules' threshold).
NODE_MIN_PCT = 10.0
#: Parts whose causes are separate stretches of time, each a node of its own (``part.outside_steps.evaluation``,
#: ``.checkpoint``, ``.epoch_end``), with the metrics that measure the part (its share of the throughput window, ms
#: per training step) where the attribution's (a share of the steps' own wall time) leaves it out.
SEPARATE_CAUSES = {"outside_steps": ("outside_pct", "outside_ms_per_step")}


def node_of(rule: Rule, metrics: Mapping[str, Any]) -> tuple[str, str]:
    """(part, component kind) a rule explains: ``part.{comp_metric_part}.component.metric`` -> (``elementwise``,
    ``metric``); a rule that explains no part of the program ``(part, "")``."""
    rest = rule.explains.split(".")[2:]
    part = rule.part(metrics)
    if part in SEPARATE_CAUSES and rest:
        return part, rest[0]
    return part, (rest[1] if len(rest) > 1 and rest[0] == "component" else "")


def _part_metrics(part: str) -> tuple[str, str]:
    """The metrics of a part's share of the wall time and its ms per step."""
    return SEPARATE_CAUSES.get(part, (f"attr_{part}_pct", f"attr_{part}_ms"))


def explain(hits: list[tuple[Any, int]], rules: Mapping[str, Rule],
            metrics: Mapping[str, Any]) -> list[tuple[Any, int]]:
    """One finding per node explained: ``hits`` (finding, rule position) with the findings that explain the same
    node folded into the most specific, generic ones dropped where a specific one holds; then the caveats.

    A node is a part of the wall time, or a part of the program in it (a metric, the optimizer, the loss: rules
    that explain ``part.<part>.component.<kind>``). Where the program's parts that have findings hold at least
    half of a part, the part's own finding folds into the largest of them: the cost is theirs, told once."""
    by_node: dict[tuple[str, str], list[tuple[Any, int]]] = {}
    out: list[tuple[Any, int]] = []
    for f, i in hits:
        node = node_of(rules[f.rule], metrics)
        if node[0]:
            f.node = node[0]
            by_node.setdefault(node, []).append((f, i))
        else:
            out.append((f, i))
    winners: dict[tuple[str, str], tuple[Any, int]] = {}
    for node, group in by_node.items():
        group.sort(key=lambda fi: (rules[fi[0].rule].generic, -SEVERITY_RANK.get(fi[0].severity, 0),
                                   -rules[fi[0].rule].depth, -(fi[0].impact_pct or 0.0), fi[1]))
        win = group[0][0]
        for f, _ in group[1:]:
            _fold(win, f, rules)
        winners[node] = group[0]
    for (part, kind), (f, _) in list(winners.items()):
        if kind or (part, kind) not in winners:
            continue
        parts = sorted((winners[n][0] for n in winners if n[0] == part and n[1]),
                       key=lambda w: -(w.impact_pct or 0.0))
        held = sum(w.impact_pct or 0.0 for w in parts)
        if parts and held >= 0.5 * (_number(metrics.get(_part_metrics(part)[0])) or 0.0):
            if not rules[f.rule].generic:
                _fold(parts[0], f, rules)
            del winners[(part, kind)]
    for (part, _), (win, pos) in winners.items():
        if win.impact_pct is None:  # what is at stake: the part's cost as the folded explanations measured it
            win.impact_pct = max((a["impact_pct"] for a in win.also if a["impact_pct"] is not None), default=None)
        win.node_pct = _number(metrics.get(_part_metrics(part)[0]))
        for name in (*_part_metrics(part), f"comp_{part}_top"):  # the part, in the program's words
            v = metrics.get(name)
            if v is not None and v == v and name not in win.evidence:
                win.evidence[name] = v
        out.append((win, pos))
    for c in CAVEATS:
        if not c.holds(metrics):
            continue
        said = {"id": c.id, "label": c.label, "text": c.render(metrics)}
        for f, _ in out:
            if c.id not in rules[f.rule].reports and (not c.parts or f.node in c.parts):
                f.caveats.append(dict(said))
    return out


def _fold(win: Any, f: Any, rules: Mapping[str, Rule]) -> None:
    """``f`` told as part of ``win``: as one of its ``also`` (a generic one dropped), its severity if higher, what
    it points at."""
    if rules[f.rule].generic:
        return
    win.also.append({"rule": f.rule, "severity": f.severity, "title": f.title, "message": f.message,
                     "impact_pct": f.impact_pct, "evidence": dict(f.evidence), "fix": f.fix})
    if SEVERITY_RANK.get(f.severity, 0) > SEVERITY_RANK.get(win.severity, 0):
        win.severity = f.severity
    for attr in ("marks", "plots", "lanes"):  # what the folded explanations point at, the finding shows
        setattr(win, attr, list(dict.fromkeys(getattr(win, attr) + getattr(f, attr))))


def _number(v: Any) -> float | None:
    return round(float(v), 2) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


__all__ = ["CAVEATS", "NODE_MIN_PCT", "SEPARATE_CAUSES", "explain", "node_of"]
