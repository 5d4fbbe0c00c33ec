"""The program-component pairs (``sample_traces/comp_*``, ``make_component_samples.py``; issue 52, point 7): each
problem's cost sits in one part of the program, counted here from the protobuf (``tfadvisor.proto.xplane_pb2``,
none of tfadvisor's reader or analyses): the summed durations of the host's TF op events (``scope/name:Type``) of
that part, by the name scopes the program opened (or, where the part is not a scope, its op types), against the
tool's ``components`` table; the part is the largest on the problem and smaller on its fixed twin."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
from conftest import SAMPLES
from xplane_events import host_events

import tfadvisor

#: Scopes a runtime wraps the program's in (Keras 3 ``fit`` runs its step as ``StatefulPartitionedCall``).
WRAPPER = re.compile(r"^(?:StatefulPartitionedCall|PartitionedCall)(?:_\d+)?/")
#: Input ops: the pipeline's, not a part of the program.
INPUT = re.compile(r"^(?:IteratorGetNext\w*|OptionalGetValue|OptionalHasValue|MultiDeviceIteratorGetNextFromShard)$")


class Part:
    """A planted part: which op events are its (``ops(scope, type)``, the scope without the wrapper) and which rows
    of the tool's components table (``rows(component, kind, role)``)."""

    def __init__(self, ops, rows, what: str):
        self.ops, self.rows, self.what = ops, rows, what


def _scope(pattern: str):
    return lambda scope, typ: re.search(pattern, scope) is not None


#: Keras 3 opens no name scope around a compiled metric's update: its ops are the step's own
#: (``StatefulPartitionedCall/Cumsum_1``; the multi-label AUC's per-label loop ``loop_body/...``, vectorised by
#: pfor): the metric is every op of the step outside the model, the loss and the optimizer, which the tool lists as
#: the metric or the step's own (but the model's input casts, ``functional_1/Cast``: the model's, outside its layers).
NOT_METRIC = re.compile(r"^(?:gradient_tape/)?(?:functional|compile_loss|adam)(?:_\d+)?/")
PARTS = {
    "comp_metric_auc": Part(lambda s, t: NOT_METRIC.match(s) is None,
                            lambda c, k, r: k == "metric" or (k == "step" and NOT_METRIC.match(c + "/") is None),
                            "the AUC metric's ops (the step's own)"),
    "comp_optimizer_table": Part(_scope(r"^(?:adam|sgd)(?:_\d+)?/"), lambda c, k, r: k == "optimizer",
                                 "the optimizer's update"),
    "comp_loss_map_fn": Part(_scope(r"(?:^|/)compile_loss/"), lambda c, k, r: k == "loss",
                             "the loss, forward and gradient"),
    "comp_py_function": Part(_scope(r"(?:^|/)feature_transform(?:_\d+)?/"),
                             lambda c, k, r: re.search(r"(?:^|/)feature_transform(?:_\d+)?(?:/|$)", c) is not None,
                             "the layer feature_transform"),
    "comp_mixed_precision_cpu": Part(_scope(r"^(?:gradient_tape/)?functional(?:_\d+)?/[a-z]\w*/"),
                                     lambda c, k, r: k == "layer", "the model's layers (float16 math on the CPU)"),
    "comp_layer_one_hot": Part(_scope(r"(?:^|/)tokens(?:_\d+)?/"),
                               lambda c, k, r: re.search(r"(?:^|/)tokens(?:_\d+)?$", c) is not None,
                               "the layer tokens, forward and gradient"),
    "comp_gradient_per_head": Part(_scope(r"^gradient_tape(?:_\d+)?/"), lambda c, k, r: r == "gradient",
                                   "the gradient computation"),
}
#: enable_check_numerics instruments every op's output with its own op, in that op's scope: a part by op type.
DEBUG_TYPES = re.compile(r"^(?:CheckNumerics(?:V2)?|DebugNumericSummary(?:V2)?|DebugIdentity\w*|Assert)$")
PROBLEMS = [*PARTS, "comp_debug_checks"]


@cache
def op_events(name: str) -> tuple[tuple[str, str, int], ...]:
    """(scope without the wrapper, op type, duration in ps) of every TF op event on the host planes."""
    out = []
    for n, _, d, _ in host_events(name):
        full, sep, typ = n.rpartition(":")
        if sep and "/" in full and not INPUT.match(typ):
            out.append((WRAPPER.sub("", full), typ, d))
    return tuple(out)


