"""`tfadvisor capture vertex`: the real Vertex AI SDK and google-cloud-storage code paths, against
local stand-ins on loopback: tests/vertex_fake_api.py for the Vertex AI REST API and
gcp-storage-emulator for Cloud Storage. Nothing here reaches Google Cloud.
"""

from __future__ import annotations

import io
import json
import os
import re
import site
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest
from conftest import free_port

import tfadvisor

pytest.importorskip("google.cloud.aiplatform")
pytest.importorskip("google.cloud.storage")
emulator = pytest.importorskip("gcp_storage_emulator.server")

from typer.testing import CliRunner  # noqa: E402
from vertex_fake_api import FAILED, FakeVertex  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "input_bound_defaults_off"
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
    from tfadvisor.cli.capture import app

    result = CliRunner().invoke(app, ["vertex", *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _assert_analysed(result, directory: Path) -> None:
    """Exit 0, and the findings tfadvisor.analyze gives for the downloaded profile are printed."""
    assert result.exit_code == 0, result.output
    findings = tfadvisor.analyze(directory).findings
    assert findings  # the sample is input-bound
    for f in findings:
        assert f.rule in result.stdout and f.title in result.stdout, f"{f.rule} missing from:\n{result.stdout}"


def _sample_files() -> list[Path]:
    assert any(SAMPLE.rglob("*.xplane.pb")), f"no xplane.pb under {SAMPLE}"
    return sorted(SAMPLE.rglob("*.xplane.pb"))


def _put_profile(gcs, logdir_uri: str, job_id: str | None = None, *, run: str | None = None,
                 host: str | None = None, task: str = "workerpool0-0") -> list[str]:
    """Write the sample profile under a gs:// log dir, as the job's profiler would.

    ``job_id``: also write the ``tfadvisor_run.json`` that ``tfadvisor.vertex.init`` writes in job
    ``job_id`` (none: a profile from elsewhere, e.g. TensorBoard's "Capture profile").
    ``run``/``host`` rename the run directory / host file.
    """
    bucket, _, prefix = logdir_uri[len("gs://"):].partition("/")
    names = []
    run_dir = None
    for f in _sample_files():
        parts = f.relative_to(SAMPLE).as_posix().split("/")  # plugins/profile/<run>/<host>.xplane.pb
        if run:
            parts[2] = run
        if host:
            parts[-1] = f"{host}.xplane.pb"
        name = f"{prefix.rstrip('/')}/{'/'.join(parts)}"
        run_dir = name.rsplit("/", 1)[0]
        gcs.bucket(bucket).blob(name).upload_from_filename(str(f))
        names.append(name)
    if job_id is not None:
        meta = {"vertex": {"platform": "vertex-ai", "job_id": job_id, "task": task}, "batch_size": 32}
        gcs.bucket(bucket).blob(f"{run_dir}/tfadvisor_run.json").upload_from_string(json.dumps(meta))
    return names


def _package_uris(pool: dict) -> list[str]:
    """The gs:// packages a worker pool installs (prebuilt image, or custom container from /gcs)."""
    if "pythonPackageSpec" in pool:
        return pool["pythonPackageSpec"]["packageUris"]
    command = pool["containerSpec"]["command"][-1]
    return ["gs://" + p.split("[", 1)[0] for p in re.findall(r"/gcs/(\S+?\.(?:whl(?:\[\w+\])?|tar\.gz))", command)]


def _job_id(job: dict) -> str:
    return job["name"].rsplit("/", 1)[-1]


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
                     "--container-uri", "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest",
                     "--", "--epochs", "2")
    assert result.exit_code == 0, result.output
    # Vertex AI's supported-frameworks page: the 2.17 prebuilt images ended on 2026-07-11
    assert "reached its end of availability on 2026-07-11" in result.stderr
    spec = json.loads(result.stdout)
    assert spec["parent"] == f"projects/{PROJECT}/locations/{REGION}"
    job = spec["customJob"]
    assert job["displayName"] == "my-run"
    js = job["jobSpec"]
    assert js["tensorboard"] == TB  # an ID is expanded to the full resource name
    assert js["serviceAccount"] == SA
    base = js["baseOutputDirectory"]["outputUriPrefix"]
    # one directory per submission, timestamped like the SDK's
    assert re.fullmatch(rf"gs://{BUCKET}/runs/tfadvisor/my-run/\d{{4}}-\d\d-\d\d-\d{{6}}-\d{{6}}", base), base
    chief, workers = js["workerPoolSpecs"]
    assert chief["replicaCount"] == "1" and workers["replicaCount"] == "2"
    assert chief["machineSpec"] == {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4",
                                    "acceleratorCount": 1}
    pkg = chief["pythonPackageSpec"]
    assert pkg["executorImageUri"].endswith("/tf-gpu.2-17.py310:latest")
    assert pkg["pythonModule"] == "aiplatform_custom_trainer_script.task"
    # the exact local tfadvisor goes with the code (first), never looked up on a package index
    version = tfadvisor.__version__
    assert pkg["packageUris"] == [f"{base}/code/tfadvisor-{version}-py3-none-any.whl",
                                  f"{base}/code/aiplatform_custom_trainer_script-0.1.tar.gz"]
    assert pkg["args"] == ["--epochs", "2"]
    assert {"name": "TFADVISOR_STEPS", "value": "3,7"} in pkg["env"]
    # the wheel's vertex extra goes in the trainer's requirements (pip installs each package URI alone);
    # TF 2.17 in the prebuilt image needs NumPy 1.x; tfadvisor's dependencies would bring NumPy 2
    reqs = spec["package"]["requirements"]
    assert reqs[:2] == ["numpy>=1.26", "scipy"] and reqs[-1] == "numpy<2"
    assert not [r for r in reqs if r.startswith("tfadvisor")]
    assert any(r.startswith("google-cloud-aiplatform[cloud_profiler]") for r in reqs)


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
    base = spec["customJob"]["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    assert base.startswith(f"gs://{BUCKET}/tfadvisor/c/")
    local = base.replace("gs://", "/gcs/", 1)
    assert f"{local}/code/aiplatform_custom_trainer_script-0.1.tar.gz" in command
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
            written["names"] = _put_profile(gcs, f"{base}/logs/", _job_id(job))

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
    # the default image: TensorFlow's own, as a custom container installing from the FUSE mount
    spec = pool["containerSpec"]
    assert spec["imageUri"] == "tensorflow/tensorflow:2.21.0"
    assert {"name": "TFADVISOR_STEPS", "value": "5,9"} in spec["env"]
    base = js["baseOutputDirectory"]["outputUriPrefix"]
    assert base.startswith(f"gs://{BUCKET}/tfadvisor/tfadvisor-train-")
    wheel_uri, uri = _package_uris(pool)
    assert wheel_uri == f"{base}/code/tfadvisor-{tfadvisor.__version__}-py3-none-any.whl"
    assert f"/gcs/{wheel_uri[5:]}[vertex]" in spec["command"][-1]

    # the package the job installs is in the bucket and holds the script and its requirements
    bucket, _, name = uri[len("gs://"):].partition("/")
    data = gcs.bucket(bucket).blob(name).download_as_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
        task = tar.extractfile(members["aiplatform_custom_trainer_script/task.py"]).read().decode()
        setup = tar.extractfile(members["setup.py"]).read().decode()
    assert task == script.read_text()
    assert '"pandas>=2"' in setup and "tfadvisor" not in setup
    assert spec["command"][-1].endswith("python3 -m aiplatform_custom_trainer_script.task")
    # the wheel is this very tfadvisor: same files as the package running here
    bucket, _, name = wheel_uri[len("gs://"):].partition("/")
    with zipfile.ZipFile(io.BytesIO(gcs.bucket(bucket).blob(name).download_as_bytes())) as whl:
        assert whl.read("tfadvisor/capture/vertex_job.py") == (ROOT / "tfadvisor/capture/vertex_job.py").read_bytes()
        assert "tfadvisor/_rules/10_input.toml" in whl.namelist()

    # followed until it ended, with progress on stderr
    assert len(fake.calls("GET", r"/customJobs/\d+$")) >= 2
    for state in ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"):
        assert state in result.stderr

    # downloaded where it was written, and readable
    job_id = _job_id(fake.jobs[next(iter(fake.jobs))])
    got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.xplane.pb"))
    assert got == sorted(f"plugins/profile/{job_id}/{n.rsplit('/', 1)[1]}" for n in written["names"])
    trace = tfadvisor.load(out)
    assert trace.summary()["events"] > 0
    assert f"file(s) of {len(got)} host(s) to {out}" in result.stderr


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
    _put_profile(gcs, f"{base}/logs", "777")
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
    _put_profile(gcs, f"gs://{BUCKET}/old/job-778/logs/", "778")
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
    assert f"job 779 wrote no tfadvisor profile under {base}/logs/" in line


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
    # the same job, but in its own directory: each submission gets a new one
    dry_base = described["customJob"]["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    real_base = create.body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"]
    assert dry_base != real_base and dry_base.rsplit("/", 1)[0] == real_base.rsplit("/", 1)[0]
    stamp_dry, stamp_real = dry_base.rsplit("/", 1)[1], real_base.rsplit("/", 1)[1]
    assert json.loads(json.dumps(create.body).replace(stamp_real, stamp_dry)) == described["customJob"]
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


# --- the right profile: this submission's, all its hosts ----------------------------------------------


def test_reused_display_name_never_shows_an_old_profile(gcs, fake, script, tmp_path):
    """A second job with the same display name that writes nothing: exit 2, not the first job's findings."""
    def first_job_writes(job: dict, state: str) -> None:
        if state == "JOB_STATE_RUNNING":
            _put_profile(gcs, job["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] + "/logs/", _job_id(job))

    fake.on_state = first_job_writes
    first = _invoke(*_submit_args(script, fake, tmp_path / "one", "--display-name", "same"))
    _assert_analysed(first, tmp_path / "one")
    fake.on_state = None  # the second job writes nothing
    second = _invoke(*_submit_args(script, fake, tmp_path / "two", "--display-name", "same"))
    assert second.exit_code == 2, second.output
    assert "wrote no tfadvisor profile" in second.stderr.strip().splitlines()[-1]
    assert "finding" not in second.stdout.lower() and not list((tmp_path / "two").rglob("*.xplane.pb"))
    bases = [c.body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] for c in fake.calls("POST", r"/customJobs$")]
    assert len(set(bases)) == 2
    packages = [_package_uris(c.body["jobSpec"]["workerPoolSpecs"][0])[-1] for c in fake.calls("POST", r"/customJobs$")]
    assert len(set(packages)) == 2  # nor does it reuse the first one's code


def test_all_replicas_analysed_as_one_run_and_foreign_profiles_left_out(gcs, fake, tmp_path):
    name = f"projects/{PROJECT}/locations/{REGION}/customJobs/880"
    base = f"gs://{BUCKET}/shared/job-880"
    logs = f"{base}/logs/"
    # each replica writes its own run directory (the same host name: a collision to resolve)
    _put_profile(gcs, logs, "880", run="2026_01_01_00_00_01", host="trainer", task="workerpool0-0")
    _put_profile(gcs, logs, "880", run="2026_01_01_00_00_02", host="trainer", task="workerpool1-0")
    # newer runs that are not this job's: a TensorBoard "Capture profile", another job's profile
    _put_profile(gcs, logs, None, run="2026_01_01_09_00_00", host="tb-capture")
    _put_profile(gcs, logs, "999", run="2026_01_01_09_00_01", host="other-job")
    fake.add_job(name, "JOB_STATE_SUCCEEDED", base_output_dir=base)
    out = tmp_path / "p"
    result = _invoke("--job", name, "--api-endpoint", fake.endpoint, "--anonymous", "--out", str(out))
    assert result.exit_code == 0, result.output
    from tfadvisor.io.discovery import find_runs

    (run,) = find_runs(str(out))
    assert sorted(Path(f).name for f in run.files) == ["trainer-workerpool1-0.xplane.pb", "trainer.xplane.pb"]
    assert tfadvisor.load(out).run_metadata["hosts"] == 2
    assert "skipped 2 profile run(s)" in result.stderr
    assert "2 host(s)" in result.stderr


# --- the packaged job, run for real ---------------------------------------------------------------------

JOB_SCRIPT = r'''
import os
import numpy as np
import tensorflow as tf
import tfadvisor
import tfadvisor.vertex

callback = tfadvisor.vertex.init()  # the window from TFADVISOR_STEPS, into AIP_TENSORBOARD_LOG_DIR
x = np.random.default_rng(0).random((160, 8), dtype=np.float32)
y = np.random.default_rng(1).random((160, 1), dtype=np.float32)
model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(1)])
model.compile("adam", "mse")
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0, callbacks=[callback])
print("TRAINED", type(callback).__name__, tfadvisor.__file__, flush=True)
'''


def _run_replicas(gcs, job: dict, work: Path, fuse: Path, log: dict) -> None:
    """What Vertex AI does with the job: fetch the packages its pool names, install them in a fresh
    environment, run the pool's command once per replica with the job's environment. The profile goes
    through the Cloud Storage FUSE mount (here a local directory, copied into the bucket afterwards)."""
    spec = job["jobSpec"]
    base = spec["baseOutputDirectory"]["outputUriPrefix"]
    pools = spec["workerPoolSpecs"]
    pkgs = work / "packages"
    pkgs.mkdir()
    local = []
    for uri in _package_uris(pools[0]):
        bucket, _, name = uri[len("gs://"):].partition("/")
        path = pkgs / name.rsplit("/", 1)[1]
        gcs.bucket(bucket).blob(name).download_to_filename(str(path))
        local.append(f"{path}[vertex]" if path.suffix == ".whl" else str(path))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # TensorFlow and the SDKs from this environment, not downloaded again: its site-packages (a venv's, when the
    # suite runs in one; --system-site-packages would give the base interpreter's) on the new venv's path.
    # A path line in a .pth runs none of that directory's own .pth files: this checkout's editable install
    # stays out, and the installed wheel is what runs.
    own = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                         text=True, check=True).stdout.strip()
    Path(own, "parent_env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip = subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation", *local],
                         capture_output=True, text=True, timeout=300)
    log["pip"] = pip.returncode, pip.stderr[-2000:]
    command = pools[0]["containerSpec"]["command"][-1]
    module = re.search(r"python3 -m (\S+)", command)[1]
    bucket = base[len("gs://"):].split("/", 1)[0]
    (fuse / bucket).mkdir(parents=True)
    cluster = {"workerpool0": ["replica-0:2222"], "workerpool1": ["replica-1:2222"]}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "TFADVISOR_", "GOOGLE_"))}
    env.update({e["name"]: e["value"] for e in pools[0]["containerSpec"]["env"]})
    env.update(CLOUD_ML_JOB_ID=job["name"].rsplit("/", 1)[1], AIP_TENSORBOARD_LOG_DIR=f"{base}/logs/",
               TFADVISOR_GCS_FUSE_ROOT=str(fuse), TF_CPP_MIN_LOG_LEVEL="2", NO_GCE_CHECK="true")
    log["replicas"] = []
    for pool, role in (("workerpool0", "chief"), ("workerpool1", "worker")):
        env["CLUSTER_SPEC"] = json.dumps({"cluster": cluster, "task": {"type": pool, "index": 0}})
        env["TF_CONFIG"] = json.dumps({"cluster": {"chief": cluster["workerpool0"], "worker": cluster["workerpool1"]},
                                       "task": {"type": role, "index": 0}})
        proc = subprocess.run([python, "-m", module], env=env, cwd=work, capture_output=True, text=True, timeout=300)
        log["replicas"].append((proc.returncode, proc.stdout, proc.stderr[-3000:]))
        time.sleep(1.1)  # the profiler names run directories by the second: one per replica
    for f in sorted((fuse / bucket).rglob("*")):
        if f.is_file():
            gcs.bucket(bucket).blob(f.relative_to(fuse / bucket).as_posix()).upload_from_filename(str(f))


