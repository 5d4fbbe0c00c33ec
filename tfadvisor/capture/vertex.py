"""``tfadvisor capture vertex``: run a training script as a Vertex AI custom job, then analyse its profile.

Submit: the script is packaged (the Vertex AI SDK's own script packager) and uploaded under the
job's base output directory, and a CustomJob is created with the TensorBoard instance and
service account attached; ``AIP_TENSORBOARD_LOG_DIR`` in the job is ``<base output dir>/logs/``.
The script calls ``tfadvisor.vertex.init()`` (see ``tfadvisor/vertex.py``), which writes the
profile there. The command follows the job's state, downloads the profile files when it ends
and prints the analysis. ``--job`` does the last two for a job that already exists;
``--dry-run`` prints the CustomJob it would create, touching nothing.

Every problem the user can fix is one line on stderr and exit code 2.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import typer

from tfadvisor.cli import fail
from tfadvisor.discovery import RUN_METADATA_FILE, XPLANE_SUFFIX
from tfadvisor.errors import one_line
from tfadvisor.keras import parse_window
from tfadvisor.vertex import DEFAULT_STEPS, STEPS_ENV

CPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
GPU_IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-gpu.2-17.py310:latest"
PREBUILT_IMAGE_MARKERS = ("docker.pkg.dev/vertex-ai/", "gcr.io/cloud-aiplatform/")
TFADVISOR_REQUIREMENT = "tfadvisor[vertex]"
EXTRA_HINT = "Vertex AI support is not installed: pip install 'tfadvisor[vertex]'"
CREDENTIALS_HINT = ("no Google Cloud credentials found: run `gcloud auth application-default login` "
                    "or set GOOGLE_APPLICATION_CREDENTIALS to a service account key file")
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
JOB_NAME = re.compile(r"^projects/([^/]+)/locations/([^/]+)/customJobs/([^/]+)$")
SUCCEEDED = "JOB_STATE_SUCCEEDED"
ENDED_BADLY = {"JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED", "JOB_STATE_PAUSED"}
ENDED = ENDED_BADLY | {SUCCEEDED, "JOB_STATE_PARTIALLY_SUCCEEDED"}


@dataclass
class JobRequest:
    """Everything the CustomJob is made of; one source for --dry-run and the real submission."""

    project: str
    region: str
    script: Path
    tensorboard: str
    service_account: str
    staging_bucket: str
    display_name: str
    container_uri: str = CPU_IMAGE
    requirements: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    machine_type: str = "n1-standard-4"
    accelerator_type: str | None = None
    accelerator_count: int = 0
    replica_count: int = 1
    steps: tuple[int, int] = DEFAULT_STEPS
    web_access: bool = False

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    @property
    def base_output_dir(self) -> str:
        """The job's base output directory; the job sees ``AIP_TENSORBOARD_LOG_DIR=<this>/logs/``."""
        return f"{self.staging_bucket.rstrip('/')}/tfadvisor/{self.display_name}"

    @property
    def package_uri(self) -> str:
        from google.cloud.aiplatform.utils import source_utils

        packager = source_utils._TrainingScriptPythonPackager
        return f"{self.base_output_dir}/code/{packager._ROOT_MODULE}-{packager._SETUP_PY_VERSION}.tar.gz"

    @property
    def module_name(self) -> str:
        return self._packager().module_name

    @property
    def prebuilt(self) -> bool:
        return any(m in self.container_uri for m in PREBUILT_IMAGE_MARKERS)

    def _packager(self):
        from google.cloud.aiplatform.utils import source_utils

        return source_utils._TrainingScriptPythonPackager(script_path=str(self.script),
                                                          requirements=list(self.requirements))

    def worker_pool_specs(self) -> list[dict[str, Any]]:
        """Chief pool, plus a worker pool with the other replicas (as ``from_local_script`` lays them out)."""
        env = [{"name": STEPS_ENV, "value": f"{self.steps[0]},{self.steps[1]}"}]
        machine: dict[str, Any] = {"machine_type": self.machine_type}
        if self.accelerator_type:
            machine.update(accelerator_type=self.accelerator_type, accelerator_count=self.accelerator_count or 1)
        if self.prebuilt:
            code = {"python_package_spec": {"executor_image_uri": self.container_uri,
                                            "package_uris": [self.package_uri],
                                            "python_module": self.module_name, "args": list(self.args),
                                            "env": env}}
        else:  # a custom image: install the package from the Cloud Storage FUSE mount, then run it
            local = self.package_uri.replace("gs://", "/gcs/", 1)
            run = shlex.join(["python3", "-m", self.module_name, *self.args])
            code = {"container_spec": {"image_uri": self.container_uri, "env": env, "command": [
                "sh", "-c", f"pip install --upgrade pip && pip3 install -q --user {shlex.quote(local)} && {run}"]}}
        disk = {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100}
        pools = [{"machine_spec": machine, "replica_count": 1, "disk_spec": disk, **code}]
        if self.replica_count > 1:
            pools.append({"machine_spec": dict(machine), "replica_count": self.replica_count - 1,
                          "disk_spec": dict(disk), **code})
        return pools

    def labels(self) -> dict[str, str]:
        return {"created-by": "tfadvisor"}

    def describe(self) -> dict[str, Any]:
        """What --dry-run prints: the create call's parent and body, and what goes into the package."""
        return {"parent": self.parent, "customJob": self.custom_job(),
                "package": {"script": str(self.script), "uri": self.package_uri, "module": self.module_name,
                            "requirements": list(self.requirements)}}

    def custom_job(self) -> dict[str, Any]:
        """The CustomJob as the create call sends it (REST JSON), for --dry-run."""
        from google.cloud.aiplatform import compat
        from google.protobuf import json_format

        types = compat.types
        job = types.custom_job.CustomJob(
            display_name=self.display_name,
            labels=self.labels(),
            job_spec=types.custom_job.CustomJobSpec(
                worker_pool_specs=self.worker_pool_specs(),
                base_output_directory=types.io.GcsDestination(output_uri_prefix=self.base_output_dir),
                service_account=self.service_account,
                tensorboard=self.tensorboard,
                enable_web_access=self.web_access,
            ),
        )
        return json_format.MessageToDict(type(job).pb(job))


