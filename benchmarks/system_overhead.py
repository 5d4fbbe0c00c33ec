"""Overhead of the system sampler (tfadvisor/capture/system_sampler.py) on training step time.

Trains the same small Keras model on a tf.data pipeline in one process, alternating runs
with the sampler running (10 Hz and 20 Hz) and without, and compares the median time per
step. Also reports the sampler's own CPU time per sample (thread CPU time).

    PYTHONPATH=. python benchmarks/system_overhead.py [--steps 300] [--rounds 5]

The profiler itself is not started: this isolates what the sampler adds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300, help="steps per timed run")
    ap.add_argument("--rounds", type=int, default=5, help="runs per setting (alternating)")
    args = ap.parse_args()

    import keras
    import numpy as np
    import tensorflow as tf

    from tfadvisor.capture.system_sampler import SystemSampler

    n = args.steps * 64
    x = np.random.default_rng(0).random((n, 256), dtype=np.float32)
    y = np.random.default_rng(1).random((n, 1), dtype=np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(64).cache().prefetch(tf.data.AUTOTUNE)
    model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(512, activation="relu"),
                              keras.layers.Dense(512, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    model.fit(ds, epochs=1, verbose=0)  # warm-up: tracing, cache filled

    def timed(hz: float | None) -> tuple[float, float | None]:
        sampler = SystemSampler(hz=hz) if hz else None
        if sampler is not None:
            sampler.start()
        t0 = time.perf_counter()
        model.fit(ds, epochs=1, verbose=0)
        dt = time.perf_counter() - t0
        per_sample = None
        if sampler is not None:
            sampler.stop()
            meta, count = sampler.meta(), len(sampler.columns()["t_unix_s"])
            per_sample = meta["sampler_cpu_s"] / max(count, 1) * 1e3
        return dt / args.steps * 1e3, per_sample

    settings = (None, 10.0, 20.0)
    times: dict[float | None, list[float]] = {s: [] for s in settings}
    cost: dict[float | None, list[float]] = {s: [] for s in settings}
    for _ in range(args.rounds):
        for s in settings:
            ms, per = timed(s)
            times[s].append(ms)
            if per is not None:
                cost[s].append(per)
    base = statistics.median(times[None])
    print(f"steps per run {args.steps}, rounds {args.rounds}, cores {os.cpu_count()}")
    print(f"no sampler : median step {base:.3f} ms  (runs: {', '.join(f'{t:.3f}' for t in times[None])})")
    for s in settings[1:]:
        med = statistics.median(times[s])
        print(f"{s:4.0f} Hz    : median step {med:.3f} ms  overhead {100 * (med - base) / base:+.2f} %  "
              f"sampler CPU {statistics.median(cost[s]):.2f} ms per sample "
              f"(= {statistics.median(cost[s]) * s / 10:.2f} % of one core)  "
              f"(runs: {', '.join(f'{t:.3f}' for t in times[s])})")


if __name__ == "__main__":
    main()
