"""A seeded Keras 3 / TensorFlow training program, written out as a Python file a user can read and rerun.

``draw(seed, small=False)`` picks the program (model family and sizes, optimizer and options, loss, compiled
metrics, callbacks, the tf.data pipeline or a Python generator, dtype policy, threading, steps_per_execution,
evaluation, ``fit`` or a custom loop); some components are drawn expensive on purpose. ``render(draw)`` writes the
program's source. The program carries its own ablations: ``--off KEY`` removes (or makes cheap) the components
of one ablation key (see :mod:`mapping`), so the truth (``truth.py``) times the very program a user reads.

The program's modes:

    python prog.py                      # train once, print the wall clock per step
    python prog.py --profile LOGDIR     # the same, with tfadvisor's Keras callback (or TF's markers) on the window
    python prog.py --measure full,metric,input --repeats 3   # each variant built and warmed once, then timed
                                                             # interleaved; prints JSON ms per step per variant

    python benchmarks/ablation/generate.py --seed 7 --out /tmp/p7   # writes /tmp/p7/program.py and draw.json
"""

from __future__ import annotations

import argparse
import json
import random
import textwrap
from pathlib import Path

FAMILIES = ("mlp", "cnn", "rnn", "embedding", "attention")
OPTIMIZERS = ("adam", "adamw", "rmsprop", "nadam", "adagrad", "sgd")