# --- the command ---------------------------------------------------------------------------------


def register(app: typer.Typer) -> None:
    """Add ``vertex`` to the ``tfadvisor capture`` group."""
    app.command("vertex", context_settings={"allow_extra_args": True})(vertex)


def vertex(
    ctx: typer.Context,
    project: str | None = typer.Option(
        None, "--project", envvar="GOOGLE_CLOUD_PROJECT", help="Google Cloud project."),
    region: str | None = typer.Option(None, "--region", help="Vertex AI region, e.g. us-central1."),
    script: Path | None = typer.Option(
        None, "--script", exists=True, dir_okay=False, help="Training script; it calls tfadvisor.vertex.init()."),
    requirements: list[str] = typer.Option(
        [], "--requirements", help="Pip requirement, or a requirements file, for the script (repeatable)."),
    tfadvisor_package: str = typer.Option(
        TFADVISOR_REQUIREMENT, "--tfadvisor-package", help="How the job installs tfadvisor ('' if the image has it)."),
    container_uri: str | None = typer.Option(
        None, "--container-uri",
        help="Training image (default: Vertex AI's prebuilt TensorFlow 2.17 one, the GPU one with an accelerator)."),
    tensorboard: str | None = typer.Option(
        None, "--tensorboard", help="Vertex AI TensorBoard instance: projects/P/locations/R/tensorboards/ID, or ID."),
    service_account: str | None = typer.Option(
        None, "--service-account",
        help="Service account the job runs as (needs roles/storage.admin and roles/aiplatform.user)."),
    staging_bucket: str | None = typer.Option(
        None, "--staging-bucket", help="gs:// bucket (or folder) for the code and the job's output and profile."),
    machine_type: str = typer.Option("n1-standard-4", "--machine-type"),
    accelerator_type: str | None = typer.Option(None, "--accelerator-type", help="e.g. NVIDIA_TESLA_T4."),
    accelerator_count: int = typer.Option(0, "--accelerator-count", help="Per replica (default 1 with a type)."),
    replica_count: int = typer.Option(1, "--replica-count", min=1, help="Replicas (chief + workers)."),
    display_name: str | None = typer.Option(
        None, "--display-name", help="Job name, also its output folder (default: tfadvisor-<script>-<time>)."),
    steps: str = typer.Option(
        f"{DEFAULT_STEPS[0]},{DEFAULT_STEPS[1]}", "--steps",
        help="Step window start,stop the job profiles (TFADVISOR_STEPS, read by tfadvisor.vertex.init)."),
    web_access: bool = typer.Option(False, "--web-access", help="Enable interactive shell access to the job."),
    api_endpoint: str | None = typer.Option(
        None, "--api-endpoint", help="Vertex AI API endpoint (default: the region's); http://HOST:PORT: a stand-in."),
    anonymous: bool = typer.Option(
        False, "--anonymous",
        help="Send no credentials (local stand-ins: with --api-endpoint and STORAGE_EMULATOR_HOST)."),
    job: str | None = typer.Option(
        None, "--job", help="Analyse this existing job instead (projects/P/locations/R/customJobs/ID, or ID)."),
    out: Path | None = typer.Option(
        None, "--out", file_okay=False, help="Where to put the profile (default: a new temporary directory)."),
    poll_seconds: float = typer.Option(30.0, "--poll-seconds", min=0, help="How often to check the job."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the CustomJob as JSON; create nothing."),
) -> None:
    """Run a training script on Vertex AI with profiling, then analyse the profile it wrote.

    Arguments after `--` go to the script.
    """
    try:
        window = parse_window(steps)
    except ValueError as err:
        fail(f"--steps: {err}")
    try:
        import google.cloud.aiplatform  # noqa: F401
        import google.cloud.storage  # noqa: F401
    except ImportError:
        fail(EXTRA_HINT)
    if job and dry_run:
        fail("--dry-run describes a new job; it does not go with --job")
    if job:
        project, region, job = _job_name(job, project, region)
    else:
        request = _request(project, region, script, requirements, tfadvisor_package, container_uri, tensorboard,
                           service_account, staging_bucket, machine_type, accelerator_type, accelerator_count,
                           replica_count, display_name, window, web_access, list(ctx.args))
        if dry_run:
            typer.echo(json.dumps(request.describe(), indent=2))
            return
    try:
        _run(job or request, project, region, api_endpoint, anonymous, out, poll_seconds)
    except typer.Exit:
        raise
    except Exception as err:  # noqa: BLE001 - Google errors into one line; the rest goes on up
        message = _google_error(err)
        if message is None:
            raise
        fail(message)


def _request(project, region, script, requirements, tfadvisor_package, container_uri, tensorboard,
             service_account, staging_bucket, machine_type, accelerator_type, accelerator_count, replica_count,
             display_name, window, web_access, args) -> JobRequest:
    missing = [name for name, value in (("--project", project), ("--region", region), ("--script", script),
                                        ("--tensorboard", tensorboard), ("--service-account", service_account),
                                        ("--staging-bucket", staging_bucket)) if not value]
    if missing:
        fail(f"a new job needs {', '.join(missing)} (or --job to analyse an existing one)")
    if not staging_bucket.startswith("gs://"):
        fail(f"--staging-bucket must be a gs:// URI (got {staging_bucket!r})")
    if "/" not in tensorboard:
        tensorboard = f"projects/{project}/locations/{region}/tensorboards/{tensorboard}"
    elif not re.match(r"^projects/[^/]+/locations/[^/]+/tensorboards/[^/]+$", tensorboard):
        fail(f"--tensorboard: expected projects/P/locations/R/tensorboards/ID or an ID (got {tensorboard!r})")
    reqs = _requirements(requirements)
    image = container_uri or (GPU_IMAGE if accelerator_type else CPU_IMAGE)
    if tfadvisor_package and not any(_req_name(r) == "tfadvisor" for r in reqs):
        reqs.append(tfadvisor_package)
        reqs.extend(_image_pins(image))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = display_name or f"tfadvisor-{re.sub(r'[^a-z0-9-]+', '-', script.stem.lower()).strip('-')}-{stamp}"
    return JobRequest(
        project=project, region=region, script=script, tensorboard=tensorboard, service_account=service_account,
        staging_bucket=staging_bucket, display_name=name,
        container_uri=image, requirements=reqs,
        args=args, machine_type=machine_type, accelerator_type=accelerator_type,
        accelerator_count=accelerator_count, replica_count=replica_count, steps=window, web_access=web_access,
    )


def _requirements(values: list[str]) -> list[str]:
    """Requirement strings; a value naming an existing file is read as a requirements file."""
    out: list[str] = []
    for value in values:
        path = Path(value)
        if path.is_file():
            for line in path.read_text().splitlines():
                line = line.split(" #", 1)[0].strip()
                if line and not line.startswith(("#", "-")):
                    out.append(line)
        elif value.strip():
            out.append(value.strip())
    return out


def _image_pins(image: str) -> list[str]:
    """Pins that keep a prebuilt image's TensorFlow working once tfadvisor is installed next to it.

    TensorFlow < 2.18 is built against NumPy 1.x; tfadvisor's dependencies would otherwise bring
    NumPy 2 (newest pandas and numba), and ``import tensorflow`` fails in the job.
    """
    m = re.search(r"/tf-(?:cpu|gpu)\.2-(\d+)", image)
    return ["numpy<2"] if m and any(marker in image for marker in PREBUILT_IMAGE_MARKERS) and int(m[1]) < 18 else []


def _req_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _job_name(job: str, project: str | None, region: str | None) -> tuple[str, str, str]:
    m = JOB_NAME.match(job)
    if m:
        return m[1], m[2], job
    if "/" in job or not (project and region):
        fail(f"--job: give projects/P/locations/R/customJobs/ID, or an ID with --project and --region (got {job!r})")
    return project, region, f"projects/{project}/locations/{region}/customJobs/{job}"


# --- talking to Google Cloud -----------------------------------------------------------------------


def _credentials(anonymous: bool):
    if anonymous:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    import google.auth

    credentials, _ = google.auth.default(scopes=SCOPES)
    return credentials


def _run(target, project, region, api_endpoint, anonymous, out, poll_seconds) -> None:
    # the SDK's loggers (each at INFO, each with a handler) print its progress to stdout: keep stdout for
    # the findings; this command says the same on stderr
    loggers = [lg for name, lg in logging.root.manager.loggerDict.items()
               if name.startswith("google.cloud.aiplatform") and isinstance(lg, logging.Logger)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.level, logging.WARNING))
    try:
        _run_quietly(target, project, region, api_endpoint, anonymous, out, poll_seconds)
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _run_quietly(target, project, region, api_endpoint, anonymous, out, poll_seconds) -> None:
    from google.cloud import aiplatform, storage

    credentials = _credentials(anonymous)
    aiplatform.init(project=project, location=region, credentials=credentials, api_endpoint=api_endpoint,
                    api_transport="rest")
    gcs = storage.Client(project=project, credentials=credentials)
    if isinstance(target, JobRequest):
        job = _submit(target, gcs)
    else:
        job = aiplatform.CustomJob.get(target)
        _say(f"job {job.resource_name} ({job.display_name})")
    state = _follow(job, poll_seconds)
    base = job.gca_resource.job_spec.base_output_directory.output_uri_prefix
    logs = f"{base.rstrip('/')}/logs" if base else ""
    if state in ENDED_BADLY:
        error = job.gca_resource.error.message or "no error message"
        where = f"; its log directory may still hold a profile: tfadvisor analyze {logs}" if logs else ""
        fail(f"job {job.resource_name} ended {state}: {error}{where}")
    if not base:
        fail(f"job {job.resource_name} has no base output directory, so no AIP_TENSORBOARD_LOG_DIR "
             "and nothing to download")
    dest = Path(out) if out else Path(tempfile.mkdtemp(prefix="tfadvisor-vertex-"))
    files = download_profile(gcs, base, dest)
    if not files:
        fail(f"no profile under {logs}/ (no *{XPLANE_SUFFIX} in plugins/profile/): did the script call "
             "tfadvisor.vertex.init() and run past the profiled steps?")
    _say(f"downloaded {len(files)} file(s) to {dest}")
    _analyse(dest)


