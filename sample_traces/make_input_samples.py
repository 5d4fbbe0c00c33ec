#!/usr/bin/env python3
"""Capture the tf.data problem/twin samples (``sample_traces/tfdata_*``) with TF's defaults ON.

Usage::

    python sample_traces/make_input_samples.py                  # every case, 3 captures each
    python sample_traces/make_input_samples.py --only tfdata_seq_map --reps 2
    python sample_traces/make_input_samples.py --finalize       # rewrite expected.toml/measured.json only

Each case is a pipeline as users write it, run with ``tf.data``'s default optimizations on
(map+batch fused into ``MapAndBatch``, stateless maps parallelised, a ``Prefetch`` injected),
either under Keras 3 ``model.fit`` with the stock TensorBoard callback (``profile_batch``) or in
a custom loop (tf.function train step in ``Trace('train', step_num=i, _r=1)`` markers). Each
problem ``tfdata_<case>`` has a twin ``tfdata_<case>_tuned`` that applies exactly the fix.

Every capture runs in a fresh subprocess; a case is captured ``--reps`` times and the run whose
median step time is the median of the runs is kept (the machine is shared and noisy). The
parent reuses ``make_samples.py``'s helpers (trace summary, xprof overview, TOML values), writes
``measured.json`` (per-step wall time, the map/pipeline timed alone, and for a pair the planted
cost: problem step minus twin step) and ``expected.toml`` (``kind = "captured"``, the truth,
``fixed_by`` on the problem, the findings the analysis should give).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_samples as ms  # noqa: E402  (helpers: summary, xprof, child-side training bits)

SEED = ms.SEED
STEPS = 12  # profiled steps per sample

# --------------------------------------------------------------------------
# Cases (parent side). `cause` is the rule id the analysis should put first on the problem,
# `fix` the twin's change. `absent` holds rules that must not fire on either side.
# --------------------------------------------------------------------------

NEVER = ["eager_execution", "retracing", "step_gaps"]

CASES = {
    "seq_map": dict(
        loop="custom", cause="tfdata_sequential_map",
        problem="""Custom loop (tf.function MLP train step, batch 32). The pipeline
        from_tensor_slices(256 x 96x96).map(f).batch(32).repeat() with an expensive
        deterministic map f (8 x tanh(matmul + x) per element) whose weights live in a
        tf.Variable (as a preprocessing layer's do): the function is stateful, so tf.data's
        default map_parallelization leaves it on one thread; the defaults still fuse it into
        MapAndBatch and inject a Prefetch. The host waits in IteratorGetNext.""",
        fix="map(f, num_parallel_calls=tf.data.AUTOTUNE) ... .prefetch(tf.data.AUTOTUNE)",
    ),
    "repeat_map": dict(
        loop="fit", cause="tfdata_no_cache",
        problem="""Keras 3 model.fit (MLP, batch 32, steps_per_epoch) on
        from_tensor_slices(256 x 96x96).repeat().map(f).batch(32): the expensive
        deterministic map f (8 x tanh(matmul + x), stateless, so tf.data parallelises it and
        fuses it into MapAndBatch) runs on the same 256 elements again in every pass, after
        the repeat.""",
        fix="map(f).cache().repeat().batch(32).prefetch(tf.data.AUTOTUNE) (map once, cache, then repeat)",
    ),
    "py_function_latency": dict(
        loop="custom", cause="tfdata_sequential_map",
        problem="""Custom loop (tf.function MLP train step, batch 16). Each element is
        fetched by a tf.py_function that sleeps 1 ms (a remote read's latency) and returns a
        96x96 array; map without num_parallel_calls: py_function is stateful, so it runs
        one element at a time.""",
        fix="map(fetch, num_parallel_calls=tf.data.AUTOTUNE)",
    ),
    "generator": dict(
        loop="fit", cause="tfdata_generator",
        problem="""Keras 3 model.fit (MLP, batch 32) on tf.data.Dataset.from_generator: the
        generator does per-element Python/numpy work (tanh(row @ w) for each of the 96 rows
        of a 96x96 array, then the mean over rows) while holding the GIL.""",
        fix="""the same features precomputed with one vectorised numpy call,
        from_tensor_slices(...).batch(32) then a vectorised tf map, prefetch""",
    ),
    "many_files": dict(
        loop="custom", cause="tfdata_sequential_reads",
        problem="""Custom loop (tf.function MLP train step, batch 32). 256 small TFRecord
        files (2 serialised 96x96 tensors each, about 74 KB per file) written to the
        capture's temp dir, read with TFRecordDataset(files) (one file after another),
        parse_tensor map, batch(32), repeat().""",
        # num_parallel_reads on these 256 local, page-cached files made this program 63 % SLOWER
        # on a 2-core host: it pays off for remote latency; many small local files want packing
        fix="""the same 512 records packed into one TFRecord file (about 19 MB, within the usual
        1-128 MB per file), read with TFRecordDataset([packed]): one open instead of 256""",
    ),
    "contention": dict(
        loop="fit", cause="tfdata_cpu_contention",
        problem="""Keras 3 model.fit (a wider MLP 96-1024-1024-10 whose step uses both
        cores, batch 64) on from_tensor_slices(512 x 96x96).map(f,
        num_parallel_calls=AUTOTUNE).batch(64).repeat().prefetch(AUTOTUNE) with a
        deterministic f (4 x tanh(matmul + x)) that alone produces a batch about as fast as
        the train step runs alone; on this 2-core host the autotuned tf.data threads and
        the train step's ops share the cores, and the step is slower than either alone.""",
        fix="map(f, num_parallel_calls=AUTOTUNE).cache() before batch/repeat (the work done once)",
    ),
    "vectorizable_map": dict(
        loop="fit", cause="tfdata_vectorizable_map", steps=10,  # ~15 events per element: < 2 MB
        problem="""Keras 3 model.fit (small MLP 64-64-10, batch 256) on
        from_tensor_slices(8192 x 64).map(g).batch(256).repeat() where g is a cheap
        feature scaling (a dozen elementwise ops and two reductions on 64 floats): the
        function-call overhead is paid for each of the 256 elements of a batch (MapAndBatch,
        parallel by the defaults).""",
        fix="batch(256).map(g) (one vectorised call per batch)",
    ),
}