def draw(seed: int, small: bool = False) -> dict:
    """The program's choices. ``small``: sizes for the suite's stored captures (a run of a few seconds)."""
    r = random.Random(seed)
    family = r.choice(FAMILIES)
    loop = "custom" if r.random() < 0.25 else "fit"
    task = "binary" if r.random() < 0.4 else "multiclass"
    d = {
        "seed": seed, "small": small, "family": family, "loop": loop, "task": task,
        "classes": 1 if task == "binary" else r.choice((10, 20, 50)),
        "batch": r.choice((32, 64, 128)),
        "dtype_policy": "mixed_bfloat16" if r.random() < 0.15 else "float32",
        "threads": r.choice((None, None, None, [2, 2], [1, 2])),  # [intra, inter] or TF's defaults
        "steps_per_execution": 1 if loop == "custom" else r.choice((1, 1, 1, 2, 4)),
        "width": r.choice((64, 128, 256)),
    }
    if family == "mlp":
        d["features"] = r.choice((32, 64, 128))
        d["depth"] = r.choice((1, 2, 3))
    elif family == "cnn":
        d["image"] = r.choice((16, 24, 32))
        d["filters"] = r.choice((8, 16, 32))
    elif family == "rnn":
        d["rnn"] = r.choice(("lstm", "gru"))
        d["timesteps"] = r.choice((8, 16))
        d["features"] = r.choice((8, 16))
        d["units"] = r.choice((16, 32, 64))
    else:
        d["vocab"] = r.choice((1000, 5000, 20000))
        d["seq"] = r.choice((16, 32))
        d["embed"] = r.choice((32, 64))
        if family == "attention":
            d["heads"] = r.choice((2, 4))
    # the components drawn expensive on purpose (at least one)
    expensive = [k for k in ("metric", "loss", "layer", "optimizer", "input", "callback", "evaluation")
                 if r.random() < 0.22]
    if not expensive:
        expensive = [r.choice(("metric", "loss", "layer", "input", "callback"))]
    d["expensive"] = expensive
    d["optimizer"] = r.choice(OPTIMIZERS)
    d["optimizer_options"] = {}
    if r.random() < 0.3:
        d["optimizer_options"]["clipnorm"] = 1.0
    if d["optimizer"] != "sgd" and ("optimizer" in expensive or r.random() < 0.15):
        d["optimizer_options"]["use_ema"] = True
    if d["optimizer"] == "sgd":
        d["optimizer_options"]["momentum"] = 0.9
    if "optimizer" in expensive and family in ("embedding", "attention"):
        d["vocab"] = r.choice((30000, 50000))
    elif "optimizer" in expensive:
        d["width"] = 512
        if d["optimizer"] == "sgd":
            d["optimizer"] = "adam"
            d["optimizer_options"] = {"use_ema": True}
    # metrics: cheap accuracy, and maybe an AUC / precision-recall over many thresholds
    d["metrics"] = []
    if r.random() < 0.7:
        d["metrics"].append("accuracy")
    if "metric" in expensive:
        d["metrics"].append(r.choice(("auc", "auc", "pr_thresholds")))
        d["auc_thresholds"] = r.choice((1000, 2000, 4000))
    elif r.random() < 0.2:
        d["metrics"].append("top_k" if task == "multiclass" else "precision")
    # loss: the standard one, or a costly custom loss (a penalty summed over many shifted copies of the batch)
    d["loss"] = "costly" if "loss" in expensive else "standard"
    d["loss_terms"] = r.choice((8, 16, 32)) if "loss" in expensive else 0
    d["loss_width"] = r.choice((1024, 2048)) if "loss" in expensive else 0  # elements per example in the penalty
    # a big layer inside the model (an up-projection and back, a wide conv, a big recurrent layer)
    d["costly_layer"] = r.choice((2048, 4096)) if "layer" in expensive else 0
    # input: in-memory tensors, a tf.data map (cheap or costly), a py_function, or a Python generator
    if "input" in expensive:
        d["input"] = r.choice(("map", "map", "py_function", "generator"))
        d["map_work"] = r.choice((8, 16, 32))
    else:
        d["input"] = r.choice(("slices", "slices", "map"))
        d["map_work"] = 0
    d["parallel_map"] = r.choice((None, "AUTOTUNE", 2))
    d["cache"] = d["input"] in ("slices", "map") and r.random() < 0.3 and not d["map_work"]
    d["shuffle"] = r.random() < 0.6
    d["prefetch"] = r.random() < 0.7
    d["interleave"] = d["input"] in ("slices", "map") and r.random() < 0.2
    # callbacks: none, a cheap one, or a heavy one (the weights' norms in NumPy after every batch)
    d["callback"] = "heavy" if "callback" in expensive else r.choice(("none", "none", "cheap"))
    d["callback_repeats"] = r.choice((1, 2, 3)) if "callback" in expensive else 1
    # evaluation at every epoch's end
    d["evaluation"] = "evaluation" in expensive or r.random() < 0.4
    d["validation_steps"] = r.choice((10, 20)) if "evaluation" in expensive else 2
    if small:  # the suite's stored captures
        d["batch"] = min(d["batch"], 64)
        d["steps_per_execution"] = min(d["steps_per_execution"], 2)
        d["width"] = min(d["width"], 128)
        d["loss_terms"] = min(d["loss_terms"], 16)
        if "vocab" in d:
            d["vocab"] = min(d["vocab"], 20000)
    # where the user put tfadvisor's callback in the list: first (its marker closes before the other callbacks run)
    # or last (the other callbacks' batch hooks run inside its step marker)
    d["advisor_first"] = r.random() < 0.5
    d["epoch_steps"] = max(10 if small else 20, 5 * d["steps_per_execution"])  # the profile window: one epoch
    d["epochs"] = 3
    d["ablations"] = ablations(d)
    return d


def ablations(d: dict) -> list[str]:
    """The ablation keys this program has (each removes or makes cheap what :mod:`mapping` says)."""
    keys = []
    if d["metrics"]:
        keys.append("metric")
    if d["loss"] == "costly":
        keys.append("loss")
    if d["costly_layer"]:
        keys.append("layer")
    if d["optimizer"] != "sgd" or d["optimizer_options"].get("use_ema"):
        keys.append("optimizer")
    if d["input"] != "slices" and (d["map_work"] or d["input"] != "map"):
        keys.append("input")
    if d["callback"] != "none" or d["evaluation"]:
        keys.append("between_steps")
    return keys


