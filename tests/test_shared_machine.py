"""A shared machine (issue 26, point 4): another process burns the CPU while a real Keras capture runs. The
competing load is named, and the pipeline is not blamed for CPU it did not take (real TensorFlow, real
processes, the callback's own system samples)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest
from conftest import CAPTURE_MARKS, ROOT

import tfadvisor
from tfadvisor.report.findings import finding_rule

pytestmark = CAPTURE_MARKS

SCRIPT = r'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, keras, tensorflow as tf
from tfadvisor.keras import AdvisorCallback
x = np.random.rand(4096, 64).astype("float32"); y = np.random.randint(0, 4, 4096)
def expensive(a, b):  # deterministic per-element work: the pipeline's CPU
    for _ in range(20):
        a = tf.tanh(tf.linalg.matvec(tf.eye(64), a))
    return a, b
ds = (tf.data.Dataset.from_tensor_slices((x, y)).map(expensive, num_parallel_calls=tf.data.AUTOTUNE)
      .batch(32).prefetch(tf.data.AUTOTUNE)).repeat()
m = keras.Sequential([keras.Input((64,)), keras.layers.Dense(256, activation="relu"), keras.layers.Dense(4)])
m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
cb = AdvisorCallback(sys.argv[1], steps=(10, 400), analyze=False)  # about a second: ~10 system samples
print("READY", flush=True)  # the test starts the competing load now, then says go
sys.stdin.readline()
m.fit(ds, epochs=1, steps_per_epoch=420, verbose=0, callbacks=[cb])
print("RUN", cb.run_dir, flush=True)
'''

#: a pipeline verdict about CPU: what the competing load must not be mistaken for
PIPELINE_CPU = {"system_preprocessing_bound", "tfdata_cpu_contention", "tfdata_sequential_map"}


def _capture(out, burn: int) -> str:
    """The capture, with ``burn`` CPU burners (another job) from the script's fit on: its TensorFlow import and model
    before it ran beside them too, 3x slower on 2 cores, adding nothing to what the window measures."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen([sys.executable, "-c", SCRIPT, str(out)], env=env, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=err, text=True)
        burners = []
        try:
            assert child.stdout.readline().strip() == "READY", "the capture script ended before its fit"
            burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burn)]
            stdout, _ = child.communicate("go\n", timeout=300)
        finally:
            for b in burners:
                b.kill()
                b.wait()
            if child.poll() is None:
                child.kill()
                child.wait()
        err.seek(0)
        assert child.returncode == 0, err.read()[-3000:]
    return next(ln.split(" ", 1)[1] for ln in stdout.splitlines() if ln.startswith("RUN "))


@pytest.fixture(scope="module")
def shared_capture(tmp_path_factory):
    return _capture(tmp_path_factory.mktemp("shared"), burn=4)


@pytest.fixture(scope="module")
def quiet_capture(tmp_path_factory):
    return _capture(tmp_path_factory.mktemp("quiet"), burn=0)


def test_competing_load_is_named_and_the_pipeline_not_blamed(shared_capture):
    r = tfadvisor.analyze(shared_capture)
    m = r.metrics
    # four burners on this 2-core machine: other processes took a real share (one burner: 12-27 % over runs here)
    assert m["system_other_cpu_pct"] >= 20, m["system_other_cpu_pct"]
    rules = [finding_rule(f) for f in r.findings]
    assert "system_competing_load" in rules, rules
    assert rules[0] not in PIPELINE_CPU, rules
    assert "system_preprocessing_bound" not in rules, rules
    found = next(f for f in r.findings if finding_rule(f) == "system_competing_load")
    assert f"{m['system_other_cpu_pct']:.0f} % of all 2 cores" in found.message


def test_diff_says_when_the_load_differs(quiet_capture, shared_capture):
    """The same program captured on a quiet machine and beside a CPU burner: whatever the verdict, diff says the
    captures' conditions differ (other processes' CPU), so it is not a measure of a change."""
    from tfadvisor.report.diff import diff_results

    d = diff_results(tfadvisor.analyze(quiet_capture), tfadvisor.analyze(shared_capture))
    assert not d["conditions"]["comparable"]
    assert any("other processes took" in why for why in d["conditions"]["differ"])
    assert "conditions differ" in d["verdict_text"]
