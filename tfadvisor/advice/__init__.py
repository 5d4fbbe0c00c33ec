"""Advice: rules (TOML data in ``rules/``) evaluated over the analyses' metrics.

metrics -> :func:`evaluate` (with :func:`load_rules`) -> ordered :class:`Finding` list.
This package reads only metrics; it imports neither the reporters nor the API.
"""

from __future__ import annotations

from tfadvisor.advice.docs import explain_rule, list_rules_text
from tfadvisor.advice.engine import Finding, evaluate, evaluate_rule, severity_at_least
from tfadvisor.advice.expr import Expr, ExprError, Template
from tfadvisor.advice.metrics import KNOWN_METRICS
from tfadvisor.advice.rules import SEVERITIES, Rule, RuleError, builtin_rules_dir, load_file, load_rules

__all__ = [
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