def describe(d: dict) -> str:
    """One paragraph saying what the program is."""
    fam = {"mlp": f"an MLP ({d.get('depth')} hidden layers of {d['width']})",
           "cnn": f"a CNN on {d.get('image')}x{d.get('image')}x3 images ({d.get('filters')} filters)",
           "rnn": f"a {str(d.get('rnn')).upper()} ({d.get('units')} units) over {d.get('timesteps')} steps",
           "embedding": f"an embedding model (vocab {d.get('vocab')}, dim {d.get('embed')})",
           "attention": f"an attention block (vocab {d.get('vocab')}, dim {d.get('embed')}, {d.get('heads')} heads)"}
    opts = ", ".join(f"{k}={v}" for k, v in d["optimizer_options"].items())
    return (f"{'model.fit' if d['loop'] == 'fit' else 'a custom training loop'} of {fam[d['family']]}, "
            f"{d['task']} task, batch {d['batch']}; optimizer {d['optimizer']}{' (' + opts + ')' if opts else ''}; "
            f"loss {d['loss']}{' (' + str(d['loss_terms']) + ' terms)' if d['loss_terms'] else ''}; "
            f"metrics {d['metrics'] or 'none'}; input {d['input']}"
            f"{' (work ' + str(d['map_work']) + ')' if d['map_work'] else ''}; callback {d['callback']}; "
            f"evaluation {'every epoch' if d['evaluation'] else 'none'}; dtype {d['dtype_policy']}; "
            f"threads {d['threads'] or 'default'}; steps_per_execution {d['steps_per_execution']}; "
            f"costly layer {d['costly_layer'] or 'none'}; "
            f"tfadvisor's callback {'first' if d.get('advisor_first') else 'last'} in the list; "
            f"expensive on purpose: {', '.join(d['expensive'])}")


# --------------------------------------------------------------------------------------------------------------
# the program's source

HEADER = '''\
"""Generated by benchmarks/ablation/generate.py (seed {seed}).

{desc}

Run: python program.py [--profile LOGDIR] [--measure full,KEY,...] [--off KEY ...]
Ablation keys this program has: {keys}
"""
import argparse
import json
import os
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

SEED = {seed}
BATCH = {batch}
EPOCH_STEPS = {epoch_steps}
EPOCHS = {epochs}
STEPS_PER_EXECUTION = {spe}
CLASSES = {classes}
'''


def _threads(d: dict) -> str:
    if not d["threads"]:
        return ""
    a, b = d["threads"]
    return (f"tf.config.threading.set_intra_op_parallelism_threads({a})\n"
            f"tf.config.threading.set_inter_op_parallelism_threads({b})\n")


def _data(d: dict) -> str:
    fam = d["family"]
    if fam == "mlp":
        shape, gen = f"({d['features']},)", f"rng.normal(size=(n, {d['features']})).astype('float32')"
    elif fam == "cnn":
        s = d["image"]
        shape, gen = f"({s}, {s}, 3)", f"rng.random(size=(n, {s}, {s}, 3)).astype('float32')"
    elif fam == "rnn":
        shape, gen = f"({d['timesteps']}, {d['features']})", \
            f"rng.normal(size=(n, {d['timesteps']}, {d['features']})).astype('float32')"
    else:
        shape, gen = f"({d['seq']},)", f"rng.integers(0, {d['vocab']}, size=(n, {d['seq']})).astype('int32')"
    if d["task"] == "binary":
        lab = "rng.integers(0, 2, size=(n, 1)).astype('float32')"
    else:
        lab = "np.eye(CLASSES, dtype='float32')[rng.integers(0, CLASSES, size=n)]"
    return f'''
INPUT_SHAPE = {shape}
N_TRAIN = BATCH * EPOCH_STEPS * 2
N_VAL = BATCH * {d['validation_steps']}


def arrays(n, seed):
    rng = np.random.default_rng(seed)
    x = {gen}
    y = {lab}
    return x, y
'''