@pytest.mark.slow
def test_packaged_job_runs_for_real_with_two_replicas(gcs, fake, tmp_path):
    pytest.importorskip("tensorflow")
    script = tmp_path / "train.py"
    script.write_text(JOB_SCRIPT)
    work, fuse = tmp_path / "job", tmp_path / "gcs"
    work.mkdir()
    done, log = threading.Event(), {}

    def job_runs(job: dict, state: str) -> None:
        if state == "JOB_STATE_RUNNING":
            def replicas():
                try:
                    _run_replicas(gcs, job, work, fuse, log)
                except BaseException as err:  # noqa: BLE001 - reported by the test below
                    log["error"] = repr(err)
                finally:
                    done.set()

            threading.Thread(target=replicas, daemon=True).start()

    fake.on_state = job_runs
    fake.ready = lambda job: done.is_set()  # RUNNING until both replicas have ended
    out = tmp_path / "out"
    result = _invoke(*_submit_args(script, fake, out, "--replica-count", "2", "--steps", "2,6",
                                   "--poll-seconds", "0.5"))
    assert "error" not in log, log
    assert log["pip"][0] == 0, log["pip"]
    for rc, stdout, stderr in log["replicas"]:
        assert rc == 0 and "TRAINED AdvisorCallback" in stdout, stderr
        assert str(work / "venv") in stdout  # the shipped wheel runs, not this checkout
    assert result.exit_code == 0, result.output
    from tfadvisor.io.discovery import find_runs

    (run,) = find_runs(str(out))  # both replicas, one multi-host run
    assert len(run.files) == 2
    meta = tfadvisor.load(out).run_metadata
    assert meta["hosts"] == 2 and meta["vertex"]["tasks"] == ["workerpool0-0", "workerpool1-0"]
    assert meta["steps"]["start"] == 2 and meta["steps"]["count"] == 4
    assert "of 2 host(s)" in result.stderr
    assert tfadvisor.analyze(out).metrics["steps_count"] == 4


