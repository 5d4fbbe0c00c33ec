"""Capture real TensorFlow pairs whose cost sits in one part of the program other than the input pipeline.

Issue 52, point 7: each problem is a small training program as TensorFlow users write it, TF's defaults on
(Keras 3 ``fit`` over NumPy arrays goes through tf.data with its default optimizations), whose time goes to one
program component; its twin ``<name>_tuned`` is the same program with exactly the fix. Each trains for real on
this machine's CPU and is profiled with tfadvisor's own capture (``tfadvisor.keras.AdvisorCallback`` for ``fit``,
``tfadvisor.profile`` with ``tfadvisor.step`` markers for custom loops); the script times every training step
itself, start to next start (``step_clock`` "wall", :class:`make_op_samples.StepClock`):

- ``comp_metric_auc`` (fit): a multi-label tagger compiled with ``metrics=[AUC(multi_label=True, num_labels=TAGS,
  num_thresholds=METRIC_THRESHOLDS)]``; twin: the default 200 thresholds.
- ``comp_optimizer_table`` (fit): an embedding model (a VOCAB x 32 table) trained with Adam, whose dense update
  writes the whole table every step; twin: ``SGD`` without momentum, whose update scatters the looked-up rows.
- ``comp_loss_map_fn`` (fit): a custom loss computed per example with ``tf.map_fn``; twin: the same math on the
  whole batch.
- ``comp_py_function`` (fit): a layer calling ``tf.py_function`` (NumPy) on every batch; twin: the same math in
  TF ops.
- ``comp_debug_checks`` (custom loop): ``tf.debugging.enable_check_numerics()`` left on; twin: without it.
- ``comp_mixed_precision_cpu`` (fit): the ``mixed_float16`` policy on a CPU; twin: ``float32``.
- ``comp_layer_one_hot`` (fit): a layer multiplying ``tf.one_hot(ids)`` by a weight matrix; twin: an
  ``Embedding`` of the same shape (the same math, a lookup).
- ``comp_gradient_per_head`` (custom loop): a six-head model, one ``tape.gradient`` per head's loss (persistent
  tape), summed; twin: one ``tape.gradient`` of the summed loss.

Usage: ``python make_component_samples.py OUT [--cases a,b] [--reps 3] [--finalize]`` (each case in its own
process, each pair captured ``reps`` times, the repetition with the median speedup kept: the machine is shared;
``--finalize`` only rewrites expected.toml and the README table from the measured.json); ``OUT/<sample>/``
gets the logdir, ``measured.json`` and ``expected.toml``; with ``OUT`` = ``sample_traces`` the README's table of
these pairs is rewritten too.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from make_op_samples import StepClock, non_finite_stats, stats_mean, write_measured  # noqa: E402
from make_samples import _toml_value  # noqa: E402

#: Warm-up steps (the first traces the step function), then the profiled steps.
FIRST, STEPS = 8, 12
#: comp_metric_auc: the problem's AUC thresholds (Keras' default is 200) and the tagger's labels.
METRIC_THRESHOLDS, TAGS = 10_000, 50
#: comp_optimizer_table, comp_layer_one_hot: the tables' vocabulary sizes.
VOCAB, ONE_HOT_VOCAB = 200_000, 8_000

#: Per problem: its loop, the rule that should explain it, the planted component, what the problem does and the
#: fix its twin applies (plain words, for expected.toml and the README); ``remains``: the twin still has the part
#: (a metric, an optimizer) at a smaller cost, so its rule may still fire there (the closed loop checks the cost fell).
CASES = {
    "comp_metric_auc": dict(
        loop="fit", rule="component_metric", component="the metric (keras.metrics.AUC)", remains=True,
        problem=f"compiled with metrics=[keras.metrics.AUC(multi_label=True, num_labels={TAGS}, "
                f"num_thresholds={METRIC_THRESHOLDS:_})]",
        fix=f"metrics=[keras.metrics.AUC(multi_label=True, num_labels={TAGS})] (the default 200 thresholds)"),
    "comp_optimizer_table": dict(
        loop="fit", rule="component_optimizer", component="the optimizer's update of the embedding table",
        remains=True,
        problem=f"an Embedding({VOCAB:_}, 32) bag-of-words model trained with Adam: Adam's moments and update are "
                "dense, so every step rewrites the whole table",
        fix="keras.optimizers.SGD(0.05) without momentum, whose update of the table is a scatter of the "
            "looked-up rows (the gradient stays tf.IndexedSlices)"),
    "comp_loss_map_fn": dict(
        loop="fit", rule="component_loss", component="the loss (a custom function, tf.map_fn per example)",
        problem="a custom loss (label-smoothed cross-entropy) computed per example with tf.map_fn over the batch",
        fix="the same loss written on the whole batch (one_hot, log_softmax, reduce_sum over the last axis)"),
    "comp_py_function": dict(
        loop="fit", rule="component_py_function", component="the layer feature_transform (tf.py_function)",
        problem="a layer (feature_transform) that runs NumPy through tf.py_function on every batch "
                "(sign(x) * log1p(|x|), then each example standardised in a Python loop over the rows)",
        fix="the same math in TF ops on the whole batch (tf.sign, tf.math.log1p, tf.nn.moments) in that layer"),
    "comp_debug_checks": dict(
        loop="loop", rule="component_debug_checks",
        component="debugging instrumentation (enable_check_numerics: DebugNumericSummaryV2 ops)",
        problem="tf.debugging.enable_check_numerics() left on from debugging: every op's output is checked for "
                "NaN and Inf",
        fix="without tf.debugging.enable_check_numerics()"),
    "comp_mixed_precision_cpu": dict(
        loop="fit", rule="component_dtype_policy", component="the dtype policy (casts and float16 math on a CPU)",
        problem="keras.mixed_precision.set_global_policy('mixed_float16') while training on the CPU",
        fix="the default float32 policy"),
    "comp_layer_one_hot": dict(
        loop="fit", rule="component_layer", component="the layer tokens (one_hot then matmul)",
        problem=f"a layer (tokens) computing tf.one_hot(ids, {ONE_HOT_VOCAB:_}) @ W (W {ONE_HOT_VOCAB:_} x 64): "
                "a dense matmul with a one-hot matrix",
        fix=f"keras.layers.Embedding({ONE_HOT_VOCAB:_}, 64, name='tokens'): the same math, a row lookup"),
    "comp_gradient_per_head": dict(
        loop="loop", rule="component_gradient",
        component="gradient computation (the trunk's backward pass, six times)",
        problem="a six-head model trained with a persistent GradientTape and one tape.gradient per head's loss, "
                "the gradients summed (the shared trunk's backward pass runs six times)",
        fix="one tape.gradient of the summed loss (the trunk's backward pass once)"),
}
PAIRS = {name: name + "_tuned" for name in CASES}


def _data(np, n, in_dim, classes=10):
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, in_dim), dtype=np.float32), rng.integers(0, classes, n)


def _fit_case(name: str, tuned: bool):
    """The compiled model, its data, batch size and a description of the model, for the fit cases."""
    import keras
    import numpy as np
    import tensorflow as tf

    L = keras.layers
    n = (FIRST + STEPS + 4)
    if name == "comp_metric_auc":
        batch, tags = 512, TAGS
        rng = np.random.default_rng(0)
        x, y = rng.standard_normal((n * batch, 64), dtype=np.float32), rng.integers(0, 2, (n * batch, tags))
        inp = keras.Input((64,))
        out = L.Dense(tags, activation="sigmoid")(L.Dense(256, activation="relu")(inp))
        model = keras.Model(inp, out)
        auc = keras.metrics.AUC(multi_label=True, num_labels=tags, **({} if tuned else
                                                                       {"num_thresholds": METRIC_THRESHOLDS}))
        model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy", metrics=[auc])
        return model, x, y, batch, f"a multi-label tagger, an MLP 64-256-{tags} (sigmoid), binary cross-entropy, Adam"
    if name == "comp_optimizer_table":
        batch, seq = 256, 20
        rng = np.random.default_rng(0)
        x, y = rng.integers(0, VOCAB, (n * batch, seq)), rng.integers(0, 2, n * batch)
        inp = keras.Input((seq,), dtype="int32")
        h = L.GlobalAveragePooling1D()(L.Embedding(VOCAB, 32, name="embedding")(inp))
        model = keras.Model(inp, L.Dense(1, activation="sigmoid")(h))
        opt = keras.optimizers.SGD(0.05) if tuned else keras.optimizers.Adam(1e-3)
        model.compile(opt, "binary_crossentropy")
        return model, x, y, batch, f"token ids ({seq} per example) -> Embedding({VOCAB}, 32) -> mean -> Dense(1)"
    if name == "comp_loss_map_fn":
        batch = 64
        x, y = _data(np, n * batch, 32)
        inp = keras.Input((32,))
        model = keras.Model(inp, L.Dense(10)(L.Dense(64, activation="relu")(inp)))

        def one_example(args):
            label, logits = args
            target = 0.9 * tf.one_hot(label, 10) + 0.01
            return -tf.reduce_sum(target * tf.nn.log_softmax(logits))

        def smoothed_xent(y_true, y_pred):
            labels = tf.cast(tf.reshape(y_true, [-1]), tf.int32)
            if tuned:
                target = 0.9 * tf.one_hot(labels, 10) + 0.01
                return -tf.reduce_sum(target * tf.nn.log_softmax(y_pred), axis=-1)
            return tf.map_fn(one_example, (labels, y_pred), fn_output_signature=tf.float32)

        model.compile(keras.optimizers.Adam(1e-3), smoothed_xent)
        return model, x, y, batch, "an MLP 32-64-10, Adam, the custom loss smoothed_xent"
    if name == "comp_py_function":
        batch, d = 256, 256
        x, y = _data(np, n * batch, d)

        def np_transform(a):  # each example's features, standardised one by one
            z = np.sign(a.numpy()) * np.log1p(np.abs(a.numpy()))
            for row in z:
                row -= row.mean()
                row /= row.std() + 1e-6
            return z

        class FeatureTransform(L.Layer):
            def call(self, a):
                if tuned:
                    z = tf.sign(a) * tf.math.log1p(tf.abs(a))
                    mean, var = tf.nn.moments(z, axes=[1], keepdims=True)
                    return (z - mean) / (tf.sqrt(var) + 1e-6)
                out = tf.py_function(np_transform, [a], tf.float32)
                return tf.ensure_shape(out, a.shape)

        inp = keras.Input((d,))
        h = FeatureTransform(name="feature_transform")(inp)
        model = keras.Model(inp, L.Dense(10)(L.Dense(64, activation="relu")(h)))
        model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model, x, y, batch, f"inputs of {d} features -> feature_transform -> Dense(64) -> Dense(10), Adam"
    if name == "comp_mixed_precision_cpu":
        if not tuned:
            keras.mixed_precision.set_global_policy("mixed_float16")
        batch, width = 256, 256  # steps of milliseconds at least: the fit clock's per-step jitter is ~0.1 ms
        x, y = _data(np, n * batch, 128)
        inp = keras.Input((128,))
        h = L.Dense(width, activation="relu")(L.Dense(width, activation="relu")(inp))
        model = keras.Model(inp, L.Dense(10, dtype="float32")(h))  # float32 logits under any policy
        model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model, x, y, batch, f"an MLP 128-{width}-{width}-10 (float32 logits), Adam"
    if name == "comp_layer_one_hot":
        batch, seq, dim = 128, 16, 64
        rng = np.random.default_rng(0)
        x, y = rng.integers(0, ONE_HOT_VOCAB, (n * batch, seq)), rng.integers(0, 2, n * batch)

        class OneHotDense(L.Layer):
            def build(self, shape):
                self.w = self.add_weight(shape=(ONE_HOT_VOCAB, dim), initializer="glorot_uniform", name="w")

            def call(self, ids):
                return tf.matmul(tf.one_hot(ids, ONE_HOT_VOCAB), self.w)

        inp = keras.Input((seq,), dtype="int32")
        tokens = L.Embedding(ONE_HOT_VOCAB, dim, name="tokens") if tuned else OneHotDense(name="tokens")
        h = L.GlobalAveragePooling1D()(tokens(inp))
        model = keras.Model(inp, L.Dense(1, activation="sigmoid")(L.Dense(64, activation="relu")(h)))
        model.compile(keras.optimizers.Adam(1e-3), "binary_crossentropy")
        return model, x, y, batch, f"token ids ({seq} per example) -> tokens ({ONE_HOT_VOCAB} x {dim}) -> mean -> " \
                                   "Dense(64) -> Dense(1), Adam"
    raise ValueError(name)


def run_fit(name: str, out: Path) -> dict:
    import keras

    import tfadvisor.keras

    problem, tuned = name.removesuffix("_tuned"), name.endswith("_tuned")
    model, x, y, batch, what = _fit_case(problem, tuned)
    clock = StepClock()
    logdir = out / name
    cb = tfadvisor.keras.AdvisorCallback(str(logdir), steps=(FIRST, FIRST + STEPS), analyze=False)
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[clock.callback(keras)(), cb])
    desc = (f"Keras 3 model.fit, batch {batch}, of {what}; " + (CASES[problem]["fix"] if tuned else
            CASES[problem]["problem"]) + f"; dtype policy {keras.mixed_precision.global_policy().name}; "
            f"tfadvisor.keras.AdvisorCallback profiles steps {FIRST}-{FIRST + STEPS - 1}")
    return {"description": desc, "batch_size": batch, "steps_per_execution": 1,
            "measured_step_ms": clock.per_step_ms(FIRST, STEPS), "capture_api": "tfadvisor_callback"}


def _loop_case(name: str, tuned: bool):
    """The step function (a tf.function returning the loss), its arguments and a description, for the loops."""
    import keras
    import numpy as np
    import tensorflow as tf

    L = keras.layers
    rng = np.random.default_rng(0)
    if name == "comp_debug_checks":
        if not tuned:
            tf.debugging.enable_check_numerics()
        batch, width = 256, 1024
        x = tf.constant(rng.standard_normal((batch, 128), dtype=np.float32))
        y = tf.constant(rng.integers(0, 10, batch))
        inp = keras.Input((128,))
        h = inp
        for _ in range(3):
            h = L.Dense(width, activation="relu")(h)
        model = keras.Model(inp, L.Dense(10)(h))
        opt, xent = keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = xent(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        return step, (x, y), batch, f"an MLP 128-{width}-{width}-{width}-10, Adam, sparse cross-entropy"
    if name == "comp_gradient_per_head":
        batch, width = 512, 512
        x = tf.constant(rng.standard_normal((batch, 256), dtype=np.float32))
        heads = [("click", 2), ("like", 2), ("share", 2), ("watch_time", 1), ("rating", 1), ("dwell", 1)]
        ys = [tf.constant(rng.integers(0, k, batch)) if k > 1 else
              tf.constant(rng.standard_normal((batch, 1), dtype=np.float32)) for _, k in heads]
        inp = keras.Input((256,))
        h = inp
        for _ in range(3):
            h = L.Dense(width, activation="relu")(h)
        model = keras.Model(inp, [L.Dense(k, name=f"{head}_head")(h) for head, k in heads])
        opt = keras.optimizers.Adam(1e-3)
        xent, mse = keras.losses.SparseCategoricalCrossentropy(from_logits=True), keras.losses.MeanSquaredError()
        losses = [xent if k > 1 else mse for _, k in heads]
        variables = model.trainable_variables

        @tf.function
        def step(x, *targets):
            with tf.GradientTape(persistent=not tuned) as tape:
                per_head = [fn(t, p) for fn, t, p in zip(losses, targets, model(x, training=True))]
                loss = tf.add_n(per_head)
            if tuned:
                grads = tape.gradient(loss, variables)
            else:  # one gradient per head's loss, summed
                each = [tape.gradient(h, variables) for h in per_head]
                grads = [tf.add_n([g for g in gs if g is not None]) for gs in zip(*each)]
            opt.apply_gradients(zip(grads, variables))
            return loss

        return step, (x, *ys), batch, (f"a multi-task model with six heads (trunk 256-{width}-{width}-{width}; "
                                       "click, like and share: 2-class cross-entropy; watch_time, rating and dwell: "
                                       "mean squared error), Adam")
    raise ValueError(name)


def run_loop(name: str, out: Path) -> dict:
    import tfadvisor

    problem, tuned = name.removesuffix("_tuned"), name.endswith("_tuned")
    step, args, batch, what = _loop_case(problem, tuned)
    clock = StepClock()
    logdir = out / name
    for _ in range(FIRST):
        float(step(*args))
    with tfadvisor.profile(str(logdir), analyze=False):
        for i in range(FIRST, FIRST + STEPS):
            clock.starts.append(time.perf_counter())
            with tfadvisor.step(i):
                float(step(*args))
        clock.end = time.perf_counter()
    desc = (f"Custom training loop (tf.function step, GradientTape) of {what}, batch {batch}, on in-memory tensors, "
            "reading float(loss) every step; " + (CASES[problem]["fix"] if tuned else CASES[problem]["problem"]) +
            f"; tfadvisor.profile around steps {FIRST}-{FIRST + STEPS - 1}, each in tfadvisor.step(i)")
    return {"description": desc, "batch_size": batch, "steps_per_execution": 1,
            "measured_step_ms": clock.per_step_ms(0, STEPS), "capture_api": "tfadvisor_profile"}


#: What this script's clock measures (measured.json ``clock``).
CLOCK = ("time.perf_counter at the start of each training step (fit: on_train_batch_begin; loops: before the step); "
         "each step lasts to the next one's start, the last to the end of training")


def capture(name: str, out: Path) -> dict:
    shutil.rmtree(out / name, ignore_errors=True)
    problem = name.removesuffix("_tuned")
    t = (run_loop if CASES[problem]["loop"] == "loop" else run_fit)(name, out)
    t["median_step_ms"] = round(statistics.median(t["measured_step_ms"]), 4)
    return write_measured(name, out, t, CLOCK)


def write_expected(out: Path, name: str) -> None:
    """``expected.toml`` of a captured case from its measured.json (the pair's figures from the problem's)."""
    import tomllib

    v = _toml_value
    problem, tuned = name.removesuffix("_tuned"), name.endswith("_tuned")
    m = json.loads((out / name / "measured.json").read_text())
    pair = json.loads((out / problem / "measured.json").read_text()).get("pair")
    spec = CASES[problem]
    desc = m["description"] + (". measured_step_ms: the script's own time.perf_counter from one training step's "
                               "start to the next (callbacks included).")
    if tuned:
        desc = f"Tuned twin of {problem}, the same program with exactly the fix: {desc}"
    lines = ["# Planted truth for this captured sample; written by sample_traces/make_component_samples.py from its "
             "measured.json", "# (captured on this project's 2-core CPU, TF defaults on). Planted component: "
             f"{spec['component']}.", f"description = {v(desc)}", 'kind = "captured"',
             f"capture_api = {v(m['capture_api'])}", f"tf_version = {v(m['tf_version'])}",
             f"keras_version = {v(m['keras_version'])}", "hosts = 1", "tf_data_default_optimizations = true"]
    if not tuned and pair:
        lines.append(f"fixed_by = {v(pair['twin'])}")
    nan = non_finite_stats(out / name)
    if nan:  # TF 2.21 writes MemoryAllocation fragmentation = nan now and then: the reader ignores them, with a note
        lines.append(f"load_notes = {v([f'{nan} stat value(s) that are not finite numbers'])}")
    mean = stats_mean(m)
    lines += ["", "[truth]", f"steps = {len(m['measured_step_ms'])}",
              "# the script's own clock (measured.json, step_clock): its mean over the steps the statistics use, "
              "+-15 %",
              f"step_time_ms = {v([round(mean * 0.85, 3), round(mean * 1.15, 3)])}"]
    if pair:
        lines += ["# the planted cost: this pair's mean step time, problem minus twin (measured.json: pair)",
                  f"planted_cost_ms = {v(float(pair['planted_cost_ms']))}",
                  f"planted_cost_pct = {v(float(pair['planted_cost_pct']))}"]
    lines += ["", "[findings]"]
    if tuned:
        absent = ([] if spec.get("remains") else [spec["rule"]]) + ["capture_not_steady_state", "retracing"]
        lines.append(f"absent = {v(absent)}")
    else:
        lines += [f"top = {v(spec['rule'])}", f"present = {v([spec['rule']])}",
                  f"absent = {v(['capture_not_steady_state', 'retracing'])}"]
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)
    (out / name / "expected.toml").write_text(text)


TABLE_BEGIN = "<!-- BEGIN COMPONENT PAIRS (written by make_component_samples.py) -->"
TABLE_END = "<!-- END COMPONENT PAIRS -->"


def update_readme_table(out: Path) -> None:
    """Rewrite sample_traces/README.md's table of these pairs (when they were captured into sample_traces)."""
    rows = ["| problem -> twin | loop | planted component | explained by | fix in the twin | step ms (mean, median), "
            "problem -> twin | faster |", "|---|---|---|---|---|---|---|"]
    for problem, spec in CASES.items():
        path = out / problem / "measured.json"
        if not path.exists() or "pair" not in json.loads(path.read_text()):
            continue
        m = json.loads(path.read_text())
        t = json.loads((out / PAIRS[problem] / "measured.json").read_text())
        c = m["pair"]
        rows.append(f"| {problem} -> `_tuned` | {'model.fit' if spec['loop'] == 'fit' else 'custom loop'} | "
                    f"{spec['component']} | `{spec['rule']}` | {spec['fix']} | {c['problem_step_ms']:.2f} -> "
                    f"{c['twin_step_ms']:.2f} (median {m['median_step_ms']:.2f} -> {t['median_step_ms']:.2f}) | "
                    f"{c['problem_step_ms'] / c['twin_step_ms']:.2f}x |")
    readme = HERE / "README.md"
    text = readme.read_text()
    if TABLE_BEGIN in text and TABLE_END in text:
        head, rest = text.split(TABLE_BEGIN, 1)
        readme.write_text(head + TABLE_BEGIN + "\n" + "\n".join(rows) + "\n" + TABLE_END + rest.split(TABLE_END, 1)[1])