def _input(d: dict) -> str:
    fl = d["family"] in ("mlp", "cnn", "rnn")
    work = d["map_work"]
    par = {None: "None", "AUTOTUNE": "tf.data.AUTOTUNE", 2: "2"}[d["parallel_map"]]
    if fl:
        costly_body = (f"    for _ in range({work}):\n"
                       "        x = tf.tanh(x * 1.01 + tf.sin(x))  # augmentation, done the slow way\n")
        cheap_body = "    x = x * 1.0\n"
    else:
        costly_body = (f"    for _ in range({work}):\n"
                       "        x = tf.math.floormod(x * 31 + 7, VOCAB_LIMIT)  # token hashing, the slow way\n")
        cheap_body = "    x = tf.identity(x)\n"
    vocab_limit = f"VOCAB_LIMIT = {d.get('vocab', 1)}\n"
    out = vocab_limit + f'''

def preprocess(x, y):
    """Per-example preprocessing."""
{costly_body if work else cheap_body}    return x, y


def preprocess_cheap(x, y):
{cheap_body}    return x, y

'''
    if d["input"] == "py_function":
        out += f'''
def numpy_augment(x):
    """Augmentation in NumPy, called from the graph through tf.py_function."""
    x = x.numpy()
    for _ in range({work}):
        x = np.tanh(x * 1.01 + np.sin(x)) if x.dtype.kind == "f" else (x * 31 + 7) % VOCAB_LIMIT
    return x


def preprocess_py(x, y):
    x2 = tf.py_function(numpy_augment, [x], x.dtype)
    x2.set_shape(x.shape)
    return x2, y

'''
    if d["input"] == "generator":
        out += f'''
def batches(x, y, off):
    """A Python generator of batches (augmenting in NumPy), as many programs feed Keras."""
    i = 0
    n = len(x) // BATCH
    while True:
        xb, yb = x[(i % n) * BATCH:(i % n + 1) * BATCH], y[(i % n) * BATCH:(i % n + 1) * BATCH]
        if "input" not in off:
            for _ in range({work}):
                xb = np.tanh(xb * 1.01 + np.sin(xb)) if xb.dtype.kind == "f" else (xb * 31 + 7) % VOCAB_LIMIT
        i += 1
        yield xb, yb

'''
    lines = ["", "def make_dataset(x, y, training, off):", '    """The input pipeline."""']
    if d["input"] == "generator":
        lines += ["    if training and \"input\" not in off:",
                  "        spec = (tf.TensorSpec((BATCH,) + INPUT_SHAPE, tf.as_dtype(x.dtype)),",
                  "                tf.TensorSpec((BATCH,) + y.shape[1:], tf.float32))",
                  "        ds = tf.data.Dataset.from_generator(lambda: batches(x, y, off), output_signature=spec)",
                  "        return ds.prefetch(2)" if d["prefetch"] else "        return ds",
                  "    ds = tf.data.Dataset.from_tensor_slices((x, y))"]
    else:
        lines.append("    ds = tf.data.Dataset.from_tensor_slices((x, y))")
    if d["interleave"]:
        lines += ["    ds = tf.data.Dataset.range(4).interleave(",
                  "        lambda i: ds.shard(4, i), cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)"]
    if d["shuffle"]:
        lines.append("    if training:\n        ds = ds.shuffle(1024, seed=SEED)")
    if d["input"] == "map":
        lines.append(f"    ds = ds.map(preprocess if \"input\" not in off else preprocess_cheap, "
                     f"num_parallel_calls={par})")
    elif d["input"] == "py_function":
        lines.append(f"    ds = ds.map(preprocess_py if training and \"input\" not in off else preprocess_cheap, "
                     f"num_parallel_calls={par})")
    if d["cache"]:
        lines.append("    ds = ds.cache()")
    lines.append("    ds = ds.batch(BATCH, drop_remainder=True)")
    lines.append("    ds = ds.repeat()")
    if d["prefetch"]:
        lines.append("    ds = ds.prefetch(tf.data.AUTOTUNE)")
    lines.append("    return ds\n")
    return out + "\n".join(lines) + "\n"