#: Another script's cases reuse this one's parent side by setting these (make_time_samples.py): its case
#: table, its child functions (case -> function; default: ``_case_<case>`` here), its path (run as the
#: child) and the README table it writes.
CHILD: dict = {}
SCRIPT = os.path.abspath(__file__)


def problem_name(case: str) -> str:
    return CASES[case].get("prefix", "tfdata") + "_" + case


def twin_name(case: str) -> str:
    return problem_name(case) + "_tuned"


def all_names() -> list[str]:
    return [n for c in CASES for n in (problem_name(c), twin_name(c))]


def case_of(name: str) -> tuple[str, bool]:
    """(case, tuned) of a sample name."""
    for case in CASES:
        if name in (problem_name(case), twin_name(case)):
            return case, name == twin_name(case)
    raise KeyError(name)


# --------------------------------------------------------------------------
# Child side: the pipelines and the training.
# --------------------------------------------------------------------------

def _heavy(tf, w, n=8):
    """The expensive deterministic per-element map (n x tanh(matmul + x), mean over rows)."""
    def f(a, b):
        for _ in range(n):
            a = tf.tanh(tf.matmul(a, w) + a)
        return tf.reduce_mean(a, axis=0), b
    return f


def _median_ms(fn, k=7, inner=1):
    from time import perf_counter
    ts = []
    for _ in range(k):
        t0 = perf_counter()
        for _ in range(inner):
            fn()
        ts.append((perf_counter() - t0) * 1e3 / inner)
    return statistics.median(ts)


#: How the ``*_alone`` figures are timed (written into measured.json as ``alone_method``).
ALONE_METHOD = (
    "Timed in the capture's process, no profiler, no training running, before the capture. "
    "map_element_ms_alone: the per-element function's cost inside tf.data: the source mapped with it "
    "one element at a time (no num_parallel_calls, map_parallelization off) and batched by 256, iterated "
    "to the end, minus the same source unmapped, per element, median of 5 passes (for a from_generator "
    "source: the generator dataset itself, unbatched, per element). pipeline_batch_ms_alone: the "
    "problem's pipeline as written (TF's default optimizations on) after 5 warm-up batches, the mean "
    "wall time of next() over 40 batches, median of 3 such runs (throughput: ms to produce one batch). "
    "*_profiled: the same timings while the profiler runs (what a trace of the pipeline alone can show).")


