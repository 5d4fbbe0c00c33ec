"""`tfadvisor.vertex.init()`: inside a Vertex AI job (the job's environment variables, the SDK's real
cloud_profiler pointed at loopback stand-ins) and outside one. Nothing here reaches Google Cloud.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import free_port

import tfadvisor.capture.vertex as vertex

ROOT = Path(__file__).resolve().parent.parent
JOB_ENV = ("CLOUD_ML_JOB_ID", "AIP_TENSORBOARD_LOG_DIR", "AIP_TF_PROFILER_PORT", "AIP_HTTP_HANDLER_PORT",
           "AIP_TENSORBOARD_API_URI", "AIP_TENSORBOARD_RESOURCE_NAME", "CLUSTER_SPEC", "TFADVISOR_STEPS")
TB = "projects/demo-project/locations/us-central1/tensorboards/77"
CLUSTER = {"cluster": {"workerpool0": ["127.0.0.1:2222"]}, "task": {"type": "workerpool0", "index": 0}}


@pytest.fixture()
def clean_env(monkeypatch):
    for name in JOB_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(vertex, "_profiler_service_started", False)
    return monkeypatch




# --- small parts -------------------------------------------------------------------------------------


def test_in_vertex_job():
    assert vertex.in_vertex_job({"CLOUD_ML_JOB_ID": "123"})
    assert not vertex.in_vertex_job({})
    assert not vertex.in_vertex_job({"CLOUD_ML_JOB_ID": ""})


def test_job_logdir_uses_the_fuse_mount_when_there(tmp_path):
    env = {"AIP_TENSORBOARD_LOG_DIR": "gs://bkt/runs/job-1/logs/"}
    assert vertex.job_logdir(env, fuse_root=str(tmp_path)) == "gs://bkt/runs/job-1/logs/"  # not mounted
    (tmp_path / "bkt").mkdir()
    assert vertex.job_logdir(env, fuse_root=str(tmp_path)) == f"{tmp_path}/bkt/runs/job-1/logs/"
    assert vertex.job_logdir({"AIP_TENSORBOARD_LOG_DIR": "/mnt/logs"}, fuse_root=str(tmp_path)) == "/mnt/logs"
    assert vertex.job_logdir({}, fuse_root=str(tmp_path)) is None


def test_job_facts():
    env = {"CLOUD_ML_JOB_ID": "42", "AIP_TENSORBOARD_RESOURCE_NAME": TB, "CLUSTER_SPEC": json.dumps(CLUSTER),
           "AIP_TENSORBOARD_LOG_DIR": "gs://b/l/"}
    assert vertex.job_facts(env) == {"platform": "vertex-ai", "job_id": "42", "tensorboard": TB,
                                     "log_dir": "gs://b/l/", "task": "workerpool0-0"}
    assert vertex.job_facts({"CLOUD_ML_JOB_ID": "42", "CLUSTER_SPEC": "not json"})["job_id"] == "42"


# --- outside and inside a job, in this process ----------------------------------------------------------


def _is_advisor(cb) -> bool:
    return type(cb).__name__ == "AdvisorCallback"


def test_outside_vertex_is_a_no_op(clean_env, caplog):
    called = []
    clean_env.setattr(vertex, "start_profiler_service", lambda: called.append(1))
    with caplog.at_level(logging.INFO, logger="tfadvisor.vertex"):
        cb = vertex.init(steps=(10, 20))
    assert not called
    assert not _is_advisor(cb)
    if cb is not None:  # a Keras callback that does nothing
        import keras

        assert type(cb) is keras.callbacks.Callback
    assert "not in a Vertex AI training job (CLOUD_ML_JOB_ID is not set)" in caplog.text


def test_problems_never_reach_training(clean_env, caplog):
    clean_env.setenv("CLOUD_ML_JOB_ID", "42")
    clean_env.setenv("AIP_TENSORBOARD_LOG_DIR", "/tmp/nowhere/logs")
    with caplog.at_level(logging.WARNING, logger="tfadvisor.vertex"):
        cb = vertex.init(steps=(20, 10), tensorboard_profiler=False)  # a bad window
    assert not _is_advisor(cb)
    assert "not profiling (ValueError" in caplog.text
    caplog.clear()
    clean_env.delenv("AIP_TENSORBOARD_LOG_DIR")
    with caplog.at_level(logging.WARNING, logger="tfadvisor.vertex"):
        cb = vertex.init(tensorboard_profiler=False)  # a job without a base output directory
    assert not _is_advisor(cb)
    assert "AIP_TENSORBOARD_LOG_DIR is not set" in caplog.text


@pytest.mark.slow
def test_inside_vertex_profiles_the_window_into_the_log_dir(clean_env, tmp_path, caplog):
    """A Vertex job's environment: the profile of the window lands in AIP_TENSORBOARD_LOG_DIR (through
    the Cloud Storage FUSE mount, here a temporary directory), with the job in tfadvisor_run.json.
    cloud_profiler is the installed one: without the TensorBoard variables (or where it does not load)
    it starts nothing, and training goes on."""
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    clean_env.setenv("CLOUD_ML_JOB_ID", "5150")
    clean_env.setenv("AIP_TENSORBOARD_LOG_DIR", "gs://bkt/tfadvisor/job/logs/")
    clean_env.setenv("CLUSTER_SPEC", json.dumps(CLUSTER))
    clean_env.setenv("TFADVISOR_STEPS", "2,5")
    clean_env.setattr(vertex, "GCS_FUSE_ROOT", str(tmp_path))
    (tmp_path / "bkt").mkdir()
    with caplog.at_level(logging.INFO, logger="tfadvisor.vertex"):
        cb = vertex.init()
    assert _is_advisor(cb), caplog.text
    # the installed cloud_profiler: it does not load with protobuf 7 / TF 2.21 (a warning), or, where it
    # does, it finds no TensorBoard variables and starts nothing
    assert "TensorBoard Profiler not started" in caplog.text or "Profiler service requested" in caplog.text
    assert cb.window == (2, 5)
    logdir = tmp_path / "bkt" / "tfadvisor" / "job" / "logs"
    assert Path(cb.logdir) == logdir

    x = np.random.rand(256, 8).astype("float32")
    y = np.random.rand(256, 1).astype("float32")
    model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(4), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=32, epochs=1, callbacks=[cb], verbose=0)

    (xplane,) = logdir.glob("plugins/profile/*/*.xplane.pb")
    meta = json.loads((xplane.parent / "tfadvisor_run.json").read_text())
    assert meta["vertex"] == {"platform": "vertex-ai", "job_id": "5150", "log_dir": "gs://bkt/tfadvisor/job/logs/",
                              "task": "workerpool0-0"}
    assert meta["steps"]["requested"] == [2, 5]
    import tfadvisor

    assert tfadvisor.load(logdir).summary()["events"] > 0


# --- the SDK's cloud_profiler, started for real against loopback stand-ins ----------------------------------

_JOB = r"""
import importlib.machinery, json, os, socket, sys, time, types, urllib.error, urllib.request

