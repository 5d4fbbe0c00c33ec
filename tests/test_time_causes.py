"""Causes that live in time, on real captures made here: a step that traces the train function again is a
one-time cost named as compilation, not a slow step to tune; a checkpoint written every few steps is periodic
work with its period and cost.

Each program runs in a fresh TensorFlow process (real profiler, real events) and writes its own clock beside
the profile; the analysis must find the step the program planted and what it cost by that clock.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tfadvisor

PROGRAM = r'''
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, tensorflow as tf, keras
keras.utils.set_random_seed(0)
logdir, case = sys.argv[1], sys.argv[2]
model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)])
opt = keras.optimizers.Adam(1e-3)
lossf = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

@tf.function
def step(x, y):
    with tf.GradientTape() as t:
        loss = lossf(y, model(x, training=True))
    opt.apply(t.gradient(loss, model.trainable_variables), model.trainable_variables)
    return loss

x = np.random.rand(64, 256).astype("float32"); y = np.random.randint(0, 10, 64)
ckpt = tf.train.Checkpoint(model=model, optimizer=opt)
for _ in range(5):
    step(x, y)
ckpt.write(os.path.join(logdir, "..", "ckpt", "c"))  # its first write outside the window
starts = []
tf.profiler.experimental.start(logdir)
for i in range(12):
    starts.append(time.perf_counter())
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        if case == "retrace" and i == 7:
            step(x[:48], y[:48])  # a smaller batch: the function is traced again
        else:
            step(x, y)
    if case == "checkpoint" and i % 4 == 2:
        ckpt.write(os.path.join(logdir, "..", "ckpt", "c"))
starts.append(time.perf_counter())
tf.profiler.experimental.stop()
with open(os.path.join(logdir, "..", "clock.json"), "w") as f:
    json.dump({"step_ms": [(b - a) * 1e3 for a, b in zip(starts, starts[1:])]}, f)
'''


def _run(tmp_path: Path, case: str) -> tuple[object, list[float]]:
    logdir = tmp_path / "log"
    logdir.mkdir()
    (tmp_path / "ckpt").mkdir()
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(logdir), case], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    clock = json.loads((tmp_path / "clock.json").read_text())["step_ms"]
    return tfadvisor.analyze(str(logdir)), clock


@pytest.mark.slow
@pytest.mark.serial  # trace times against the script's perf_counter (conftest)
def test_a_retrace_in_the_window_is_a_one_time_compilation(tmp_path):
    res, clock = _run(tmp_path, "retrace")
    m = res.metrics
    assert m["one_off_step"] == 7 and m["one_off_kind"] == "compilation", res.tables.get("step_patterns")
    # what it added, against the program's own clock: step 7 less the median of the others (steps 1..10,
    # the statistics' steps); measured 0.0 % apart (two runs: the clock is read just outside each marker)
    others = sorted(clock[1:7] + clock[8:11])
    want = clock[7] - others[len(others) // 2]
    assert m["one_off_ms"] == pytest.approx(want, rel=0.02)
    f = next(f for f in res.findings if f.rule == "one_off_slow_step")
    assert f.title == "One step traces or compiles a function" and "drop_remainder=True" in f.fix
    assert "step_outliers" not in [x.rule for x in res.findings]  # the one slow step is named, not an outlier


@pytest.mark.slow
@pytest.mark.serial  # trace times against the script's perf_counter (conftest)
def test_a_checkpoint_every_4th_step_is_periodic_work(tmp_path):
    res, clock = _run(tmp_path, "checkpoint")
    m = res.metrics
    assert (m["periodic_kind"], m["periodic_every_steps"], m["periodic_steps_count"]) == ("checkpoint", 4, 3)
    # per step, against the clock: the excess of steps 2, 6, 10 over the other statistics' steps' median,
    # spread over the 10 statistics' steps; measured 0.0 % apart (two runs)
    stats = clock[1:11]
    held = [clock[i] for i in (2, 6, 10)]
    rest = sorted(v for i, v in enumerate(clock[1:11], start=1) if i not in (2, 6, 10))
    want = sum(h - rest[len(rest) // 2] for h in held) / len(stats)
    assert m["periodic_ms_per_step"] == pytest.approx(want, rel=0.02)
    f = res.findings[0]
    assert f.rule == "periodic_step_work" and "save_freq=" in f.fix


# ------------------------------------------------------------------------------------------------
# Untraced periodic work: evenly spaced over the whole window and alike, not slow steps lining up by chance
# ------------------------------------------------------------------------------------------------
def _steps_ms(n: int, slow: dict[int, float]) -> tuple:
    import numpy as np

    ms = 100.0 + np.tile([-0.5, 0.5, -0.3, 0.3], n)[:n]  # a little jitter: a robust deviation to beat
    for i, extra in slow.items():
        ms[i] += extra
    return ms, np.ones(n, bool)


@pytest.mark.parametrize(("n", "slow", "every"), [
    (12, {1: 40.0, 5: 40.0, 9: 40.0}, 4),  # a callback's work every 4th step: periodic
    (12, {1: 40.0, 5: 55.0, 9: 30.0}, 4),  # alike enough (largest 1.8x the smallest)
    (12, {1: 60.0, 5: 25.0, 9: 40.0}, None),  # 2.4x apart: unrelated stalls (a warm-up step, two sleeps)
    (16, {5: 40.0, 9: 40.0, 13: 40.0}, None),  # step 1 should be slow too: a chance alignment
    (16, {1: 40.0, 5: 40.0, 9: 40.0}, None),  # step 13 should be slow too
    (12, {1: 40.0, 4: 40.0, 9: 40.0}, None),  # not evenly spaced
])
def test_untraced_pattern_needs_whole_window_and_alike_steps(n, slow, every):
    from tfadvisor.analyses.variation import _untraced

    ms, train = _steps_ms(n, slow)
    got = _untraced(ms, train, [], None)
    if every is None:
        assert got is None, got
    else:
        assert got is not None and got["every_steps"] == every and got["steps"] == sorted(slow)