def _model(d: dict) -> str:
    fam, w = d["family"], d["width"]
    L = ["", "def build_model(off):", '    """The model; with "layer" off its costly block is left out."""',
         "    inputs = keras.Input(shape=INPUT_SHAPE, name=\"features\")"]
    big = d["costly_layer"]
    if fam == "mlp":
        L.append("    x = inputs")
        for i in range(d["depth"]):
            L.append(f"    x = keras.layers.Dense({w}, activation=\"relu\", name=\"hidden_{i}\")(x)")
        if big:
            L += ["    if \"layer\" not in off:",
                  f"        h = keras.layers.Dense({big}, activation=\"relu\", name=\"costly_up\")(x)",
                  f"        x = keras.layers.Dense({w}, name=\"costly_down\")(h)"]
    elif fam == "cnn":
        f = d["filters"]
        L += [f"    x = keras.layers.Conv2D({f}, 3, padding=\"same\", activation=\"relu\", name=\"conv_0\")(inputs)",
              "    x = keras.layers.MaxPooling2D(name=\"pool_0\")(x)",
              f"    x = keras.layers.Conv2D({2 * f}, 3, padding=\"same\", activation=\"relu\", name=\"conv_1\")(x)"]
        if big:
            L += ["    if \"layer\" not in off:",
                  f"        x = keras.layers.Conv2D({max(64, big // 16)}, 5, padding=\"same\", activation=\"relu\", "
                  "name=\"costly_conv\")(x)",
                  f"        x = keras.layers.Conv2D({2 * f}, 1, name=\"costly_proj\")(x)"]
        L += ["    x = keras.layers.GlobalAveragePooling2D(name=\"gap\")(x)",
              f"    x = keras.layers.Dense({w}, activation=\"relu\", name=\"head\")(x)"]
    elif fam == "rnn":
        cls = "LSTM" if d["rnn"] == "lstm" else "GRU"
        u = d["units"]
        L.append(f"    x = keras.layers.{cls}({u}, return_sequences=True, name=\"rnn_0\")(inputs)")
        if big:
            L += ["    if \"layer\" not in off:",
                  f"        x = keras.layers.{cls}({big // 4}, return_sequences=True, name=\"costly_rnn\")(x)"]
        L += [f"    x = keras.layers.{cls}({u}, name=\"rnn_1\")(x)",
              f"    x = keras.layers.Dense({w}, activation=\"relu\", name=\"head\")(x)"]
    else:
        e = d["embed"]
        L.append(f"    x = keras.layers.Embedding({d['vocab']}, {e}, name=\"embedding\")(inputs)")
        if fam == "attention":
            L += [f"    a = keras.layers.MultiHeadAttention({d['heads']}, {e // d['heads']}, name=\"attention\")(x, x)",
                  "    x = keras.layers.LayerNormalization(name=\"norm_0\")(x + a)",
                  f"    f = keras.layers.Dense({2 * e}, activation=\"relu\", name=\"ffn_up\")(x)",
                  f"    x = keras.layers.LayerNormalization(name=\"norm_1\")(x + keras.layers.Dense({e}, "
                  "name=\"ffn_down\")(f))"]
        L.append("    x = keras.layers.GlobalAveragePooling1D(name=\"pool\")(x)")
        if big:  # a wide projection of the pooled vector (per token it took 100+ ms a step on 2 cores)
            L += ["    if \"layer\" not in off:",
                  f"        h = keras.layers.Dense({big}, activation=\"relu\", name=\"costly_up\")(x)",
                  f"        x = keras.layers.Dense({e}, name=\"costly_down\")(h)"]
        L.append(f"    x = keras.layers.Dense({w}, activation=\"relu\", name=\"head\")(x)")
    act = "sigmoid" if d["task"] == "binary" else "softmax"
    L += [f"    outputs = keras.layers.Dense(CLASSES, activation=\"{act}\", dtype=\"float32\", name=\"out\")(x)",
          "    return keras.Model(inputs, outputs)", ""]
    return "\n".join(L) + "\n"


def _loss(d: dict) -> str:
    std = "keras.losses.BinaryCrossentropy()" if d["task"] == "binary" else "keras.losses.CategoricalCrossentropy()"
    out = f"\ndef standard_loss():\n    return {std}\n\n"
    if d["loss"] == "costly":
        out += f'''
def costly_loss(y_true, y_pred):
    """Cross-entropy plus a consistency penalty over shifted copies of the batch (written term by term)."""
    base = keras.losses.{"binary" if d["task"] == "binary" else "categorical"}_crossentropy(y_true, y_pred)
    z = tf.tile(tf.cast(y_pred, tf.float32), [1, {-(-d["loss_width"] // d["classes"])}])
    penalty = 0.0
    for k in range(1, {d["loss_terms"] + 1}):
        penalty += tf.reduce_mean(tf.square(z - tf.roll(z, shift=k, axis=0)) * tf.exp(-0.1 * k), axis=-1)
    return base + 1e-3 * penalty

'''
    out += "\ndef make_loss(off):\n"
    out += ("    return standard_loss() if \"loss\" in off else costly_loss\n" if d["loss"] == "costly"
            else "    return standard_loss()\n")
    return out


