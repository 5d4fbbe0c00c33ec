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
has them, else the TF ops of the host's training threads (a CPU run: the work itself; tf.data's threads run the
input pipeline beside them). Wall time is the attribution's: on a device each op category's part of the wall time is
shared out among the components by their op time in that category; on a CPU, where the ops share the cores (a check
beside a matrix product slows it though the attribution gives that instant to the product), the compute parts
together by op time across categories. On the host the runtime's part (the executor between ops,
op dispatch, a ``tf.map_fn``'s iterations, which the trace does not record as ops) is shared out too, by the time
inside a step before each op (from the end of the op before it, on any thread): the time it took to get to that op
(a wait, the time before an input op, a function call's start, is no op's). So a loop's iterations are the part
whose op closes the loop (the loss of a ``tf.map_fn`` loss), a debugging check's dispatch is the check's, and the
components' shares add up to the compute parts and the part of the runtime that ops' dispatch took. (Not by the
number of ops: that gave the runtime to the optimizer's thousand small ops where a loop's iterations took it.) Figures:
``comp_top`` / ``comp_top_pct`` (the largest part and its share of the wall time), ``comp_summary`` (the largest
five), and ``comp_<category>_top`` per op category (the parts that ran that category's ops: what the attribution's
``matrix`` or ``optimizer`` part is made of, in the program's words). Table ``components``.

On a CPU the ops are the training steps' own (from a step's start to its work's end): a callback's ops between steps
and an evaluation's are not the step's. Those make rows of their own (:data:`PASSES`): role ``between steps`` (from
each step's work's end to its wall time's end; the attribution's ``between_steps`` per training step shared out by the
parts' op time there: a callback's ``predict_on_batch`` runs the model's layers; ``comp_between_steps_top``) and role
``evaluation`` (the throughput analysis' evaluation intervals; the evaluation per training step over the run,
``outside_eval_ms_per_step_run``, the callback's clock beside the window's; ``comp_eval_top``): what a layer or a
metric costs there too, in the program's words.

An optimizer's row is its whole update; beside it (``sgd_saves_ms``) what swapping it for plain SGD would save: SGD
still writes each dense weight (the same ``AssignSubVariableOp``) after one multiply of its size (timed as one pass
over the weight, the gradient squared that the adaptive optimizers compute) and scatters a sparse gradient's rows,
where Adam on a dense model also keeps two moments, bias corrections, clipping, an EMA (:func:`_sgd_saves`).
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.opcost import CATEGORIES, INPUT_OPS, category, display_type, op_parts, op_type_of
from tfadvisor.analyses.placement import tf_op_meta_mask
from tfadvisor.analyses.program import Names, Program
from tfadvisor.analyses.step_detect import StepSet
from tfadvisor.io.runmeta import keras_facts
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace

DECLARED = declare(
    "components",
    ("comp_top", "", "the part of the program with the most time (`layer functional_1/dense_1`, `optimizer adam`)"),
    ("comp_top_pct", "%", "its share of the wall time (the attribution's: each op category's time shared out by "
                          "the parts' op time in it)"),
    ("comp_summary", "", "the parts of the program with the most time, with their shares of the wall time"),
    *[(f"comp_{c}_top", "", f"{c.replace('_', ' ')} ops: the parts of the program that ran them, with their share "
                            "of that category's op time") for c in CATEGORIES],
    *[m for k in ("layer", "optimizer", "loss", "metric") for m in (
        (f"comp_{k}", "", f"the {k} with the most time (its forward and gradient ops together)"),
        (f"comp_{k}_class", "", f"what that {k} is, its scope without TensorFlow's uniquifying numbers (`auc`)"),
        (f"comp_{k}_pct", "%", f"that {k}'s share of the wall time"),
        (f"comp_{k}_ms", "ms", f"that {k}'s wall time per step"),
        (f"comp_{k}_part", "", f"the part of the wall time (an op category) that holds most of that {k}'s time"),
        (f"comp_{k}_types", "", f"that {k}'s op types with the most time"),
        (f"comp_{k}_ratio", "", f"that {k}'s op time over all the layers' op time (the model's forward and gradient)"),
    )],
    ("comp_optimizer_updates", "", "the layer whose weights take most of the optimizer's update, by parameter "
                                   "count (`70 % of it updating embedding`; where the program's facts give them)"),
    ("comp_optimizer_sgd_saves_ms", "ms", "what replacing the optimizer by plain SGD would save per step (the "
                                          "optimizer rows' `sgd_saves_ms`: the update less SGD's own)"),
    ("comp_between_steps_ms", "ms", "the time between steps per training step (`attr_between_steps_ms`: a "
                                    "callback's hooks, a custom loop's code after the step), shared out among the "
                                    "parts of the program its ops belong to (`components` rows of role `between "
                                    "steps`: a callback's `predict_on_batch` runs the model's layers)"),
    ("comp_between_steps_top", "", "the parts of the program the ops between steps belong to, with their shares "
                                   "of that op time"),
    ("comp_eval_ms", "ms", "evaluation per training step over the run (`outside_eval_ms_per_step_run`), shared "
                           "out among the parts of the program its ops belong to (`components` rows of role "
                           "`evaluation`)"),
    ("comp_eval_top", "", "the parts of the program evaluation's op time goes to, with their shares "
                          "(`metric auc 60 %, layer functional_1/dense_1 30 %`)"),
    ("comp_dtype_policy", "", "the model's dtype policy (`mixed_float16`, `float32`), from the run file's `keras` "
                              "facts (tfadvisor's capture)"),
    ("comp_gradient_pct", "%", "the gradient computation's share of the wall time (every gradient op)"),
    ("comp_gradient_ms", "ms", "the gradient computation's wall time per step"),
    ("comp_gradient_part", "", "the part of the wall time that holds most of the gradient computation"),
    ("comp_gradient_ratio", "", "gradient op time over forward op time (about 2 when each gradient is taken once)"),
    *[m for c, what in (("py_function", "Python called from the graph (`tf.py_function`, `tf.numpy_function`)"),
                        ("debug", "debugging checks (`CheckNumerics`, asserts, `tf.print`)"),
                        ("cast", "dtype casts"),
                        ("one_hot", "one-hot encodings (`tf.one_hot`, `keras.ops.one_hot`)"),
                        ("lookup", "table lookups and their gradients (embeddings: `ResourceGather`, segment sums)"),
                        ("loop", "ops inside loops over elements (`tf.map_fn`, `tf.while_loop`)"))
      for m in ((f"comp_{c}_pct", "%", f"{what}: share of the wall time"),
                (f"comp_{c}_ms", "ms", f"{what}: wall time per step"),
                (f"comp_{c}_part", "", f"{what}: the part of the wall time that holds most of it"),
                (f"comp_{c}_where", "", f"{what}: the parts of the program that ran them, with their share of the "
                                        "wall time"))],
    doc="The op time joined to the program's parts by the ops' name scopes: the model's layers (forward and "
        "gradient), the optimizer (and the variable it updates, where the scope names it), the loss, the metrics, "
        "the step's own ops.",
    tables="`components` (component, kind: layer/optimizer/loss/metric/step/input, role: "
           "forward/gradient/update/input, or `between steps` / `evaluation`: the parts of the time between steps and "
           "of evaluation, per training step, after the steps' (on a CPU), "
           "label: how reports name it, ms_per_step and pct: its share of the wall time, each op category's (the "
           "attribution's part) shared out by the component's op time in it; op_ms, op_pct: its ops' summed "
           "time; ops; types: its op types with the most time; layer_class, params (-1: unknown): the layer's class "
           "and parameters where the model config or the run file says; function: the function whose calls made "
           "its ops, where the graph's library says; names_from: where its name came from: the model config in "
           "the TensorBoard event file beside the profile, tfadvisor_run.json, the compiled metrics, or its name "
           "scope; sgd_saves_ms: on the optimizer's rows, what replacing it by plain SGD would save per step, the "
           "update less SGD's own: a multiply and a write per dense weight, a scatter per sparse gradient)",
)

#: Scopes a runtime or tf.distribute wraps the program's in: not the program's own.
WRAPPERS = re.compile(r"^(?:StatefulPartitionedCall|PartitionedCall|replica|while|body|cond|then|else|"
                      r"TPUPartitionedCall|cluster|inference|train_function|one_step_on_data|multi_step_on_iterator|"
                      r"one_step_on_iterator|train_step|test_step|predict_step)(?:_\d+)?$|^_\d+$", re.I)
#: (Keras 3 names an optimizer's scope by its class in snake case: ``RMSprop`` -> ``rm_sprop``, ``AdamW`` ->
#: ``adam_w``.)
OPTIMIZERS = re.compile(r"^(?:adam|adamw|adam_w|adamax|nadam|sgd|rmsprop|rm_sprop|adagrad|adadelta|ftrl|lion|lamb|"
                        r"adafactor|loss_scale_optimizer|lossscaleoptimizer|optimizer|[a-z]+_optimizer)(?:_\d+)*$",
                        re.I)
APPLY_OP = re.compile(r"^ResourceApply|^ApplyAdam|^ResourceSparseApply")
LOSSES = re.compile(r"^(?:compile_loss|.*loss.*|.*crossentropy.*|mean_squared_error|mean_absolute_error|huber.*)"
                    r"(?:_\d+)*$", re.I)
METRICS = re.compile(r"^(?:compile_metrics|metrics|.*accuracy.*|auc|precision|recall|mean|mean_metric_wrapper|"
                     r"top_k.*|f1_score|mean_iou|root_mean_squared_error)(?:_\d+)*$", re.I)
#: A Keras ``fit`` (the program's compiled metrics are known: the run file of tfadvisor's callback, the TensorBoard
#: callback's scalars): its train step opens scopes for the model, the loss, the gradient and the optimizer, and runs
#: outside them only the metrics' updates and results (the compiled metrics' and the loss tracker's:
#: ``StatefulPartitionedCall/Cumsum``, ``.../Add_3``); so its ops in no scope, and in the scopes ``tf.vectorized_map``
#: opens for them (``loop_body``: a multi-label AUC), are the compiled metrics'.
PFOR_SCOPE = re.compile(r"^loop_body(?:_\d+)?$")
#: Keras's scopes around the losses and metrics ``compile`` was given: the scope inside names the one.
COMPILED = re.compile(r"^(?:compile_loss|compile_metrics|metrics)(?:_\d+)?$")
GRADIENTS = re.compile(r"^(?:gradient_tape|gradients)(?:_\d+)?$")
#: How many scopes below the model name a layer (``bert_encoder_1/transformer``).
LAYER_DEPTH = 2
#: Parts listed in ``comp_summary`` and per category.
TOP = 5
#: The component of ops in no scope of the program's.
STEP = "(no scope)"
#: The input pipeline's part (kind ``input``): the wait for batches and, on a CPU, the step time its threads take
#: (:func:`_input_part`: it overlaps the compute parts it slowed); listed where it holds this share of the wall time
#: at least.
INPUT = "input pipeline"
INPUT_MIN_PCT = 1.0
#: The loss of a program whose loss opened no scope (a custom loop's ``loss_fn(y, model(x))``): the step's own ops
#: that the gradient goes through, and the step's own gradient ops (:func:`_differentiated`).
DIFFERENTIATED = "loss"
#: The attribution's part of the time the runtime takes (the executor between ops, op dispatch, a loop's iterations
#: that the trace does not record as ops): shared out by the time before each op (:func:`_dispatch`).
RUNTIME = "runtime"
#: A gap between ops longer than this is not the next op's dispatch but a wait, unless a loop's untraced iterations
#: fill it (:func:`_dispatch`). Gaps before ops measured on four CPU samples here (keras_fit_callback, ops_fit_graph,
#: comp_loss_map_fn_tuned, comp_debug_checks): median 0.5-1 us, 90th percentile 1.5-6 us, 99th 280-950 us.
MAX_DISPATCH_PS = 50_000_000
#: The gaps that are no op's dispatch: they weigh in the runtime's share-out for no part of the program.
UNCLAIMED = ("", "", "")
#: A graph op's name (``scope/name:Type``, ``name:Type``), not an eager one (``EagerLocalExecute: Type``).
GRAPH_OP = re.compile(r"^[^\s:]+:[A-Za-z_]\w*$")
#: The kinds of part whose largest the findings can name (``comp_<kind>``, ``comp_<kind>_pct``, ...).
KINDS = ("layer", "optimizer", "loss", "metric")
#: The time outside the steps' work whose ops make rows of their own (role, its ms per training step, the prefix of
#: its figures): a callback's ops between steps (a ``predict_on_batch`` runs the model), an evaluation's.
PASSES = (("between steps", "attr_between_steps_ms", "comp_between_steps"),
          ("evaluation", "outside_eval_ms_per_step_run", "comp_eval"))
#: Op types that say what the program does there, whichever part ran them (``comp_<cause>_pct``): Python called
#: from the graph (``tf.py_function``, ``tf.numpy_function``), debugging checks (``enable_check_numerics``,
#: ``check_numerics``, asserts, ``tf.print``), dtype casts (a mixed-precision policy, inputs in another dtype), table
#: lookups (embeddings) and their gradients.
CAUSES = {
    "py_function": re.compile(r"^(?:EagerPyFunc|PyFunc|PyFuncStateless)$"),
    "debug": re.compile(r"^(?:CheckNumerics(?:V2)?|Assert|DebugIdentity(?:V2|V3)?|DebugNumericSummary(?:V2)?|"
                        r"PrintV2)$"),
    "cast": re.compile(r"^Cast$"),
    "one_hot": re.compile(r"^OneHot$"),
    "lookup": re.compile(r"^(?:ResourceGather|GatherV2|Gather|SparseSegment\w+|UnsortedSegmentSum)$"),
}
#: What plain SGD (``keras.optimizers.SGD()``: ``variable.assign_sub(gradient * learning_rate)``) still runs of an
#: optimizer's update (:func:`_sgd_saves`): each dense weight's write (the same op on the same weight as the drawn
#: optimizer's last one) and, for a sparse gradient (an embedding's rows), the scatter of those rows.
SGD_WRITE = "AssignSubVariableOp"
SGD_SCATTER = re.compile(r"^ResourceScatter(?:Sub|Add)$")
#: The op whose time is one pass over a weight (:func:`_sgd_saves`): the gradient squared (Adam's, Nadam's, RMSprop's,
#: Adagrad's second moment; clipnorm's norm), like SGD's gradient times the learning rate a pass into a new buffer.
SGD_PASS = "Square"
#: Layers whose gradient is sparse (the rows a batch looked up): plain SGD scatters those rows, where an optimizer
#: that densifies the gradient (Adam's moments) writes the whole table.
SPARSE_GRADIENT = re.compile(r"embedding", re.I)
#: Ops inside a loop over elements (``tf.map_fn``, ``tf.vectorized_map``'s fallback, ``tf.while_loop``): cause
#: ``loop``.
LOOP_OPS = re.compile(r"^(?:While|StatelessWhile|TensorList\w+|TensorArray\w*)$")
LOOP_SCOPE = re.compile(r"(?:^|/)(?:while|map/while|TensorArray\w*)(?:_\d+)?/")


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
    for kind, pattern in (("loss", LOSSES), ("metric", METRICS)):
        if pattern.match(scopes[0]):
            # Keras's wrappers (``compile_loss``, ``compile_metrics``) hold the loss or metric the program named
            named = COMPILED.match(scopes[0]) and len(scopes) > 1 and scopes[1][:1].islower()
            return ("/".join(scopes[:2]) if named else scopes[0]), kind, role
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


def label(name: str, kind: str, role: str = "", what: str = "") -> str:
    """How a report names a part: ``layer functional_1/dense_1 (gradient)``, ``optimizer adam``; ``what`` the program
    says it is (``layer dense_1 (Dense, 512 units)``: :class:`~tfadvisor.analyses.program.Names`)."""
    text = ("the step's own ops (no scope)" if kind == "step" and name == STEP else
            "the loss (no scope: the ops outside the model the gradient goes through)"
            if kind == "loss" and name == DIFFERENTIATED else f"{kind} {name}")
    text += f" ({what})" if what else ""
    return text + (" (gradient)" if role == "gradient" else "")


def kind_name(name: str) -> str:
    """What a part is, without the numbers TensorFlow appends to make a scope unique (``auc_1`` -> ``auc``)."""
    return re.sub(r"(?:_\d+)+$", "", name.rsplit("/", 1)[-1]).lower()


class _Acc:
    """One part's ops: summed time, count, time by op type, by category, and by cause and category."""

    def __init__(self) -> None:
        self.ps, self.count = 0.0, 0
        self.types: dict[str, float] = {}
        self.type_count: dict[str, int] = {}
        self.cats: dict[str, float] = {}
        self.causes: dict[str, dict[str, float]] = {}

    def add(self, d: float, n: int, typ: str, cat: str, causes: list[str]) -> None:
        """An op: its time in its category, and in each cause it has."""
        self.ps += d
        self.count += n
        self.types[typ] = self.types.get(typ, 0.0) + d
        self.type_count[typ] = self.type_count.get(typ, 0) + n
        self.cats[cat] = self.cats.get(cat, 0.0) + d
        for c in causes:
            by = self.causes.setdefault(c, {})
            by[cat] = by.get(cat, 0.0) + d

    def merge(self, other: _Acc, skip: tuple[str, ...] = ()) -> None:
        """Add ``other``'s ops, but those of the categories in ``skip``."""
        for typ, d in other.types.items():
            if category(typ) not in skip:
                self.types[typ] = self.types.get(typ, 0.0) + d
                self.type_count[typ] = self.type_count.get(typ, 0) + other.type_count.get(typ, 0)
        for cat, d in other.cats.items():
            if cat not in skip:
                self.cats[cat] = self.cats.get(cat, 0.0) + d
                self.ps += d if cat != RUNTIME else 0.0  # op time: the runtime's share is time before the ops
        self.count += other.count


def causes_of(full_name: str, op_type: str) -> list[str]:
    """What an op says the program does there, whichever part ran it (:data:`CAUSES`)."""
    out = [c for c, pattern in CAUSES.items() if pattern.match(op_type)]
    if LOOP_SCOPE.search(full_name) or LOOP_OPS.match(op_type):
        out.append("loop")
    return out


def training_rows(p: Plane) -> np.ndarray:
    """A host plane's TF op events but those of tf.data's threads (``tf_data_*`` lines: the input pipeline's
    functions, whose ops carry no scope of the program's, ``GatherV2:GatherV2``)."""
    rows = p.rows_with_meta(tf_op_meta_mask(p))
    tfdata = p.line_rows(prefix="tf_data")
    return rows[~np.isin(p.ev_line[rows], tfdata)] if rows.shape[0] and tfdata.shape[0] else rows


def _host_ops(planes: list[tuple[Plane, np.ndarray]], *spans: tuple[np.ndarray, np.ndarray] | None
              ) -> list[tuple[list[str], np.ndarray, np.ndarray]]:
    """For each of ``spans``, (op names, summed durations ps, counts) of the host's TF ops on the training threads
    (``planes``: each host plane with its :func:`training_rows`): on a CPU the program's work; with spans
    (``(start_ps, end_ps)``) only the ops that start in one (the training steps' work, not a callback's between them
    or an evaluation's), with None every op."""
    out: list[tuple[list[str], list[np.ndarray], list[np.ndarray]]] = [([], [], []) for _ in spans]
    for p, all_rows in planes:
        start = p.ev_start_ps[all_rows]
        for (names, dur, cnt), sp in zip(out, spans):
            rows = all_rows if sp is None else all_rows[in_spans(start, *sp)]
            if not rows.shape[0]:
                continue
            meta = p.ev_meta[rows].astype(np.int64)
            d = np.bincount(meta, weights=np.maximum(p.ev_dur_ps[rows], 0).astype(np.float64),
                            minlength=len(p.event_names))
            c = np.bincount(meta, minlength=len(p.event_names))
            used = np.flatnonzero(c)
            names.extend(str(p.event_names[m]) for m in used.tolist())
            dur.append(d[used])
            cnt.append(c[used])
    return [(names, np.concatenate(dur), np.concatenate(cnt)) if names else ([], np.empty(0), np.empty(0, np.int64))
            for names, dur, cnt in out]


def in_spans(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Whether each time ``t`` lies in one of the spans ``[lo, hi]`` (in any order, overlapping or not)."""
    if not lo.shape[0]:
        return np.zeros(t.shape, bool)
    order = np.argsort(lo, kind="stable")
    lo, reach = lo[order], np.maximum.accumulate(hi[order])  # the furthest end of the spans starting by each
    k = np.searchsorted(lo, t, side="right") - 1
    return (k >= 0) & (t <= reach[np.maximum(k, 0)])


def _tf_ops(names: list[str], source: str) -> list[int]:
    """Indices of the TF ops with scopes; on the host also graph ops in no scope (``GatherV2:GatherV2``: the step's
    own, for their dispatch too)."""
    out = [i for i, n in enumerate(names) if ":" in n and "/" in n.split(":", 1)[0]]
    if source == "host":
        out += [i for i, n in enumerate(names) if GRAPH_OP.match(n) and "/" not in n]
    return out


def _eval_spans(outside: Table | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The evaluations between steps (the throughput analysis' ``outside_steps`` rows with evaluation time): from
    each interval's start to its evaluation's end; None where there are none."""
    if outside is None or not len(outside):
        return None
    lo = np.asarray(outside["start_ps"], np.int64)
    ev = np.asarray(outside["eval_ms"], np.float64)
    keep = ev > 0
    if not keep.any():
        return None
    return lo[keep], lo[keep] + (ev[keep] * PS_PER_MS).astype(np.int64)


def _dispatch(planes: list[tuple[Plane, np.ndarray]], steps: StepSet, work: np.ndarray, key_of: dict,
              acc: dict[tuple[str, str, str], _Acc]) -> None:
    """Each op's dispatch into its part of the program, as :data:`RUNTIME` (see the module docs): the time inside a
    step between the previous op's end (of any thread) and this op's start. Before an op of the step's own (no
    scope: the ops TensorFlow adds for a loop's gradient, ``zeros_like``, ``GatherV2``) the time is the part's
    whose ops come just before and just after, where that is one part (the loss around its ``tf.map_fn``'s
    gradient loop). A gap longer than :data:`MAX_DISPATCH_PS` is a wait, no op's, unless a loop's op is beside it or
    one part's ops are on both sides; so is the time before an input op, or after one (a function call's start): those
    are :data:`UNCLAIMED`, in the share-out for no part. ``planes``: each host plane with its :func:`training_rows`."""
    for p, rows in planes:
        start = p.ev_start_ps[rows]
        order = np.argsort(start, kind="stable")
        rows, start = rows[order], start[order]
        reach = np.maximum.accumulate(start + np.maximum(p.ev_dur_ps[rows], 0))
        gap = np.zeros(start.shape[0], np.float64)
        gap[1:] = np.maximum(start[1:] - reach[:-1], 0)
        # inside one step: the op and the previous op's end within the same step's start and its work's end
        k = np.searchsorted(steps.start, start, side="right") - 1
        ok = (k >= 0) & (start <= work[np.maximum(k, 0)])  # the step's work: not its batch-end hooks
        ok[1:] &= reach[:-1] >= steps.start[np.maximum(k[1:], 0)]
        ok[0] = False
        # each event's part: an index into ``owners`` (-1: an input op or one not counted)
        owners: list[tuple[tuple[str, str, str], list[str]]] = []
        by_meta = np.full(len(p.event_names), -1, np.int64)
        for m in np.unique(p.ev_meta[rows]).tolist():
            got = key_of.get(str(p.event_names[m])) if m >= 0 else None
            if got is not None:
                by_meta[m] = len(owners)
                owners.append(got)
        own = by_meta[p.ev_meta[rows].astype(np.int64)]
        whose = np.array([f"{k[0]}\0{k[1]}" for k, _ in owners] + [""], dtype=object)  # a part, its roles together
        scoped = (own >= 0) & np.array([k[1] != "step" or k[0] != STEP for k, _ in owners] + [False])[own]
        idx = np.arange(own.shape[0])
        before = np.maximum.accumulate(np.where(scoped, idx, -1))  # the last scoped op at or before each
        after = np.where(scoped, idx, own.shape[0])[::-1]
        after = np.minimum.accumulate(after)[::-1]  # the first scoped op at or after each
        step_own = (own >= 0) & ~scoped
        prev_i = np.concatenate(([-1], before[:-1]))
        lend = step_own & (prev_i >= 0) & (after < own.shape[0])
        lend_to = np.where(lend, after, -1)
        same = np.zeros(own.shape[0], bool)
        same[lend] = whose[own[prev_i[lend]]] == whose[own[lend_to[lend]]]
        taker = np.where(same, own[np.maximum(lend_to, 0)], own)
        taker[1:][own[:-1] < 0] = -1  # after an input or eager op: the function call's start, no op's dispatch
        # a long gap is no op's dispatch (a wait, a pause), but beside a loop's op (its untraced iterations: the
        # loop's part) or between one part's ops (lent)
        loop = np.array(["loop" in c for _, c in owners] + [False])[own]
        long_ = gap > MAX_DISPATCH_PS
        by_loop = long_ & ~same & ~loop
        by_loop[1:] &= loop[:-1]
        taker[by_loop] = np.concatenate(([-1], own[:-1]))[by_loop]  # after a loop's op: that loop's part
        taker[long_ & ~same & ~loop & ~by_loop] = -1
        use = ok & (gap > 0)
        for t, g in zip(taker[use].tolist(), gap[use].tolist()):
            if t < 0:  # a wait, before an input op, a call's start: in the share-out, no part's
                acc.setdefault(UNCLAIMED, _Acc()).ps += g
                continue
            key, causes = owners[t]
            a = acc.setdefault(key, _Acc())
            a.cats[RUNTIME] = a.cats.get(RUNTIME, 0.0) + g
            for c in causes:
                by = a.causes.setdefault(c, {})
                by[RUNTIME] = by.get(RUNTIME, 0.0) + g


def analyze(trace: Trace, ctx: Context, *, program: Program | None = None, steps: StepSet | None = None,
            step_table: Table | None = None, outside_table: Table | None = None) -> AnalysisResult:
    res = AnalysisResult("components")
    source, names, dur, cnt = op_parts(trace, ctx)
    work = None
    passes: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}  # role -> the ops of the time between steps
    if source == "host":  # the training threads' ops alone: tf.data's run beside them (its own analyses)
        planes = [(p, rows) for p in trace.host_planes if (rows := training_rows(p)).shape[0]]
        if steps is not None and steps.start.shape[0]:
            same = step_table is not None and len(step_table) == steps.start.shape[0]
            work = np.asarray(step_table["work_end_ps"], np.int64) if same else steps.end
        # the steps' own ops (not a callback's between them, not an evaluation's), and those apart
        apart = [(role, sp) for role, sp in (("between steps", _between_spans(step_table)),
                                             ("evaluation", _eval_spans(outside_table))) if sp is not None]
        (names, dur, cnt), *got = _host_ops(planes, (steps.start, work) if work is not None else None,
                                            *[sp for _, sp in apart])
        passes = {role: ops for (role, _), ops in zip(apart, got)}
    metrics = list(DECLARED.names())
    tf_ops = _tf_ops(names, source)
    if not tf_ops:
        res.missing(metrics, "no TF op names with scopes in the trace (a JAX program, ops run eagerly, or ops without "
                    "name scopes)", tf_only=True)
        return res
    acc: dict[tuple[str, str, str], _Acc] = {}
    key_of: dict[str, tuple[tuple[str, str, str], list[str]] | None] = {}  # op name -> (part, causes); None: input
    pass_ops = {role: (*got, _tf_ops(got[0], source)) for role, got in passes.items()}
    # the scopes in the program's own names (the model's forward pass between steps and in evaluation too)
    named = Names(program, [names[i] for i in tf_ops] + [got[0][i] for got in pass_ops.values() for i in got[3]],
                  component)
    compiled = ", ".join(program.metrics) if program and program.metrics else ""
    keys = {i: named(*names[i].partition(":")[::2]) for i in tf_ops}
    loss = None if compiled else _differentiated(names, keys)

    def part(key: tuple[str, str, str], full: str) -> tuple[str, str, str]:
        """The part an op is, its scopes' part re-read: a Keras ``fit``'s unscoped ops are its compiled metrics'; a
        custom loop's unscoped differentiated ops its loss."""
        if compiled and key[1] == "step" and (key[0] == STEP or PFOR_SCOPE.match(key[0])):
            return compiled, "metric", "forward"
        if loss is not None and key[1] == "step" and (key[2] == "gradient" or _own_name(full) in loss):
            return DIFFERENTIATED, "loss", key[2]
        return key

    for i in tf_ops:
        full, _, typ = names[i].partition(":")
        t = op_type_of(names[i], source)
        dt = display_type(t)
        if INPUT_OPS.match(dt):
            key_of[names[i]] = None
            continue
        key = part(keys[i], full)
        key_of[names[i]] = (key, causes_of(full, dt))
        acc.setdefault(key, _Acc()).add(float(dur[i]), int(cnt[i]), dt, category(t), key_of[names[i]][1])
    if work is not None:
        _dispatch(planes, steps, work, key_of, acc)
    total = sum(a.ps for a in acc.values())
    if total <= 0:
        res.missing(metrics, "no op time in named scopes", tf_only=True)
        return res
    # each category's wall time (the attribution's part) shared out by the components' op time in it
    cat_total = {c: sum(a.cats.get(c, 0.0) for a in acc.values()) for c in CATEGORIES}
    cat_total[RUNTIME] = sum(a.cats.get(RUNTIME, 0.0) for a in acc.values()) + acc.pop(UNCLAIMED, _Acc()).ps
    wall_ms = {c: ctx.metric(f"attr_{c}_ms") or 0.0 for c in (*CATEGORIES, RUNTIME)}
    wall_pct = {c: ctx.metric(f"attr_{c}_pct") or 0.0 for c in (*CATEGORIES, RUNTIME)}

    # On a CPU the ops share the cores: an op beside a matrix product slows it though the attribution gives that
    # instant to the product (its category comes first). So there the compute parts' wall time is shared out by
    # op time across categories (each op's share of all the ops' time); on a device, category by category.
    pooled = source == "host"
    pool_total = sum(cat_total[c] for c in CATEGORIES)
    ms_per_pct = _ms_per_pct(ctx, wall_ms, wall_pct)  # the wall time per training step of one percent of it
    inp = _input_part(ctx, wall_ms, wall_pct, ms_per_pct, pooled)

    def on_wall(cats: dict[str, float], figure: dict[str, float]) -> float:
        out = 0.0
        for c, v in cats.items():
            if pooled and c != RUNTIME:
                out += sum(figure[k] for k in CATEGORIES) * v / pool_total if pool_total > 0 else 0.0
            elif cat_total.get(c, 0.0) > 0:
                out += figure[c] * v / cat_total[c]
        return out

    def part_of(cats: dict[str, float]) -> str:
        """The attribution's part that holds most of this time on the wall clock ("" for no time)."""
        return max(cats, key=lambda c: (on_wall({c: cats[c]}, wall_pct), cats[c], c)) if cats else ""

    rows = sorted(acc.items(), key=lambda kv: (-on_wall(kv[1].cats, wall_pct), -kv[1].ps, kv[0]))
    row_labels = [label(*k, what=named.about(k)) for k, _ in rows]  # one per row of ``rows``
    op_ms = np.array([a.ps for _, a in rows]) / PS_PER_MS
    cols = {
        "component": [k[0] for k, _ in rows],
        "kind": [k[1] for k, _ in rows],
        "role": [k[2] for k, _ in rows],
        "label": list(row_labels),
        "ms_per_step": [on_wall(a.cats, wall_ms) for _, a in rows],
        "pct": [on_wall(a.cats, wall_pct) for _, a in rows],
        "op_ms": op_ms.tolist(),
        "op_pct": (100.0 * op_ms * PS_PER_MS / total).tolist(),
        "ops": [a.count for _, a in rows],
        "types": [_top_types(a.types) for _, a in rows],
        "layer_class": [named.layer_class(k) for k, _ in rows],
        "params": [named.params(k) for k, _ in rows],
        "function": [named.function(k) for k, _ in rows],
        "names_from": [named.names_from(k) for k, _ in rows],
    }
    dense = _dense_share(cols)
    cols["sgd_saves_ms"] = [_sgd_saves(a, on_wall, wall_ms, dense) if k[1] == "optimizer" else 0.0 for k, a in rows]
    if inp["pct"] >= INPUT_MIN_PCT:  # the input pipeline among the parts, in its place by its share
        at = int(np.searchsorted(-np.asarray(cols["pct"], np.float64), -inp["pct"], side="right"))
        row = {"component": INPUT, "kind": "input", "role": "input", "label": inp["label"], "ms_per_step": inp["ms"],
               "pct": inp["pct"], "op_ms": 0.0, "op_pct": 0.0, "ops": 0, "types": inp["types"], "layer_class": "",
               "params": 0, "function": "", "names_from": "", "sgd_saves_ms": 0.0}
        for c, v in row.items():
            cols[c].insert(at, v)
    for role, figure, prefix in PASSES:  # after the training steps' parts: between steps', evaluation's
        per_step = ctx.metric(figure)
        got, top = ([], "") if role not in pass_ops else _pass_rows(
            role, per_step, pass_ops[role], named, part, source, ms_per_pct)
        for row in got:
            for c, v in row.items():
                cols[c].append(v)
        if got:
            res.add(f"{prefix}_ms", float(per_step))
            res.add(f"{prefix}_top", top)
        else:
            res.missing([f"{prefix}_ms", f"{prefix}_top"], "")
    cols["update_ms"], on = _updates(cols)
    if on:  # said by the findings on the optimizer (the label stays its name)
        res.add("comp_optimizer_updates", on)
    else:
        res.missing(["comp_optimizer_updates"], "")
    if "optimizer" in cols["kind"]:
        res.add("comp_optimizer_sgd_saves_ms", float(sum(v for v, k in zip(cols["sgd_saves_ms"], cols["kind"])
                                                         if k == "optimizer")))
    else:
        res.missing(["comp_optimizer_sgd_saves_ms"], "")
    labels = cols["label"]  # the table's: the input pipeline's row in its place, evaluation's after
    table = Table({c: np.array(v, dtype=np.int64 if c in ("ops", "params") else
                               np.float64 if c in ("ms_per_step", "pct", "op_ms", "op_pct", "update_ms", "sgd_saves_ms")
                               else object)
                   for c, v in cols.items()}, n=len(labels))
    res.tables["components"] = table
    res.notes.extend(named.notes())
    pct = table["pct"]
    res.add("comp_top", labels[0])
    res.add("comp_top_pct", float(pct[0]))
    res.add("comp_summary", ", ".join(f"{lb} {p:.0f} %" for lb, p in zip(labels[:TOP], pct[:TOP].tolist())))
    for c in CATEGORIES:
        part = sorted(((a.cats.get(c, 0.0), lb) for lb, (_, a) in zip(row_labels, rows) if a.cats.get(c, 0.0) > 0),
                      key=lambda x: (-x[0], x[1]))
        if cat_total[c] > 0:
            res.add(f"comp_{c}_top", ", ".join(f"{lb} {100.0 * v / cat_total[c]:.0f} %" for v, lb in part[:TOP]))
        else:
            res.missing([f"comp_{c}_top"], "")

    # the largest part of each kind, its roles together (a layer's forward and gradient ops), its own work: the
    # collectives in its scope (an optimizer's all-reduce of the gradients) are the distribution strategy's
    whole: dict[tuple[str, str], _Acc] = {}
    for (name, kind, _role), a in rows:
        whole.setdefault((name, kind), _Acc()).merge(a, skip=("collective",))
    model_ps = sum(a.ps for (_, kind), a in whole.items() if kind == "layer")
    for kind in KINDS:
        mine = sorted(((on_wall(a.cats, wall_pct), a.ps, name, a) for (name, k), a in whole.items()
                       if k == kind and a.cats),  # a part of collectives alone has no work of its own
                      key=lambda x: (-x[0], -x[1], x[2]))
        keys = [f"comp_{kind}{x}" for x in ("", "_class", "_pct", "_ms", "_part", "_types", "_ratio")]
        if not mine:
            res.missing(keys, "")
            continue
        p, ps, name, a = mine[0]
        res.add(keys[0], name)
        res.add(keys[1], kind_name(name))
        res.add(keys[2], p)
        res.add(keys[3], on_wall(a.cats, wall_ms))
        res.add(keys[4], part_of(a.cats))
        res.add(keys[5], _top_types(a.types))
        if model_ps > 0:
            res.add(keys[6], ps / model_ps)
        else:
            res.missing(keys[6:], "")
    policy = keras_facts(trace.run_metadata or {})[0].get("dtype_policy")
    if policy:
        res.add("comp_dtype_policy", policy)
    else:
        res.missing(["comp_dtype_policy"], "")
    _roles(res, rows, on_wall, wall_pct, wall_ms, part_of)
    _causes(res, rows, row_labels, on_wall, wall_pct, wall_ms, part_of)
    return res


def _between_spans(step_table: Table | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The time between steps: from each step's work's end to its wall time's end (the next step's start, or the
    interval outside the steps before it: evaluation, an epoch's end); None without."""
    if step_table is None or not len(step_table):
        return None
    lo = np.asarray(step_table["work_end_ps"], np.int64)
    hi = np.asarray(step_table["wall_end_ps"], np.int64)
    keep = hi > lo
    return (lo[keep], hi[keep]) if keep.any() else None


def _pass_rows(role: str, per_step, ops: tuple[list[str], np.ndarray, np.ndarray, list[int]], named: Names, part,
               source: str, ms_per_pct: float) -> tuple[list[dict], str]:
    """The parts of the program whose ops ran between steps or in evaluation (``role``: :data:`PASSES`), each ms
    per training step: that time per training step (``per_step``) shared out by the parts' op time in it; and the
    largest five said (``metric auc 60 %, ...``). Empty where it ran no ops."""
    names, dur, cnt, idx = ops
    if not idx or not isinstance(per_step, (int, float)) or per_step <= 0:
        return [], ""
    acc: dict[tuple[str, str, str], _Acc] = {}
    own: dict[tuple[str, str, str], tuple[str, str, str]] = {}  # the part -> the key its names are kept under
    for i in idx:
        full, _, typ = names[i].partition(":")
        t = op_type_of(names[i], source)
        dt = display_type(t)
        if INPUT_OPS.match(dt):
            continue
        got = part(named(full, typ), full)
        row = (got[0], got[1], role)
        own.setdefault(row, got)
        acc.setdefault(row, _Acc()).add(float(dur[i]), int(cnt[i]), dt, category(t), [])
    total = sum(a.ps for a in acc.values())
    if total <= 0:
        return [], ""
    rows, said = [], []
    for key, a in sorted(acc.items(), key=lambda kv: (-kv[1].ps, kv[0])):
        k = own[key]
        ms = float(per_step) * a.ps / total
        name = label(key[0], key[1], what=named.about(k))
        share = 100.0 * a.ps / total
        if len(said) < TOP and (not said or share >= 1.0):  # not the parts of under 1 % but the first
            said.append(f"{name} {share:.0f} %")
        rows.append({"component": key[0], "kind": key[1], "role": role, "label": f"{name} ({role})", "ms_per_step": ms,
                     "pct": ms / ms_per_pct if ms_per_pct > 0 else 0.0, "op_ms": a.ps / PS_PER_MS,
                     "op_pct": share, "ops": a.count, "types": _top_types(a.types),
                     "layer_class": named.layer_class(k), "params": named.params(k), "function": named.function(k),
                     "names_from": named.names_from(k), "sgd_saves_ms": 0.0})
    return rows, ", ".join(said)


def _ms_per_pct(ctx: Context, wall_ms: dict[str, float], wall_pct: dict[str, float]) -> float:
    """The wall time per training step of one percent of it: the attribution's parts' ms over their %."""
    parts = [(wall_pct[c], wall_ms[c]) for c in (*CATEGORIES, RUNTIME)]
    parts.append((float(ctx.metric("attr_input_pct") or 0.0), float(ctx.metric("attr_input_ms") or 0.0)))
    pct_sum = sum(p for p, _ in parts)
    return sum(m for _, m in parts) / pct_sum if pct_sum > 0 else 0.0


def _updates(cols: dict[str, list]) -> tuple[list[float], str]:
    """The optimizer's update of each layer's weights, ms per step: the optimizer's time shared by the layers'
    parameter counts (an update is element-wise over each weight; Keras 3 names no variable in its scopes), on each
    layer's first row, 0 elsewhere; where the program's facts give the parameters (the run file, the model
    config) and the layers with ops hold any. And the largest share said (``93 % of it updating embedding``), or ""."""
    out = [0.0] * len(cols["kind"])
    params: dict[str, tuple[int, int]] = {}  # layer -> (its first row, its parameters)
    for i, (name, kind, role, n) in enumerate(zip(cols["component"], cols["kind"], cols["role"], cols["params"])):
        if kind == "layer" and role in ("forward", "gradient") and n >= 0 and name not in params:
            params[name] = (i, int(n))
    total = sum(n for _, n in params.values())
    opt = sum(ms for ms, kind in zip(cols["ms_per_step"], cols["kind"]) if kind == "optimizer")
    if total <= 0 or opt <= 0:
        return out, ""
    for i, n in params.values():
        out[i] = opt * n / total
    name, (_, n) = max(params.items(), key=lambda kv: (kv[1][1], kv[0]))
    return out, f"{100.0 * n / total:.0f} % of it updating {name}"


def _dense_share(cols: dict[str, list]) -> float:
    """The layers' parameters outside those with a sparse gradient (:data:`SPARSE_GRADIENT`), over all of them; 1
    where the program's facts give none."""
    params: dict[str, tuple[str, int]] = {}
    for name, kind, n, cls in zip(cols["component"], cols["kind"], cols["params"], cols["layer_class"]):
        if kind == "layer" and n >= 0 and name not in params:
            params[name] = (str(cls or ""), int(n))
    total = sum(n for _, n in params.values())
    sparse = sum(n for cls, n in params.values() if SPARSE_GRADIENT.search(cls))
    return 1.0 - sparse / total if total > 0 else 1.0


def _sgd_saves(a: _Acc, on_wall, wall_ms: dict[str, float], dense: float) -> float:
    """What replacing an optimizer (its row's ops ``a``) by plain SGD saves per step, ms: the row's wall time less
    SGD's own update, read from the same ops. SGD's: each dense weight's write (the row's ``AssignSubVariableOp``
    time; of it the dense weights' share ``dense``: an optimizer that densifies an embedding's gradient writes the
    whole table, SGD the batch's rows), per write a multiply of the weight's size (the gradient by the learning
    rate: the time of one :data:`SGD_PASS` op, the gradient squared, which the adaptive optimizers compute for each
    weight, a pass of the same size into a new buffer; without one the row's mean element-wise op), a sparse
    gradient's scatters as they are, and the dispatch (the runtime's share) in proportion to SGD's op count. The
    per-step scalars (the iteration count, the learning rate's cast) take microseconds and are left out."""
    writes = a.type_count.get(SGD_WRITE, 0) * dense
    if a.type_count.get(SGD_PASS, 0) > 0:
        per_pass = a.types[SGD_PASS] / a.type_count[SGD_PASS]
    else:
        elem = [(d, a.type_count.get(t, 0)) for t, d in a.types.items()
                if category(t) == "elementwise" and not t.endswith("VariableOp")]
        n = sum(c for _, c in elem)
        per_pass = sum(d for d, _ in elem) / n if n > 0 else 0.0
    kept = {category(SGD_WRITE): a.types.get(SGD_WRITE, 0.0) * dense, category(SGD_PASS): per_pass * writes}
    scatters = [t for t in a.types if SGD_SCATTER.match(t)]
    for t in scatters:
        kept[category(t)] = kept.get(category(t), 0.0) + a.types[t]
    if a.count > 0:
        n_kept = 2 * writes + sum(a.type_count.get(t, 0) for t in scatters)
        kept[RUNTIME] = a.cats.get(RUNTIME, 0.0) * min(n_kept / a.count, 1.0)
    kept = {c: min(v, a.cats.get(c, 0.0)) for c, v in kept.items() if a.cats.get(c, 0.0) > 0}
    return max(on_wall(a.cats, wall_ms) - on_wall(kept, wall_ms), 0.0)


def _input_part(ctx: Context, wall_ms: dict[str, float], wall_pct: dict[str, float], ms_per_pct: float,
                pooled: bool) -> dict:
    """The input pipeline as a part of the program, what it costs the step: the wait for its batches (the
    attribution's ``input``) and, on a CPU, the step time its threads took from the step's ops on the cores
    (``tfdata_contention_ms_per_step``; that time is also inside the compute parts the step's ops ran in, which it
    slowed, so this row overlaps them). ``pct`` of the wall time, ``ms`` per training step."""
    wait_pct, wait_ms = float(ctx.metric("attr_input_pct") or 0.0), float(ctx.metric("attr_input_ms") or 0.0)
    taken_ms = float(ctx.metric("tfdata_contention_ms_per_step") or 0.0) if pooled else 0.0
    taken = taken_ms / ms_per_pct if ms_per_pct > 0 else 0.0
    what = [f"waiting for batches {wait_ms:.3g} ms"] if wait_ms > 0 else []
    what += [f"its threads slowing the step's ops {taken_ms:.3g} ms"] if taken_ms > 0 else []
    pct = min(wait_pct + taken, 100.0)  # the contention estimate is at most the steps' own time, the wait beside it
    return {"pct": pct, "ms": min(wait_ms + taken_ms, 100.0 * ms_per_pct),
            "types": str(ctx.metric("tfdata_hot_stage") or ""),
            "label": "the input pipeline" + (f" ({', '.join(what)})" if what else "")}


def _own_name(full: str) -> str:
    """An op's name without TensorFlow's wrappers (``StatefulPartitionedCall/mul_3`` -> ``mul_3``)."""
    return "/".join(s for s in full.split("/") if not WRAPPERS.match(s))


def _differentiated(names: list[str], keys: dict[int, tuple[str, str, str]]) -> set[str] | None:
    """The step's own forward ops (in no scope of the program's) that the gradient goes through: their gradients are
    scoped by their names (``gradient_tape/mul_3/Mul``: the step's part ``mul_3``, role gradient). Where the program
    has no loss part (a custom loop whose loss opened no scope), these and the step's own gradient ops are its loss:
    what the program computes from the model's outputs and differentiates. None where there are none."""
    grads = {k[0] for k in keys.values() if k[1] == "step" and k[2] == "gradient" and k[0] != STEP}
    own = {_own_name(names[i].partition(":")[0]) for i, k in keys.items() if k == (STEP, "step", "forward")}
    hit = own & grads
    return hit or None


def _top_types(types: dict[str, float]) -> str:
    return ", ".join(t for t, _ in sorted(types.items(), key=lambda x: (-x[1], x[0]))[:3])


def _roles(res: AnalysisResult, rows: list, on_wall, wall_pct: dict, wall_ms: dict, part_of) -> None:
    """The gradient computation (every part's gradient ops) against the forward pass it differentiates."""
    grad, fwd = _Acc(), _Acc()
    for (_name, kind, role), a in rows:
        if kind in ("layer", "loss", "step"):
            (grad if role == "gradient" else fwd).merge(a)
    keys = ["comp_gradient_pct", "comp_gradient_ms", "comp_gradient_part", "comp_gradient_ratio"]
    if grad.ps <= 0:
        res.missing(keys, "")
        return
    res.add(keys[0], on_wall(grad.cats, wall_pct))
    res.add(keys[1], on_wall(grad.cats, wall_ms))
    res.add(keys[2], part_of(grad.cats))
    if fwd.ps > 0:
        res.add(keys[3], grad.ps / fwd.ps)
    else:
        res.missing(keys[3:], "")


def _causes(res: AnalysisResult, rows: list, labels: list[str], on_wall, wall_pct: dict, wall_ms: dict,
            part_of) -> None:
    """Each cause's share of the wall time, the part it lies in and the parts of the program that have it."""
    for cause in (*CAUSES, "loop"):
        keys = [f"comp_{cause}_pct", f"comp_{cause}_ms", f"comp_{cause}_part", f"comp_{cause}_where"]
        cats: dict[str, float] = {}
        where = []
        for lb, (_, a) in zip(labels, rows):
            by = a.causes.get(cause)
            if not by:
                continue
            for c, v in by.items():
                cats[c] = cats.get(c, 0.0) + v
            where.append((on_wall(by, wall_pct), lb))
        if not cats:
            res.missing(keys, "")
            continue
        res.add(keys[0], on_wall(cats, wall_pct))
        res.add(keys[1], on_wall(cats, wall_ms))
        res.add(keys[2], part_of(cats))
        where.sort(key=lambda x: (-x[0], x[1]))
        res.add(keys[3], ", ".join(f"{lb} {p:.0f} %" for p, lb in where[:3]))