def _pipeline_alone(ds, warm=5, n=40, reps=3):
    """ms per batch when only the pipeline runs: the mean over ``n`` batches of a fresh iterator after
    ``warm`` batches (a throughput; a single ``next()`` may return an already buffered batch),
    median of ``reps`` runs."""
    from time import perf_counter
    it = iter(ds)
    for _ in range(warm):
        next(it)
    ts = []
    for _ in range(reps):
        t0 = perf_counter()
        for _ in range(n):
            next(it)
        ts.append((perf_counter() - t0) * 1e3 / n)
    return statistics.median(ts)


def _sequential(tf):
    opts = tf.data.Options()
    opts.experimental_optimization.map_parallelization = False
    return opts


def _per_element_ms(tf, ds, n, reps=5):
    """ms per element of iterating ``ds`` (``n`` elements, batched by 256) to the end, median of ``reps``."""
    from time import perf_counter

    def once():
        t0 = perf_counter()
        for _ in ds:
            pass
        return (perf_counter() - t0) * 1e3 / n
    once()
    return statistics.median(once() for _ in range(reps))


def _map_alone(tf, src, fn, n=1024):
    """ms per element of ``fn`` as tf.data runs it: ``src`` (at least ``n`` elements) mapped one
    element at a time, minus ``src`` alone (see ``ALONE_METHOD``). Not a Python call of a tf.function:
    that adds the call's dispatch and argument conversion, tens to hundreds of us per call."""
    src = src.take(n)
    mapped = src.map(fn).batch(256).with_options(_sequential(tf))
    plain = src.batch(256).with_options(_sequential(tf))
    return max(_per_element_ms(tf, mapped, n) - _per_element_ms(tf, plain, n), 0.0)


def _alone(tf, res, logdir, ds, elem):
    """The ``*_alone`` figures of ``res`` (``elem``: a callable timing one element, ms); with
    ``RETIME`` also the same timed under the profiler, then the capture is skipped."""
    if elem is not None:
        res["map_element_ms_alone"] = elem()
    res["pipeline_batch_ms_alone"] = _pipeline_alone(ds)
    res["alone_method"] = ALONE_METHOD
    if RETIME:
        tf.profiler.experimental.start(logdir)
        if elem is not None:
            res["map_element_ms_alone_profiled"] = elem()
        res["pipeline_batch_ms_alone_profiled"] = _pipeline_alone(ds)
        tf.profiler.experimental.stop()
    return res


#: --retime: time the ``*_alone`` figures only (no capture, no training).
RETIME = False


def _custom_loop(tf, keras, logdir, ds, in_dim, hidden=(256, 256), warm=4):
    from time import perf_counter
    model = ms._mlp(keras, in_dim, hidden=hidden)
    opt = keras.optimizers.Adam(1e-3)
    step = tf.function(ms._train_step_fn(tf, keras, model, opt))
    it = iter(ds)
    for _ in range(warm):
        step(*next(it))
    batch = next(it)
    train_ms = _median_ms(lambda: step(*batch), k=9)  # the train step alone, on one batch

    def body(i):
        t0 = perf_counter()
        xb, yb = next(it)
        t1 = perf_counter()
        step(xb, yb)
        return (t1 - t0) * 1e3

    step_ms, input_ms, _ = ms._marked_loop(tf, logdir, STEPS, body)
    return dict(step_ms=step_ms, input_ms=input_ms, train_step_alone_ms=train_ms,
                input_pct=100.0 * sum(input_ms) / sum(step_ms))


def _fit(tf, keras, logdir, ds, in_dim, hidden=(256, 256), first=6, steps=STEPS):
    """model.fit with the stock TensorBoard callback profiling executions first..first+steps-1."""
    model = ms._mlp(keras, in_dim, hidden=hidden)
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    last = first + steps - 1
    begin, end = ms._window_timer(keras, first, last)
    tb = tf.keras.callbacks.TensorBoard(log_dir=logdir, profile_batch=(first, last))
    # the timer outside the callback's hooks: it holds the whole `Profiled batch` marker (its first
    # and last steps also hold the profiler's start and stop; tfadvisor leaves those two out)
    model.fit(ds, epochs=1, steps_per_epoch=last + 2, verbose=0, callbacks=[begin, tb, end])
    step_ms = [v for *_, v in end.rows]
    return dict(step_ms=step_ms, train_steps=len(step_ms))