def _metrics(d: dict) -> str:
    items = []
    for m in d["metrics"]:
        if m == "accuracy":
            items.append("keras.metrics.BinaryAccuracy(name=\"accuracy\")" if d["task"] == "binary"
                         else "keras.metrics.CategoricalAccuracy(name=\"accuracy\")")
        elif m == "auc":
            ml = ", multi_label=True" if d["task"] == "multiclass" else ""
            items.append(f"keras.metrics.AUC(num_thresholds={d['auc_thresholds']}{ml}, name=\"auc\")")
        elif m == "pr_thresholds":
            th = f"[i / {d['auc_thresholds']} for i in range(1, {d['auc_thresholds']})]"
            items.append(f"keras.metrics.Precision(thresholds={th}, name=\"precision\")")
            items.append(f"keras.metrics.Recall(thresholds={th}, name=\"recall\")")
        elif m == "top_k":
            items.append("keras.metrics.TopKCategoricalAccuracy(k=5, name=\"top5\")")
        elif m == "precision":
            items.append("keras.metrics.Precision(name=\"precision\")")
    if not items:
        return "\ndef make_metrics(off):\n    return []\n"
    body = ",\n        ".join(items)
    return (f"\ndef make_metrics(off):\n    if \"metric\" in off:\n        return []\n"
            f"    return [\n        {body},\n    ]\n")


def _optimizer(d: dict) -> str:
    cls = {"adam": "Adam", "adamw": "AdamW", "rmsprop": "RMSprop", "nadam": "Nadam", "adagrad": "Adagrad",
           "sgd": "SGD"}[d["optimizer"]]
    opts = "".join(f", {k}={v!r}" for k, v in d["optimizer_options"].items())
    return (f"\ndef make_optimizer(off):\n    if \"optimizer\" in off:\n"
            f"        return keras.optimizers.SGD(learning_rate=0.01)\n"
            f"    return keras.optimizers.{cls}(learning_rate=1e-3{opts})\n")


def _callbacks(d: dict) -> str:
    out = '''

class Monitor(keras.callbacks.Callback):
    """After each batch: the predictions on a probe batch and every weight's norm (in NumPy), kept for a plot."""

    def __init__(self, repeats, probe):
        super().__init__()
        self.repeats = repeats
        self.probe = probe
        self.log = []

    def on_train_batch_end(self, batch, logs=None):
        for _ in range(self.repeats):
            pred = self.model.predict_on_batch(self.probe)
            norms = [float(np.linalg.norm(w)) for w in self.model.get_weights()]
        self.log.append((float(np.mean(pred)), sum(norms)))


class LossHistory(keras.callbacks.Callback):
    """Keeps the loss of each batch."""

    def on_train_batch_end(self, batch, logs=None):
        self.last = logs


def make_callbacks(off):
    if "between_steps" in off:
        return []
'''
    if d["callback"] == "heavy":
        out += f"    return [Monitor({d['callback_repeats']}, arrays(BATCH, SEED + 2)[0])]\n"
    elif d["callback"] == "cheap":
        out += "    return [LossHistory()]\n"
    else:
        out += "    return []\n"
    return out


def _policy(d: dict) -> str:
    return f"keras.mixed_precision.set_global_policy(\"{d['dtype_policy']}\")\n" \
        if d["dtype_policy"] != "float32" else ""


