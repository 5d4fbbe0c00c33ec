"""Capture real TensorFlow problem/twin pairs whose cost is in the ops or their dispatch, with wall-clock truth.

Each case trains for real on this machine's CPU with TF's defaults (Keras 3 ``fit`` or a custom loop) and is
profiled with tfadvisor's own capture (``tfadvisor.keras.AdvisorCallback`` for ``fit``, ``tfadvisor.profile``
with ``tfadvisor.step`` markers for custom loops), which records the run file (CPU flags included). The
script times every training step itself (start of one to the start of the next, callbacks included):

- ``ops_fit_fp32`` / ``ops_fit_bf16``: an MLP whose step is matrix work, float32 (Keras' default policy) and
  the twin under ``mixed_bfloat16`` (the fix tfadvisor prints on a CPU with AMX or AVX512-BF16).
- ``ops_loop_eager`` / ``ops_loop_function``: a custom loop (GradientTape, Adam) run eagerly, and the twin
  with the step under ``tf.function``.
- ``ops_fit_run_eagerly`` / ``ops_fit_graph``: ``model.fit`` compiled with ``run_eagerly=True``, and the twin
  without it (the default graph execution).

Usage: ``python make_op_samples.py OUT [--cases a,b]``; ``OUT/<sample>/`` gets the logdir and ``measured.json``.
The pairs' twins are the problems with exactly the fix applied; ``measured.json`` ``pair`` holds both means.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: problem -> twin.
PAIRS = {"ops_fit_fp32": "ops_fit_bf16", "ops_loop_eager": "ops_loop_function",
         "ops_fit_run_eagerly": "ops_fit_graph"}
#: Steps profiled, after this many warm-up steps.
FIRST, STEPS = 6, 12


class StepClock:
    """Wall-clock start of every training step (Keras: on_train_batch_begin; loops: before each step)."""

    def __init__(self):
        self.starts: list[float] = []
        self.end = 0.0

    def callback(self, keras):
        """A Keras callback class that records each batch's start and the end of training on this clock."""
        clock = self

        class Clock(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                clock.starts.append(time.perf_counter())

            def on_train_end(self, logs=None):
                clock.end = time.perf_counter()

        return Clock

    def per_step_ms(self, first: int, n: int) -> list[float]:
        s = self.starts[first:first + n + 1]
        if len(s) < n + 1:
            s = s + [self.end]
        return [round((b - a) * 1e3, 4) for a, b in zip(s[:-1], s[1:])]


def _mlp(keras, width: int, depth: int, in_dim: int):
    inp = keras.Input((in_dim,))
    h = inp
    for _ in range(depth):
        h = keras.layers.Dense(width, activation="relu")(h)
    out = keras.layers.Dense(10, dtype="float32")(h)  # float32 logits under any policy
    return keras.Model(inp, out)


def fit_setup(keras, n: int, width: int, depth: int, in_dim: int, **compile_kw):
    """``n`` random examples (seeded) and the MLP compiled with Adam and sparse cross-entropy."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.random((n, in_dim), dtype=np.float32)
    y = rng.integers(0, 10, n)
    model = _mlp(keras, width, depth, in_dim)
    model.compile(keras.optimizers.Adam(1e-4), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  **compile_kw)
    return x, y, model


#: The custom loops' MLP and batch: width, depth, input size, batch size.
LOOP_SHAPE = (256, 3, 128, 64)


def loop_setup():
    """A custom loop's parts: the MLP (LOOP_SHAPE), Adam, sparse cross-entropy, and one seeded batch on the
    device (x, y)."""
    import keras
    import numpy as np
    import tensorflow as tf

    width, depth, in_dim, batch = LOOP_SHAPE
    model = _mlp(keras, width, depth, in_dim)
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((batch, in_dim), dtype=np.float32))
    y = tf.constant(rng.integers(0, 10, batch))
    return model, keras.optimizers.Adam(1e-4), keras.losses.SparseCategoricalCrossentropy(from_logits=True), x, y


def run_fit(name: str, out: Path) -> dict:
    import keras

    import tfadvisor.keras

    if name == "ops_fit_bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    eager = name == "ops_fit_run_eagerly"
    width, depth, in_dim, batch = (4096, 2, 1024, 512) if name.startswith("ops_fit_fp32") or \
        name == "ops_fit_bf16" else (256, 3, 128, 64)
    x, y, model = fit_setup(keras, (FIRST + STEPS + 4) * batch, width, depth, in_dim, run_eagerly=eager)
    clock = StepClock()
    Clock = clock.callback(keras)

    logdir = out / name
    cb = tfadvisor.keras.AdvisorCallback(str(logdir), steps=(FIRST, FIRST + STEPS), analyze=False)
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[Clock(), cb])
    policy = keras.mixed_precision.global_policy().name
    desc = (f"Keras 3 model.fit of an MLP {in_dim}-" + "-".join([str(width)] * depth) + f"-10, batch {batch}, "
            f"Adam, dtype policy {policy}" + (", compiled with run_eagerly=True" if eager else "") +
            f"; tfadvisor.keras.AdvisorCallback profiles steps {FIRST}-{FIRST + STEPS - 1}")
    return {"description": desc, "batch_size": batch, "steps_per_execution": 1,
            "measured_step_ms": clock.per_step_ms(FIRST, STEPS), "capture_api": "tfadvisor_callback"}


def run_loop(name: str, out: Path) -> dict:
    import tensorflow as tf

    import tfadvisor

    width, depth, in_dim, batch = LOOP_SHAPE
    model, opt, loss_fn, x, y = loop_setup()

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if name == "ops_loop_function":
        step = tf.function(step)
    clock = StepClock()
    logdir = out / name
    for _ in range(FIRST):
        step(x, y)
    with tfadvisor.profile(str(logdir), analyze=False):
        for i in range(FIRST, FIRST + STEPS):
            clock.starts.append(time.perf_counter())
            with tfadvisor.step(i):
                float(step(x, y))
        clock.end = time.perf_counter()
    desc = (f"Custom training loop (GradientTape, Adam) of an MLP {in_dim}-" + "-".join([str(width)] * depth) +
            f"-10, batch {batch}, on in-memory tensors, reading float(loss) every step; " +
            ("the step runs eagerly (no tf.function)" if name == "ops_loop_eager" else "the step under tf.function") +
            f"; tfadvisor.profile around steps {FIRST}-{FIRST + STEPS - 1}, each in tfadvisor.step(i)")
    return {"description": desc, "batch_size": batch, "steps_per_execution": 1,
            "measured_step_ms": clock.per_step_ms(0, STEPS), "capture_api": "tfadvisor_profile"}


#: What the ops scripts' clock measures (measured.json ``clock``).
CLOCK = ("time.perf_counter at the start of each training step (fit: on_train_batch_begin; loops: before the step); "
         "each step lasts to the next one's start, the last to the end of training")


def non_finite_stats(logdir: Path) -> int:
    """How many of the profile's double stats are NaN or infinite (counted with TF's own xplane_pb2)."""
    import math

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    n = 0
    for f in logdir.rglob("*.xplane.pb"):
        for plane in xplane_pb2.XSpace.FromString(f.read_bytes()).planes:
            for line in plane.lines:
                for ev in line.events:
                    n += sum(1 for st in ev.stats if st.WhichOneof("value") == "double_value" and
                             not math.isfinite(st.double_value))
    return n


def write_measured(name: str, out: Path, t: dict, clock: str) -> dict:
    """``OUT/<name>/measured.json``: the case's own figures ``t``, the versions and the machine; the clock
    runs from one step's start to the next (``step_clock`` "wall")."""
    import keras
    import tensorflow as tf

    logdir = out / name
    host = next(logdir.glob("plugins/profile/*/*.xplane.pb")).name.split(".xplane.pb")[0]
    m = {"case": name, "original_files": {host: f"plugins/profile/<run>/{host}.xplane.pb"}, **t,
         "tf_version": tf.__version__, "keras_version": keras.__version__, "host": platform.node(),
         "cpu_count": os.cpu_count(), "step_clock": "wall", "clock": clock}
    (logdir / "measured.json").write_text(json.dumps(m, indent=1) + "\n")
    return m


