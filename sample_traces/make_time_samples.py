#!/usr/bin/env python3
"""Capture the problem/twin samples of causes that live in time and structure (issue 25).

Usage::

    python sample_traces/make_time_samples.py                       # every case, 3 captures each
    python sample_traces/make_time_samples.py --only steps_checkpoint --reps 1
    python sample_traces/make_time_samples.py --finalize            # expected.toml/measured.json only

Each case is a program as users write it, TF's tf.data defaults on, with one cause that is not in
every step or not in one stage's cost: periodic work between steps (checkpoints, summaries,
evaluation), a window inside a one-time phase (a cache being filled), work the pipeline throws
away (a filter after an expensive map), an iterator made in every step, a deterministic map redone
every epoch ahead of a random one. Its twin ``<name>_tuned`` applies exactly the printed fix.

The parent side (fresh subprocess per capture, median of ``--reps`` kept, ``measured.json``,
``expected.toml``, the README table) is ``make_input_samples.py``'s. Step times here are wall
clock, one step's start to the next one's (``step_clock = "wall"``): the work these causes add
lies between the step markers as often as inside them.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_input_samples as mi  # noqa: E402  (the parent side)
import make_samples as ms  # noqa: E402  (child-side training bits)

STEPS = mi.STEPS
#: Rules that must not fire on either side of these pairs.
NEVER = ["eager_execution", "retracing"]

CASES = {
    "checkpoint": dict(
        prefix="steps", loop="custom", cause="periodic_step_work",
        problem="""Custom loop (tf.function train step of an MLP 96-1024-1024-10, Adam, batch
        32, a prefetched cheap pipeline). After every 4th step the loop writes a checkpoint of
        the model and optimizer (tf.train.Checkpoint.write, about 14 MB): SaveV2 and friends
        run between the step markers in one step of four.""",
        fix="""the same checkpoint written every 500 steps, the period the finding prints (none inside
        the profiled window)""",
    ),
    "summaries": dict(
        prefix="steps", loop="custom", cause="periodic_step_work",
        problem="""Custom loop (tf.function train step of an MLP 96-1024-1024-10, batch 32).
        Every 4th step the loop writes a histogram summary of every weight and flushes the
        writer (tf.summary.histogram under a file writer, eagerly, after the step).""",
        fix="""the same summaries written every 1000 steps, the period the finding prints (none
        inside the profiled window)""",
    ),
    "evaluation": dict(
        prefix="steps", loop="custom", cause="periodic_step_work",
        problem="""Custom loop (tf.function train step of an MLP 96-256-256-10, batch 32).
        Every 4th step the loop evaluates the model on 16 validation batches with a
        tf.function test step.""",
        fix="""the same evaluation every 500 steps, the period the finding prints (none inside the
        profiled window)""",
    ),
    "checkpoint_fit": dict(
        prefix="steps", loop="fit", cause="periodic_step_work",
        problem="""Keras 3 model.fit (MLP 96-1024-1024-10, batch 32) with
        keras.callbacks.ModelCheckpoint(save_freq=4): the weights (.weights.h5, about 5 MB)
        are saved after every 4th batch, between the step markers.""",
        fix="""ModelCheckpoint(save_freq=200), the period the finding prints (no save inside the
        profiled window)""",
    ),
    "cache_fill": dict(
        prefix="phase", loop="fit", cause="phase_cache_fill", first=2,
        problem="""Keras 3 model.fit (MLP, batch 32) on from_tensor_slices(1024 x
        96x96).map(f).cache().repeat().batch(32) with an expensive deterministic map f,
        profiled at batches 2-13 of the first pass: the cache is being written, so every
        element still goes through f. Later passes read the cache.""",
        fix="the same program profiled at batches 40-51, after the first pass (the cache full)",
    ),
    "filter_after_map": dict(
        prefix="pipe", loop="custom", cause="tfdata_filter_after_map", steps=10,  # ~2 MB of events
        problem="""Custom loop (tf.function MLP train step, batch 32). The pipeline
        range(2**30).map(read record i) (a stream that does not repeat within the window, as a
        large dataset) .map(f).filter(label < 4).batch(32).prefetch with an expensive
        deterministic map f: the filter keeps 4 labels of 10, so 60 % of
        the map's work is thrown away. The predicate reads only the label, which f passes
        through.""",
        fix="filter(label < 4) before map(f): the map runs only on the kept elements",
    ),
    "iterator_per_step": dict(
        prefix="pipe", loop="custom", cause="tfdata_iterator_per_step",
        problem="""Custom loop (tf.function MLP train step, batch 32) that takes each batch with
        next(iter(ds)): a new iterator every step, so the shuffle buffer (1024 elements) fills
        and the parallel map and prefetch start from empty every step.""",
        fix="it = iter(ds) once before the loop, next(it) in each step",
    ),
    "random_after_map": dict(
        prefix="pipe", loop="fit", cause="tfdata_no_cache", first=12,
        problem="""Keras 3 model.fit (MLP, batch 32) on
        from_tensor_slices(256 x 96x96).repeat().map(f).map(augment).batch(32) where f is an
        expensive deterministic map and augment adds random noise: f is redone on the same
        256 elements every pass; the random map cannot be cached, the map before it can.""",
        fix="""map(f).cache().repeat().map(augment).batch(32): f once, cached, before the random
        map (the fix the finding prints for this pipeline)""",
    ),
    "varlen": dict(
        prefix="steps", loop="custom", cause="variable_work_per_step",
        problem="""Custom loop (tf.function train step with reduce_retracing, a Conv1D text model:
        Embedding 1000x64, Conv1D 128x5, global max pool, Dense 10; Adam). Token sequences of
        log-normal length (median 33, up to 1024) padded per batch: padded_batch(32). A batch
        that draws one long sequence pads all 32 rows to it.""",
        fix="""bucket_by_sequence_length(len, bucket_boundaries=[32, 64, 128, 256, 512],
        bucket_batch_sizes=[32] * 6): batches of similar lengths, little padding""",
    ),
    "dataset_per_epoch": dict(
        prefix="pipe", loop="custom", cause="periodic_step_work", steps=24,  # 6 epochs: their spread known
        problem="""Custom loop (tf.function MLP train step, batch 32) over epochs of 4 steps: each
        epoch builds its dataset again, from_tensor_slices of the 128 x 96x96 arrays then a map
        (8 x tanh(matmul + x)) traced anew, shuffle, batch.""",
        fix="the same dataset built once before the epochs, iterated each epoch",
    ),
    "numpy_per_step": dict(
        prefix="pipe", loop="custom", cause="numpy_input_per_step",
        problem="""Custom loop (tf.function train step of a small MLP 27648-32-10 on flattened
        3x96x96 images, batch 256, Adam) called with NumPy slices x[i:i + 256], y[i:i + 256]:
        each call converts and copies 28 MB into new tensors on the training thread.""",
        fix="""tf.data.Dataset.from_tensor_slices((x, y)).batch(256).prefetch(AUTOTUNE), made
        once, iterated by the loop""",
    ),
}


# --------------------------------------------------------------------------
# Child side.
# --------------------------------------------------------------------------

def _features(tf, x, y):
    return tf.data.Dataset.from_tensor_slices((x, y)).map(lambda a, b: (tf.reduce_mean(a, axis=0), b))


def _wall_loop(tf, logdir, n, body, after):
    """Profile n steps, each in Trace('train', step_num=i, _r=1), ``after(i)`` between them; the
    wall time of each step, its start to the next one's (the last: to the end of its ``after``)."""
    from time import perf_counter
    starts = []
    tf.profiler.experimental.start(logdir)
    try:
        for i in range(n):
            starts.append(perf_counter())
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                body(i)
            after(i)
        starts.append(perf_counter())
    finally:
        tf.profiler.experimental.stop()
    return [(b - a) * 1e3 for a, b in zip(starts, starts[1:])]


