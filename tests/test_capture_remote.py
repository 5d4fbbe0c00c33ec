"""Captures into a ``gs://`` log directory from a machine without TensorFlow (``tfadvisor capture
service`` with the xprof client): the run directories the server wrote are found, and the metadata
file is written, through fsspec/gcsfs, against a Cloud Storage emulator on loopback."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from conftest import free_port

pytest.importorskip("gcsfs")
emulator = pytest.importorskip("gcp_storage_emulator.server")

from tfadvisor.capture import rundirs, runfacts, service  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = next((ROOT / "sample_traces" / "input_bound_defaults_off").rglob("*.xplane.pb"))
BUCKET = "captures"


@pytest.fixture()
def gcs(monkeypatch):
    port = free_port()
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    try:
        yield storage.Client(project="p", credentials=AnonymousCredentials())
    finally:
        server.stop()


def _server_writes(gcs, name: str) -> None:
    """What a profiler server does at the end of a capture: one host file in a new run directory."""
    gcs.bucket(BUCKET).blob(name).upload_from_filename(str(SAMPLE))


def test_remote_logdir_without_tensorflow(gcs, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if TensorFlow were not installed
    with pytest.raises(ImportError):
        import tensorflow  # noqa: F401
    logdir = f"gs://{BUCKET}/svc"
    _server_writes(gcs, "svc/plugins/profile/2026_01_01_00_00_00/old-host.xplane.pb")  # an earlier capture

    before = rundirs.snapshot_runs(logdir)
    assert list(before) == [f"{logdir}/plugins/profile/2026_01_01_00_00_00/old-host.xplane.pb"]
    _server_writes(gcs, "svc/plugins/profile/2026_01_01_00_00_09/worker-1.xplane.pb")
    _server_writes(gcs, "svc/plugins/profile/2026_01_01_00_00_09/worker-0.xplane.pb")
    (run_dir,) = rundirs.new_run_dirs(logdir, before)  # only the new one
    assert run_dir == f"{logdir}/plugins/profile/2026_01_01_00_00_09"
    assert service._host_names(run_dir) == ["worker-0", "worker-1"]

    path = runfacts.write_run_metadata(run_dir, {"host_names": ["worker-0", "worker-1"], "capture": {"x": 1}})
    assert path == f"{run_dir}/tfadvisor_run.json"
    runfacts.write_run_metadata(run_dir, {"batch_size": 64})  # merged into what is there
    meta = json.loads(gcs.bucket(BUCKET).blob("svc/plugins/profile/2026_01_01_00_00_09/tfadvisor_run.json")
                      .download_as_bytes())
    assert meta["hosts"] == 2 and meta["capture"] == {"x": 1} and meta["batch_size"] == 64
    assert os.environ["STORAGE_EMULATOR_HOST"]
