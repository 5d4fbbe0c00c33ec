"""One real TensorFlow capture for tests/test_program_events.py (run as ``python tests/program_capture.py OUT``):

* ``OUT/tb``: a Keras 3 ``fit`` with ``keras.callbacks.TensorBoard(log_dir, profile_batch=(3, 6), write_graph=True)``
  (the model's config and the epoch scalars in ``train/`` and ``validation/`` event files, the profile under
  ``train/plugins/profile/<run>/``), in the same ``fit`` as
* ``OUT/adv``: tfadvisor's ``AdvisorCallback`` (steps 10-13; ``tfadvisor_run.json`` with the model's facts);
* ``OUT/loop``: a custom loop whose step (a ``tf.function``) calls another ``tf.function`` for the gradients,
  its graph written by ``tf.summary.trace_export`` and ``tf.summary.graph`` (a function library: the ops under
  ``StatefulPartitionedCall/`` come from ``__inference_grads_of_<n>``), profiled for 5 marked steps;
* ``OUT/plain``: a custom loop whose loss and accuracy are written inline, in no name scope but one term's
  (``tf.nn.sigmoid_cross_entropy_with_logits``: ``logistic_loss/``) (profiled for 5 marked steps): the loss is
  differentiated, the accuracy (``ArgMax``, ``Equal``) is not;
* ``OUT/expected.json``: what the model itself says (Keras's objects, not the files): its layers' names, classes,
  units, activations and parameters, the compiled metrics' names, the inner function's name.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfadvisor.capture.keras import AdvisorCallback  # noqa: E402


def layers_of(model, path=()):
    out = []
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        cfg = layer.get_config()
        out.append({"path": [*path, layer.name], "class": type(layer).__name__, "units": cfg.get("units"),
                    "activation": cfg.get("activation"), "params": int(layer.count_params())})
        if getattr(layer, "layers", None):
            out.extend(layers_of(layer, (*path, layer.name)))
    return out


def fit(out: str) -> dict:
    inp = keras.Input((32,))
    x = keras.layers.Dense(48, activation="relu")(inp)
    x = keras.Sequential([keras.layers.Dense(24, activation="tanh", name="inner_dense")], name="block")(x)
    x = keras.layers.Dense(40, activation="relu", name="hidden")(x)
    y = keras.layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inp, y)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=3, name="top3")])
    rng = np.random.default_rng(0)
    data, labels = rng.random((1280, 32), dtype=np.float32), rng.integers(0, 10, 1280)
    tb = keras.callbacks.TensorBoard(os.path.join(out, "tb"), profile_batch=(3, 6), write_graph=True)
    adv = AdvisorCallback(os.path.join(out, "adv"), steps=(10, 14), analyze=False, verbose=False)
    model.fit(data, labels, batch_size=64, epochs=2, validation_split=0.2, callbacks=[tb, adv], verbose=0)
    return {"model": model.name, "layers": layers_of(model), "metrics": ["accuracy", "top3"],
            "adv_run": adv.run_dir}


def loop(out: str) -> dict:
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def grads_of(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, model.trainable_variables)

    @tf.function
    def train_step(x, y):
        loss, grads = grads_of(x, y)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    x = tf.random.normal((64, 32), seed=1)
    y = tf.random.uniform((64,), 0, 10, tf.int32, seed=2)
    logdir = os.path.join(out, "loop", "train")
    writer = tf.summary.create_file_writer(logdir)
    tf.summary.trace_on(graph=True, profiler=False)
    train_step(x, y)
    with writer.as_default():
        tf.summary.trace_export("train_step", step=0)
        tf.summary.graph(train_step.get_concrete_function(x, y).graph)
    tf.profiler.experimental.start(logdir)
    for i in range(5):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            loss = train_step(x, y)
        with writer.as_default():
            tf.summary.scalar("batch_loss", loss, step=i)
    tf.profiler.experimental.stop()
    writer.flush()
    inner = grads_of.get_concrete_function(x, y).name.decode()
    return {"loop_function": inner, "loop_layers": layers_of(model)}


def plain(out: str) -> dict:
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)])
    opt = keras.optimizers.SGD(0.01)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            err = logits - tf.one_hot(y, 10)
            loss = tf.reduce_mean(tf.square(err)) + 0.1 * tf.reduce_mean(tf.abs(tf.roll(logits, 1, axis=0)))
            # a term from TF's library, in its own scope (logistic_loss/...): the rest of the loss has none
            loss += tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(tf.one_hot(y, 10), logits))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), y), tf.float32))
        return loss, acc

    x = tf.random.normal((64, 32), seed=3)
    y = tf.random.uniform((64,), 0, 10, tf.int32, seed=4)
    train_step(x, y)
    tf.profiler.experimental.start(os.path.join(out, "plain"))
    for i in range(5):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            train_step(x, y)
    tf.profiler.experimental.stop()
    return {}


if __name__ == "__main__":
    out = sys.argv[1]
    expected = {**fit(out), **loop(out), **plain(out)}
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as fh:
        json.dump(expected, fh, indent=1)
    print("RUN", out)
