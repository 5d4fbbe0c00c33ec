"""A real capture of a deliberately heavily traced model, for tests/test_profiler_inflation.py.

A Keras 3 ``fit`` of a model whose layer runs :data:`OPS` tiny element-wise ops per forward pass (a few thousand
traced ops per training step, forward, gradient and optimizer), profiled by ``AdvisorCallback(steps=WINDOW)``; a
callback after it times every training step with ``time.perf_counter`` (start to the next start). Writes
``OUT/clock.json``: the run directory and the script's own ratio, the median step inside the window over the median
step outside it (not the first step: tracing; not the step whose interval holds the profiler starting or stopping).

Usage: ``python inflation_capture.py OUT``.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: tiny ops per forward pass, steps of the fit, the profiled window
OPS, STEPS, WINDOW = 150, 70, (25, 40)


def main(out: Path) -> None:
    import keras
    import numpy as np

    import tfadvisor.keras

    class Chain(keras.layers.Layer):
        """OPS tiny element-wise ops in a row: the profiler records each of them (and their gradients)."""

        def build(self, shape):
            self.w = self.add_weight(shape=(shape[-1],), initializer="ones")

        def call(self, x):
            for i in range(OPS):
                x = x * self.w + 0.001 * (i % 3)
            return x

    inp = keras.Input((16,))
    h = Chain()(inp)
    model = keras.Model(inp, keras.layers.Dense(1)(h))
    model.compile(keras.optimizers.SGD(1e-6), "mse")
    rng = np.random.default_rng(0)
    x = rng.random((STEPS * 8, 16), dtype=np.float32)
    y = rng.random((STEPS * 8, 1), dtype=np.float32)
    starts: list[float] = []
    end = [0.0]

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            starts.append(time.perf_counter())

        def on_train_end(self, logs=None):
            end[0] = time.perf_counter()

    cb = tfadvisor.keras.AdvisorCallback(str(out / "logs"), steps=WINDOW, analyze=False, verbose=False)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False, callbacks=[cb, Clock()])
    s = starts + end
    ms = [(b - a) * 1e3 for a, b in zip(s[:-1], s[1:])]
    lo, hi = WINDOW
    # inside: the window's steps but the last (its interval holds the profiler stopping and writing)
    inside = ms[lo:hi - 1]
    # outside: not the first step (tracing), not the one before the window (its end waits for nothing, but keep
    # the profiler's start out), not the last window step's interval
    outside = ms[1:lo - 1] + ms[hi:]
    run_dir = next((out / "logs").rglob("*.xplane.pb")).parent
    (out / "clock.json").write_text(json.dumps({
        "run_dir": str(run_dir), "inside_ms": inside, "outside_ms": outside,
        "ratio": statistics.median(inside) / statistics.median(outside)}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