def _periodic_loop(tf, keras, logdir, hidden, every, periodic, warm=6):
    """The custom loop of the ``steps_*`` cases: ``periodic(model, opt, i)`` after each step ``i``
    with ``(i + 2) % every == 0`` (steps 2, 6, 10 of 12 for every=4; none of the 12 for every >= 14)."""
    import numpy as np
    x, y, _ = ms._input_data(np)
    ds = _features(tf, x, y).batch(32).repeat().prefetch(tf.data.AUTOTUNE)
    model = ms._mlp(keras, 96, hidden=hidden)
    opt = keras.optimizers.Adam(1e-3)
    step = tf.function(ms._train_step_fn(tf, keras, model, opt))
    it = iter(ds)
    for _ in range(warm):
        step(*next(it))
    periodic(model, opt, -1)  # the first call's tracing and setup happen before the window
    step_ms = _wall_loop(tf, logdir, STEPS, lambda i: step(*next(it)),
                         lambda i: periodic(model, opt, i) if (i + 2) % every == 0 else None)
    return dict(step_ms=step_ms, step_clock="wall", every=every, params=int(model.count_params()))


def _case_checkpoint(tf, keras, np, logdir, tuned):
    import tempfile
    ckdir = tempfile.mkdtemp(prefix="tfadv_ckpt_")
    holder = {}

    def save(model, opt, i):
        if "ck" not in holder:
            holder["ck"] = tf.train.Checkpoint(model=model, optimizer=opt)
        holder["ck"].write(os.path.join(ckdir, "ckpt"))

    try:
        return _periodic_loop(tf, keras, logdir, (1024, 1024), 500 if tuned else 4, save)
    finally:
        import shutil
        shutil.rmtree(ckdir, ignore_errors=True)