def _submit(request: JobRequest, gcs):
    from google.cloud import aiplatform

    with tempfile.TemporaryDirectory(prefix="tfadvisor-package-") as tmp:
        package = request._packager().make_package(tmp)
        bucket, blob = _split(request.package_uri)
        gcs.bucket(bucket).blob(blob).upload_from_filename(package)
    _say(f"uploaded {request.script.name} as {request.package_uri}")
    job = aiplatform.CustomJob(
        display_name=request.display_name,
        worker_pool_specs=request.worker_pool_specs(),
        base_output_dir=request.base_output_dir,
        labels=request.labels(),
        staging_bucket=request.staging_bucket,
        project=request.project,
        location=request.region,
    )
    job.submit(service_account=request.service_account, tensorboard=request.tensorboard,
               enable_web_access=request.web_access)
    _say(f"submitted {job.resource_name}; the profile goes to {request.base_output_dir}/logs/")
    try:
        from google.cloud.aiplatform.utils import console_utils

        _say(f"job: {console_utils.custom_job_console_uri(job.resource_name)}")
        _say(f"TensorBoard: {console_utils.custom_job_tensorboard_console_uri(request.tensorboard, job.resource_name)}")
    except Exception:  # noqa: BLE001 - links are a convenience
        pass
    return job


