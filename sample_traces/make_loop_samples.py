"""Capture real TensorFlow pairs whose time is *between* the step markers, with wall-clock truth.

The step time users measure is wall clock per step, callbacks and logging included. Each case trains
for real on this machine's CPU with TF's defaults and times every training step itself (the start of one
to the start of the next, whatever runs in between):

- ``loop_callback_slow`` / ``loop_callback_spe10``: Keras 3 ``model.fit`` with a callback that spends
  20 ms in ``on_train_batch_end`` (a slow logger); the twin runs ``steps_per_execution=10``, so Keras
  calls the batch hooks, and the callback, once per 10 steps. Profiled by ``AdvisorCallback`` with its
  default window (under ``steps_per_execution=10`` it grows to whole executions).
- ``loop_log_every_step`` / ``loop_log_every_20``: a custom loop (``tf.function`` step, Adam) that logs
  the loss and every layer's gradient norm with ``.numpy()`` after each step; the twin logs every 20th
  step. Each step is marked with ``tf.profiler.experimental.Trace('train', step_num=i, _r=1)`` around the
  step call only, as users write it: the logging runs between the markers.

Usage: ``python make_loop_samples.py OUT [--cases a,b]``; ``OUT/<sample>/`` gets the logdir and
``measured.json`` (``measured_step_ms``: wall clock per training step of each marker; ``pair``: both means
over the steps the statistics use).
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_op_samples import LOOP_SHAPE, StepClock, fit_setup, loop_setup, pairs_main, write_measured  # noqa: E402

#: problem -> twin.
PAIRS = {"loop_callback_slow": "loop_callback_spe10", "loop_log_every_step": "loop_log_every_20"}
#: the slow callback's time per call (ms).
CALLBACK_MS = 20.0
#: custom loops: warm-up steps, then the profiled steps.
FIRST, STEPS = 10, 60


def run_fit(name: str, out: Path) -> dict:
    import keras

    import tfadvisor.keras

    spe = 10 if name == "loop_callback_spe10" else 1
    width, depth, in_dim, batch = 256, 2, 128, 64
    x, y, model = fit_setup(keras, 200 * batch, width, depth, in_dim, steps_per_execution=spe)
    clock = StepClock()
    Clock = clock.callback(keras)

    class SlowLogger(keras.callbacks.Callback):
        """A logger that spends CALLBACK_MS per call (writing to a slow sink)."""

        def on_train_batch_end(self, batch, logs=None):
            time.sleep(CALLBACK_MS / 1000.0)

    logdir = out / name
    cb = tfadvisor.keras.AdvisorCallback(str(logdir), analyze=False)  # the default window
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[cb, Clock(), SlowLogger()])
    meta = json.loads(next(logdir.rglob("tfadvisor_run.json")).read_text())
    first, last = meta["steps"]["start"], meta["steps"]["stop"]
    ex0 = first // spe
    k = meta["steps"]["markers"]  # executions profiled
    per_ex = clock.per_step_ms(ex0, k)
    desc = (f"Keras 3 model.fit of an MLP {in_dim}-" + "-".join([str(width)] * depth) + f"-10, batch {batch}, "
            f"Adam, with a callback sleeping {CALLBACK_MS:g} ms in on_train_batch_end; steps_per_execution={spe}; "
            f"tfadvisor.keras.AdvisorCallback with its default window (steps {first}-{last - 1})")
    return {"description": desc, "batch_size": batch, "steps_per_execution": spe, "train_steps": k * spe,
            "measured_step_ms": [round(v / spe, 4) for v in per_ex], "capture_api": "tfadvisor_callback"}


def run_loop(name: str, out: Path) -> dict:
    import tensorflow as tf

    every = 20 if name == "loop_log_every_20" else 1
    width, depth, in_dim, batch = LOOP_SHAPE
    model, opt, loss_fn, x, y = loop_setup()

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss, grads

    log_path = out / f"{name}_train.log"
    log = open(log_path, "w")

    def log_step(i, loss, grads):
        norms = {v.path: float(tf.norm(g).numpy()) for v, g in zip(model.trainable_variables, grads)}
        log.write(f"step {i} loss {loss.numpy():.5f} " + " ".join(f"{k}={v:.4g}" for k, v in norms.items()) + "\n")
        log.flush()

    clock = StepClock()
    logdir = out / name
    for i in range(FIRST):
        loss, grads = step(x, y)
        if i % every == 0:
            log_step(i, loss, grads)
    tf.profiler.experimental.start(str(logdir))
    for i in range(FIRST, FIRST + STEPS):
        clock.starts.append(time.perf_counter())
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            loss, grads = step(x, y)
        if i % every == 0:
            log_step(i, loss, grads)
    clock.end = time.perf_counter()
    tf.profiler.experimental.stop()
    log.close()
    log_path.unlink()
    desc = (f"Custom training loop (tf.function step, Adam) of an MLP {in_dim}-" + "-".join([str(width)] * depth) +
            f"-10, batch {batch}, on in-memory tensors; after " + ("every step" if every == 1 else f"every {every}th "
            "step") + " it logs the loss and each variable's gradient norm with .numpy() to a file; steps "
            f"{FIRST}-{FIRST + STEPS - 1} profiled with tf.profiler.experimental.start/stop, each step call in "
            "tf.profiler.experimental.Trace('train', step_num=i, _r=1) (the logging outside it)")
    return {"description": desc, "batch_size": batch, "steps_per_execution": 1,
            "measured_step_ms": clock.per_step_ms(0, STEPS), "capture_api": "tf_profiler_experimental"}


#: What these scripts' clock measures (measured.json ``clock``).
CLOCK = ("time.perf_counter at the start of each step marker (fit: on_train_batch_begin, once per execution under "
         "steps_per_execution; loops: before the step); each lasts to the next one's start, divided by "
         "steps_per_execution: wall clock per training step, callbacks and logging included")


def capture(name: str, out: Path) -> dict:
    return write_measured(name, out, (run_loop if name.startswith("loop_log") else run_fit)(name, out), CLOCK)


def main() -> None:
    pairs_main(__file__, capture, PAIRS)


if __name__ == "__main__":
    main()