def run_case(name: str, logdir: str) -> dict:
    case, tuned = case_of(name)
    tf, keras = ms._import_tf()
    import numpy as np
    fn = CHILD.get(case) or globals()["_case_" + case]
    return fn(tf, keras, np, logdir, tuned)


def _case_seq_map(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    f = _heavy(tf, tf.Variable(w))  # stateful (variable read): the defaults keep it sequential
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if tuned:
        ds = ds.map(f, num_parallel_calls=tf.data.AUTOTUNE).batch(32).repeat().prefetch(tf.data.AUTOTUNE)
    else:
        ds = ds.map(f).batch(32).repeat()
    src = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    res = _alone(tf, dict(batch_size=32), logdir, ds, lambda: _map_alone(tf, src, f))
    if RETIME:
        return res
    res.update(_custom_loop(tf, keras, logdir, ds, 96))
    return res


def _case_repeat_map(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)
    f = _heavy(tf, tf.constant(w))
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if tuned:
        ds = ds.map(f).cache().repeat().batch(32).prefetch(tf.data.AUTOTUNE)
    else:
        ds = ds.repeat().map(f).batch(32)
    src = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    res = _alone(tf, dict(batch_size=32), logdir, ds, lambda: _map_alone(tf, src, f))
    if RETIME:
        return res
    # 256 elements = 8 batches: the profile starts at execution 12, after the cache is full
    res.update(_fit(tf, keras, logdir, ds, 96, first=12))
    return res


def _case_py_function_latency(tf, keras, np, logdir, tuned):
    x, y, _ = ms._input_data(np)

    def read(i):  # a remote read: 1 ms of latency, then the bytes
        time.sleep(0.001)
        return x[int(i)]

    def fetch(i):
        a = tf.py_function(read, [i], tf.float32)
        a.set_shape((96, 96))
        return tf.reduce_mean(a, axis=0), tf.gather(y, i)

    ds = tf.data.Dataset.range(len(x)).repeat()
    if tuned:
        ds = ds.map(fetch, num_parallel_calls=tf.data.AUTOTUNE).batch(16)
    else:
        ds = ds.map(fetch).batch(16)
    res = _alone(tf, dict(batch_size=16), logdir, ds,
                 lambda: _map_alone(tf, tf.data.Dataset.range(len(x)).repeat(), fetch, n=256))
    if RETIME:
        return res
    res.update(_custom_loop(tf, keras, logdir, ds, 96))
    return res


def _case_generator(tf, keras, np, logdir, tuned):
    x, y, w = ms._input_data(np)

    def features(img):  # per-element Python work, row by row
        return np.mean([np.tanh(row @ w) for row in img], axis=0).astype(np.float32)

    if tuned:
        feats = np.tanh(x @ w)  # the same work, vectorised, once
        ds = (tf.data.Dataset.from_tensor_slices((feats, y)).batch(32)
              .map(lambda a, b: (tf.reduce_mean(a, axis=1), b)).repeat().prefetch(tf.data.AUTOTUNE))
    else:
        def gen():
            while True:
                for i in range(len(x)):
                    yield features(x[i]), y[i]
        sig = (tf.TensorSpec((96,), tf.float32), tf.TensorSpec((), tf.int64))
        ds = tf.data.Dataset.from_generator(gen, output_signature=sig).batch(32)
    # per element: the from_generator source itself (its Python and from_generator's own machinery)
    elem = None if tuned else (lambda: _per_element_ms(tf, ds.unbatch().take(512).batch(256), 512, reps=3))
    res = _alone(tf, dict(batch_size=32), logdir, ds, elem)
    if RETIME:
        return res
    res.update(_fit(tf, keras, logdir, ds, 96))
    return res


def _case_many_files(tf, keras, np, logdir, tuned):
    x, y, _ = ms._input_data(np)
    root = os.path.join(os.path.dirname(logdir), "records")
    os.makedirs(root)
    records = [tf.io.serialize_tensor(x[i % len(x)]).numpy() for i in range(512)]
    per_file = len(records) if tuned else 2  # the fix: the same records packed into one file
    files = []
    for k in range(0, len(records), per_file):
        path = os.path.join(root, "part-%05d.tfrecord" % (k // per_file))
        with tf.io.TFRecordWriter(path) as wr:
            for rec in records[k:k + per_file]:
                wr.write(rec)
        files.append(path)

    def parse(s):
        a = tf.io.parse_tensor(s, tf.float32)
        a.set_shape((96, 96))
        return tf.reduce_mean(a, axis=0), tf.constant(0, tf.int64)

    ds = tf.data.TFRecordDataset(files).map(parse).batch(32).repeat()
    res = _alone(tf, dict(files=len(files), file_bytes=os.path.getsize(files[0]), batch_size=32), logdir, ds, None)
    if RETIME:
        return res
    res.update(_custom_loop(tf, keras, logdir, ds, 96))
    return res


def _case_contention(tf, keras, np, logdir, tuned):
    rng = np.random.default_rng(SEED)
    x = rng.random((512, 96, 96), dtype=np.float32)
    y = rng.integers(0, 10, 512).astype(np.int64)
    w = tf.constant((rng.random((96, 96), dtype=np.float32) - 0.5) / 96.0)
    f = _heavy(tf, w, n=4)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(f, num_parallel_calls=tf.data.AUTOTUNE)
    if tuned:
        ds = ds.cache()
    ds = ds.batch(64).repeat().prefetch(tf.data.AUTOTUNE)
    src = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    res = _alone(tf, dict(batch_size=64), logdir, ds, lambda: _map_alone(tf, src, f))
    if RETIME:
        return res
    # 512 elements = 8 batches: the profile starts at execution 12, after the cache is full
    res.update(_fit(tf, keras, logdir, ds, 96, hidden=(1024, 1024), first=12))
    return res


def _case_vectorizable_map(tf, keras, np, logdir, tuned):
    rng = np.random.default_rng(SEED)
    x = rng.random((8192, 64), dtype=np.float32)
    y = rng.integers(0, 10, 8192).astype(np.int64)

    def g(a, b):  # elementwise feature scaling: a dozen cheap ops
        a = tf.clip_by_value((tf.cast(a, tf.float32) - 0.5) * 2.0, -1.0, 1.0)
        a = tf.math.log1p(tf.abs(a)) * tf.sign(a)
        a = (a - tf.reduce_mean(a)) / (tf.math.reduce_std(a) + 1e-6)
        return tf.tanh(a), b

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.batch(256).map(g) if tuned else ds.map(g).batch(256)
    ds = ds.repeat()
    src = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    res = _alone(tf, dict(batch_size=256), logdir, ds, lambda: _map_alone(tf, src, g, n=4096))
    if RETIME:
        return res
    res.update(_fit(tf, keras, logdir, ds, 64, hidden=(64,), steps=CASES["vectorizable_map"]["steps"]))
    return res


# --------------------------------------------------------------------------
# Parent side.
# --------------------------------------------------------------------------

def _median(v):
    return statistics.median(v) if v else float("nan")


def capture_once(name: str, keep_dir: str) -> dict | None:
    """One capture in a fresh process; the run's files are left in ``keep_dir``."""
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    p = subprocess.run([sys.executable, "-B", SCRIPT, "--child", name,
                        "--workdir", keep_dir], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-2000:] + p.stderr[-4000:])
        return None
    with open(os.path.join(keep_dir, "result.json")) as f:
        return json.load(f)


def capture(names: list[str], reps: int, do_xprof: bool, problems: list[str]) -> None:
    """Capture each sample ``reps`` times, a problem and its twin alternately (both see the same
    load on a shared machine), keep each one's run whose median step time is the median."""
    runs: dict[str, list] = {n: [] for n in names}
    try:
        for r in range(reps):
            for name in names:
                work = tempfile.mkdtemp(prefix=f"tfadv_{name}_{r}_")
                res = capture_once(name, work)
                if res is None:
                    problems.append(f"{name}: capture {r} failed")
                    shutil.rmtree(work, ignore_errors=True)
                    continue
                runs[name].append((_median(res["step_ms"]), work, res))
                print(f"  {name} run {r}: median step {runs[name][-1][0]:.2f} ms", flush=True)
        for name in names:
            if runs[name]:
                done = sorted(runs[name], key=lambda t: t[0])
                keep(name, done[(len(done) - 1) // 2], [t[0] for t in runs[name]], do_xprof, problems)
    finally:
        for rs in runs.values():
            for _, work, _ in rs:
                shutil.rmtree(work, ignore_errors=True)


def keep(name: str, run: tuple, medians: list[float], do_xprof: bool, problems: list[str]) -> None:
    """Write the kept run as the sample: the trace, measured.json."""
    case, _ = case_of(name)
    fit = CASES[case]["loop"] == "fit"
    _, work, res = run
    found = sorted(glob.glob(os.path.join(work, "log", "**", "*.xplane.pb"), recursive=True))
    if len(found) != 1:
        problems.append(f"{name}: expected one xplane file, got {found}")
        return
    out_dir = os.path.join(HERE, name)
    shutil.rmtree(out_dir, ignore_errors=True)
    run_dir = os.path.join(out_dir, "train" if fit else "", "plugins", "profile", ms.RUN_DIR)
    os.makedirs(run_dir)
    dst = os.path.join(run_dir, "localhost.xplane.pb")
    shutil.copyfile(found[0], dst)
    summary = ms.trace_summary(dst)
    size = os.path.getsize(dst)
    if size > 2 * 1024 * 1024:
        problems.append(f"{name}: {size} bytes (> 2 MB)")
    want = CASES[case].get("steps", STEPS)
    got = summary["profiled_batch"] if fit else summary["root_steps"]
    if got != want:
        problems.append(f"{name}: {got} step markers, want {want}")
    step_ms = res.pop("step_ms")
    measured = dict(
        original_files={"localhost": os.path.relpath(found[0], work)},
        scenario=name, capture_api="tensorboard_callback" if fit else "trace_markers",
        tf_data_default_optimizations=True,
        measured_step_ms=[round(v, 3) for v in step_ms],
        step_clock="busy",  # timed inside the step marker: the busy part
        measured_step_ms_mean=round(sum(step_ms) / len(step_ms), 3),
        measured_step_ms_median=round(_median(step_ms), 3),
        captures=len(medians), capture_median_step_ms=[round(v, 3) for v in medians],
        files={"localhost": dict(bytes=size, **summary)},
    )
    for k, v in res.items():
        measured[k] = (round(v, 4) if isinstance(v, float) else
                       [round(a, 3) for a in v] if isinstance(v, list) and v and isinstance(v[0], float)
                       else v)
    if do_xprof:
        measured["xprof_overview"] = ms.run_xprof(out_dir)
    with open(os.path.join(out_dir, "measured.json"), "w") as f:
        json.dump(measured, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{name:34s} kept median {measured['measured_step_ms_median']:.2f} ms, {size} bytes", flush=True)


def retime(names: list[str], problems: list[str]) -> None:
    """Re-time the ``*_alone`` figures of captured samples (their traces are kept) in a fresh quiet
    subprocess each, and write them into measured.json."""
    for name in names:
        m = _load(name)
        if m is None:
            continue
        work = tempfile.mkdtemp(prefix=f"tfadv_retime_{name}_")
        try:
            env = dict(os.environ, PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", TF_CPP_MIN_LOG_LEVEL="2")
            p = subprocess.run([sys.executable, "-B", SCRIPT, "--child", name, "--workdir", work,
                                "--retime"], env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                problems.append(f"{name}: re-timing failed: {p.stderr[-1000:]}")
                continue
            with open(os.path.join(work, "result.json")) as f:
                res = json.load(f)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        _apply_retime(m, res)
        with open(os.path.join(HERE, name, "measured.json"), "w") as f:
            json.dump(m, f, indent=1, sort_keys=True)
            f.write("\n")
        print(name, {k: v for k, v in res.items() if k not in ("alone_method", "batch_size")}, flush=True)


def _apply_retime(m: dict, res: dict) -> None:
    """Put re-timed ``*_alone`` figures into a sample's measured.json ``m``. The host is shared: a
    re-timing runs under another load than the capture did, so its figures are kept as
    ``*_retimed`` and the per-element figure is brought to the capture's load through the one figure
    timed then with a sound method, the pipeline's ms per batch: element = batch at capture x
    (element / batch, both re-timed in one process)."""
    first = m.get("map_element_ms_alone_first", m.get("map_element_ms_alone"))
    for k in [k for k in m if k.startswith(("map_element_ms_alone", "pipeline_batch_ms_alone"))
              and k not in ("pipeline_batch_ms_alone",)]:
        del m[k]
    for k, v in res.items():
        if k.startswith(("map_element_ms_alone", "pipeline_batch_ms_alone")):
            m[k + "_retimed"] = round(v, 4)
    batch = m.get("pipeline_batch_ms_alone")
    if batch and res.get("map_element_ms_alone") is not None:
        m["map_element_ms_alone"] = round(batch * res["map_element_ms_alone"] / res["pipeline_batch_ms_alone"], 4)
    if first is not None:
        m["map_element_ms_alone_first"] = first
    m["alone_method"] = res["alone_method"]
    m["alone_retimed"] = (
        "map_element_ms_alone was first timed as a Python call of the map as a tf.function (its dispatch and "
        "argument conversion included; kept as map_element_ms_alone_first). Re-timed after the capture "
        "(make_input_samples.py --retime; the trace kept) as alone_method says, under another load on this "
        "shared 2-core host: the *_retimed figures. pipeline_batch_ms_alone is the capture's own (median of "
        "16 next() after 10 warm-up batches); map_element_ms_alone = pipeline_batch_ms_alone x "
        "map_element_ms_alone_retimed / pipeline_batch_ms_alone_retimed (the per-element share of a batch, "
        "timed in one process, at the capture's load).")


def _in_stats(v: list[float]) -> list[float]:
    """The steps tfadvisor's statistics use: first and last left out when there are more than five."""
    return v[1:-1] if len(v) > 5 else v


def _load(name: str) -> dict | None:
    path = os.path.join(HERE, name, "measured.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def finalize(problems: list[str]) -> None:
    """Per pair: the planted cost into both measured.json, expected.toml for both."""
    import keras
    import tensorflow as tf
    for case, spec in CASES.items():
        pn, tn = problem_name(case), twin_name(case)
        mp, mt = _load(pn), _load(tn)
        if mp is None or mt is None:
            continue
        slow = statistics.mean(_in_stats(mp["measured_step_ms"]))
        fast = statistics.mean(_in_stats(mt["measured_step_ms"]))
        cost = dict(problem=pn, twin=tn, problem_step_ms=round(slow, 3), twin_step_ms=round(fast, 3),
                    planted_cost_ms=round(slow - fast, 3),
                    planted_cost_pct=round(100.0 * (slow - fast) / slow, 1))
        cost["closed"] = slow - fast >= 0.15 * slow  # the fix measurably helped: fixed_by
        if not cost["closed"]:
            problems.append(f"{case}: twin {fast:.2f} ms is not clearly faster than {slow:.2f} ms: no fixed_by")
        for name, m in ((pn, mp), (tn, mt)):
            m["pair"] = cost
            with open(os.path.join(HERE, name, "measured.json"), "w") as f:
                json.dump(m, f, indent=1, sort_keys=True)
                f.write("\n")
            write_expected(name, spec, m, cost, tf.__version__, keras.__version__)
    update_readme_table()


TABLE_BEGIN = "<!-- BEGIN TFDATA PAIRS (written by make_input_samples.py) -->"
TABLE_END = "<!-- END TFDATA PAIRS -->"


def update_readme_table() -> None:
    """Rewrite README.md's table of pairs from every pair's measured.json."""
    rows = ["| problem -> twin | loop | planted cause (first finding) | fix in the twin | mean step ms, "
            "problem -> twin | faster | fixed_by |", "|---|---|---|---|---|---|---|"]
    for case, spec in CASES.items():
        m = _load(problem_name(case))
        if m is None or "pair" not in m:
            continue
        c = m["pair"]
        rows.append("| {} -> `_tuned` | {} | `{}` | {} | {:.2f} -> {:.2f} | {:.0f} % | {} |".format(
            problem_name(case), "model.fit" if spec["loop"] == "fit" else "custom loop", spec["cause"],
            " ".join(spec["fix"].split()), c["problem_step_ms"], c["twin_step_ms"], c["planted_cost_pct"],
            "yes" if c["closed"] else "no"))
    readme = os.path.join(HERE, "README.md")
    with open(readme) as f:
        text = f.read()
    if TABLE_BEGIN in text and TABLE_END in text:
        head, rest = text.split(TABLE_BEGIN, 1)
        text = head + TABLE_BEGIN + "\n" + "\n".join(rows) + "\n" + TABLE_END + rest.split(TABLE_END, 1)[1]
        with open(readme, "w") as f:
            f.write(text)


def write_expected(name, spec, m, cost, tf_version, keras_version):
    _, tuned = case_of(name)
    v = ms._toml_value
    steps = m.get("train_steps", len(m["measured_step_ms"]))
    text = spec["fix"] if tuned else spec["problem"]
    desc = ("Tuned twin of " + problem_name(case_of(name)[0]) + ": the same program with exactly the fix: "
            + text) if tuned else text
    lines = [
        "# Planted truth for this captured sample; written by make_input_samples.py.",
        f"description = {v(' '.join(desc.split()))}",
        'kind = "captured"',
        f"capture_api = {v(m['capture_api'])}",
        f"tf_version = {v(tf_version)}",
        f"keras_version = {v(keras_version)}",
        "hosts = 1",
        "tf_data_default_optimizations = true",
    ]
    if not tuned and cost["closed"]:
        lines.append(f"fixed_by = {v(cost['twin'])}")
    elif not tuned:
        lines += ["# the fix did not measurably help when captured on this host: no fixed_by",
                  f"twin = {v(cost['twin'])}"]
    clock = statistics.mean(_in_stats(m["measured_step_ms"]))  # the script's clock, the steps the stats use
    lines += ["", "[truth]", f"steps = {steps}",
              "# the script's own clock (measured.json, the steps the statistics use) +-15 %",
              f"step_time_ms = {v([round(clock * 0.85, 3), round(clock * 1.15, 3)])}",
              "# the planted cost: this pair's mean step time, problem minus twin (measured.json: pair)",
              f"planted_cost_ms = {v(float(cost['planted_cost_ms']))}",
              f"planted_cost_pct = {v(float(cost['planted_cost_pct']))}"]
    if m.get("map_element_ms_alone") is not None:
        lines.append(f"map_element_us_alone = {v(round(1000.0 * m['map_element_ms_alone'], 1))}")
    if m.get("pipeline_batch_ms_alone") is not None:
        lines.append(f"pipeline_batch_ms_alone = {v(round(m['pipeline_batch_ms_alone'], 3))}")
    lines += ["", "[findings]"]
    if tuned:
        lines.append(f"absent = {v([spec['cause']] + spec.get('never', NEVER))}")
    else:
        lines.append(f"top = {v(spec['cause'])}")
        lines.append(f"present = {v([spec['cause']])}")
        lines.append(f"absent = {v(spec.get('never', NEVER))}")
    out = "\n".join(lines) + "\n"
    import tomllib
    tomllib.loads(out)
    with open(os.path.join(HERE, name, "expected.toml"), "w") as f:
        f.write(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", choices=all_names(), help="capture only this sample (repeatable)")
    ap.add_argument("--reps", type=int, default=3, help="captures per sample; the median one is kept")
    ap.add_argument("--no-xprof", action="store_true", help="do not run xprof's overview page")
    ap.add_argument("--finalize", action="store_true", help="only rewrite expected.toml and the pair figures")
    ap.add_argument("--retime", action="store_true",
                    help="re-time only the *_alone figures of the captured samples (traces kept), then finalize")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        global RETIME
        RETIME = args.retime
        res = run_case(args.child, os.path.join(args.workdir, "log"))
        with open(os.path.join(args.workdir, "result.json"), "w") as f:
            json.dump(res, f)
        return 0
    problems: list[str] = []
    t0 = time.time()
    if args.retime:
        retime(args.only or all_names(), problems)
    elif not args.finalize:
        wanted = args.only or all_names()
        for case in CASES:
            names = [n for n in (problem_name(case), twin_name(case)) if n in wanted]
            if names:
                capture(names, max(1, args.reps), not args.no_xprof, problems)
    finalize(problems)
    print("total %.1fs" % (time.time() - t0))
    for p in problems:
        print("PROBLEM:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