FIT_RUN = '''

def build(off):
    """A compiled model and its datasets, for the components not in ``off``."""
    keras.utils.set_random_seed(SEED)
    model = build_model(off)
    model.compile(optimizer=make_optimizer(off), loss=make_loss(off), metrics=make_metrics(off),
                  steps_per_execution=STEPS_PER_EXECUTION)
    x, y = arrays(N_TRAIN, SEED)
    train = make_dataset(x, y, True, off)
    val = None
    if EVALUATION and "between_steps" not in off:
        vx, vy = arrays(N_VAL, SEED + 1)
        val = make_dataset(vx, vy, False, off)
    return model, train, val, make_callbacks(off)


class EpochClock(keras.callbacks.Callback):
    """The program's own clock: each epoch's wall time (its steps, callbacks and evaluation), as Keras reports."""

    def __init__(self):
        super().__init__()
        self.seconds = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds += time.perf_counter() - self.t0


def train(state, epochs, extra_callbacks=()):
    """Train for ``epochs`` epochs; returns the epochs' wall time in seconds."""
    model, ds, val, callbacks = state
    clock = EpochClock()
    cbs = [*extra_callbacks, *callbacks] if ADVISOR_FIRST else [*callbacks, *extra_callbacks]
    model.fit(ds, epochs=epochs, steps_per_epoch=EPOCH_STEPS, verbose=0, callbacks=[clock, *cbs],
              validation_data=val, validation_steps=VALIDATION_STEPS if val is not None else None)
    return clock.seconds


def profile_callback(logdir):
    """tfadvisor's Keras callback, TF defaults, on one epoch's worth of steps in the middle of the run."""
    import tfadvisor.keras

    start = STEPS_PER_EXECUTION * round(EPOCH_STEPS / 2 / STEPS_PER_EXECUTION)
    return [tfadvisor.keras.AdvisorCallback(logdir, steps=(start, start + EPOCH_STEPS), analyze=False)]
'''

LOOP_RUN = '''

def build(off):
    """The model, loss, optimizer, metrics and datasets of the custom loop, for the components not in ``off``."""
    keras.utils.set_random_seed(SEED)
    model = build_model(off)
    loss_fn, opt, metrics = make_loss(off), make_optimizer(off), make_metrics(off)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            pred = model(x, training=True)
            loss = tf.reduce_mean(loss_fn(y, pred))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        for m in metrics:
            m.update_state(y, pred)
        return loss

    @tf.function
    def test_step(x, y):
        pred = model(x, training=False)
        for m in metrics:
            m.update_state(y, pred)

    x, y = arrays(N_TRAIN, SEED)
    it = iter(make_dataset(x, y, True, off))
    val = None
    if EVALUATION and "between_steps" not in off:
        vx, vy = arrays(N_VAL, SEED + 1)
        val = make_dataset(vx, vy, False, off)
    return model, train_step, test_step, it, val, metrics, make_callbacks(off)


def train(state, epochs, profile_dir=None):
    """The loop: EPOCH_STEPS steps an epoch, the callbacks' batch hook after each step, evaluation at the end.
    Returns the epochs' wall time in seconds."""
    model, train_step, test_step, it, val, metrics, callbacks = state
    seconds = 0.0
    for cb in callbacks:
        cb.set_model(model)
    step, first = 0, STEPS_PER_EXECUTION * round(EPOCH_STEPS / 2)
    for _ in range(epochs):
        t0 = time.perf_counter()
        for m in metrics:
            m.reset_state()
        for batch in range(EPOCH_STEPS):
            if profile_dir and step == first:
                tf.profiler.experimental.start(profile_dir)
            x, y = next(it)
            if profile_dir and first <= step < first + EPOCH_STEPS:
                with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                    loss = train_step(x, y)
            else:
                loss = train_step(x, y)
            for cb in callbacks:
                cb.on_train_batch_end(batch, {"loss": loss})
            step += 1
            if profile_dir and step == first + EPOCH_STEPS:
                tf.profiler.experimental.stop()
        if val is not None:
            for m in metrics:
                m.reset_state()
            for vx, vy in val.take(VALIDATION_STEPS):
                test_step(vx, vy)
        for m in metrics:
            m.result()
        seconds += time.perf_counter() - t0
    return seconds


def profile_callback(logdir):
    return logdir
'''

