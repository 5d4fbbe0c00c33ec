"""``tfadvisor capture vertex``: run a training script as a Vertex AI custom job, then analyse its profile.

Submit: each submission gets its own base output directory, ``<staging>/tfadvisor/<display name>/<UTC
time to the microsecond>`` (like the SDK's timestamped ones), so a reused display name shares neither
code nor profile with an earlier job. The script is packaged (the Vertex AI SDK's own script
packager) and uploaded to ``<base>/code/`` together with a wheel of the tfadvisor running here
(``tfadvisor/capture/wheel.py``; never looked up on a package index), and a CustomJob is created
with the TensorBoard instance and service account attached; ``AIP_TENSORBOARD_LOG_DIR`` in the job
is ``<base>/logs/``. The default image is TensorFlow's own ``tensorflow/tensorflow`` (a custom
container); a Vertex AI prebuilt image past its end of availability gets a warning. The script
calls ``tfadvisor.vertex.init()`` (see ``tfadvisor/capture/vertex.py``), which writes the profile there.

The command follows the job's state and, when it ends, downloads the profile runs whose
``tfadvisor_run.json`` names this job (not TensorBoard captures, nor other jobs' runs), every
replica's host in one multi-host run, and prints the analysis; a job that wrote none is one line and
exit 2. ``--job`` does the last two for a job that already exists; ``--dry-run`` prints the CustomJob
it would create, touching nothing.

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
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import typer

from tfadvisor._version import __version__
from tfadvisor.capture.vertex import DEFAULT_STEPS, STEPS_ENV
from tfadvisor.errors import fail, one_line
from tfadvisor.io.discovery import RUN_METADATA_FILE, XPLANE_SUFFIX

# TensorFlow's own public images (Docker Hub), run as custom containers: no end-of-availability date,
# and the TensorFlow tfadvisor is tested with. Vertex AI's prebuilt tf-cpu/tf-gpu.2-17 training images
# (the newest TensorFlow ones on its supported-frameworks page) end on 2026-07-11.
CPU_IMAGE = "tensorflow/tensorflow:2.21.0"
GPU_IMAGE = "tensorflow/tensorflow:2.21.0-gpu"
#: End of availability of Vertex AI's prebuilt TensorFlow training images (supported-frameworks page):
#: after it a job with the image does not start.
PREBUILT_END: dict[str, date] = {"2-12": date(2025, 6, 30), "2-13": date(2025, 7, 5), "2-14": date(2025, 9, 26),
                                 "2-17": date(2026, 7, 11)}
PREBUILT_IMAGE_MARKERS = ("docker.pkg.dev/vertex-ai/", "gcr.io/cloud-aiplatform/")
LOCAL_BUILD = "local"  # --tfadvisor-package default: ship a wheel of the tfadvisor running here
VERTEX_EXTRA = "vertex"
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
    network: str | None = None  # VPC network peered with Vertex AI: projects/NUMBER/global/networks/NAME
    ship_wheel: bool = False  # upload a wheel of this tfadvisor with the code, and install it in the job
    stamp: str = field(default_factory=lambda: submission_stamp())

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    @property
    def base_output_dir(self) -> str:
        """The job's base output directory, new for each submission (like the SDK's timestamped ones).

        The job sees ``AIP_TENSORBOARD_LOG_DIR=<this>/logs/``; the code package goes in ``<this>/code/``,
        so a second job with the same display name shares neither.
        """
        return f"{self.staging_bucket.rstrip('/')}/tfadvisor/{self.display_name}/{self.stamp}"

    @property
    def package_uri(self) -> str:
        from google.cloud.aiplatform.utils import source_utils

        packager = source_utils._TrainingScriptPythonPackager
        return f"{self.base_output_dir}/code/{packager._ROOT_MODULE}-{packager._SETUP_PY_VERSION}.tar.gz"

    @property
    def wheel_uri(self) -> str | None:
        """Where the wheel of this tfadvisor goes (``ship_wheel``), beside the code package."""
        if not self.ship_wheel:
            return None
        return f"{self.base_output_dir}/code/tfadvisor-{__version__}-py3-none-any.whl"

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
        wheel = self.wheel_uri
        if self.prebuilt:  # the wheel first: its dependencies come from the trainer's requirements
            code = {"python_package_spec": {"executor_image_uri": self.container_uri,
                                            "package_uris": ([wheel] if wheel else []) + [self.package_uri],
                                            "python_module": self.module_name, "args": list(self.args),
                                            "env": env}}
        else:  # a custom image: install the packages from the Cloud Storage FUSE mount, then run them
            local = [u.replace("gs://", "/gcs/", 1) for u in ([wheel] if wheel else []) + [self.package_uri]]
            if wheel:
                local[0] += f"[{VERTEX_EXTRA}]"
            run = shlex.join(["python3", "-m", self.module_name, *self.args])
            code = {"container_spec": {"image_uri": self.container_uri, "env": env, "command": [
                "sh", "-c", f"pip install --upgrade pip && pip3 install -q --user {shlex.join(local)} && {run}"]}}
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
                            "requirements": list(self.requirements), "tfadvisor_wheel": self.wheel_uri}}

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
                network=self.network or "",
            ),
        )
        return json_format.MessageToDict(type(job).pb(job))


def submission_stamp(now: datetime | None = None) -> str:
    """``2026-11-23-043012-123456``: UTC time to the microsecond, for one submission's directory."""
    return (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d-%H%M%S-%f")


def _request(project, region, script, requirements, tfadvisor_package, container_uri, tensorboard,
             service_account, staging_bucket, machine_type, accelerator_type, accelerator_count, replica_count,
             display_name, window, web_access, args, network=None) -> JobRequest:
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
    tb_region = tensorboard.split("/")[3]
    if tb_region != region:
        fail(f"--tensorboard {tensorboard} is in {tb_region}, the job in --region {region}: Vertex AI needs them in "
             "the same region")
    if network and not re.match(r"^projects/[^/]+/global/networks/[^/]+$", network):
        fail(f"--network: expected projects/PROJECT_NUMBER/global/networks/NAME (got {network!r})")
    reqs = _requirements(requirements)
    image = container_uri or (GPU_IMAGE if accelerator_type else CPU_IMAGE)
    late = image_past_its_date(image)
    if late:
        _say(f"warning: {late}")
    ship = tfadvisor_package == LOCAL_BUILD and not any(_req_name(r) == "tfadvisor" for r in reqs)
    if ship:
        if any(m in image for m in PREBUILT_IMAGE_MARKERS):  # pip installs each package URI alone
            reqs.extend(_extra_requirements(VERTEX_EXTRA))
        reqs.extend(_image_pins(image))
    elif tfadvisor_package and tfadvisor_package != LOCAL_BUILD and not any(_req_name(r) == "tfadvisor"
                                                                             for r in reqs):
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
        ship_wheel=ship, network=network,
    )


