"""A local stand-in for the few Vertex AI REST calls tfadvisor's Vertex support makes.

It speaks the JSON the SDK's REST transport sends and parses (camelCase protobuf JSON), on
127.0.0.1 only, and records every request. Point the SDK at it with::

    aiplatform.init(project=..., location=..., api_endpoint=fake.endpoint, api_transport="rest",
                    credentials=AnonymousCredentials())

Calls served:
- CustomJob create (``POST /v1/projects/P/locations/L/customJobs``) and get (``GET /v1/<job name>``);
  each get moves the job one step along its script of states (``job_script``), calling ``on_state``
  as it enters each state, so a test can write the job's output at the right moment.
- TensorBoard get (``GET /v1/<tensorboard name>``) and TensorBoard experiment create/get, which
  ``cloud_profiler.init()`` calls from inside a job.
Anything else answers 404 in the Google error shape, and is recorded too.

A CustomJob create is checked as the real API checks it (400 INVALID_ARGUMENT, or 404 for a
TensorBoard that does not exist), by these documented rules (``JOB_RULES``; each has a test in
tests/test_vertex_capture.py):

- ``displayName`` is set; ``jobSpec.workerPoolSpecs`` has at least one pool;
- each pool has a ``machineSpec.machineType``, a ``replicaCount`` >= 1 (the first pool, the chief,
  exactly 1), an ``acceleratorCount`` >= 1 with an ``acceleratorType``, and exactly one of
  ``containerSpec`` (with ``imageUri``) and ``pythonPackageSpec`` (with ``executorImageUri``,
  ``packageUris`` and ``pythonModule``);
- a ``tensorboard`` needs a ``serviceAccount`` ("service_account must be specified when uploading
  to TensorBoard"), is a TensorBoard of the job's project and region, and exists (``tensorboards``);
- ``baseOutputDirectory`` is a gs:// URI, and its bucket, where its location is known
  (``bucket_locations``), is in the job's region (or a multi-region containing it).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_VERSION = r"/v1(?:beta1)?"
_LOCATION = r"projects/[^/]+/locations/[^/]+"
_CREATE_JOB = re.compile(rf"^{_VERSION}/({_LOCATION})/customJobs$")
_JOB = re.compile(rf"^{_VERSION}/({_LOCATION}/customJobs/[^/:]+)$")
_TENSORBOARD = re.compile(rf"^{_VERSION}/({_LOCATION}/tensorboards/[^/:]+)$")
_EXPERIMENTS = re.compile(rf"^{_VERSION}/({_LOCATION}/tensorboards/[^/:]+)/experiments$")
_EXPERIMENT = re.compile(rf"^{_VERSION}/({_LOCATION}/tensorboards/[^/:]+/experiments/[^/:]+)$")

SUCCEEDED = ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]
FAILED = ["JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_FAILED"]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any


@dataclass
class FakeVertex:
    """The stand-in server; use as a context manager or call start()/stop()."""

    job_script: list[str] = field(default_factory=lambda: list(SUCCEEDED))
    job_error: str = "The replica workerpool0-0 exited with a non-zero status of 1."
    tensorboard_bucket_prefix: str = "tb-blobs/tensorboard-1"
    on_state: Callable[[dict, str], None] | None = None
    ready: Callable[[dict], bool] | None = None  # a RUNNING job stays RUNNING until this says True
    tensorboards: set[str] | None = None  # names that exist; None: any well-formed name exists
    bucket_locations: dict[str, str] = field(default_factory=dict)  # bucket -> location, e.g. "US-CENTRAL1"
    requests: list[Recorded] = field(default_factory=list)
    jobs: dict[str, dict] = field(default_factory=dict)
    experiments: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._ids = itertools.count(1000)
        self._steps: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # ---- life cycle -------------------------------------------------------------------------
    def start(self) -> FakeVertex:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _answer(self, method: str) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with fake._lock:
                    fake.requests.append(Recorded(method, parts.path, parse_qs(parts.query), body))
                    status, payload = fake._route(method, parts.path, parse_qs(parts.query), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

            def do_DELETE(self):
                self._answer("DELETE")

            def do_PATCH(self):
                self._answer("PATCH")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-vertex", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeVertex:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        """What to give ``aiplatform.init(api_endpoint=...)``: the scheme keeps the transport on plain HTTP."""
        return f"http://127.0.0.1:{self.port}"

    # ---- helpers for tests ------------------------------------------------------------------
    def add_job(self, name: str, state: str, *, base_output_dir: str = "", error: str = "",
                script: list[str] | None = None) -> dict:
        """Put an existing job in the store (for ``--job``); gets after the first go through ``script``."""
        job = {"name": name, "displayName": name.rsplit("/", 1)[-1], "state": state,
               "jobSpec": {"workerPoolSpecs": []}}
        if base_output_dir:
            job["jobSpec"]["baseOutputDirectory"] = {"outputUriPrefix": base_output_dir}
        if error:
            job["error"] = {"code": 13, "message": error}
        with self._lock:
            self.jobs[name] = job
            self._steps[name] = [state, *(script or [])]
        return job

    def calls(self, method: str, pattern: str) -> list[Recorded]:
        """Recorded requests whose path matches ``pattern`` (a regex)."""
        return [r for r in self.requests if r.method == method and re.search(pattern, r.path)]

    # ---- routing ----------------------------------------------------------------------------
    def _route(self, method: str, path: str, query: dict, body: Any) -> tuple[int, dict]:
        if method == "POST" and (m := _CREATE_JOB.match(path)):
            problem = self.check_job(m[1], body or {})
            if problem is not None:
                return problem
            job = dict(body or {})
            job["name"] = f"{m[1]}/customJobs/{next(self._ids)}"
            job["createTime"] = "2026-01-01T00:00:00Z"
            self._steps[job["name"]] = list(self.job_script)
            self.jobs[job["name"]] = job
            self._advance(job)
            return 200, job
        if method == "GET" and (m := _JOB.match(path)):
            job = self.jobs.get(m[1])
            if job is None:
                return _error(404, f"CustomJob {m[1]} not found", "NOT_FOUND")
            self._advance(job)
            return 200, job
        if method == "GET" and (m := _TENSORBOARD.match(path)):
            return 200, {"name": m[1], "displayName": "tensorboard",
                         "blobStoragePathPrefix": self.tensorboard_bucket_prefix}
        if method == "POST" and (m := _EXPERIMENTS.match(path)):
            ids = query.get("tensorboardExperimentId") or query.get("tensorboard_experiment_id") or ["x"]
            name = f"{m[1]}/experiments/{ids[0]}"
            if name in self.experiments:
                return _error(409, f"{name} already exists", "ALREADY_EXISTS")
            self.experiments[name] = {**(body or {}), "name": name}
            return 200, self.experiments[name]
        if method == "GET" and (m := _EXPERIMENT.match(path)):
            if m[1] in self.experiments:
                return 200, self.experiments[m[1]]
            return _error(404, f"{m[1]} not found", "NOT_FOUND")
        return _error(404, f"the stand-in does not serve {method} {path}", "NOT_FOUND")

    def check_job(self, parent: str, job: dict) -> tuple[int, dict] | None:
        """The real API's checks of a CustomJob create (see the module docs); None when it passes."""
        region = parent.rsplit("/", 1)[1]
        project = parent.split("/")[1]
        spec = job.get("jobSpec") or {}
        if not job.get("displayName"):
            return _invalid("display_name is required")
        pools = spec.get("workerPoolSpecs") or []
        if not pools:
            return _invalid("job_spec.worker_pool_specs must have at least one worker pool")
        for i, pool in enumerate(pools):
            where = f"job_spec.worker_pool_specs[{i}]"
            machine = pool.get("machineSpec") or {}
            if not machine.get("machineType"):
                return _invalid(f"{where}.machine_spec.machine_type is required")
            if machine.get("acceleratorType") and int(machine.get("acceleratorCount") or 0) < 1:
                return _invalid(f"{where}.machine_spec.accelerator_count must be positive with an accelerator_type")
            count = int(pool.get("replicaCount") or 0)
            if count < 1:
                return _invalid(f"{where}.replica_count must be positive")
            if i == 0 and count != 1:
                return _invalid("the first worker pool (the chief) must have exactly one replica")
            container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
            if bool(container) == bool(package):
                return _invalid(f"{where}: exactly one of container_spec and python_package_spec must be set")
            if container and not container.get("imageUri"):
                return _invalid(f"{where}.container_spec.image_uri is required")
            if package and not (package.get("executorImageUri") and package.get("packageUris")
                                and package.get("pythonModule")):
                return _invalid(f"{where}.python_package_spec needs executor_image_uri, package_uris and "
                                "python_module")
        tensorboard = spec.get("tensorboard")
        if tensorboard:
            if not spec.get("serviceAccount"):
                return _invalid("service_account must be specified when uploading to TensorBoard")
            m = re.fullmatch(r"projects/([^/]+)/locations/([^/]+)/tensorboards/[^/]+", tensorboard)
            if not m:
                return _invalid(f"invalid TensorBoard resource name: {tensorboard}")
            if m[2] != region:
                return _invalid(f"TensorBoard {tensorboard} must be in the job's region {region}")
            if m[1] != project or (self.tensorboards is not None and tensorboard not in self.tensorboards):
                return _error(404, f"Tensorboard {tensorboard} not found", "NOT_FOUND")
        base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
        if base is not None:
            if not base.startswith("gs://"):
                return _invalid(f"base_output_directory must be a Cloud Storage URI: {base}")
            location = self.bucket_locations.get(base[len("gs://"):].split("/", 1)[0], "").lower()
            if location and location != region and not region.startswith(_MULTI_REGION.get(location, "-")):
                return _invalid(f"the bucket of {base} is in {location}, not in the job's region {region}")
        return None

    def _advance(self, job: dict) -> None:
        """Move the job to the next state of its script; the last state stays."""
        steps = self._steps.get(job["name"]) or []
        if not steps:
            return
        if job.get("state") == "JOB_STATE_RUNNING" and self.ready is not None and not self.ready(job):
            return
        state = steps.pop(0)
        if state != job.get("state"):
            job["state"] = state
            if state == "JOB_STATE_FAILED":
                job["error"] = {"code": 13, "message": self.job_error}
            if self.on_state is not None:
                self.on_state(job, state)


_MULTI_REGION = {"us": "us-", "eu": "europe-", "asia": "asia-"}


def _invalid(message: str) -> tuple[int, dict]:
    return _error(400, message, "INVALID_ARGUMENT")


def _error(code: int, message: str, status: str) -> tuple[int, dict]:
    return code, {"error": {"code": code, "message": message, "status": status}}