def _ratio(out: Path, problem: str) -> float:
    pair = json.loads((out / problem / "measured.json").read_text()).get("pair")
    return pair["problem_step_ms"] / pair["twin_step_ms"] if pair else float("nan")


def main() -> None:
    """``OUT [--cases a,b] [--reps N]``: each case captured N times (problem and twin interleaved, each in its own
    process); per pair the repetition whose speedup is the median is kept in ``OUT``."""
    import argparse

    from make_op_samples import capture_pairs

    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--cases", default=",".join(k for p in PAIRS.items() for k in p))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--finalize", action="store_true", help="only rewrite expected.toml and the README table")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: capture one case in this process
    a = ap.parse_args()
    if a.one:
        capture(a.one, a.out)
        return
    cases = a.cases.split(",")
    if a.finalize:
        for name in cases:
            write_expected(a.out, name)
        if a.out.resolve() == HERE:
            update_readme_table(a.out)
        return
    runs = [a.out / ".reps" / str(r) for r in range(a.reps)]
    for run in runs:
        capture_pairs(__file__, run, cases, PAIRS)
    for problem, twin in PAIRS.items():
        if problem not in cases or twin not in cases:
            continue
        ratios = sorted((_ratio(run, problem), i) for i, run in enumerate(runs))
        keep = runs[ratios[len(ratios) // 2][1]]
        print(f"{problem}: speedups {', '.join(f'{r:.2f}x' for r, _ in sorted(ratios, key=lambda x: x[1]))}; "
              f"kept {keep.name}", flush=True)
        for name in (problem, twin):
            shutil.rmtree(a.out / name, ignore_errors=True)
            shutil.copytree(keep / name, a.out / name)
            m = json.loads((a.out / name / "measured.json").read_text())
            m["speedups_of_repetitions"] = [round(r, 3) for r, _ in sorted(ratios, key=lambda x: x[1])]
            (a.out / name / "measured.json").write_text(json.dumps(m, indent=1) + "\n")
        for name in (problem, twin):
            write_expected(a.out, name)
    shutil.rmtree(a.out / ".reps", ignore_errors=True)
    if a.out.resolve() == HERE:
        update_readme_table(a.out)


if __name__ == "__main__":
    main()