def image_past_its_date(image: str, today: date | None = None) -> str | None:
    """Why a Vertex AI prebuilt TensorFlow training image will not start today; None when it may."""
    m = re.search(r"/training/tf-(?:cpu|gpu)\.(2-(\d+))", image)
    if not m or not any(marker in image for marker in PREBUILT_IMAGE_MARKERS):
        return None
    today = today or datetime.now(timezone.utc).date()
    end = PREBUILT_END.get(m[1])
    if end is None and int(m[2]) < 17:  # older than the newest one with a date: ended before it
        end = PREBUILT_END["2-17"]
    if end is None or today <= end:
        return None
    return (f"{image} reached its end of availability on {end.isoformat()} (Vertex AI's supported-frameworks "
            f"page): the job may not start; the default is {CPU_IMAGE} (or give a newer --container-uri)")


def _requirements(values: list[str]) -> list[str]:
    """Requirement strings; a value naming an existing file is read as a requirements file.

    ``-r``/``--requirement`` lines are followed. Other pip options (``--extra-index-url``, ``-c``,
    ``-e`` ...) cannot reach the job's pip through the package: one line, exit 2. Double quotes
    become single ones (the generated ``setup.py`` quotes each requirement with double quotes).
    """
    out: list[str] = []
    for value in values:
        path = Path(value)
        if path.is_file():
            out.extend(_requirements_file(path, set()))
        elif value.strip():
            out.append(value.strip().replace('"', "'"))
    return out


