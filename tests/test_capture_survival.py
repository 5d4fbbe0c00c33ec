"""Capture that survives real jobs (issue 17), with real TensorFlow in subprocesses:

* a stock ``TensorBoard(profile_batch=...)`` overlapping the callback's window delays it, and
  does not disable it;
* ``ds.batch(64)`` without ``drop_remainder`` still gives the batch size; a window crossing an
  epoch end (validation inside) says so in ``tfadvisor_run.json``;
* SIGTERM inside the callback's window, and to ``tfadvisor capture run`` itself, leaves an
  analysable profile, no orphaned child and no temporary directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import capture_env, run_metadata, train_markers

import tfadvisor
from tfadvisor.io.discovery import find_runs

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                       reason="capture tests need TensorFlow (pip install 'tfadvisor[tf-cpu]')"),
]

ROOT = Path(__file__).resolve().parent.parent


SCRIPT = r'''
import json, os, signal, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import keras
import tensorflow as tf
from tfadvisor.keras import AdvisorCallback

out = sys.argv[1]
x = np.random.default_rng(0).random((128, 8), dtype=np.float32)
y = np.random.default_rng(1).random((128, 1), dtype=np.float32)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).prefetch(2)  # no drop_remainder: shape (None, 8)
val = tf.data.Dataset.from_tensor_slices((x[:32], y[:32])).batch(16)

def model():
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    m.compile("adam", "mse")
    return m

# 1. a stock TensorBoard callback profiles batches 2-6 (1-based), overlapping the window 4..9
tb = keras.callbacks.TensorBoard(os.path.join(out, "tb"), profile_batch=(2, 6))
cb = AdvisorCallback(os.path.join(out, "clash"), steps=(4, 10), analyze=False)
m = model()
m.fit(ds, epochs=3, validation_data=val, verbose=0, callbacks=[tb, cb])
res = {"clash": dict(run_dir=cb.run_dir, state=cb.state, error=cb.error, attempts=getattr(cb, "attempts", 1))}

# 2. the window 5..10 crosses the end of epoch 0 (8 steps), validation included
cb = AdvisorCallback(os.path.join(out, "epochs"), steps=(5, 11), analyze=False)
model().fit(ds, epochs=2, validation_data=val, verbose=0, callbacks=[cb])
res["epochs"] = dict(run_dir=cb.run_dir, state=cb.state)
print("RESULT " + json.dumps(res), flush=True)

# 3. SIGTERM inside the window (a Vertex AI cancel): the profile is written, then the process ends
class Term(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.n = 0
    def on_train_batch_end(self, batch, logs=None):
        self.n += 1
        if self.n == 6:
            os.kill(os.getpid(), signal.SIGTERM)

cb = AdvisorCallback(os.path.join(out, "term"), steps=(2, 40), analyze=False)
m = model()
m.fit(ds, epochs=10, verbose=0, callbacks=[cb, Term()])
print("NOT TERMINATED", flush=True)
'''


@pytest.fixture(scope="module")
def callback_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("survival")
    script = out / "script.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(out)], env=capture_env(), capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"script failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    res = json.loads(lines[-1][len("RESULT "):])
    res.update(_rc=proc.returncode, _stdout=proc.stdout, _stderr=proc.stderr, _dir=str(out))
    return res


def test_stock_tensorboard_profiler_delays_the_window_not_disables_it(callback_run):
    r = callback_run["clash"]
    assert r["state"] == "done" and r["error"] is None, r
    assert r["attempts"] > 1  # the first start clashed
    marks = train_markers(r["run_dir"])
    # started once TensorBoard's profiler stopped, and kept the window's length
    assert len(marks) == 6 and marks == list(range(marks[0], marks[0] + 6)) and marks[0] > 4
    steps = run_metadata(r["run_dir"])["steps"]
    assert steps["delayed"]["by_steps"] == marks[0] - 4 and steps["delayed"]["tries"] == r["attempts"]
    assert "AlreadyExists" in steps["delayed"]["because"]
    assert "another profiler is running at step 4" in callback_run["_stdout"]
    # TensorBoard's own profile is there too
    assert find_runs(str(Path(callback_run["_dir"]) / "tb"))


def test_batch_size_from_unbatched_shape_and_epoch_crossing(callback_run):
    r = callback_run["epochs"]
    assert r["state"] == "done" and r["run_dir"], r
    md = run_metadata(r["run_dir"])
    assert md["batch_size"] == 16  # ds.batch(16) without drop_remainder
    steps = md["steps"]
    assert steps["start"] == 5 and steps["stop"] == 11
    # 8 steps per epoch: the window crosses the end of epoch 0 (after step 7), with validation inside
    assert train_markers(r["run_dir"]) == [5, 6, 7, 8, 9, 10]
    assert steps["epochs"] == [0, 1] and steps["crosses_epoch_end"] is True
    assert steps["epoch_ends_after_step"] == [7]
    assert steps["validation_runs"] == 1


def test_sigterm_in_the_callback_window_leaves_an_analysable_profile(callback_run):
    assert callback_run["_rc"] == -signal.SIGTERM, callback_run["_stderr"][-3000:]  # the signal still ends it
    assert "NOT TERMINATED" not in callback_run["_stdout"]
    (run,) = find_runs(str(Path(callback_run["_dir"]) / "term"))
    marks = train_markers(run.directory)
    assert marks[0] == 2 and marks == list(range(2, 2 + len(marks))) and len(marks) >= 3
    md = run_metadata(run.directory)
    assert "SIGTERM during the window" in md["steps"]["note"]
    assert tfadvisor.analyze(run.directory).metrics["steps_count"] >= 3


TRAIN = r'''
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf
keras = tf.keras
flag = sys.argv[1]

class Slow(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.n = 0
    def on_train_batch_end(self, batch, logs=None):
        self.n += 1
        time.sleep(0.02)
        if self.n == 7:
            with open(flag, "w") as fh:
                fh.write(str(os.getpid()))

x = np.random.default_rng(0).random((160, 8), dtype=np.float32)
y = np.random.default_rng(1).random((160, 1), dtype=np.float32)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile("adam", "mse")
model.fit(x, y, batch_size=16, epochs=200, verbose=0, callbacks=[Slow()])
print("TRAINED", flush=True)
'''


def test_sigterm_to_capture_run_saves_the_profile_and_cleans_up(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    flag, logdir, tmp = tmp_path / "in_window", tmp_path / "log", tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tfadvisor", "capture", "run", "--logdir", str(logdir), "--start-step", "3", "--steps",
         "1000", "--", sys.executable, str(script), str(flag)],
        env=capture_env(TMPDIR=str(tmp)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 200
        while not flag.exists() or not flag.read_text():
            assert proc.poll() is None, proc.communicate()
            assert time.time() < deadline, "the script never reached the window"
            time.sleep(0.1)
        child = int(flag.read_text())
        proc.send_signal(signal.SIGTERM)  # to tfadvisor itself, as a container stop does to PID 1
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM, stderr[-3000:]
    assert "TRAINED" not in stdout
    with pytest.raises(ProcessLookupError):  # the script was not orphaned
        os.kill(child, 0)
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("tfadvisor_capture_")]
    (run,) = find_runs(str(logdir))
    assert "got SIGTERM and passed it on to the script" in stderr and run.directory in stderr
    marks = train_markers(run.directory)
    assert marks[0] == 3 and marks == list(range(3, 3 + len(marks))) and len(marks) >= 3
    assert "SIGTERM" in run_metadata(run.directory)["steps"]["note"]
    assert tfadvisor.analyze(run.directory).metrics["steps_count"] >= 3
