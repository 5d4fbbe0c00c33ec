"""Inside a Vertex AI training job: keep the TensorBoard Profiler tab working and record tfadvisor's profile.

In the training script::

    import tfadvisor.vertex

    callback = tfadvisor.vertex.init()  # steps: `tfadvisor capture vertex --steps`, default 10,20
    model.fit(dataset, epochs=3, callbacks=[callback])

In a Vertex AI custom job (``CLOUD_ML_JOB_ID`` is set) ``init`` starts the profiler service of
the Vertex AI SDK (``cloud_profiler.init()``, so "Capture profile" in the TensorBoard Profile tab
works, target ``workerpool0-0``) and returns an ``AdvisorCallback`` that profiles the step window
into the job's TensorBoard log directory (``AIP_TENSORBOARD_LOG_DIR``), where
``tfadvisor capture vertex`` downloads it from when the job ends. Outside Vertex AI it logs one
line and returns a callback that does nothing, so the same script runs anywhere.

Nothing here raises into training: every problem is a warning and a do-nothing callback.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from tfadvisor.errors import one_line

logger = logging.getLogger("tfadvisor.vertex")

JOB_ID_ENV = "CLOUD_ML_JOB_ID"  # set in every Vertex AI custom job; cloud_profiler checks it too
LOGDIR_ENV = "AIP_TENSORBOARD_LOG_DIR"  # <base output dir>/logs/, set when the job has a base output dir
STEPS_ENV = "TFADVISOR_STEPS"  # "10,20": the window, set by `tfadvisor capture vertex --steps`
DEFAULT_STEPS = (10, 20)
GCS_FUSE_ROOT = "/gcs"  # Vertex AI mounts Cloud Storage buckets here (Cloud Storage FUSE)
FUSE_ROOT_ENV = "TFADVISOR_GCS_FUSE_ROOT"  # another mount point (a local stand-in for the mount, in tests)
PROFILER_HINT = "pip install 'google-cloud-aiplatform[cloud_profiler]' (or 'tfadvisor[vertex]')"

_profiler_service_started = False


def in_vertex_job(environ: dict[str, str] | None = None) -> bool:
    """Whether this process runs in a Vertex AI training job."""
    env = os.environ if environ is None else environ
    return bool(env.get(JOB_ID_ENV))


def job_logdir(environ: dict[str, str] | None = None, fuse_root: str | None = None) -> str | None:
    """The job's TensorBoard log directory, as a local Cloud Storage FUSE path when mounted.

    Through the mount (``/gcs/<bucket>/...``) plain file I/O works, whatever TensorFlow's own
    ``gs://`` support; the objects written are the same.
    """
    env = os.environ if environ is None else environ
    uri = (env.get(LOGDIR_ENV) or "").strip()
    if not uri:
        return None
    if uri.startswith("gs://"):
        bucket, _, rest = uri[len("gs://") :].partition("/")
        mounted = os.path.join(fuse_root or env.get(FUSE_ROOT_ENV) or GCS_FUSE_ROOT, bucket)
        if bucket and os.path.isdir(mounted):
            return os.path.join(mounted, rest) if rest else mounted
    return uri


def start_profiler_service() -> bool:
    """``cloud_profiler.init()`` once per process; False (after a warning) when it cannot run.

    The SDK starts the TensorFlow profiler server on ``AIP_TF_PROFILER_PORT`` and a small web
    server on ``AIP_HTTP_HANDLER_PORT`` that Vertex AI TensorBoard calls for "Capture profile".
    It needs the job to run with a TensorBoard instance and a service account; without them it
    only logs warnings and starts nothing.
    """
    global _profiler_service_started
    if _profiler_service_started:
        return True
    port = os.environ.get("AIP_TF_PROFILER_PORT")
    if not (port and os.environ.get("AIP_TENSORBOARD_RESOURCE_NAME")):
        # cloud_profiler.init() only logs warnings and starts nothing without these
        logger.warning("TensorBoard Profiler not started: the job has no %s (the job needs a TensorBoard instance "
                       "and a service account); tfadvisor's own capture goes on",
                       "AIP_TF_PROFILER_PORT" if not port else "AIP_TENSORBOARD_RESOURCE_NAME")
        return False
    try:
        from google.cloud.aiplatform.training_utils import cloud_profiler
    except ImportError as err:
        logger.warning("TensorBoard Profiler not started: %s (%s)", PROFILER_HINT, err)
        return False
    except Exception as err:  # noqa: BLE001 - e.g. a tensorboard-plugin-profile built for another protobuf/TF
        logger.warning("TensorBoard Profiler not started: the SDK's cloud_profiler does not load here "
                       "(%s: %s); tfadvisor's own capture goes on", type(err).__name__, one_line(err))
        return False
    try:
        cloud_profiler.init()
    except Exception as err:  # noqa: BLE001
        logger.warning("TensorBoard Profiler not started: cloud_profiler.init() failed (%s: %s)",
                       type(err).__name__, one_line(err))
        return False
    _profiler_service_started = True
    logger.info("TensorBoard Profiler service started on port %s (capture target workerpool0-0)", port)
    return True


def job_facts(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """What the run metadata should say about the job: id, task, TensorBoard."""
    env = os.environ if environ is None else environ
    facts: dict[str, Any] = {"platform": "vertex-ai", "job_id": env.get(JOB_ID_ENV)}
    for key, name in (("tensorboard", "AIP_TENSORBOARD_RESOURCE_NAME"), ("log_dir", LOGDIR_ENV)):
        if env.get(name):
            facts[key] = env[name]
    spec = env.get("CLUSTER_SPEC")
    if spec:
        try:
            task = json.loads(spec).get("task") or {}
            facts["task"] = f"{task.get('type', '')}-{task.get('index', '')}"
        except (ValueError, AttributeError):
            pass
    return facts


def init(
    steps: Any = None,
    *,
    logdir: str | None = None,
    tensorboard_profiler: bool = True,
    **callback_options: Any,
):
    """Set up profiling for a Vertex AI job; a Keras callback to pass to ``model.fit``.

    ``steps``: the step window tfadvisor profiles, ``(start, stop)``; default: ``TFADVISOR_STEPS``
    from the job (``tfadvisor capture vertex --steps``), else (10, 20). ``logdir``: where to write
    (default: the job's ``AIP_TENSORBOARD_LOG_DIR``). ``tensorboard_profiler=False`` skips
    ``cloud_profiler.init()``. Other keyword arguments go to ``AdvisorCallback``; by default it does
    not analyse on the training machine (``analyze=True`` also prints the findings in the job's log)
    and it adds the job (id, task, TensorBoard) to ``tfadvisor_run.json``.

    Returns the ``AdvisorCallback``; outside Vertex AI, or when something is missing, a callback
    that does nothing (None where not even Keras can be imported). Never raises.
    """
    try:
        return _init(steps, logdir, tensorboard_profiler, callback_options)
    except Exception as err:  # noqa: BLE001 - never into training
        logger.warning("tfadvisor.vertex.init: not profiling (%s: %s)", type(err).__name__, one_line(err))
        return _noop_callback()


def _init(steps, logdir, tensorboard_profiler, callback_options):
    if not in_vertex_job():
        logger.info("tfadvisor.vertex.init: not in a Vertex AI training job (%s is not set); not profiling",
                    JOB_ID_ENV)
        return _noop_callback()
    if steps is None:
        steps = os.environ.get(STEPS_ENV) or DEFAULT_STEPS
    from tfadvisor.capture.keras import AdvisorCallback, parse_window

    window = parse_window(steps)
    if tensorboard_profiler:
        start_profiler_service()
    target = logdir or job_logdir()
    if not target:
        logger.warning("tfadvisor.vertex.init: %s is not set (the job has no base output directory; "
                       "`tfadvisor capture vertex` sets one); not profiling", LOGDIR_ENV)
        return _noop_callback()
    options = dict(callback_options)
    options.setdefault("metadata", {"vertex": job_facts()})
    options.setdefault("analyze", False)  # analysed where the profile is fetched, not on the training machine
    callback = AdvisorCallback(target, steps=window, **options)
    logger.info("tfadvisor.vertex.init: profiling steps %d-%d into %s", window[0], window[1] - 1, target)
    return callback


def _noop_callback():
    """A Keras callback that does nothing, or None without Keras."""
    try:
        import keras

        return keras.callbacks.Callback()
    except Exception:  # noqa: BLE001
        return None