# tensorboard-plugin-profile < 2.18 (what google-cloud-aiplatform[cloud_profiler] allows) does not load with
# protobuf 7 / TF 2.21: stand in for its ProfilePlugin class only (the "Capture profile" handler).
pkg = types.ModuleType("tensorboard_plugin_profile")
pkg.__spec__ = importlib.machinery.ModuleSpec("tensorboard_plugin_profile", None, is_package=True)
pkg.__path__ = []
mod = types.ModuleType("tensorboard_plugin_profile.profile_plugin")
mod.__spec__ = importlib.machinery.ModuleSpec("tensorboard_plugin_profile.profile_plugin", None)
mod.ProfilePlugin = type("ProfilePlugin", (), {"__init__": lambda self, context: None})
pkg.profile_plugin = mod
sys.modules.update({"tensorboard_plugin_profile": pkg, "tensorboard_plugin_profile.profile_plugin": mod})

# The job's SDK talks to the stand-in API (in a real job it finds the regional endpoint by itself),
# and the SDK's web server listens on loopback (it binds 0.0.0.0 in a job).
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform
aiplatform.init(api_endpoint=os.environ["TEST_API_ENDPOINT"], api_transport="rest",
                credentials=AnonymousCredentials())
from werkzeug import serving
_run_simple = serving.run_simple
serving.run_simple = lambda host, port, app, **kw: _run_simple("127.0.0.1", port, app, **kw)

