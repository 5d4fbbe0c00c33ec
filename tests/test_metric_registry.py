"""Metrics are declared once, in the module that produces them: the analyses refuse undeclared
names, rules are checked against the declarations, and the analyses README is generated from them."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest

from tfadvisor.advice import RuleError, load_rules
from tfadvisor.analyses import metric_registry
from tfadvisor.analyses.base import AnalysisResult, UndeclaredMetric, declare

ROOT = Path(__file__).resolve().parent.parent


def test_readme_is_generated_from_the_declarations():
    from tfadvisor.analyses.docs import render

    committed = (ROOT / "tfadvisor" / "analyses" / "README.md").read_text(encoding="utf-8")
    assert committed == render(), "run: python -m tfadvisor.analyses.docs > tfadvisor/analyses/README.md"


def test_rules_readme_is_generated_from_the_rules():
    """rules/README.md: the rule format, then every built-in rule from its own declaration (as ruff's rule pages)."""
    from tfadvisor.advice.readme import render_readme

    committed = (ROOT / "rules" / "README.md").read_text(encoding="utf-8")
    text = render_readme(load_rules())
    assert committed == text, "run: python -m tfadvisor.advice.readme > rules/README.md"
    assert all(f"### {r.id}\n" in text for r in load_rules())


def test_names_are_unique_across_producers():
    counts = Counter(n for d in metric_registry().values() for n in d.names())
    assert not [n for n, k in counts.items() if k > 1]


def test_every_declared_metric_has_a_meaning():
    for source, decl in metric_registry().items():
        for m in decl.metrics:
            assert m.doc.strip(), f"{source}: {m.name} has no doc"


def test_add_refuses_an_undeclared_name_and_takes_unit_and_text_from_the_declaration():
    declare("test_registry_source", ("known_pct", "%", "a declared metric"))
    res = AnalysisResult("test_registry_source")
    res.add("known_pct", 1.5)
    assert res.metrics["known_pct"].unit == "%" and res.metrics["known_pct"].doc == "a declared metric"
    with pytest.raises(UndeclaredMetric, match="typo_pct"):
        res.add("typo_pct", 1.0)
    res.add("known_pct", 2.0, doc="refined for this run")
    assert res.metrics["known_pct"].unit == "%" and res.metrics["known_pct"].doc == "refined for this run"
    with pytest.raises(UndeclaredMetric):
        res.missing(["typo_pct"], "why")
    res.missing(["known_pct"], "why")
    with pytest.raises(UndeclaredMetric, match="no metric declarations"):
        AnalysisResult("no_such_source").add("x", 1)


def test_datafiles_results_use_the_declarations():
    import numpy as np

    import tfadvisor.analyses.datafiles as mod

    res = mod.summarise(np.array([10, 2_000_000, 3_000_000_000], dtype=np.int64), "x")
    assert set(res.metrics) <= set(metric_registry()["datafiles"].names())


def test_a_rule_naming_an_undeclared_metric_is_rejected(tmp_path):
    d = tmp_path / "rules"
    d.mkdir()
    (d / "mine.toml").write_text(textwrap.dedent('''
        [[rule]]
        id = "mine"
        title = "t"
        severity = "info"
        when = "input_pct > 5 and not_a_metric_pct > 1"
        message = "m"
        fix = "f"
        ''').lstrip(), encoding="utf-8")
    with pytest.raises(RuleError) as info:
        load_rules([d])
    text = str(info.value)
    assert "mine.toml" in text and "'not_a_metric_pct'" in text and "unknown metric" in text
