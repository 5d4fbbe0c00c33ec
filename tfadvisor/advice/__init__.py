"""Advice: rules (TOML data in ``rules/``) evaluated over the analyses' metrics.

metrics -> :func:`evaluate` (with :func:`load_rules`) -> ordered :class:`Finding` list.
This package reads only metrics; it imports neither the reporters nor the API.
"""

from __future__ import annotations

from tfadvisor.advice.docs import explain_rule, list_rules_text, rule_dict
from tfadvisor.advice.engine import Finding, evaluate, evaluate_rule, severity_at_least
from tfadvisor.advice.expr import Expr, ExprError, Template
from tfadvisor.advice.rules import SEVERITIES, Rule, RuleError, builtin_rules_dir, load_file, load_rules


def __getattr__(name: str):
    if name == "KNOWN_METRICS":  # every declared metric name (tfadvisor.analyses.known_metrics), read when asked
        from tfadvisor.analyses import known_metrics

        return known_metrics()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "rule_dict",
    "Expr",
    "ExprError",
    "Finding",
    "KNOWN_METRICS",
    "Rule",
    "RuleError",
    "SEVERITIES",
    "Template",
    "builtin_rules_dir",
    "evaluate",
    "evaluate_rule",
    "explain_rule",
    "list_rules_text",
    "load_file",
    "load_rules",
    "severity_at_least",
]