def _follow(job, poll_seconds: float, clock: Callable[[], float] = time.monotonic) -> str:
    """Poll the job until it ends, printing each new state; the final state's name."""
    start = clock()
    state = job.gca_resource.state.name  # as created or fetched: no call
    _say(f"{_elapsed(0)} {state}")
    try:
        while state not in ENDED:
            time.sleep(poll_seconds)
            last, state = state, job.state.name  # a fresh GET each time
            if state != last:
                _say(f"{_elapsed(clock() - start)} {state}")
        return state
    except KeyboardInterrupt:
        _say(f"stopped following; the job goes on. Later: tfadvisor capture vertex --job {job.resource_name}")
        raise typer.Exit(130) from None


def download_profile(gcs, base_output_dir: str, dest: Path) -> list[Path]:
    """Copy the profile files (``plugins/profile/**``) under the job's output dir into ``dest``."""
    bucket, prefix = _split(base_output_dir)
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    files = []
    for blob in gcs.list_blobs(bucket, prefix=prefix):
        rel = blob.name[len(prefix):]
        if "plugins/profile/" not in rel or not rel.endswith((XPLANE_SUFFIX, RUN_METADATA_FILE)):
            continue
        target = dest.joinpath(*rel.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        blob.download_to_filename(str(target))
        files.append(target)
    return files


def _analyse(directory: Path) -> None:
    from tfadvisor.api import analyze
    from tfadvisor.errors import TraceError
    from tfadvisor.report.terminal import print_result

    try:
        result = analyze(str(directory))
    except TraceError as err:
        fail(str(err))
    print_result(result)


def _google_error(err: Exception) -> str | None:
    """One line for the errors of Google's libraries a user can act on; None for the rest."""
    import requests
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth

    if isinstance(err, auth.DefaultCredentialsError):
        return CREDENTIALS_HINT
    if isinstance(err, auth.RefreshError):
        return (f"Google Cloud credentials could not be refreshed ({one_line(err)}): "
                "run `gcloud auth application-default login`")
    if isinstance(err, api.GoogleAPICallError):
        code = err.code
        status = f"{int(code)} {code.name}" if hasattr(code, "name") else str(code)
        text = re.sub(r"^[A-Z]+ \S+: ", "", one_line(err.message or err))  # the REST transport's "GET <url>: "
        hint = ("; you need roles/aiplatform.user and access to the bucket, the job's service account "
                "roles/aiplatform.user and roles/storage.admin") if code == 403 else ""
        return f"Google Cloud refused the call ({status}): {text}{hint}"
    if isinstance(err, (api.RetryError, requests.exceptions.ConnectionError)):
        cause = err.cause if isinstance(err, api.RetryError) and err.cause is not None else err
        return f"cannot reach Google Cloud: {one_line(cause)}"
    if isinstance(err, RuntimeError) and "Packaging of training script failed" in str(err):
        return f"could not package the script: {one_line(err)}"
    return None


# --- small helpers ---------------------------------------------------------------------------------


def _split(uri: str) -> tuple[str, str]:
    bucket, _, path = uri[len("gs://"):].partition("/")
    return bucket, path


def _say(message: str) -> None:
    typer.echo(f"tfadvisor: {message}", err=True)


def _elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


