"""The one place that says how an ablated component maps to what the tool reports.

Each ablation key (what ``program.py --measure`` / ``--off KEY`` removes or makes cheap, see ``generate.py``) is
compared with one figure of the tool's and is "named" by a finding in one way:

========== =================================================== ============================================
key        ablation (the program's ``off`` set)                the tool's figure (ms per step)
========== =================================================== ============================================
metric     every compiled metric removed                       sum of ``components`` rows of kind ``metric``
loss       the costly custom loss -> the standard cross-entropy sum of rows of kind ``loss``
layer      the ``costly_*`` block left out (shapes kept)       sum of rows of kind ``layer`` with a
                                                               ``costly_`` scope, with the optimizer's update
                                                               of their weights (``update_ms``)
optimizer  the drawn optimizer (and options) -> plain SGD      sum of rows of kind ``optimizer``: what
                                                               replacing it by plain SGD saves
                                                               (``sgd_saves_ms``: the whole update less
                                                               SGD's own, a multiply and a write per dense
                                                               weight, a scatter per sparse gradient)
input      the map / py_function / generator made trivial      the ``components`` row of kind ``input``: the
                                                               wait for batches and, on a CPU, the step time
                                                               the pipeline's threads took (contention)
between_steps  the callbacks and the evaluation removed        ``attr_between_steps_ms`` + ``outside_ms_per_step``
                                                               (evaluation and epoch ends, outside the steps'
                                                               wall time: the throughput analysis); the host
                                                               work the tool puts under ``python`` when the
                                                               markers hold the callback is not added (README)
========== =================================================== ============================================

A finding names a key when its node (the part of the wall time it explains, ``Finding.node``) is that key's part
(``input``, ``between_steps``), or, for a compute node (an op category), when the first program part the tool lists
for that category (``comp_<category>_top``) or the finding's own text names the key's component (``metric ...``,
``layer .../costly_...``), or its title says the key's kind (``metric``, ``loss``, ``optimizer``; a ``costly_``
layer by name). The optimizer key also matches the ``optimizer`` node.

Notes: the loss's truth is what the swap saves, not the whole part (the standard loss still costs a little); the
tolerance (25 % or 2 ms) covers that on these programs. The optimizer's is compared with the tool's own estimate of
the swap (``sgd_saves_ms``), not the whole update (``ms_per_step``): plain SGD's update of a dense model's weights
is a good part of the whole where the weights are large.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: key -> (the kind of the ``components`` rows, or None; the attribution part, or None)
#: (the time outside the steps, evaluation and epoch ends, is between_steps' too: ``OUTSIDE``)
KEYS: dict[str, tuple[str | None, str | None]] = {
    "metric": ("metric", None),
    "loss": ("loss", None),
    "layer": ("layer", None),
    "optimizer": ("optimizer", None),
    "input": ("input", "input"),
    "between_steps": (None, "between_steps"),
}
#: what else a part's figure adds (ms per training step) and the node of the findings that explain it
OUTSIDE = {"between_steps": ("outside_ms_per_step", "outside_steps")}
#: the costly layer's scopes (generate.py names its block ``costly_up``/``costly_down``/``costly_conv``/...)
COSTLY_LAYER = re.compile(r"(^|/)costly_")
#: what a tolerance is: within 25 % of the truth or 2 ms per step, whichever is larger
REL_TOL, ABS_TOL_MS = 0.25, 2.0
#: a label in ``comp_<category>_top``: ``layer functional_1/dense_1 (gradient) 70 %``
_LABEL = re.compile(r"^\s*(?P<kind>layer|optimizer|loss|metric|step|the step's own ops)\s*(?P<name>.*?)"
                    r"(?: \(gradient\))?\s+\d+ %")


def tolerance_ms(truth_ms: float) -> float:
    return max(REL_TOL * abs(truth_ms), ABS_TOL_MS)


def row_matches(key: str, kind: str, name: str) -> bool:
    """Whether a ``components`` row (kind, component name) belongs to the key."""
    want, _ = KEYS[key]
    if want is None or kind != want:
        return False
    return key != "layer" or bool(COSTLY_LAYER.search(name))


def tool_ms(key: str, components: Any, metrics: Mapping[str, Any]) -> float:
    """The tool's ms per step for the key: its components rows, or its attribution part."""
    kind, part = KEYS[key]
    if part is not None and kind is None:
        extra = OUTSIDE.get(key, (None, None))[0]
        vs = [metrics.get(f"attr_{part}_ms"), metrics.get(extra) if extra else None]
        return sum(float(v) for v in vs if isinstance(v, (int, float)) and v == v)
    if components is None:
        return 0.0
    total = 0.0
    upd = components.get("update_ms") or [0.0] * len(components["kind"])
    # the optimizer swapped for plain SGD: what the swap saves, not the whole update
    figure = components.get("sgd_saves_ms") if key == "optimizer" else None
    for k, n, ms, u in zip(components["kind"], components["component"], figure or components["ms_per_step"], upd):
        if row_matches(key, str(k), str(n)):
            total += float(ms) + (float(u) if key == "layer" else 0.0)  # a layer removed: its weights' update too
    return total


def first_part(metrics: Mapping[str, Any], category: str) -> tuple[str, str] | None:
    """(kind, name) of the first program part listed for an op category, or None."""
    top = metrics.get(f"comp_{category}_top")
    if not isinstance(top, str) or not top:
        return None
    m = _LABEL.match(top)  # the first entry: up to its first "NN %" (a label may hold ", ")
    return (m["kind"], m["name"]) if m else None


def names(key: str, finding: Any, metrics: Mapping[str, Any]) -> bool:
    """Whether a finding names the key's component (see the module's docstring)."""
    kind, part = KEYS[key]
    node = getattr(finding, "node", "") or ""
    if part is not None:
        nodes = (part, OUTSIDE[key][1]) if key in OUTSIDE else (part,)
        return any(node == n or node.startswith(n + ".") for n in nodes)
    if key == "optimizer" and node == "optimizer":
        return True
    first = first_part(metrics, node.split(".")[0]) if node else None
    if first is not None and first[0] == kind and (key != "layer" or COSTLY_LAYER.search(first[1])):
        return True
    title = getattr(finding, "title", "") or ""
    if key == "layer":
        return "costly_" in title
    return re.search(rf"\b{kind}", title, re.I) is not None