# --- the stand-in rejects what the real API rejects ---------------------------------------------------


def _valid_job() -> dict:
    return {"displayName": "j", "jobSpec": {
        "workerPoolSpecs": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                             "containerSpec": {"imageUri": "tensorflow/tensorflow:2.21.0"}}],
        "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/x"}, "tensorboard": TB, "serviceAccount": SA}}


def _pool(job: dict, i: int = 0) -> dict:
    return job["jobSpec"]["workerPoolSpecs"][i]


def _second_pool(job: dict) -> dict:
    job["jobSpec"]["workerPoolSpecs"].append(json.loads(json.dumps(_pool(job))))
    return _pool(job, 1)


@pytest.mark.parametrize("break_it, status, message", [
    (lambda j: j.pop("displayName"), 400, "display_name is required"),
    (lambda j: j["jobSpec"].update(workerPoolSpecs=[]), 400, "at least one worker pool"),
    (lambda j: _pool(j).update(machineSpec={}), 400, "machine_type is required"),
    (lambda j: _pool(j).update(replicaCount="0"), 400, "replica_count must be positive"),
    (lambda j: _second_pool(j).update(replicaCount="0"), 400, "worker_pool_specs[1].replica_count must be positive"),
    (lambda j: _pool(j).update(replicaCount="2"), 400, "exactly one replica"),
    (lambda j: _pool(j)["machineSpec"].update(acceleratorType="NVIDIA_TESLA_T4"), 400, "accelerator_count"),
    (lambda j: _pool(j).pop("containerSpec"), 400, "exactly one of container_spec and python_package_spec"),
    (lambda j: _pool(j).update(containerSpec={}), 400, "exactly one of container_spec"),
    (lambda j: _pool(j).update(pythonPackageSpec={"executorImageUri": "x"}), 400, "exactly one of"),
    (lambda j: _pool(j).pop("containerSpec") and _pool(j).update(pythonPackageSpec={"executorImageUri": "x"}),
     400, "needs executor_image_uri, package_uris and python_module"),
    (lambda j: j["jobSpec"].pop("serviceAccount"), 400,
     "service_account must be specified when uploading to TensorBoard"),
    (lambda j: j["jobSpec"].update(tensorboard="tb-1"), 400, "invalid TensorBoard resource name"),
    (lambda j: j["jobSpec"].update(tensorboard=TB.replace(REGION, "europe-west4")), 400, "must be in the job's region"),
    (lambda j: j["jobSpec"].update(tensorboard=TB.replace("4242", "4243")), 404, "not found"),
    (lambda j: j["jobSpec"].update(baseOutputDirectory={"outputUriPrefix": "/tmp/x"}), 400, "Cloud Storage URI"),
    (lambda j: j["jobSpec"].update(baseOutputDirectory={"outputUriPrefix": "gs://eu-bucket/x"}), 400,
     "is in europe-west4, not in the job's region"),
])
def test_stand_in_rejects_what_the_real_api_rejects(break_it, status, message):
    import requests

    with FakeVertex(tensorboards={TB}, bucket_locations={"eu-bucket": "EUROPE-WEST4", BUCKET: "US"}) as f:
        url = f"{f.endpoint}/v1/projects/{PROJECT}/locations/{REGION}/customJobs"
        ok = requests.post(url, json=_valid_job(), timeout=10)
        assert ok.status_code == 200, ok.text  # the valid job (a multi-region US bucket is fine)
        job = _valid_job()
        break_it(job)
        bad = requests.post(url, json=job, timeout=10)
    assert bad.status_code == status, bad.text
    assert message in bad.json()["error"]["message"]
    assert len(f.jobs) == 1  # the bad one was not created


