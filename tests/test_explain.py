"""The cost tree proposes, the rules explain (tfadvisor.advice.explain): every part of the wall time of at least
10 % gets a finding, the findings of one part are one finding (the most specific, the others folded into it), and
conditions that make a verdict uncertain are caveats, never gates."""

from __future__ import annotations

import re

import pytest
from conftest import analysed, trace_dirs
from outputs import target_name

from tfadvisor.advice import evaluate, load_rules
from tfadvisor.advice.explain import NODE_MIN_PCT
from tfadvisor.analyses.attribution import PARTS

#: Advice to run more in parallel: more tf.data calls or reads, more threads.
MORE_PARALLELISM = re.compile(r"num_parallel_calls|num_parallel_reads|cycle_length|set_(?:intra|inter)_op_parallelism")

RULES = load_rules()
STEP = dict(steps_count=10, complete_steps=10, step_time_mean_ms=20.0, step_time_median_ms=20.0)
INPUT = dict(STEP, attr_input_pct=55.0, attr_input_ms=11.0, attr_wall_ms=200.0, input_pct=55.0,
             tfdata_present=True, tfdata_has_prefetch=False, tfdata_pipeline="Root::Map")


def by_rule(findings):
    return {f.rule: f for f in findings}


def test_a_large_part_no_rule_explains_gets_its_generic_finding():
    got = by_rule(evaluate({**STEP, "attr_optimizer_pct": 62.0, "attr_optimizer_ms": 12.4, "attr_wall_ms": 200.0,
                            "attr_optimizer_items": "ResourceApplyAdam 80 %"}, RULES))
    f = got["cost_optimizer"]
    assert f.node == "optimizer" and f.severity == "warning" and f.impact_pct == 62.0
    assert "62 %" in f.message and "12.4 ms per step" in f.message and "ResourceApplyAdam 80 %" in f.message


def test_the_explanations_of_one_part_are_one_finding_the_most_specific_of_the_most_severe_first():
    got = evaluate(INPUT, RULES)
    ids = [f.rule for f in got]
    # input_bound (part.input, critical at 55 %) and tfdata_no_prefetch (part.input.tfdata, info: a condition the
    # tf.data analysis did not name as the cause) both hold: one finding, the surer one leading
    assert "input_bound" in ids and "tfdata_no_prefetch" not in ids and "cost_input" not in ids
    f = by_rule(got)["input_bound"]
    assert [a["rule"] for a in f.also] == ["tfdata_no_prefetch"]  # the generic one is dropped, not folded
    assert f.also[0]["fix"] and f.also[0]["title"] and f.also[0]["evidence"]
    assert f.node == "input" and f.node_pct == 55.0


def test_a_part_named_by_a_metric_is_that_part():
    m = {**STEP, "step_device_compute_pct": 80.0, "op_top_category": "elementwise", "op_top_category_pct": 70.0,
         "op_matrix_pct": 10.0, "op_top_ops": "Mul 50 %", "attr_elementwise_pct": 56.0, "attr_elementwise_ms": 11.2,
         "attr_wall_ms": 200.0}
    got = by_rule(evaluate(m, RULES))
    assert "cost_elementwise" not in got and got["compute_bound_ops"].node == "elementwise"


def test_a_window_not_steady_keeps_its_findings_with_the_caveat():
    m = {**INPUT, "capture_steady_state": False, "complete_steps": 1, "capture_issues": "only 1 step in the window"}
    got = evaluate(m, RULES)
    f = by_rule(got)["input_bound"]
    assert [c["id"] for c in f.caveats] == ["not_steady"] and "only 1 step" in f.caveats[0]["text"]
    own = by_rule(got)["capture_not_steady_state"]  # the finding that says the condition carries no caveat of it
    assert own.caveats == []


def test_a_cache_being_written_is_a_caveat_on_the_input_alone():
    m = {**INPUT, "capture_phase": "cache_fill", "attr_matrix_pct": 20.0, "attr_matrix_ms": 4.0,
         "tfdata_cost_pct": 50.0, "tfdata_cost_ms_per_step": 10.0}
    got = by_rule(evaluate(m, RULES))
    assert got["phase_cache_fill"].node == "input" and got["phase_cache_fill"].caveats == []
    assert {"input_bound", "tfdata_no_prefetch"} <= {a["rule"] for a in got["phase_cache_fill"].also}
    assert got["cost_matrix"].caveats == []
    # without the phase's own finding (too few steps for it), the input's finding carries the caveat
    few = by_rule(evaluate({**m, "complete_steps": 2}, RULES))
    assert [c["id"] for c in few["input_bound"].caveats] == ["cache_fill"] and few["cost_matrix"].caveats == []


@pytest.mark.parametrize("d", trace_dirs(), ids=target_name)
def test_no_part_of_ten_percent_is_silent(d):
    """On every sample and real trace: each part of the wall time of at least 10 % has a finding that explains it
    (so no report says "No findings" beside such a cost), and a window judged not steady still has findings."""
    res = analysed(d)
    m = res.metrics
    nodes = {f.node for f in res.findings}
    large = {p for p in PARTS if isinstance(m.get(f"attr_{p}_pct"), float) and m[f"attr_{p}_pct"] >= NODE_MIN_PCT}
    assert large <= nodes, f"parts without a finding: {sorted(large - nodes)}"
    if large:
        assert res.findings
    if m.get("capture_steady_state") is False and large:
        assert any(c["id"] == "not_steady" for f in res.findings for c in f.caveats)
    # a CPU measured saturated (the system sampler's >= 80 %) is never advised more parallelism (issue 52, point 4)
    if isinstance(m.get("system_cpu_util_pct"), float) and m["system_cpu_util_pct"] >= 80:
        fixes = [f.fix or "" for f in res.findings] + [a.get("fix") or "" for f in res.findings for a in f.also]
        # the recorded pipeline's own lines, rewritten into a fix, are the user's parallelism, not advice
        own = {ln.strip() for ln in str(m.get("tfdata_code") or "").splitlines() if ln.strip()}
        asked = [ln for x in fixes for ln in x.splitlines() if ln.strip() not in own and MORE_PARALLELISM.search(ln)]
        assert not asked, (m["system_cpu_util_pct"], asked)


def test_findings_of_a_severity_are_ordered_by_what_their_fix_is_expected_to_recover():
    """A generic part's figure is its size, not a fix's gain: it counts at half (GENERIC_RECOVERS) unless its rule says
    what leaving it out recovers (the time between steps: the whole part). Two warnings, the generic matrix part
    (36 % -> 18) and the time between steps (32 % -> 32, recovers = 1): the latter leads (at half it would not)."""
    from tfadvisor.advice.engine import GENERIC_RECOVERS, expected_gain

    m = {**STEP, "attr_wall_ms": 200.0, "attr_matrix_pct": 36.0, "attr_matrix_ms": 7.2,
         "attr_between_steps_pct": 32.0, "attr_between_steps_ms": 6.4}
    got = evaluate(m, RULES)
    ids = [f.rule for f in got]
    assert ids.index("cost_between_steps") < ids.index("cost_matrix"), ids
    rules = {r.id: r for r in RULES}
    f = by_rule(got)
    assert expected_gain(f["cost_matrix"], rules["cost_matrix"]) == 36.0 * GENERIC_RECOVERS
    assert expected_gain(f["cost_between_steps"], rules["cost_between_steps"]) == 32.0
