"""Capture with real TensorFlow (tensorflow-cpu): the Keras callback, tfadvisor.profile/step,
`tfadvisor capture service` against a real profiler server, and `tfadvisor capture run`.

TensorFlow runs in subprocesses (the profiler is process-wide state): one process runs the
in-program scenarios one after the other and reports as JSON; the CLI tests start their own.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import capture_env, free_port, run_metadata, train_markers

import tfadvisor
from tfadvisor.io.discovery import find_runs

# TensorFlow only runs in subprocesses: this process does not import it.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.serial,  # the captured window and steps are timed against the script's clock (conftest)
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                       reason="capture tests need TensorFlow (pip install 'tfadvisor[tf-cpu]')"),
]

ROOT = Path(__file__).resolve().parent.parent


def _steps_found(run_dir: str):
    """steps_count as the full analysis sees it."""
    return tfadvisor.analyze(run_dir).metrics["steps_count"]


SCENARIOS = r'''
import json, os, sys, warnings
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import keras
import tensorflow as tf
import tfadvisor
import tfadvisor.api
from tfadvisor.keras import AdvisorCallback
from tfadvisor.capture.profiling import CaptureWarning

out_dir = sys.argv[1]
res = {}
x = np.random.default_rng(0).random((128, 8), dtype=np.float32)
y = np.random.default_rng(1).random((128, 1), dtype=np.float32)

def model(spe=1):
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    m.compile("adam", "mse", steps_per_execution=spe)
    return m

def warned(ws):
    return [str(w.message) for w in ws if issubclass(w.category, CaptureWarning)]

# 1. the callback around fit: 8 steps per epoch, 2 epochs; the window 3..8 crosses into the second epoch
m = model()
cb = AdvisorCallback(os.path.join(out_dir, "fit"), steps=(3, 9), report_json=os.path.join(out_dir, "fit.json"))
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[cb])
res["fit"] = dict(run_dir=cb.run_dir, state=cb.state, profiled=cb.profiled_steps, seen=cb.steps_seen,
                  params=int(m.count_params()), restored=getattr(m.train_function, "__wrapped__", None) is None,
                  warnings=warned(ws), analyzed=cb.result is not None)

# 2. steps_per_execution=2: hooks once per execution, one marker per execution
m = model(spe=2)
cb = AdvisorCallback(os.path.join(out_dir, "spe"), steps=(4, 10), analyze=False, min_executions=0)  # as asked
m.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[cb])
res["spe"] = dict(run_dir=cb.run_dir, state=cb.state, profiled=cb.profiled_steps, markers=cb.marked_executions,
                  seen=cb.steps_seen)

# 3. a custom loop with tfadvisor.profile + tfadvisor.step
m = model()
opt = keras.optimizers.Adam()
@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((m(xb) - yb) ** 2)
    grads = tape.gradient(loss, m.trainable_variables)
    opt.apply_gradients(zip(grads, m.trainable_variables))
    return loss
train_step(x[:16], y[:16])
with tfadvisor.profile(os.path.join(out_dir, "loop"), model=m, batch_size=16, metadata={"link": "pcie4"}) as p:
    for i in range(5):
        with tfadvisor.step(100 + i):
            train_step(x[:16], y[:16])
res["loop"] = dict(run_dir=p.run_dir, steps=p.steps, error=p.error, params=int(m.count_params()))

# 4. analysis forced to fail: fit finishes, a warning says so
def broken(*a, **k):
    raise RuntimeError("analysis exploded")
tfadvisor.api.analyze = broken
m = model()
cb = AdvisorCallback(os.path.join(out_dir, "broken"), steps=(2, 4))
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    h = m.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
res["broken"] = dict(run_dir=cb.run_dir, state=cb.state, epochs=len(h.history["loss"]), warnings=warned(ws))

# 5. another profiler already running: the callback warns, fit goes on
tf.profiler.experimental.start(os.path.join(out_dir, "other"))
m = model()
cb = AdvisorCallback(os.path.join(out_dir, "busy"), steps=(1, 3), analyze=False)
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    h = m.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
tf.profiler.experimental.stop()
res["busy"] = dict(state=cb.state, epochs=len(h.history["loss"]), warnings=warned(ws))

# 6. memory=True after TensorFlow started: a warning that it is too late
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    AdvisorCallback(os.path.join(out_dir, "mem"), memory=True)
res["memory"] = dict(warnings=warned(ws), env=os.environ.get("TF_CPU_ALLOCATOR_USE_BFC"))

print("RESULT " + json.dumps(res))
'''


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    out = tmp_path_factory.mktemp("scenarios")
    script = out / "scenarios.py"
    script.write_text(SCENARIOS)
    proc = subprocess.run([sys.executable, str(script), str(out)], env=capture_env(), capture_output=True, text=True,
                          timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, \
        f"scenarios failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    res = json.loads(lines[-1][len("RESULT "):])
    res["_stdout"] = proc.stdout
    res["_dir"] = str(out)
    return res


def test_callback_profiles_exactly_the_window(scenarios):
    r = scenarios["fit"]
    assert r["state"] == "done" and r["profiled"] == 6 and r["seen"] == 16
    assert r["restored"], "train_function must be restored after the window"
    assert train_markers(r["run_dir"]) == [3, 4, 5, 6, 7, 8]
    assert _steps_found(r["run_dir"]) == 6
    md = run_metadata(r["run_dir"])
    assert md["param_count"] == r["params"] == 8 * 16 + 16 + 16 + 1
    assert md["batch_size"] == 16
    assert md["replicas"] == 1 and md["strategy"] and md["hosts"] == 1
    assert md["devices"] and md["tf_version"] and md["keras_version"] and md["tfadvisor_version"]
    assert md["steps"]["start"] == 3 and md["steps"]["stop"] == 9 and md["steps"]["count"] == 6
    # tfadvisor.load hands the metadata on, and `tfadvisor analyze <logdir>` finds the run
    assert tfadvisor.load(Path(scenarios["_dir"]) / "fit").run_metadata["param_count"] == r["params"]
    assert find_runs(str(Path(scenarios["_dir"]) / "fit"))[-1].directory == r["run_dir"]
    # what was captured, as measured: the steps and the seconds the profiler ran
    assert re.search(r"tfadvisor: profile of steps 3-8 \(\d+\.\d s, [\d,]+ KiB\) written to", scenarios["_stdout"])


def test_callback_analysis_and_json_report(scenarios):
    r = scenarios["fit"]
    assert r["analyzed"], r["warnings"]
    data = json.loads((Path(scenarios["_dir"]) / "fit.json").read_text())
    assert "findings" in data
    assert "tfadvisor: 6 step(s) found" in scenarios["_stdout"]


def test_steps_per_execution(scenarios):
    r = scenarios["spe"]
    # executions start at steps 0, 2, 4, ...: the window 4..9 is three executions of two steps
    assert r["state"] == "done" and r["profiled"] == 6 and r["markers"] == 3
    assert train_markers(r["run_dir"]) == [4, 6, 8]
    md = run_metadata(r["run_dir"])
    assert md["steps"]["steps_per_execution"] == 2 and md["steps"]["markers"] == 3 and md["steps"]["count"] == 6
    assert _steps_found(r["run_dir"]) == 6  # training steps (the run file's steps_per_execution), not markers


def test_custom_loop_profile_and_step(scenarios):
    r = scenarios["loop"]
    assert r["error"] is None and r["steps"] == 5
    assert train_markers(r["run_dir"]) == [100, 101, 102, 103, 104]
    assert _steps_found(r["run_dir"]) == 5
    md = run_metadata(r["run_dir"])
    assert md["param_count"] == r["params"] and md["batch_size"] == 16 and md["link"] == "pcie4"
    assert md["steps"] == {"count": 5, "first": 100, "last": 104}


def test_failing_analysis_warns_and_training_finishes(scenarios):
    r = scenarios["broken"]
    assert r["epochs"] == 1 and r["state"] == "done" and r["run_dir"]
    assert any("analysis exploded" in w for w in r["warnings"]), r["warnings"]
    assert train_markers(r["run_dir"]) == [2, 3]


def test_profiler_busy_warns_and_training_finishes(scenarios):
    r = scenarios["busy"]
    assert r["epochs"] == 1 and r["state"] == "failed"
    assert any("profiler" in w for w in r["warnings"]), r["warnings"]


def test_memory_too_late_warns(scenarios):
    r = scenarios["memory"]
    assert r["env"] == "true"
    assert any("TF_CPU_ALLOCATOR_USE_BFC" in w for w in r["warnings"]), r["warnings"]


# --- tfadvisor capture service -------------------------------------------------------------

SERVER = r'''
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
port, flag, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
@tf.function
def f(x):
    return tf.reduce_sum(tf.matmul(x, x))
x = tf.ones((64, 64))
f(x)
tf.profiler.experimental.server.start(port)
print("READY", flush=True)
i = 0
t0 = time.time()
while not os.path.exists(stop) and time.time() - t0 < 120:
    if os.path.exists(flag):  # train while the flag file exists, idle otherwise
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            f(x)
        i += 1
        time.sleep(0.005)
    else:
        time.sleep(0.05)
'''


def _capture_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfadvisor", "capture", *args], env=capture_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_capture_service_from_a_real_server(tmp_path):
    port = free_port()
    flag, stop = tmp_path / "train", tmp_path / "stop"
    (tmp_path / "server.py").write_text(SERVER)
    flag.touch()
    server = subprocess.Popen([sys.executable, str(tmp_path / "server.py"), str(port), str(flag), str(stop)],
                              env=capture_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout.readline().strip() == "READY"
        logdir = tmp_path / "log"
        proc = _capture_cli("service", f"localhost:{port}", "--duration-ms", "700", "--logdir", str(logdir))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "tfadvisor: profile written to" in proc.stdout
        run = find_runs(str(logdir))[-1]
        assert run.hosts == [f"localhost_{port}"]
        steps = train_markers(run.directory)
        assert len(steps) >= 5 and steps == list(range(steps[0], steps[0] + len(steps)))
        assert _steps_found(run.directory) == len(steps)
        md = run_metadata(run.directory)
        assert md["capture"]["service_addr"] == f"localhost:{port}" and md["hosts"] == 1

        # the program stops training: a capture with no steps is an error, in one line
        flag.unlink()
        time.sleep(0.3)
        idle = _capture_cli("service", f"localhost:{port}", "--duration-ms", "300", "--retries", "0",
                            "--logdir", str(tmp_path / "idle"))
        assert idle.returncode == 2, idle.stdout + idle.stderr
        err = idle.stderr.strip().splitlines()
        assert len(err) == 1 and ("no training steps" in err[0] or "no trace events" in err[0]), idle.stderr
    finally:
        stop.touch()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# --- tfadvisor capture run ----------------------------------------------------------------------

TRAIN = r'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
import tensorflow as tf  # TensorFlow first, then Keras through tf.keras (TF probes keras on import)
keras = tf.keras
x = np.random.default_rng(0).random((160, 8), dtype=np.float32)
y = np.random.default_rng(1).random((160, 1), dtype=np.float32)
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile("adam", "mse")
model.fit(x, y, batch_size=16, epochs=int(sys.argv[1]), verbose=0)
print("TRAINED", model.count_params(), flush=True)
sys.exit(int(sys.argv[2]))
'''


def test_capture_run_step_mode(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    logdir = tmp_path / "log"
    proc = _capture_cli("run", "--logdir", str(logdir), "--start-step", "4", "--steps", "5",
                        "--", sys.executable, str(script), "2", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "TRAINED 161" in proc.stdout  # the script's own output is kept
    assert "tfadvisor: profile written to" in proc.stdout
    run = find_runs(str(logdir))[-1]
    assert train_markers(run.directory) == [4, 5, 6, 7, 8]
    md = run_metadata(run.directory)
    assert md["param_count"] == 161 and md["batch_size"] == 16 and md["steps"]["count"] == 5


def test_capture_run_passes_exit_code_and_time_mode(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    logdir = tmp_path / "log"
    # time mode starts once TensorFlow is imported; 40 epochs keep the script busy long enough
    proc = _capture_cli("run", "--logdir", str(logdir), "--start-after-s", "0", "--duration-s", "1", "--no-analyze",
                        "--", sys.executable, str(script), "40", "3")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "TRAINED" in proc.stdout
    assert "exited with code 3" in proc.stderr
    run = find_runs(str(logdir))[-1]
    md = run_metadata(run.directory)
    assert md["capture"]["by"] == "tfadvisor capture run"
    assert md["steps"]["count"] == len(train_markers(run.directory))


def test_profile_without_keras_import_keeps_tensorflow_out():
    code = textwrap.dedent("""
        import sys, tfadvisor, tfadvisor.keras, tfadvisor.capture.profiling
        assert "tensorflow" not in sys.modules and "keras" not in sys.modules, "imported too early"
        with tfadvisor.step(1):  # imports TensorFlow; no profiler runs: nothing recorded, nothing raised
            pass
        assert "tensorflow" in sys.modules
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", code], env=capture_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