def test_tensorboard_in_another_region_is_one_line_before_any_call(script):
    result = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard",
                     TB.replace(REGION, "europe-west4"), "--service-account", SA, "--staging-bucket",
                     f"gs://{BUCKET}", "--dry-run")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "europe-west4" in line and REGION in line


def test_bucket_in_another_region_is_one_line_and_nothing_submitted(gcs, fake, script, tmp_path):
    bucket = gcs.create_bucket("eu-staging")
    bucket._patch_property("location", "EUROPE-WEST4")  # the emulator keeps the location only when patched
    bucket.patch()
    assert gcs.get_bucket("eu-staging").location == "EUROPE-WEST4"
    args = _submit_args(script, fake, tmp_path / "out")
    args[args.index("--staging-bucket") + 1] = "gs://eu-staging"
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert "gs://eu-staging" in line and "europe-west4" in line and REGION in line
    assert not fake.calls("POST", r"customJobs")


def test_requirements_files_markers_and_pip_options(script, tmp_path):
    inner = tmp_path / "base.txt"
    inner.write_text('scipy; python_version >= "3.10"\n')
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"-r {inner.name}\nnumpy>=1.26\n")
    result = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard", TB,
                     "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}", "--requirements", str(reqs),
                     "--network", "projects/123/global/networks/default", "--dry-run")
    assert result.exit_code == 0, result.output
    spec = json.loads(result.stdout)
    # -r is followed; double quotes in markers would end the string in the generated setup.py
    assert spec["package"]["requirements"][:2] == ["scipy; python_version >= '3.10'", "numpy>=1.26"]
    assert spec["customJob"]["jobSpec"]["network"] == "projects/123/global/networks/default"
    from tfadvisor.capture.vertex_job import JobRequest

    req = JobRequest(project=PROJECT, region=REGION, script=script, tensorboard=TB, service_account=SA,
                     staging_bucket=f"gs://{BUCKET}", display_name="d", requirements=spec["package"]["requirements"])
    (tmp_path / "pkg").mkdir()
    setup = Path(req._packager().make_package(str(tmp_path / "pkg"))).parent.parent / "setup.py"
    compile(setup.read_text(), str(setup), "exec")  # valid Python

    reqs.write_text("--extra-index-url https://example.org/simple\nnumpy\n")
    bad = _invoke("--project", PROJECT, "--region", REGION, "--script", str(script), "--tensorboard", TB,
                  "--service-account", SA, "--staging-bucket", f"gs://{BUCKET}", "--requirements", str(reqs),
                  "--dry-run")
    assert bad.exit_code == 2
    (line,) = bad.stderr.strip().splitlines()
    assert "--extra-index-url" in line and str(reqs) in line


def test_out_with_an_older_profile_is_refused(gcs, fake, tmp_path):
    name = f"projects/{PROJECT}/locations/{REGION}/customJobs/881"
    fake.add_job(name, "JOB_STATE_SUCCEEDED", base_output_dir=f"gs://{BUCKET}/old/job-881")
    _put_profile(gcs, f"gs://{BUCKET}/old/job-881/logs/", "881")
    out = tmp_path / "p"
    (out / "plugins" / "profile" / "old").mkdir(parents=True)
    (out / "plugins" / "profile" / "old" / "h.xplane.pb").write_bytes(b"")
    result = _invoke("--job", name, "--api-endpoint", fake.endpoint, "--anonymous", "--out", str(out))
    assert result.exit_code == 2
    assert f"--out {out} is not empty" in result.stderr.strip().splitlines()[-1]
