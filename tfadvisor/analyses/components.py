"""Where the op time goes, by part of the program: each TF op joined to what the program wrote, by its name scope.

A TF op's name is the scopes the program opened around it (``StatefulPartitionedCall/functional_1/dense_1/MatMul``
in a Keras 3 ``fit``; ``replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_5/...`` under
``tf.distribute``). The scopes say whose op it is (:func:`component`):

* ``optimizer``: the first scope an optimizer's (``adam``, ``sgd``, ``rmsprop``, ...; Keras 2 names the variable
  each update writes, ``Adam/update_embedding/...``: ``optimizer adam on embedding``), or an apply op
  (``ResourceApplyAdam``) anywhere;
* ``loss`` (``compile_loss``, ``*loss*``, ``*crossentropy*``, ``mean_squared_error``) and ``metric``
  (``compile_metrics``, ``accuracy``, ``auc``, ``precision``, ``recall``, ``mean``, ...);
* ``layer``: the model's layers, the first scope being the model (``functional_1``, ``sequential_1``, a subclassed
  model's name) and the next up to two its layers (``bert_encoder_1/transformer``); ``gradient_tape`` or
  ``gradients`` in front makes the op the layer's gradient (role ``gradient``, else ``forward``);
* ``step``: the train step's own ops outside any of those scopes.

Op time is the ops' summed duration (ops on several threads add up), from the device's op lines where the trace
has them, else the TF ops on the host (a CPU run: the work itself). Wall time is the attribution's: each op
category's part of the wall time is shared out among the components by their op time in that category, so the
components' shares add up to the compute parts of "Where the time goes". Figures: ``comp_top`` / ``comp_top_pct``
(the largest part and its share of the wall time), ``comp_summary`` (the largest five), and ``comp_<category>_top``
per op category (the parts that ran that category's ops: what the attribution's ``matrix`` or ``optimizer`` part is
made of, in the program's words). Table ``components``.
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.opcost import CATEGORIES, INPUT_OPS, category, display_type, op_parts, op_type_of
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace

DECLARED = declare(
    "components",
    ("comp_top", "", "the part of the program with the most time (`layer functional_1/dense_1`, `optimizer adam`)"),
    ("comp_top_pct", "%", "its share of the wall time (the attribution's: each op category's time shared out by "
                          "the parts' op time in it)"),
    ("comp_summary", "", "the parts of the program with the most time, with their shares of the wall time"),
    *[(f"comp_{c}_top", "", f"{c.replace('_', ' ')} ops: the parts of the program that ran them, with their share "
                            "of that category's op time") for c in CATEGORIES],
    doc="The op time joined to the program's parts by the ops' name scopes: the model's layers (forward and "
        "gradient), the optimizer (and the variable it updates, where the scope names it), the loss, the metrics, "
        "the step's own ops.",
    tables="`components` (component, kind: layer/optimizer/loss/metric/step, role: forward/gradient/update, "
           "ms_per_step and pct: its share of the wall time, each op category's (the attribution's part) shared out "
           "by the component's op time in it; op_ms, op_pct: its ops' summed time; ops; types: its op types with "
           "the most time)",
)

#: Scopes a runtime or tf.distribute wraps the program's in: not the program's own.
WRAPPERS = re.compile(r"^(?:StatefulPartitionedCall|PartitionedCall|replica|while|body|cond|then|else|"
                      r"TPUPartitionedCall|cluster|inference|train_function|one_step_on_data|multi_step_on_iterator|"
                      r"one_step_on_iterator|train_step|test_step|predict_step)(?:_\d+)?$|^_\d+$", re.I)
OPTIMIZERS = re.compile(r"^(?:adam|adamw|adamax|nadam|sgd|rmsprop|adagrad|adadelta|ftrl|lion|lamb|adafactor|"
                        r"loss_scale_optimizer|lossscaleoptimizer|optimizer|[a-z]+_optimizer)(?:_\d+)?$", re.I)
APPLY_OP = re.compile(r"^ResourceApply|^ApplyAdam|^ResourceSparseApply")
LOSSES = re.compile(r"^(?:compile_loss|.*loss.*|.*crossentropy.*|mean_squared_error|mean_absolute_error|huber.*)"
                    r"(?:_\d+)?$", re.I)
METRICS = re.compile(r"^(?:compile_metrics|metrics|.*accuracy.*|auc|precision|recall|mean|mean_metric_wrapper|"
                     r"top_k.*|f1_score|mean_iou|root_mean_squared_error)(?:_\d+)?$", re.I)
GRADIENTS = re.compile(r"^(?:gradient_tape|gradients)(?:_\d+)?$")
#: How many scopes below the model name a layer (``bert_encoder_1/transformer``).
LAYER_DEPTH = 2
#: Parts listed in ``comp_summary`` and per category.
TOP = 5
#: The component of ops in no scope of the program's.
STEP = "(no scope)"


def component(op_name: str, op_type: str = "") -> tuple[str, str, str]:
    """(component, kind, role) of a TF op from its full name (``scope/.../name``, without ``:Type``)."""
    scopes = [s for s in op_name.split("/")[:-1] if s and not WRAPPERS.match(s)]
    role = "forward"
    if scopes and GRADIENTS.match(scopes[0]):
        role, scopes = "gradient", [s for s in scopes[1:] if not WRAPPERS.match(s)]
    if APPLY_OP.match(op_type) or (scopes and OPTIMIZERS.match(scopes[0])):
        opt = scopes[0] if scopes and OPTIMIZERS.match(scopes[0]) else "optimizer"
        var = next((s[len("update_"):] for s in scopes[1:] if s.startswith("update_")), "")
        return (f"{opt} on {var}" if var else opt), "optimizer", "update"
    if not scopes:
        return STEP, "step", role
    if LOSSES.match(scopes[0]):
        return scopes[0], "loss", role
    if METRICS.match(scopes[0]):
        return scopes[0], "metric", role
    inner = []
    for s in scopes[1:]:  # the layers' scopes, down to the first an op opened (``MatMul``, ``BiasAdd``)
        if s[:1].isupper() or len(inner) == LAYER_DEPTH:
            break
        inner.append(s)
    for s in inner:  # a loss inside the model's scope
        if LOSSES.match(s):
            return s, "loss", role
    if not inner:
        return scopes[0], "step", role
    return "/".join([scopes[0], *inner]), "layer", role


def label(name: str, kind: str, role: str) -> str:
    """How a report names a part: ``layer functional_1/dense_1 (gradient)``, ``optimizer adam``."""
    text = "the step's own ops" if kind == "step" and name == STEP else f"{kind} {name}"
    return text + (" (gradient)" if role == "gradient" else "")


def analyze(trace: Trace, ctx: Context) -> AnalysisResult:
    res = AnalysisResult("components")
    source, names, dur, cnt = op_parts(trace, ctx)
    metrics = list(DECLARED.names())
    tf_ops = [i for i, n in enumerate(names) if ":" in n and "/" in n.split(":", 1)[0]]
    if not tf_ops:
        res.missing(metrics, "no TF op names with scopes in the trace (a JAX program, or ops without name scopes)",
                    tf_only=True)
        return res
    acc: dict[tuple[str, str, str], list] = {}
    for i in tf_ops:
        full, _, typ = names[i].partition(":")
        t = op_type_of(names[i], source)
        if INPUT_OPS.match(display_type(t)):
            continue
        key = component(full, typ)
        a = acc.setdefault(key, [0.0, 0, {}, {}])
        a[0] += float(dur[i])
        a[1] += int(cnt[i])
        dt = display_type(t)
        a[2][dt] = a[2].get(dt, 0.0) + float(dur[i])
        c = category(t)
        a[3][c] = a[3].get(c, 0.0) + float(dur[i])
    total = sum(a[0] for a in acc.values())
    if total <= 0:
        res.missing(metrics, "no op time in named scopes", tf_only=True)
        return res
    # each category's wall time (the attribution's part) shared out by the components' op time in it
    cat_total = {c: sum(a[3].get(c, 0.0) for a in acc.values()) for c in CATEGORIES}
    wall_ms = {c: ctx.metric(f"attr_{c}_ms") or 0.0 for c in CATEGORIES}
    wall_pct = {c: ctx.metric(f"attr_{c}_pct") or 0.0 for c in CATEGORIES}

    def on_wall(a: list, figure: dict[str, float]) -> float:
        return sum(figure[c] * v / cat_total[c] for c, v in a[3].items() if cat_total.get(c, 0.0) > 0)

    rows = sorted(acc.items(), key=lambda kv: (-on_wall(kv[1], wall_pct), -kv[1][0], kv[0]))
    labels = [label(*k) for k, _ in rows]
    op_ms = np.array([a[0] for _, a in rows]) / PS_PER_MS
    table = Table({
        "component": np.array([k[0] for k, _ in rows], dtype=object),
        "kind": np.array([k[1] for k, _ in rows], dtype=object),
        "role": np.array([k[2] for k, _ in rows], dtype=object),
        "ms_per_step": np.array([on_wall(a, wall_ms) for _, a in rows]),
        "pct": np.array([on_wall(a, wall_pct) for _, a in rows]),
        "op_ms": op_ms,
        "op_pct": 100.0 * op_ms * PS_PER_MS / total,
        "ops": np.array([a[1] for _, a in rows], np.int64),
        "types": np.array([", ".join(t for t, _ in sorted(a[2].items(), key=lambda x: (-x[1], x[0]))[:3])
                           for _, a in rows], dtype=object),
    }, n=len(rows))
    res.tables["components"] = table
    pct = table["pct"]
    res.add("comp_top", labels[0])
    res.add("comp_top_pct", float(pct[0]))
    res.add("comp_summary", ", ".join(f"{lb} {p:.0f} %" for lb, p in zip(labels[:TOP], pct[:TOP].tolist())))
    for c in CATEGORIES:
        part = sorted(((a[3].get(c, 0.0), lb) for lb, (_, a) in zip(labels, rows) if a[3].get(c, 0.0) > 0),
                      key=lambda x: (-x[0], x[1]))
        if cat_total[c] > 0:
            res.add(f"comp_{c}_top", ", ".join(f"{lb} {100.0 * v / cat_total[c]:.0f} %" for v, lb in part[:TOP]))
        else:
            res.missing([f"comp_{c}_top"], "")
    return res