def _requirements_file(path: Path, seen: set[Path]) -> list[str]:
    path = path.resolve()
    if path in seen:
        return []
    seen.add(path)
    out: list[str] = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^(?:-r|--requirement)(?:\s+|=)(\S+)$", line)
        if m:
            inner = (path.parent / m[1]) if not Path(m[1]).is_absolute() else Path(m[1])
            if not inner.is_file():
                fail(f"--requirements {path}:{number}: {m[1]} is not a file")
            out.extend(_requirements_file(inner, seen))
        elif line.startswith("-"):
            fail(f"--requirements {path}:{number}: pip option {line.split()[0]} cannot be passed to the job's pip; "
                 "use plain requirements (or an image that has the packages: --container-uri)")
        else:
            out.append(line.replace('"', "'"))
    return out


def _extra_requirements(extra: str) -> list[str]:
    """tfadvisor's requirements for ``extra`` (pyproject.toml), as plain requirement strings."""
    from tfadvisor.capture.wheel import requirements

    out = []
    for r in requirements():
        req, _, marker = r.partition(";")
        if re.search(rf"extra == '{re.escape(extra)}'", marker):
            out.append(req.strip())
    return out


def _local_pins() -> list[str]:
    """The versions of protobuf and the Google libraries installed here, next to this TensorFlow."""
    from importlib import metadata

    out = []
    for name in ("protobuf", "google-cloud-aiplatform", "google-cloud-storage", "google-api-core", "proto-plus"):
        try:
            out.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return out


def _image_pins(image: str) -> list[str]:
    """Pins that keep a prebuilt image's TensorFlow working once tfadvisor is installed next to it.

    TensorFlow < 2.18 is built against NumPy 1.x; tfadvisor's dependencies would otherwise bring
    NumPy 2 (newest pandas), and ``import tensorflow`` fails in the job.
    """
    local = re.fullmatch(r"(?:docker\.io/)?tensorflow/tensorflow:(\d+\.\d+\.\d+)(?:-gpu)?", image)
    if local:  # the TensorFlow running here: the set of versions that works beside it here (resolved here)
        try:
            from importlib import metadata

            if metadata.version("tensorflow" if _has("tensorflow") else "tensorflow-cpu") == local[1]:
                return _local_pins()
        except Exception:  # noqa: BLE001 - no TensorFlow here: no pins known to work
            return []
        return []
    m = re.search(r"/tf-(?:cpu|gpu)\.2-(\d+)", image)
    return ["numpy<2"] if m and any(marker in image for marker in PREBUILT_IMAGE_MARKERS) and int(m[1]) < 18 else []


def _has(dist: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(dist)
    except metadata.PackageNotFoundError:
        return False
    return True


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
    job_id = job.resource_name.rsplit("/", 1)[-1]
    if out and Path(out).exists() and any(Path(out).iterdir()):
        fail(f"--out {out} is not empty: give a new directory, so that no older profile is analysed")
    dest = Path(out) if out else Path(tempfile.mkdtemp(prefix="tfadvisor-vertex-"))
    got = download_profile(gcs, base, dest, job_id)
    if got.others:
        _say(f"skipped {len(got.others)} profile run(s) not written by tfadvisor in job {job_id} "
             f"(TensorBoard captures, other jobs): {', '.join(got.others[:3])}")
    if not got.files:
        fail(f"job {job_id} wrote no tfadvisor profile under {logs}/ (no run with *{XPLANE_SUFFIX} and a "
             f"{RUN_METADATA_FILE} naming the job): did the script call tfadvisor.vertex.init() and run past the "
             "profiled steps?")
    _say(f"downloaded {len(got.files)} file(s) of {len(got.hosts)} host(s) to {dest}")
    _analyse(dest)


def _submit(request: JobRequest, gcs):
    from google.cloud import aiplatform

    _check_bucket_region(gcs, request)
    with tempfile.TemporaryDirectory(prefix="tfadvisor-package-") as tmp:
        package = request._packager().make_package(tmp)
        bucket, blob = _split(request.package_uri)
        gcs.bucket(bucket).blob(blob).upload_from_filename(package)
        if request.wheel_uri:
            from tfadvisor.capture.wheel import build_wheel

            wheel = build_wheel(tmp)
            bucket, blob = _split(request.wheel_uri)
            gcs.bucket(bucket).blob(blob).upload_from_filename(str(wheel))
            _say(f"uploaded this tfadvisor as {request.wheel_uri}")
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
               enable_web_access=request.web_access, network=request.network)
    _say(f"submitted {job.resource_name}; the profile goes to {request.base_output_dir}/logs/")
    try:
        from google.cloud.aiplatform.utils import console_utils

        _say(f"job: {console_utils.custom_job_console_uri(job.resource_name)}")
        _say(f"TensorBoard: {console_utils.custom_job_tensorboard_console_uri(request.tensorboard, job.resource_name)}")
    except Exception:  # noqa: BLE001 - links are a convenience
        pass
    return job