def debug_ms(name: str) -> float:
    """The debugging ops' time: graph ops (``scope/name:Type``) and those run eagerly (``EagerLocalExecute: Type``,
    the check of a tensor read back in Python)."""
    total = 0
    for n, _, d, _ in host_events(name):
        typ = n.removeprefix("EagerLocalExecute: ") if n.startswith("EagerLocalExecute: ") else \
            n.rpartition(":")[2] if "/" in n.rpartition(":")[0] else ""
        if DEBUG_TYPES.match(typ):
            total += d
    return total / 1e9


def counted_ms(name: str, ops) -> float:
    return sum(d for s, t, d in op_events(name) if ops(s, t)) / 1e9


@cache
def analysis(name: str):
    return tfadvisor.analyze(SAMPLES / name)


def table(name: str):
    return analysis(name).tables["components"]


def tool(name: str, rows, column: str) -> float:
    t = table(name)
    return float(sum(t[column][i] for i in range(len(t)) if rows(t["component"][i], t["kind"][i], t["role"][i])))


def groups(name: str, rows) -> dict[tuple[str, str], float]:
    """The tool's parts of the program, roles together, by share of the wall time: the planted part as one
    ``("planted", ...)``, the others by (component, kind), the step's own ops left out."""
    t = table(name)
    out: dict[tuple[str, str], float] = {}
    for i in range(len(t)):
        key = ("planted", "") if rows(t["component"][i], t["kind"][i], t["role"][i]) else (t["component"][i],
                                                                                             t["kind"][i])
        if key[1] != "step":
            out[key] = out.get(key, 0.0) + float(t["pct"][i])
    return out


def _present() -> list[str]:
    return [p for p in PROBLEMS if (SAMPLES / p / "expected.toml").exists()]


def test_the_pairs_are_committed():
    """Issue 52, point 7: eight pairs, each a different part of the program, each with its twin."""
    assert len(_present()) == 8, _present()
    for p in _present():
        assert Path(SAMPLES / (p + "_tuned") / "expected.toml").exists(), p


@pytest.mark.parametrize("name", [n for p in PARTS for n in (p, p + "_tuned")])
def test_the_part_op_time_is_its_ops_in_the_protobuf(name):
    """The tool's op time of the planted part (its rows' ``op_ms``) is the summed durations of the part's op events
    in the protobuf: measured 0.0 % apart on the 12 samples of the other six pairs (the same events: every host TF op
    of the part), so 1e-6 is float summation order only."""
    part = PARTS[name.removesuffix("_tuned")]
    want = counted_ms(name, part.ops)
    assert want > 0, f"{name}: no op of {part.what} in the protobuf"
    assert tool(name, part.rows, "op_ms") == pytest.approx(want, rel=1e-6), part.what


@pytest.mark.parametrize("problem", list(PARTS))
def test_the_planted_part_is_the_largest_and_the_fix_shrinks_it(problem):
    """On the problem the planted part has the largest share of the wall time of every part of the program (the
    step's own ops aside); on the twin its time per step is smaller."""
    part = PARTS[problem]
    g = groups(problem, part.rows)
    largest = max(g, key=g.get)
    assert largest == ("planted", ""), (part.what, sorted(g.items(), key=lambda kv: -kv[1])[:4])
    before, after = tool(problem, part.rows, "ms_per_step"), tool(problem + "_tuned", part.rows, "ms_per_step")
    assert after < before, (part.what, before, after)


@pytest.mark.parametrize("name", ["comp_debug_checks", "comp_debug_checks_tuned"])
def test_debug_checks_are_their_ops_in_the_protobuf(name):
    """enable_check_numerics' ops (one per checked tensor, in that tensor's scope) counted by type from the
    protobuf against the tool's op-type table: the same events, so 1e-6 is float summation order (measured 0.0 %
    apart)."""
    want = debug_ms(name)
    t = analysis(name).tables["op_types"]
    got = float(sum(t["total_ms"][i] for i in range(len(t)) if DEBUG_TYPES.match(str(t["type"][i]))))
    if name.endswith("_tuned"):
        assert want == 0 and got == 0
        return
    assert want > 0
    assert got == pytest.approx(want, rel=1e-6)


def test_debug_checks_are_the_largest_op_type_and_gone_on_the_twin():
    """The checks' op type has the most op time of any on the problem, and the tool says what share of the wall
    time they hold; the twin has none."""
    t = analysis("comp_debug_checks").tables["op_types"]
    top = max(range(len(t)), key=lambda i: t["total_ms"][i])
    assert DEBUG_TYPES.match(str(t["type"][top])), (t["type"][top], t["total_ms"][top])
    assert analysis("comp_debug_checks").metrics.get("comp_debug_pct", 0) > 0
    assert not analysis("comp_debug_checks_tuned").metrics.get("comp_debug_pct")