def _case_summaries(tf, keras, np, logdir, tuned):
    import tempfile
    sdir = tempfile.mkdtemp(prefix="tfadv_sum_")
    writer = tf.summary.create_file_writer(sdir)

    def summarize(model, opt, i):
        with writer.as_default(step=max(i, 0)):
            for v in model.trainable_variables:
                tf.summary.histogram(v.path if hasattr(v, "path") else v.name, v)
        writer.flush()

    try:
        return _periodic_loop(tf, keras, logdir, (1024, 1024), 1000 if tuned else 4, summarize)
    finally:
        import shutil
        shutil.rmtree(sdir, ignore_errors=True)


def _case_evaluation(tf, keras, np, logdir, tuned):
    x, y, _ = ms._input_data(np)
    val = _features(tf, x, y).batch(32).repeat().prefetch(tf.data.AUTOTUNE)
    lossf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    vit = iter(val)
    holder = {}

    def evaluate(model, opt, i):
        if "test" not in holder:
            @tf.function
            def test_step(a, b):
                return lossf(b, model(a, training=False))
            holder["test"] = test_step
        for _ in range(16):
            holder["test"](*next(vit))

    return _periodic_loop(tf, keras, logdir, (256, 256), 500 if tuned else 4, evaluate)


def _wall_fit(tf, keras, logdir, ds, first, steps=STEPS, hidden=(256, 256), callbacks=(), per_epoch=None):
    """model.fit with the stock TensorBoard callback profiling batches first..first+steps-1; the wall
    time of each profiled batch, its begin to the next batch's begin (callbacks after it included)."""
    from time import perf_counter
    model = ms._mlp(keras, 96, hidden=hidden)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    last = first + steps - 1

    class Clock(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.n, self.t = 0, []

        def on_train_batch_begin(self, batch, logs=None):
            self.n += 1
            if first <= self.n <= last + 1:
                self.t.append(perf_counter())

    clock = Clock()
    tb = tf.keras.callbacks.TensorBoard(log_dir=logdir, profile_batch=(first, last))
    # the clock first: a batch's begin is read before the TensorBoard callback's hooks
    model.fit(ds, epochs=1, steps_per_epoch=per_epoch or last + 2, verbose=0,
              callbacks=[clock, tb, *callbacks])
    step_ms = [(b - a) * 1e3 for a, b in zip(clock.t, clock.t[1:])]
    return dict(step_ms=step_ms, step_clock="wall", train_steps=len(step_ms), params=int(model.count_params()))


def _case_checkpoint_fit(tf, keras, np, logdir, tuned):
    import shutil
    import tempfile
    x, y, _ = ms._input_data(np)
    ds = _features(tf, x, y).batch(32).repeat().prefetch(tf.data.AUTOTUNE)
    ckdir = tempfile.mkdtemp(prefix="tfadv_ckfit_")
    try:
        # save_freq counts batches from the start of training: 4 saves at batches 4, 8, 12 of the window 2-13
        cb = keras.callbacks.ModelCheckpoint(os.path.join(ckdir, "m.weights.h5"), save_weights_only=True,
                                             save_freq=200 if tuned else 4)
        return _wall_fit(tf, keras, logdir, ds, first=2, hidden=(1024, 1024), callbacks=[cb])
    finally:
        shutil.rmtree(ckdir, ignore_errors=True)


def _case_cache_fill(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    x, y = np.concatenate([x] * 4), np.concatenate([y] * 4)
    f = mi._heavy(tf, tf.constant(w))
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(f).cache().repeat().batch(32)
    return _wall_fit(tf, keras, logdir, ds, first=40 if tuned else 2, per_epoch=53)


def _case_filter_after_map(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    f = mi._heavy(tf, tf.constant(w))
    keep = lambda a, b: b < 4  # noqa: E731
    xc, yc = tf.constant(x), tf.constant(y)
    # a stream of records that does not repeat within the window (a large dataset read by index)
    ds = tf.data.Dataset.range(1 << 30).map(lambda i: (tf.gather(xc, i % 256), tf.gather(yc, i % 256)))
    ds = ds.filter(keep).map(f) if tuned else ds.map(f).filter(keep)
    ds = ds.batch(32).prefetch(tf.data.AUTOTUNE)
    return _loop(tf, keras, logdir, lambda: iter(ds), steps=CASES["filter_after_map"]["steps"])


def _case_iterator_per_step(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    x, y = np.concatenate([x] * 4), np.concatenate([y] * 4)
    g = mi._heavy(tf, tf.constant(w), n=4)
    ds = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).map(g, num_parallel_calls=tf.data.AUTOTUNE)
          .batch(32).prefetch(tf.data.AUTOTUNE))  # 32 batches: one pass covers the warm-up and the window
    return _loop(tf, keras, logdir, lambda: iter(ds), fresh=not tuned)


def _loop(tf, keras, logdir, make_it, fresh=False, warm=4, steps=STEPS):
    """A custom loop over the iterator ``make_it()`` (``fresh``: a new one for every batch, as
    ``next(iter(ds))`` in the loop does), wall-clock steps."""
    model = ms._mlp(keras, 96)
    opt = keras.optimizers.Adam(1e-3)
    step = tf.function(ms._train_step_fn(tf, keras, model, opt))
    it = make_it()

    def batch():
        return next(make_it() if fresh else it)

    for _ in range(warm):
        step(*batch())
    step_ms = _wall_loop(tf, logdir, steps, lambda i: step(*batch()), lambda i: None)
    return dict(step_ms=step_ms, step_clock="wall")


def _case_random_after_map(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    f = mi._heavy(tf, tf.constant(w))

    def augment(a, b):
        return a + tf.random.uniform(tf.shape(a), -0.01, 0.01), b

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if tuned:
        ds = ds.map(f).cache().repeat().map(augment).batch(32)
    else:
        ds = ds.repeat().map(f).map(augment).batch(32)
    return _wall_fit(tf, keras, logdir, ds, first=12)


def _case_varlen(tf, keras, np, logdir, tuned):
    rng = np.random.default_rng(ms.SEED)
    n = 2048
    lengths = np.clip(rng.lognormal(3.5, 1.0, n), 8, 1024).astype(np.int64)
    values = tf.constant(rng.integers(1, 1000, int(lengths.sum())), dtype=tf.int32)
    splits = tf.constant(np.concatenate([[0], np.cumsum(lengths)]), dtype=tf.int64)
    labels = tf.constant(rng.integers(0, 10, n).astype(np.int64))

    def sequence(i):  # token sequence i, dense, of its own length
        return values[splits[i]:splits[i + 1]], labels[i]

    ds = tf.data.Dataset.range(n).shuffle(n, seed=ms.SEED).repeat().map(sequence)
    if tuned:
        ds = ds.bucket_by_sequence_length(lambda x, y: tf.shape(x)[0], bucket_boundaries=[32, 64, 128, 256, 512],
                                          bucket_batch_sizes=[32] * 6)
    else:
        ds = ds.padded_batch(32)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    model = keras.Sequential([keras.Input((None,), dtype="int32"), keras.layers.Embedding(1000, 64),
                              keras.layers.Conv1D(128, 5, activation="relu"), keras.layers.GlobalMaxPooling1D(),
                              keras.layers.Dense(10)])
    opt = keras.optimizers.Adam(1e-3)
    step = tf.function(ms._train_step_fn(tf, keras, model, opt), reduce_retracing=True)
    it = iter(ds)
    for _ in range(8):  # past the retraces of the first shapes
        step(*next(it))
    step_ms = _wall_loop(tf, logdir, STEPS, lambda i: step(*next(it)), lambda i: None)
    return dict(step_ms=step_ms, step_clock="wall", median_length=int(np.median(lengths)))


def _case_dataset_per_epoch(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    x, y = x[:128], y[:128]
    f = mi._heavy(tf, tf.constant(w))

    def build():
        return tf.data.Dataset.from_tensor_slices((x, y)).map(f).shuffle(128).batch(32)

    model = ms._mlp(keras, 96)
    opt = keras.optimizers.Adam(1e-3)
    step = tf.function(ms._train_step_fn(tf, keras, model, opt))
    once = build()
    state = {"it": iter(once)}

    def batch():
        try:
            return next(state["it"])
        except StopIteration:  # an epoch ends: the next one (a new dataset, or the same one again)
            state["it"] = iter(once if tuned else build())
            return next(state["it"])

    for _ in range(6):
        step(*batch())
    step_ms = _wall_loop(tf, logdir, CASES["dataset_per_epoch"]["steps"], lambda i: step(*batch()), lambda i: None)
    return dict(step_ms=step_ms, step_clock="wall")


def _case_numpy_per_step(tf, keras, np, logdir, tuned):
    rng = np.random.default_rng(ms.SEED)
    n, d, bs = 2048, 3 * 96 * 96, 256
    x = rng.random((n, d), dtype=np.float32)
    y = rng.integers(0, 10, n).astype(np.int64)
    if tuned:
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(bs).repeat().prefetch(tf.data.AUTOTUNE)
        it = iter(ds)
        batch = lambda i: next(it)  # noqa: E731
    else:
        batch = lambda i: (x[(i * bs) % n:(i * bs) % n + bs], y[(i * bs) % n:(i * bs) % n + bs])  # noqa: E731
    model = ms._mlp(keras, d, hidden=(32,))
    opt = keras.optimizers.Adam(1e-3)
    step = tf.function(ms._train_step_fn(tf, keras, model, opt))
    for i in range(4):
        step(*batch(i))
    step_ms = _wall_loop(tf, logdir, STEPS, lambda i: step(*batch(i + 4)), lambda i: None)
    return dict(step_ms=step_ms, step_clock="wall")


CHILD = {case: globals()["_case_" + case] for case in CASES}

TABLE_BEGIN = "<!-- BEGIN TIME PAIRS (written by make_time_samples.py) -->"
TABLE_END = "<!-- END TIME PAIRS -->"


def main(argv=None) -> int:
    mi.CASES, mi.CHILD, mi.SCRIPT = CASES, CHILD, os.path.abspath(__file__)
    mi.TABLE_BEGIN, mi.TABLE_END, mi.NEVER = TABLE_BEGIN, TABLE_END, NEVER
    return mi.main(argv)


if __name__ == "__main__":
    sys.exit(main())