def capture(name: str, out: Path) -> dict:
    return write_measured(name, out, (run_loop if name.startswith("ops_loop") else run_fit)(name, out), CLOCK)


def stats_mean(t: dict) -> float:
    """The mean over the markers the step statistics use: with more than 5, not the first and last; else not
    the last (tfadvisor/analyses/steps.py)."""
    x = t["measured_step_ms"]
    x = x[1:-1] if len(x) > 5 else x[:-1] if len(x) > 1 else x
    return sum(x) / len(x)


def capture_pairs(script: str, out: Path, cases: list[str], pairs: dict[str, str]) -> dict[str, dict]:
    """Capture each case in its own process (``script OUT --one NAME``: a dtype policy is global), then write
    each problem's ``pair`` (both means, the planted cost) into its measured.json."""
    import subprocess

    done = {}
    for name in cases:
        subprocess.run([sys.executable, script, str(out), "--one", name], check=True)
        done[name] = json.loads((out / name / "measured.json").read_text())
        print(f"{name}: mean {stats_mean(done[name]):.2f} ms/step over {len(done[name]['measured_step_ms'])} "
              "markers", flush=True)
    for problem, twin in pairs.items():
        if problem in done and twin in done:
            p, t = stats_mean(done[problem]), stats_mean(done[twin])
            done[problem]["pair"] = {"closed": True, "problem": problem, "twin": twin, "problem_step_ms": round(p, 4),
                                     "twin_step_ms": round(t, 4), "planted_cost_ms": round(p - t, 4),
                                     "planted_cost_pct": round(100 * (p - t) / p, 1)}
            (out / problem / "measured.json").write_text(json.dumps(done[problem], indent=1) + "\n")
    return done


def pairs_main(script: str, capture_one, pairs: dict[str, str]) -> None:
    """The command line of a pair-capturing script: ``OUT [--cases a,b]``, each case in its own process."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--cases", default=",".join(k for p in pairs.items() for k in p))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: capture one case in this process
    a = ap.parse_args()
    if a.one:
        capture_one(a.one, a.out)
        return
    capture_pairs(script, a.out, a.cases.split(","), pairs)


def main() -> None:
    pairs_main(__file__, capture, PAIRS)


if __name__ == "__main__":
    main()
