"""Small real tf.data captures for the tf.data tests (TF's default optimizations ON).

Run as ``python tests/tfdata_capture.py OUTDIR CASE...``: each case writes a profile under
``OUTDIR/<case>`` from 8 marked steps of a tiny train step fed by the case's pipeline, and
``OUTDIR/<case>.json`` with what was timed outside the profiler.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

AT = tf.data.AUTOTUNE
RNG = np.random.default_rng(0)
X = RNG.random((256, 48, 48), dtype=np.float32)
Y = RNG.integers(0, 10, 256).astype(np.int64)
W = tf.constant((RNG.random((48, 48), dtype=np.float32) - 0.5) / 48.0)


def heavy(a, b):
    for _ in range(8):
        a = tf.tanh(tf.matmul(a, W) + a)
    return tf.reduce_mean(a, axis=0), b


def heavier(a, b):
    """The repeated map's case: twice ``heavy``'s work (~90 us an element here), so that a fast run never brings it
    near the 50 us under which tfdata calls a map cheap (one run here named it vectorizable instead of redone)."""
    for _ in range(16):
        a = tf.tanh(tf.matmul(a, W) + a)
    return tf.reduce_mean(a, axis=0), b


def slow_py(a, b):
    def f(v):
        time.sleep(0.001)  # a remote read's latency
        return v
    out = tf.py_function(f, [a], tf.float32)
    out.set_shape(a.shape)
    return tf.reduce_mean(out, axis=0), b


def gen():
    for i in range(256):
        yield np.tanh(X[i] @ X[i].T).mean(axis=0).astype(np.float32), Y[i]


def files(tmp: str) -> list[str]:
    os.makedirs(tmp, exist_ok=True)
    out = []
    for k in range(96):
        fn = os.path.join(tmp, f"f{k}.tfrecord")
        with tf.io.TFRecordWriter(fn) as wr:
            for i in range(3):
                wr.write(X[(k * 3 + i) % 256].tobytes())
        out.append(fn)
    return out


def parse(s):
    return tf.reduce_mean(tf.reshape(tf.io.decode_raw(s, tf.float32), (48, 48)), axis=0), tf.constant(0, tf.int64)


def parse_batch(s):
    """``parse`` for a batch of records: no per-element map beside the reads in the many_files case."""
    x = tf.reshape(tf.io.decode_raw(s, tf.float32), (-1, 48, 48))
    return tf.reduce_mean(x, axis=1), tf.zeros(tf.shape(x)[:1], tf.int64)


def cheap(a, b):
    return tf.reduce_mean(a * 2.0 + 1.0, axis=-2), b


def pipeline(case: str, tmp: str) -> tf.data.Dataset:
    base = tf.data.Dataset.from_tensor_slices((X, Y))
    sig = (tf.TensorSpec((48,), tf.float32), tf.TensorSpec((), tf.int64))
    return {
        "heavy_map": lambda: base.map(heavy).batch(32).repeat(),
        "pyfunc_seq": lambda: base.map(slow_py).batch(32).repeat(),
        "pyfunc_par": lambda: base.map(slow_py, num_parallel_calls=AT).batch(32).repeat().prefetch(AT),
        "repeat_map": lambda: base.repeat().map(heavier).batch(32),
        "repeat_map_cached": lambda: base.map(heavier, num_parallel_calls=AT).cache().repeat().batch(32).prefetch(AT),
        "generator": lambda: tf.data.Dataset.from_generator(gen, output_signature=sig).batch(32).repeat(),
        "generator_fixed": lambda: base.batch(32).map(cheap, num_parallel_calls=AT).repeat().prefetch(AT),
        # sequential reads alone: the records are parsed a batch at a time (a per-element map would be
        # a second cause, tfdata_vectorizable_map, of a similar size)
        "many_files": lambda: tf.data.TFRecordDataset(files(tmp)).batch(32).map(parse_batch).repeat(),
        "many_files_par": lambda: tf.data.TFRecordDataset(files(tmp), num_parallel_reads=AT).map(
            parse, num_parallel_calls=AT).batch(32).repeat().prefetch(AT),
        "cheap_map": lambda: base.map(cheap).batch(32).repeat(),
        "cheap_map_vec": lambda: base.batch(32).map(cheap, num_parallel_calls=AT).repeat().prefetch(AT),
    }[case]()


def map_alone_us() -> float:
    """The heavy map timed alone, one element at a time, no training: 2048 elements in batches of
    256 with and without the map (median of 3 each); the difference per element."""
    opts = tf.data.Options()
    opts.experimental_optimization.map_parallelization = False
    base = tf.data.Dataset.from_tensor_slices((X, Y)).repeat(8)
    mapped = base.map(heavy).batch(256).with_options(opts)
    plain = base.batch(256).with_options(opts)

    def once(ds) -> float:
        t0 = time.perf_counter()
        for _ in ds:
            pass
        return (time.perf_counter() - t0) * 1e6 / 2048

    once(mapped)
    return float(np.median([once(mapped) for _ in range(3)]) - np.median([once(plain) for _ in range(3)]))


def capture(case: str, out: str) -> dict:
    ds = pipeline(case, os.path.join(out, case + "_files"))
    v = tf.Variable(tf.zeros((48, 10)))

    @tf.function
    def step(xb, yb):
        v.assign_add(tf.matmul(tf.transpose(xb), tf.one_hot(yb, 10)) * 1e-6)
        return tf.reduce_sum(v)

    it = iter(ds)
    for _ in range(3):
        step(*next(it))
    step_ms = []
    tf.profiler.experimental.start(os.path.join(out, case))
    for i in range(8):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            t0 = time.perf_counter()
            step(*next(it))
            step_ms.append((time.perf_counter() - t0) * 1e3)
    tf.profiler.experimental.stop()
    info = {"step_ms": step_ms}
    if case == "heavy_map":
        info["map_alone_us"] = map_alone_us()
        # the same timing with the profiler recording, as it was for the trace: its per-op events cost the map's
        # 24 ops per element 1.15-1.3x (three pairs on 2026-11-28: 101/132, 174/232, 154/181 us)
        tf.profiler.experimental.start(os.path.join(out, case + "_alone_profiled"))
        info["map_alone_profiled_us"] = map_alone_us()
        tf.profiler.experimental.stop()
    return info


def main(argv: list[str]) -> None:
    out, cases = argv[0], argv[1:]
    if os.environ.get("TFADVISOR_TEST_READY"):  # conftest.run_timed_child: the imports done, wait to be told to go
        print("READY", flush=True)
        sys.stdin.readline()
    for case in cases:
        with open(os.path.join(out, case + ".json"), "w") as fh:
            json.dump(capture(case, out), fh)
    sys.stdout.flush()
    os._exit(0)  # a py_function pipeline can hang interpreter shutdown


if __name__ == "__main__":
    main(sys.argv[1:])