MAIN = '''

def timed(state, extra=None):
    """Wall clock per training step of EPOCHS epochs (callbacks and evaluation included), ms."""
    seconds = train(state, EPOCHS) if extra is None else train(state, EPOCHS, extra)
    return 1000.0 * seconds / (EPOCHS * EPOCH_STEPS)


def machine_busy_s():
    """CPU seconds every process on the machine has used (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def precise(runs, precision_ms):
    """Whether every variant's median is known to ``precision_ms`` or 3 % of it, whichever is larger: its robust
    standard error (1.253 x 1.4826 x the median absolute deviation / sqrt(runs)); always with ``precision_ms`` 0."""
    if precision_ms <= 0:
        return True
    for v in runs.values():
        if len(v) < 3:
            return False
        m = statistics.median(v)
        se = 1.253 * 1.4826 * statistics.median(abs(x - m) for x in v) / len(v) ** 0.5
        if se > max(precision_ms, 0.03 * abs(m)):
            return False
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", help="profile one epoch's worth of steps into this logdir")
    p.add_argument("--measure", help="comma-separated variants: full, or an ablation key (its components off)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-repeats", type=int, default=0, help="more rounds, up to this, while a median is imprecise")
    p.add_argument("--precision-ms", type=float, default=0.0, help="the standard error a median needs (0: off)")
    p.add_argument("--off", action="append", default=[], help="ablation key to turn off (plain run)")
    a = p.parse_args()
    if a.measure:
        names = a.measure.split(",")
        states = {}
        for name in names:  # build and warm each variant once (compile, trace, fill caches)
            states[name] = build(set() if name == "full" else {name})
            train(states[name], 1)
        runs = {name: [] for name in names}
        for name in names:  # one untimed round (the first runs after a build are slower)
            train(states[name], 1)
        busy0, own0, t0 = machine_busy_s(), own_cpu_s(), time.perf_counter()
        rounds = 0
        while rounds < a.repeats or (rounds < a.max_repeats and not precise(runs, a.precision_ms)):
            for name in names:  # then time them interleaved, more rounds while a median is imprecise
                runs[name].append(timed(states[name]))
            rounds += 1
        wall = time.perf_counter() - t0
        other = max(machine_busy_s() - busy0 - (own_cpu_s() - own0), 0.0)
        print("ABLATION_RESULT " + json.dumps({"ms_per_step": runs, "rounds": rounds,
                                               "other_cpu_pct": 100.0 * other / (wall * (os.cpu_count() or 1))}))
        return
    state = build(set(a.off))
    train(state, 1)
    if a.profile:
        ms = timed(state, profile_callback(a.profile))
    else:
        ms = timed(state)
    print("ABLATION_RESULT " + json.dumps({"ms_per_step": ms, "off": a.off, "profiled": bool(a.profile)}))


if __name__ == "__main__":
    main()
'''


def render(d: dict) -> str:
    """The program's source."""
    src = HEADER.format(seed=d["seed"], desc="\n".join(textwrap.wrap(describe(d), 112)), keys=", ".join(d["ablations"]),
                        batch=d["batch"], epoch_steps=d["epoch_steps"], epochs=d["epochs"],
                        spe=d["steps_per_execution"], classes=d["classes"])
    src += f"EVALUATION = {bool(d['evaluation'])}\nVALIDATION_STEPS = {d['validation_steps']}\n"
    src += f"ADVISOR_FIRST = {bool(d.get('advisor_first'))}  # tfadvisor's callback first in the list (--profile)\n"
    src += _threads(d) + _policy(d)
    src += _data(d) + _input(d) + _model(d) + _loss(d) + _metrics(d) + _optimizer(d) + _callbacks(d)
    src += FIT_RUN if d["loop"] == "fit" else LOOP_RUN
    src += MAIN
    return src


def write(seed: int, out: Path, small: bool = False) -> dict:
    """Write ``out/program.py`` and ``out/draw.json``; returns the draw."""
    d = draw(seed, small)
    out.mkdir(parents=True, exist_ok=True)
    (out / "program.py").write_text(render(d))
    (out / "draw.json").write_text(json.dumps({**d, "description": describe(d)}, indent=1) + "\n")
    return d


def main() -> None:
    p = argparse.ArgumentParser(description="Write a seeded training program and its draw.")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--small", action="store_true")
    a = p.parse_args()
    d = write(a.seed, a.out, a.small)
    print(describe(d))


if __name__ == "__main__":
    main()
