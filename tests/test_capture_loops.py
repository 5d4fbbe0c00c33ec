"""``tfadvisor capture run --start-step/--steps`` on custom training loops (issue 26, point 3): the window is
armed by the loop's own step markers, TensorFlow's ``tf.profiler.experimental.Trace('train', step_num=i, _r=1)``
or ``tfadvisor.step(i)``, with real TensorFlow in a real child process."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from conftest import capture_env, run_metadata, train_markers

from tfadvisor.io.discovery import find_runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                       reason="capture tests need TensorFlow (pip install 'tfadvisor[tf-cpu]')"),
]

LOOP = '''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
import tfadvisor

w = tf.Variable(tf.zeros((8, 1)))
opt = tf.keras.optimizers.SGD(0.01)
x = tf.constant(np.random.default_rng(0).random((32, 8), dtype=np.float32))

@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(x @ w - 1.0))
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss

for i in range(int(sys.argv[1])):
    with {marker}:
        train_step()
print("TRAINED", i + 1, flush=True)
'''

MARKERS = {"tf_trace": 'tf.profiler.experimental.Trace("train", step_num=i, _r=1)',
           "tfadvisor_step": "tfadvisor.step(i)"}


def _run(tmp_path, marker: str, steps: int, *window: str) -> subprocess.CompletedProcess:
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(LOOP.replace("{marker}", MARKERS[marker])))
    cmd = [sys.executable, "-m", "tfadvisor", "capture", "run", "--logdir", str(tmp_path / "logs"), "--no-analyze",
           *window, "--", sys.executable, str(script), str(steps)]
    return subprocess.run(cmd, capture_output=True, text=True, env=capture_env(), timeout=300)


@pytest.mark.parametrize("marker", list(MARKERS))
def test_custom_loop_profiles_the_asked_steps(tmp_path, marker):
    proc = _run(tmp_path, marker, 40, "--start-step", "5", "--steps", "20")
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "TRAINED 40" in proc.stdout
    assert "profiling from step 5 (20 steps, counted by step markers)" in proc.stderr
    run = find_runs(str(tmp_path / "logs"))[-1]
    assert train_markers(run.directory) == list(range(5, 25))  # steps 5-24, each marker whole in the trace
    steps = run_metadata(run.directory)["steps"]
    assert (steps["start"], steps["stop"], steps["count"], steps["by"]) == (5, 25, 20, "step markers")
    assert steps["requested"] == [5, 25]


def test_custom_loop_window_not_reached_says_how_far_it_got(tmp_path):
    proc = _run(tmp_path, "tf_trace", 3, "--start-step", "5", "--steps", "4")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "steps 5-8" in line and "went up to step 2 (3 marker(s))" in line, line