import tfadvisor.capture.vertex as vertex
cb = vertex.init()
out = {"callback": type(cb).__name__, "started": vertex._profiler_service_started,
       "logdir": getattr(cb, "logdir", None), "window": list(getattr(cb, "window", None) or [])}
if out["started"]:
    port = int(os.environ["AIP_HTTP_HANDLER_PORT"])
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/profile/no-such-route", timeout=2)
        except urllib.error.HTTPError as err:
            out["web"] = [err.code, err.read().decode()]
            break
        except OSError:
            time.sleep(0.1)
    with socket.socket() as s:
        out["tf_profiler_server"] = s.connect_ex(("127.0.0.1", int(os.environ["AIP_TF_PROFILER_PORT"]))) == 0
print("RESULT " + json.dumps(out))
"""


def _run_job(fake) -> tuple[dict, str]:
    """The job's process: its environment variables, the stand-in API; the SDK only makes Storage client
    objects here (no call), so a dead loopback address stands for Cloud Storage."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "GCE_"))}
    env.update(
        PYTHONPATH=str(ROOT), NO_GCE_CHECK="true", TEST_API_ENDPOINT=fake.endpoint,
        STORAGE_EMULATOR_HOST="http://127.0.0.1:9",
        CLOUD_ML_JOB_ID="5150", AIP_TENSORBOARD_LOG_DIR="gs://bkt/tfadvisor/job/logs/",
        AIP_TF_PROFILER_PORT=str(free_port()), AIP_HTTP_HANDLER_PORT=str(free_port()),
        AIP_TENSORBOARD_API_URI="aiplatform.googleapis.com", AIP_TENSORBOARD_RESOURCE_NAME=TB,
        CLUSTER_SPEC=json.dumps(CLUSTER), TFADVISOR_STEPS="3,5",
    )
    proc = subprocess.run([sys.executable, "-c", _JOB], env=env, capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):]), proc.stderr


@pytest.mark.slow
def test_cloud_profiler_starts_in_a_job():
    """cloud_profiler.init() for real: the TF profiler server, the TensorBoard experiment for the job,
    the web server TensorBoard's "Capture profile" calls; and tfadvisor's callback next to it."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("google.cloud.aiplatform")
    from vertex_fake_api import FakeVertex

    with FakeVertex() as fake:
        out, stderr = _run_job(fake)
    assert out["callback"] == "AdvisorCallback", stderr[-3000:]
    assert out["logdir"] == "gs://bkt/tfadvisor/job/logs/"
    assert out["window"] == [3, 5]
    assert out["started"], stderr[-3000:]
    (create,) = fake.calls("POST", r"/tensorboards/77/experiments$")
    assert create.query["tensorboardExperimentId"] == ["5150"]
    assert fake.calls("GET", r"/tensorboards/77$")
    assert out["web"] == [404, "Not Found"]  # the SDK's profile web server answers
    assert out["tf_profiler_server"]


def test_profiler_service_not_claimed_when_nothing_can_start(clean_env, caplog):
    """Without the TensorBoard variables cloud_profiler.init() starts nothing: say so, do not claim it."""
    clean_env.setenv("CLOUD_ML_JOB_ID", "1")
    with caplog.at_level(logging.INFO, logger="tfadvisor.vertex"):
        assert vertex.start_profiler_service() is False
    assert "TensorBoard Profiler not started" in caplog.text and "AIP_TF_PROFILER_PORT" in caplog.text
    assert "requested" not in caplog.text and vertex._profiler_service_started is False