MULTI_REGIONS = {"us": "us-", "eu": "europe-", "asia": "asia-"}


def _check_bucket_region(gcs, request: JobRequest) -> None:
    """The staging bucket must be in the job's region (or a multi-region holding it): one line, exit 2."""
    name = _split(request.staging_bucket)[0]
    location = (gcs.get_bucket(name).location or "").lower()
    region = request.region.lower()
    if location and location != region and not region.startswith(MULTI_REGIONS.get(location, "-")):
        fail(f"--staging-bucket gs://{name} is in {location}, the job in --region {request.region}: Vertex AI needs "
             "the bucket in the job's region (or a multi-region holding it)")


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


@dataclass
class Download:
    files: list[Path] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)  # host file names (without .xplane.pb), as saved
    others: list[str] = field(default_factory=list)  # gs:// run directories left out


def download_profile(gcs, base_output_dir: str, dest: Path, job_id: str) -> Download:
    """Download the profile runs job ``job_id`` wrote under its output dir, as one multi-host run.

    A run counts when its ``tfadvisor_run.json`` names the job (``vertex.job_id``, written by
    ``tfadvisor.vertex.init``): profiles captured from TensorBoard, by a stock callback or by
    another job in the same tree are left out. Each replica writes its own run directory; their
    host files (and system samples) go into ``dest/plugins/profile/<job_id>/`` together, renamed
    ``<host>-<task>`` where two replicas have the same host name, with one merged metadata file.
    """
    bucket, prefix = _split(base_output_dir)
    prefix = prefix.rstrip("/") + "/" if prefix else ""
    runs: dict[str, list] = {}
    for blob in gcs.list_blobs(bucket, prefix=prefix):
        rel = blob.name[len(prefix):]
        if "plugins/profile/" in rel and "/" in rel:
            runs.setdefault(rel.rsplit("/", 1)[0], []).append(blob)
    got = Download()
    target = dest / "plugins" / "profile" / job_id
    merged: dict[str, Any] = {}
    tasks: list[str] = []
    for run, blobs in sorted(runs.items()):
        by_name = {b.name.rsplit("/", 1)[-1]: b for b in blobs}
        meta = _job_metadata(by_name.get(RUN_METADATA_FILE))
        hosts = [n for n in by_name if n.endswith(XPLANE_SUFFIX)]
        if not hosts:
            continue
        if str((meta.get("vertex") or {}).get("job_id")) != str(job_id):
            got.others.append(f"gs://{bucket}/{prefix}{run}")
            continue
        task = str((meta.get("vertex") or {}).get("task") or f"run{len(tasks)}")
        tasks.append(task)
        target.mkdir(parents=True, exist_ok=True)
        for name in sorted(hosts):
            host = name[: -len(XPLANE_SUFFIX)]
            saved = host if host not in got.hosts else f"{host}-{task}"
            got.hosts.append(saved)
            path = target / f"{saved}{XPLANE_SUFFIX}"
            by_name[name].download_to_filename(str(path))
            got.files.append(path)
            samples = by_name.get(f"tfadvisor_system.{host}.npz")
            if samples is not None:
                path = target / f"tfadvisor_system.{saved}.npz"
                samples.download_to_filename(str(path))
                got.files.append(path)
        if not merged or task.endswith("-0") and task.startswith("workerpool0"):
            merged = {**merged, **meta} if merged else dict(meta)
    if got.files:
        merged["host_names"] = list(got.hosts)
        merged["hosts"] = len(got.hosts)
        merged["vertex"] = {**(merged.get("vertex") or {}), "tasks": tasks}
        path = target / RUN_METADATA_FILE
        path.write_text(json.dumps(merged, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
        got.files.append(path)
    return got


def _job_metadata(blob) -> dict[str, Any]:
    if blob is None:
        return {}
    try:
        data = json.loads(blob.download_as_bytes() or b"{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


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


