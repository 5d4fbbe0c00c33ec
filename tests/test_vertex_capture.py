"""`tfadvisor capture vertex`: the real Vertex AI SDK and google-cloud-storage code paths, against
local stand-ins on loopback: tests/vertex_fake_api.py for the Vertex AI REST API and
gcp-storage-emulator for Cloud Storage. Nothing here reaches Google Cloud.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import free_port

pytest.importorskip("google.cloud.aiplatform")
pytest.importorskip("google.cloud.storage")
emulator = pytest.importorskip("gcp_storage_emulator.server")

from typer.testing import CliRunner  # noqa: E402
from vertex_fake_api import FAILED, FakeVertex  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "input_bound"
BUCKET = "tfadvisor-staging"
PROJECT = "demo-project"
REGION = "us-central1"
TB = f"projects/{PROJECT}/locations/{REGION}/tensorboards/4242"
SA = f"trainer@{PROJECT}.iam.gserviceaccount.com"




@pytest.fixture(scope="module")
def gcs():
    """A Cloud Storage emulator on loopback, with STORAGE_EMULATOR_HOST pointing at it."""
    port = free_port()
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    old = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project=PROJECT, credentials=AnonymousCredentials())
    try:
        yield client
    finally:
        if old is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = old
        server.stop()


@pytest.fixture(autouse=True)
def no_metadata_server(monkeypatch):
    """Safety net: google.auth never probes the GCE metadata server from these tests."""
    from google.auth.compute_engine import _metadata

    monkeypatch.setattr(_metadata, "_NO_GCE_CHECK", True)


@pytest.fixture()
def fake():
    with FakeVertex() as f:
        yield f


@pytest.fixture()
def script(tmp_path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("import tfadvisor.vertex\ncallback = tfadvisor.vertex.init()\nprint('training')\n")
    return path


def _invoke(*args: str):
    """Run `tfadvisor capture vertex ARGS` in this process (the capture group as the CLI has it)."""
    from tfadvisor.capture.cli import app

    result = CliRunner().invoke(app, ["vertex", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _assert_analysed(result, directory: Path) -> None:
    """Exit 0, and the findings tfadvisor.analyze gives for the downloaded profile are printed."""
    import tfadvisor

    assert result.exit_code == 0, result.output
    findings = tfadvisor.analyze(directory).findings
    assert findings  # the sample is input-bound
    for f in findings:
        assert f.rule in result.stdout and f.title in result.stdout, f"{f.rule} missing from:\n{result.stdout}"


def _sample_files() -> list[Path]:
    if not any(SAMPLE.rglob("*.xplane.pb")):
        pytest.skip("sample_traces/input_bound is not there")
    return sorted(SAMPLE.rglob("*.xplane.pb"))


def _put_profile(gcs, logdir_uri: str) -> list[str]:
    """Write the sample profile under a gs:// log dir, as the job's profiler would."""
    bucket, _, prefix = logdir_uri[len("gs://"):].partition("/")
    names = []
    for f in _sample_files():
        rel = f.relative_to(SAMPLE).as_posix()  # plugins/profile/<run>/<host>.xplane.pb
        name = f"{prefix.rstrip('/')}/{rel}"
        gcs.bucket(bucket).blob(name).upload_from_filename(str(f))
        names.append(name)
    return names


def _submit_args(script: Path, fake: FakeVertex, out: Path, *extra: str) -> list[str]:
    return ["--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard", TB,
            "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}", "--requirements", "pandas>=2",
            "--api-endpoint", fake.endpoint, "--anonymous", "--poll-seconds", "0", "--out", str(out),
            "--steps", "5,9", *extra]


# --- --dry-run -----------------------------------------------------------------------------------


def test_dry_run_prints_the_job_spec(script, tmp_path):
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("# deps\nnumpy>=1.26\n\nscipy  # for stats\n")
    result = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard", "4242",
                     "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}/runs", "--requirements",
                     str(reqs), "--machine-type", "n1-standard-8", "--accelerator-type", "NVIDIA_TESLA_T4",
                     "--replica-count", "3", "--display-name", "my-run", "--steps", "3:7", "--dry-run",
                     "--", "--epochs", "2")
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout)
    assert spec["parent"] == f"projects/{PROJECT}/locations/{REGION}"
    job = spec["customJob"]
    assert job["displayName"] == "my-run"
    js = job["jobSpec"]
    assert js["tensorboard"] == TB  # an ID is expanded to the full resource name
    assert js["serviceAccount"] == SA
    base = f"gs://{BUCKET}/runs/tfadvisor/my-run"
    assert js["baseOutputDirectory"]["outputUriPrefix"] == base
    chief, workers = js["workerPoolSpecs"]
    assert chief["replicaCount"] == "1" and workers["replicaCount"] == "2"
    assert chief["machineSpec"] == {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                    "acceleratorCount": 1}
    pkg = chief["pythonPackageSpec"]
    assert pkg["executorImageUri"].endswith("/tf-gpu.2-17.py310:latest")
    assert pkg["pythonModule"] == "aiplatform_custom_trainer_script.task"
    assert pkg["packageUris"] == [f"{base}/code/aiplatform_custom_trainer_script-0.1.tar.gz"]
    assert pkg["args"] == ["--epochs", "2"]
    assert {"name": "TFADVISOR_STEPS", "value": "3,7"} in pkg["env"]
    # TF 2.17 in the prebuilt image needs NumPy 1.x; tfadvisor's dependencies would bring NumPy 2
    assert spec["package"]["requirements"] == ["numpy>=1.26", "scipy", "tfadvisor[vertex]", "numpy<2"]


def test_dry_run_custom_container_installs_from_the_fuse_mount(script):
    result = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard", TB,
                     "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}", "--container-uri",
                     "europe-docker.pkg.dev/acme/train/tf:2.21", "--tfadvisor-package", "", "--display-name", "c",
                     "--dry-run")
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout)
    (pool,) = spec["customJob"]["jobSpec"]["workerPoolSpecs"]
    container = pool["containerSpec"]
    assert container["imageUri"] == "europe-docker.pkg.dev/acme/train/tf:2.21"
    command = container["command"][-1]
    assert f"/gcs/{BUCKET}/tfadvisor/c/code/aiplatform_custom_trainer_script-0.1.tar.gz" in command
    assert command.endswith("python3 -m aiplatform_custom_trainer_script.task")
    assert spec["package"]["requirements"] == []


def test_dry_run_needs_the_job_options(script):
    result = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--dry-run")
    assert result.exit_code == 2
    assert "--tensorboard, --service-account, --staging-bucket" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# --- submit, follow, download, analyse ---------------------------------------------------------------


def test_submit_follow_download_and_analyse(gcs, fake, script, tmp_path):
    written = {}

    def job_runs(job: dict, state: str) -> None:
        if state == "JOB_STATE_RUNNING":  # the job's profiler writes under AIP_TENSORBOARD_LOG_DIR
            base = job["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
            written["names"] = _put_profile(gcs, f"{base}/logs/")

    fake.on_state = job_runs
    out = tmp_path / "profile"
    result = _invoke(*_submit_args(script, fake, out))
    _assert_analysed(result, out)

    (create,) = fake.calls("POST", r"/customJobs$")
    assert create.path == f"/v1/projects/{PROJECT}/locations/{REGION}/customJobs"
    js = create.body["jobSpec"]
    assert js["tensorboard"] == TB
    assert js["serviceAccount"] == SA
    (pool,) = js["workerPoolSpecs"]
    assert {"name": "TFADVISOR_STEPS", "value": "5,9"} in pool["pythonPackageSpec"]["env"]
    base = js["baseOutputDirectory"]["outputUriPrefix"]
    assert base.startswith(f"gs://{BUCKET}/tfadvisor/tfadvisor-train-")

    # the package the job installs is in the bucket and holds the script and its requirements
    (uri,) = pool["pythonPackageSpec"]["packageUris"]
    bucket, _, name = uri[len("gs://"):].partition("/")
    data = gcs.bucket(bucket).blob(name).download_as_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
        task = tar.extractfile(members["aiplatform_custom_trainer_script/task.py"]).read().decode()
        setup = tar.extractfile(members["setup.py"]).read().decode()
    assert task == script.read_text()
    assert '"pandas>=2"' in setup and '"tfadvisor[vertex]"' in setup
    assert pool["pythonPackageSpec"]["pythonModule"] == "aiplatform_custom_trainer_script.task"

    # followed until it ended, with progress on stderr
    assert len(fake.calls("GET", r"/customJobs/\d+$")) >= 2
    for state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"):
        assert state in result.stderr

    # downloaded where it was written, and readable
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.xplane.pb"))
    assert got == sorted(f"logs/{n.split('/logs/', 1)[1]}" for n in written["names"])
    import tfadvisor

    trace = tfadvisor.load(out)
    assert trace.summary()["events"] > 0
    assert f"downloaded {len(got)} file(s) to {out}" in result.stderr


def test_failed_job_is_one_line_and_exit_2(gcs, fake, script, tmp_path):
    fake.job_script = list(FAILED)
    fake.job_error = "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error."
    result = _invoke(*_submit_args(script, fake, tmp_path / "out"))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert "JOB_STATE_FAILED" in lines[-1]
    assert "exited with a non-zero status of 1" in lines[-1]
    assert not (tmp_path / "out").exists()


def test_existing_job_is_downloaded_and_analysed(gcs, fake, tmp_path):
    name = f"projects/{PROJECT}/locations/{REGION}/customJobs/777"
    base = f"gs://{BUCKET}/old/job-777"
    fake.add_job(name, "JOB_STATE_RUNNING", base_output_dir=base, script=["JOB_STATE_SUCCEEDED"])
    _put_profile(gcs, f"{base}/logs")
    out = tmp_path / "p"
    result = _invoke("--job", name, "--api-endpoint", fake.endpoint, "--anonymous", "--poll-seconds", "0",
                     "--out", str(out))
    _assert_analysed(result, out)
    assert not fake.calls("POST", r"customJobs")
    assert len(fake.calls("GET", r"/customJobs/777$")) >= 2  # RUNNING, then SUCCEEDED
    assert list(out.rglob("*.xplane.pb"))


def test_job_id_with_project_and_region(gcs, fake, tmp_path):
    name = f"projects/{PROJECT}/locations/{REGION}/customJobs/778"
    fake.add_job(name, "JOB_STATE_SUCCEEDED", base_output_dir=f"gs://{BUCKET}/old/job-778")
    _put_profile(gcs, f"gs://{BUCKET}/old/job-778/logs/")
    result = _invoke("--job", "778", "--project", PROJECT, "--region", REGION, "--api-endpoint", fake.endpoint,
                     "--anonymous", "--out", str(tmp_path / "p"))
    _assert_analysed(result, tmp_path / "p")
    assert fake.calls("GET", r"/customJobs/778$")


def test_log_directory_without_profile(gcs, fake, tmp_path):
    name = f"projects/{PROJECT}/locations/{REGION}/customJobs/779"
    base = f"gs://{BUCKET}/old/job-779"
    gcs.bucket(BUCKET).blob("old/job-779/logs/events.out.tfevents.1.host").upload_from_string(b"x")
    fake.add_job(name, "JOB_STATE_SUCCEEDED", base_output_dir=base)
    result = _invoke("--job", name, "--api-endpoint", fake.endpoint, "--anonymous", "--out", str(tmp_path / "p"))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert f"no profile under {base}/logs/" in line


def test_unknown_job_is_one_line(gcs, fake, tmp_path):
    result = _invoke("--job", f"projects/{PROJECT}/locations/{REGION}/customJobs/404", "--api-endpoint",
                     fake.endpoint, "--anonymous")
    assert result.exit_code == 2
    assert "(404 NOT_FOUND): CustomJob projects/" in result.stderr and "customJobs/404 not found" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_staging_bucket_is_one_line(gcs, fake, script, tmp_path):
    args = _submit_args(script, fake, tmp_path / "out")
    args[args.index("--staging-bucket") + 1] = "gs://no-such-bucket"
    result = _invoke(*args)
    assert result.exit_code == 2
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("tfadvisor: Google Cloud refused the call (404 NOT_FOUND)")
    assert not fake.calls("POST", r"customJobs")  # nothing submitted


def test_dry_run_is_what_gets_submitted(gcs, fake, script, tmp_path):
    common = ["--display-name", "same-name", "--replica-count", "2", "--web-access", "--", "--lr", "0.1"]
    dry = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard", TB,
                  "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}", "--steps", "5,9", "--dry-run",
                  *common)
    assert dry.exit_code == 0, dry.output
    described = json.loads(dry.stdout)
    fake.job_script = list(FAILED)  # stop right after the submission
    _invoke(*_submit_args(script, fake, tmp_path / "out", *common))
    (create,) = fake.calls("POST", r"/customJobs$")
    assert create.path == f"/v1/{described['parent']}/customJobs"
    assert create.body == described["customJob"]
    assert create.body["jobSpec"]["enableWebAccess"] is True


def test_missing_extra(monkeypatch, script):
    monkeypatch.setitem(sys.modules, "google.cloud.aiplatform", None)  # as if not installed
    result = _invoke("--job", "projects/p/locations/r/customJobs/1")
    assert result.exit_code == 2
    assert "pip install 'tfadvisor[vertex]'" in result.stderr


def test_missing_credentials(tmp_path, script):
    """No credentials anywhere: one line and exit 2, before any call (the metadata server is not asked)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "CLOUDSDK_", "GCE_"))}
    env.update(PYTHONPATH=str(ROOT), CLOUDSDK_CONFIG=str(tmp_path / "gcloud"), NO_GCE_CHECK="true",
               HOME=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-m", "tfadvisor", "capture", "vertex", "--project", PROJECT, "--region", REGION,
         "--script", str(script), "--tensorboard", TB, "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}",
         "--api-endpoint", "http://127.0.0.1:9"],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "no Google Cloud credentials" in lines[0] and "gcloud auth application-default login" in lines[0]
