"""Capture profiles from inside a training program: ``tfadvisor.profile`` and ``tfadvisor.step``.

``profile(logdir)`` starts the TensorFlow profiler, stops it when the block ends, and
writes ``tfadvisor_run.json`` (what the trace cannot tell: parameter count, batch size,
replicas, devices, versions, steps) into the run directory the profiler created
(``<logdir>/plugins/profile/<run>/``)::

    with tfadvisor.profile("logs/prof", model=model, batch_size=64):
        for i in range(20):
            with tfadvisor.step(i):
                train_step(next(it))

When the block ends the profile is analysed and a short summary printed (``analyze=False``
turns that off).

``step(n)`` marks one training step (``tf.profiler.experimental.Trace('train', step_num=n,
_r=1)``), which is how the analyses find step boundaries in custom loops. Outside a
profiling session it costs about a microsecond.

Nothing here raises into training: when the profiler cannot start or stop, or the
analysis fails, a :class:`CaptureWarning` is issued and the program goes on. TensorFlow
is imported only when a session starts or the first step is marked.

Memory events on the CPU: TensorFlow records allocations of the host allocator only
when ``TF_CPU_ALLOCATOR_USE_BFC=true`` was in the environment before TF created its
allocator (its first op). ``memory=True`` sets it, and warns when it is already too
late; set it in the shell, or use ``tfadvisor capture run --memory``. GPU allocations
are recorded without it.

Tracer levels (``host_tracer_level``, ``python_tracer_level``, ``device_tracer_level``):
TensorFlow 2.21's ``tf.profiler.experimental.start`` drops them (it logs ``... expects an
i value`` and uses the defaults 2/0/1). A session asked for other levels checks once
whether this TensorFlow applies them and warns when not; ``tfadvisor capture service``
passes them through xprof to a profiler server, which does apply them.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import warnings
from typing import Any

from tfadvisor._version import __version__
from tfadvisor.discovery import RUN_METADATA_FILE
from tfadvisor.errors import one_line
from tfadvisor.system_sampler import DEFAULT_HZ, SystemSampler, env_hz

logger = logging.getLogger("tfadvisor.capture")

TF_INSTALL_HINT = "TensorFlow is not installed: pip install 'tfadvisor[tf]' (or 'tfadvisor[tf-cpu]')"
MEMORY_ENV = "TF_CPU_ALLOCATOR_USE_BFC"


class CaptureWarning(UserWarning):
    """A capture problem that did not stop training (profiler, metadata or analysis)."""


class TensorFlowMissing(ImportError):
    """TensorFlow is needed for this capture and is not installed."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(TF_INSTALL_HINT + (f" ({detail})" if detail else ""))


_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_SKIP_PARTS = (os.sep + "keras" + os.sep, os.sep + "tensorflow" + os.sep)


def _user_stacklevel() -> int:
    """The stacklevel of the first frame outside tfadvisor, Keras and TensorFlow."""
    level = 2
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not (name.startswith(_PKG_DIR) or any(p in name for p in _SKIP_PARTS)):
            return level
        f = f.f_back
        level += 1
    return 2


def warn(message: str) -> None:
    """A capture problem: a warning (and a log line where logging is set up), never an exception."""
    if logger.hasHandlers():
        logger.warning(message)
    warnings.warn(message, CaptureWarning, stacklevel=_user_stacklevel())


def import_tf():
    """``tensorflow``, or :class:`TensorFlowMissing` with the install hint."""
    try:
        import tensorflow as tf
    except ImportError as err:
        raise TensorFlowMissing(str(err)) from None
    return tf


# --- profiler options ----------------------------------------------------------------------


def profiler_options(
    options: Any = None,
    *,
    host_tracer_level: int | None = None,
    python_tracer_level: int | None = None,
    device_tracer_level: int | None = None,
    delay_ms: int | None = None,
) -> dict[str, Any]:
    """One options dict from a ``ProfilerOptions``/dict and explicit levels (levels win).

    Levels: host 1 (critical) .. 3 (verbose), default 2; python 0/1 (Python function
    calls, costly), default 0; device 0/1 (GPU/TPU activity), default 1.
    """
    out: dict[str, Any] = {"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 1,
                           "delay_ms": None}
    if options is not None:
        given = options._asdict() if hasattr(options, "_asdict") else dict(options)
        unknown = set(given) - set(out)
        if unknown:
            raise ValueError(f"unknown profiler option(s): {', '.join(sorted(unknown))}")
        out.update({k: v for k, v in given.items() if v is not None})
    for key, value in (("host_tracer_level", host_tracer_level), ("python_tracer_level", python_tracer_level),
                       ("device_tracer_level", device_tracer_level), ("delay_ms", delay_ms)):
        if value is not None:
            out[key] = int(value)
    return out


DEFAULT_LEVELS = {"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 1}
_levels_honoured: bool | None = None


def _probe_marker_function() -> int:
    return 1


def local_levels_honoured(tf) -> bool:
    """Whether ``tf.profiler.experimental.start`` applies tracer levels in this TensorFlow.

    TensorFlow 2.21 drops them (it logs ``python_tracer_level expects an i value`` and
    uses the defaults). Found out once per process with a tiny session using the Python
    tracer: honoured when the probe function shows up in the saved trace.
    """
    global _levels_honoured
    if _levels_honoured is None:
        import tempfile

        try:
            with tempfile.TemporaryDirectory(prefix="tfadvisor_probe_") as tmp:
                tf.profiler.experimental.start(tmp, options=tf.profiler.experimental.ProfilerOptions(
                    host_tracer_level=1, python_tracer_level=1, device_tracer_level=0))
                try:
                    _probe_marker_function()
                finally:
                    tf.profiler.experimental.stop()
                found = False
                for dirpath, _dirs, files in os.walk(tmp):
                    for f in files:
                        with open(os.path.join(dirpath, f), "rb") as fh:
                            found = found or b"_probe_marker_function" in fh.read()
                _levels_honoured = found
        except Exception:  # noqa: BLE001 - cannot tell: assume they are
            _levels_honoured = True
    return _levels_honoured


def _check_levels(tf, opts: dict[str, Any]) -> None:
    wanted = {k: opts[k] for k in DEFAULT_LEVELS if opts.get(k) is not None and opts[k] != DEFAULT_LEVELS[k]}
    if wanted and not local_levels_honoured(tf):
        given = ", ".join(f"{k}={v}" for k, v in wanted.items())
        warn(f"TensorFlow {getattr(tf, '__version__', '?')} ignores tracer levels given to "
             f"tf.profiler.experimental.start ({given}); the defaults are used. To capture with other levels, "
             "start a profiler server in the program (tf.profiler.experimental.server.start(PORT)) and capture "
             "with `tfadvisor capture service localhost:PORT`, which passes them through xprof")


def _tf_options(tf, opts: dict[str, Any]):
    return tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=opts["host_tracer_level"],
        python_tracer_level=opts["python_tracer_level"],
        device_tracer_level=opts["device_tracer_level"],
        delay_ms=opts.get("delay_ms"),
    )


# --- memory events ---------------------------------------------------------------------------


def tf_initialized() -> bool:
    """Whether TensorFlow's eager context (and with it the CPU allocator) already exists."""
    if "tensorflow" not in sys.modules:
        return False
    try:
        from tensorflow.python.eager import context

        ctx = context.context_safe()
        return bool(ctx is not None and getattr(ctx, "_initialized", False))
    except Exception:  # noqa: BLE001
        return True


def enable_memory_events() -> bool:
    """Set ``TF_CPU_ALLOCATOR_USE_BFC=true``; warn (and return False) when TF already started.

    TensorFlow reads the variable when it creates its CPU allocator, at the first op.
    Setting it after that has no effect on this process: CPU memory events will be
    missing (GPU allocations are recorded regardless).
    """
    already = os.environ.get(MEMORY_ENV, "").lower() == "true"
    if already:
        return True
    late = tf_initialized()
    os.environ[MEMORY_ENV] = "true"
    if late:
        warn(f"memory=True: TensorFlow is already running in this process, so {MEMORY_ENV}=true comes too late "
             "for CPU memory events; set it in the environment before starting Python "
             f"({MEMORY_ENV}=true python train.py) or use `tfadvisor capture run --memory`")
        return False
    return True


# --- finding the run directory the profiler wrote -----------------------------------------------


class _Remote:
    """Listing, reading and writing ``gs://`` (and other remote) paths: fsspec/gcsfs when installed
    (``tfadvisor[gcs]``/``[vertex]``; no TensorFlow needed), else TensorFlow's ``tf.io.gfile``."""

    def __init__(self, path: str) -> None:
        self.protocol = path.split("://", 1)[0]
        self.fs = None
        try:
            from tfadvisor.discovery import filesystem

            self.fs = filesystem(path)
        except Exception:  # noqa: BLE001 - no fsspec: TensorFlow's file system, if any
            self.gfile = import_tf().io.gfile

    def _full(self, p: str) -> str:
        return p if "://" in p else f"{self.protocol}://{p}"

    def glob(self, pattern: str) -> list[str]:
        if self.fs is None:
            return list(self.gfile.glob(pattern))
        return [self._full(p) for p in self.fs.glob(pattern)]

    def signature(self, path: str) -> tuple[int, int]:
        if self.fs is None:
            st = self.gfile.stat(path)
            return int(st.length), int(getattr(st, "mtime_nsec", 0))
        info = self.fs.info(path)
        stamp = info.get("generation") or info.get("updated") or info.get("mtime") or info.get("LastModified")
        try:
            version = int(stamp)
        except (TypeError, ValueError):
            version = hash(str(stamp))
        return int(info.get("size") or 0), version

    def listdir(self, d: str) -> list[str]:
        if self.fs is None:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.gfile.listdir(d)]
        return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(d, detail=False)]

    def exists(self, path: str) -> bool:
        return bool(self.gfile.exists(path) if self.fs is None else self.fs.exists(path))

    def read(self, path: str) -> str:
        if self.fs is None:
            with self.gfile.GFile(path, "r") as fh:
                return fh.read()
        with self.fs.open(path, "r") as fh:
            return fh.read()

    def write(self, path: str, text: str) -> None:
        if self.fs is None:
            with self.gfile.GFile(path, "w") as fh:
                fh.write(text)
            return
        with self.fs.open(path, "w") as fh:
            fh.write(text)


def _profile_root(logdir: str) -> str:
    return f"{str(logdir).rstrip('/')}/plugins/profile"


def snapshot_runs(logdir: str) -> dict[str, tuple[int, int]]:
    """``{xplane file: (size, mtime_ns)}`` under ``<logdir>/plugins/profile``."""
    root = _profile_root(logdir)
    out: dict[str, tuple[int, int]] = {}
    if "://" in str(logdir) and not str(logdir).startswith("file://"):
        try:
            remote = _Remote(root)
            for f in remote.glob(f"{root}/*/*.xplane.pb"):
                out[f] = remote.signature(f)
        except Exception:  # noqa: BLE001 - remote listing problems: treat as empty
            pass
        return out
    if not os.path.isdir(root):
        return out
    for run in os.listdir(root):
        d = os.path.join(root, run)
        if not os.path.isdir(d):
            continue
        for f in os.listdir(d):
            if f.endswith(".xplane.pb"):
                p = os.path.join(d, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def new_run_dirs(logdir: str, before: dict[str, tuple[int, int]]) -> list[str]:
    """Run directories holding files written since ``before``, oldest first."""
    after = snapshot_runs(logdir)
    changed = [f for f, sig in after.items() if before.get(f) != sig]
    return sorted({f.rsplit("/", 1)[0] if "://" in f else os.path.dirname(f) for f in changed})


def new_run_dir(logdir: str, before: dict[str, tuple[int, int]]) -> str | None:
    """The newest run directory holding files written since ``before``."""
    dirs = new_run_dirs(logdir, before)
    return dirs[-1] if dirs else None


# --- run metadata ----------------------------------------------------------------------------------

#: Model facts registered by a Keras callback, used by any session that lacks them.
_MODEL_INFO: dict[str, Any] = {}

#: Start-up milestones of this process (the Keras callback fills them; ``tfadvisor_run.json`` "startup").
_STARTUP: dict[str, Any] = {}


def _list_names(d: str) -> list[str]:
    if "://" in d and not d.startswith("file://"):
        try:
            return _Remote(d).listdir(d)
        except Exception:  # noqa: BLE001
            return []
    try:
        return os.listdir(d)
    except OSError:
        return []


def model_facts(model: Any = None, batch_size: int | None = None) -> dict[str, Any]:
    """Parameter count and batch size of a Keras model, where known."""
    out: dict[str, Any] = {}
    if model is not None:
        try:
            out["param_count"] = int(model.count_params())
        except Exception:  # noqa: BLE001 - an unbuilt model has no parameters yet
            pass
        try:
            out["model"] = str(getattr(model, "name", type(model).__name__))
        except Exception:  # noqa: BLE001
            pass
    if batch_size is not None:
        out["batch_size"] = int(batch_size)
    return out


def environment_facts(strategy: Any = None) -> dict[str, Any]:
    """Versions, devices, tf.distribute strategy, replicas and hosts of this process."""
    out: dict[str, Any] = {"tfadvisor_version": __version__, "host_names": [socket.gethostname()]}
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return out
    out["tf_version"] = getattr(tf, "__version__", None)
    keras = sys.modules.get("keras")
    if keras is not None and getattr(keras, "__version__", None):
        out["keras_version"] = keras.__version__
    try:
        out["devices"] = [d.name for d in tf.config.list_logical_devices()]
    except Exception:  # noqa: BLE001
        pass
    try:
        if strategy is None:
            strategy = tf.distribute.get_strategy()
        out["strategy"] = type(strategy).__name__
        out["replicas"] = int(strategy.num_replicas_in_sync)
        hosts = 1
        resolver = getattr(strategy, "cluster_resolver", None)
        if resolver is not None:
            spec = resolver.cluster_spec()
            jobs = spec.jobs if spec is not None else []
            n = sum(spec.num_tasks(j) for j in jobs if j in ("chief", "worker"))
            hosts = max(1, n)
        out["hosts"] = hosts
    except Exception:  # noqa: BLE001
        pass
    return out


def write_run_metadata(run_dir: str, facts: dict[str, Any]) -> str | None:
    """Write (merge into) ``<run_dir>/tfadvisor_run.json``; the path, or None after a warning."""
    path = f"{run_dir.rstrip('/')}/{RUN_METADATA_FILE}"
    remote = "://" in run_dir and not run_dir.startswith("file://")
    try:
        old: dict[str, Any] = {}
        if remote:
            store = _Remote(path)
            if store.exists(path):
                old = json.loads(store.read(path) or "{}")
        elif os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                old = json.load(fh)
        merged = dict(old) if isinstance(old, dict) else {}
        names = list(merged.get("host_names") or [])
        merged.update({k: v for k, v in facts.items() if v is not None})
        for n in facts.get("host_names") or []:
            if n not in names:
                names.append(n)
        if names:
            merged["host_names"] = names
            merged["hosts"] = max(int(merged.get("hosts") or 1), len(names))
        text = json.dumps(merged, indent=2, sort_keys=True, default=str) + "\n"
        if remote:
            _Remote(path).write(path, text)
        else:
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)
        return path
    except Exception as err:  # noqa: BLE001
        warn(f"could not write {path}: {type(err).__name__}: {err}")
        return None


# --- analysis and the short report ----------------------------------------------------------------


def analyze_run(run_dir: str, *, report_json: str | os.PathLike | None = None,
                report_html: str | os.PathLike | None = None, top: int = 3, verbose: bool = True,
                header: str | None = None, stream=None):
    """Analyse a finished capture, log the top findings, write reports; the Result or None."""
    import tfadvisor.api as api

    try:
        result = api.analyze(run_dir)
    except Exception as err:  # noqa: BLE001 - analysis never breaks training
        warn(f"analysis of {run_dir} failed: {type(err).__name__}: {err}; "
             f"the profile is kept, run `tfadvisor analyze {run_dir}` later")
        return None
    lines = summary_lines(result, top=top, run_dir=run_dir)
    if header:
        lines.insert(0, header)
    for f in list(getattr(result, "findings", []) or [])[:top]:
        logger.info("finding %s [%s]: %s", _get(f, "rule"), _get(f, "severity"), _get(f, "message") or "")
    if verbose:
        out = stream or sys.stdout
        for line in lines:
            print(line, file=out, flush=True)
    if report_json:
        write_json_report(result, report_json)
    if report_html:
        try:
            from tfadvisor.report.html import write_html

            write_html(result, report_html)
            logger.info("wrote %s", report_html)
        except Exception as err:  # noqa: BLE001
            warn(f"could not write the HTML report {report_html}: {type(err).__name__}: {err}")
    return result


def write_json_report(result, path) -> None:
    try:
        data = result.to_dict()
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, default=str)
            fh.write("\n")
        logger.info("wrote %s", path)
    except Exception as err:  # noqa: BLE001
        warn(f"could not write the JSON report {path}: {type(err).__name__}: {err}")


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    return getattr(value, "value", value) if name == "severity" and not isinstance(value, str) else value


def summary_lines(result, top: int = 3, run_dir: str | None = None) -> list[str]:
    """A few ``tfadvisor: ...`` lines: steps, step time, the top findings, how to see more."""
    m = getattr(result, "metrics", {}) or {}
    lines = []
    steps = m.get("steps_count")
    median = m.get("step_time_median_ms")
    if steps is not None:
        tail = f", {median:.3g} ms per step (median)" if isinstance(median, (int, float)) else ""
        lines.append(f"tfadvisor: {steps} step(s) found{tail}")
    findings = list(getattr(result, "findings", []) or [])
    if not findings:
        lines.append("tfadvisor: no findings")
    else:
        lines.append(f"tfadvisor: {len(findings)} finding(s), top {min(top, len(findings))}:")
        for i, f in enumerate(findings[:top], 1):
            title = _get(f, "title") or _get(f, "message") or ""
            lines.append(f"tfadvisor:   {i}. [{_get(f, 'severity')}] {_get(f, 'rule')}: {title}")
    target = run_dir or getattr(getattr(result, "run", None), "directory", None)
    if target:
        lines.append(f"tfadvisor: full report: tfadvisor analyze {target}")
    return lines


# --- step markers ------------------------------------------------------------------------------------

_Trace = None  # tf.profiler.experimental.Trace, once imported
_trace_failed = False


def _trace_class():
    global _Trace, _trace_failed
    if _Trace is None and not _trace_failed:
        try:
            from tensorflow.python.profiler.trace import Trace

            _Trace = Trace
        except Exception:  # noqa: BLE001
            try:
                _Trace = import_tf().profiler.experimental.Trace
            except Exception as err:  # noqa: BLE001
                _trace_failed = True
                warn(f"tfadvisor.step: no step markers ({err})")
    return _Trace


class step:  # noqa: N801 - used as a context manager like a function
    """Mark one training step: ``with tfadvisor.step(i): train_step(batch)``.

    Records ``Trace(name, step_num=n, _r=1)`` while a profiler is running (any profiler:
    ``tfadvisor.profile``, the Keras callback, ``tf.profiler.experimental.start`` or a
    remote capture); otherwise does almost nothing. Extra keyword arguments become stats
    of the step event.
    """

    __slots__ = ("n", "name", "stats", "_t", "_session")

    def __init__(self, n: int, name: str = "train", **stats: Any) -> None:
        self.n = n
        self.name = name
        self.stats = stats
        self._t = None
        self._session = None

    def __enter__(self) -> step:
        cls = _Trace if _Trace is not None else _trace_class()
        if cls is not None:
            try:
                t = cls(self.name, step_num=int(self.n), _r=1, **self.stats)
                if getattr(t, "_traceme", t) is not None:
                    self._t = t
                    self._session = _ACTIVE
            except Exception:  # noqa: BLE001 - never break the step for a marker
                self._t = None
        return self

    def __exit__(self, *exc) -> bool:
        t = self._t
        if t is not None:
            self._t = None
            with MARKER_LOCK:
                try:
                    t.__exit__(*exc)
                except Exception:  # noqa: BLE001
                    pass
                session = self._session
                still = session is not None and session is _ACTIVE  # the marker made it into the trace
            if session is not None:
                self._session = None
                if still:
                    session._count_step(self.n)
        return False


# --- SIGTERM: write what was collected, then let the signal do what it did ------------------------

_TERM_CLOSERS: list[Any] = []
_TERM_PREV: Any = None
_TERM_INSTALLED = False
_TERM_RUNNING = False


def on_sigterm(closer: Any) -> bool:
    """Call ``closer("SIGTERM")`` when the process gets SIGTERM, then act as before.

    A Vertex AI cancel or preemption, or ``kill``, sends SIGTERM: the handler stops the
    profiler and writes the profile (each registered closer, newest first), puts the
    previous handler back and hands the signal to it (the default one ends the process
    with SIGTERM as it would have). Installed from the main thread only; False elsewhere.
    """
    global _TERM_PREV, _TERM_INSTALLED
    if closer not in _TERM_CLOSERS:
        _TERM_CLOSERS.append(closer)
    if _TERM_INSTALLED:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        _TERM_PREV = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _handle_sigterm)
    except (ValueError, OSError, AttributeError):
        return False
    _TERM_INSTALLED = True
    return True


def forget_sigterm(closer: Any) -> None:
    """Undo :func:`on_sigterm` for ``closer``; the previous handler is back once none is left."""
    global _TERM_INSTALLED
    if closer in _TERM_CLOSERS:
        _TERM_CLOSERS.remove(closer)
    if _TERM_CLOSERS or not _TERM_INSTALLED or _TERM_RUNNING:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is _handle_sigterm:
            signal.signal(signal.SIGTERM, _TERM_PREV if _TERM_PREV is not None else signal.SIG_DFL)
    except (ValueError, OSError):
        return
    _TERM_INSTALLED = False


def _handle_sigterm(signum: int, frame: Any) -> None:
    global _TERM_RUNNING, _TERM_INSTALLED
    if _TERM_RUNNING:  # a second SIGTERM while writing: finish writing first
        return
    _TERM_RUNNING = True
    prev: Any = signal.SIG_DFL
    try:
        name = signal.Signals(signum).name
        for closer in reversed(list(_TERM_CLOSERS)):
            try:
                closer(name)
            except Exception as err:  # noqa: BLE001
                print(f"tfadvisor: could not save the profile on {name}: {type(err).__name__}: {err}",
                      file=sys.stderr, flush=True)
        _TERM_CLOSERS.clear()
        prev = _TERM_PREV if _TERM_PREV is not None else signal.SIG_DFL
        signal.signal(signum, prev)
        _TERM_INSTALLED = False
    finally:
        _TERM_RUNNING = False
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        os.kill(os.getpid(), signum)  # what the signal did before: end the process


# --- profiling sessions -------------------------------------------------------------------------------

_ACTIVE: ProfileSession | None = None
_LOCK = threading.Lock()
#: held while a step marker ends and while the profiler stops: a marker that ends before the stop is in
#: the trace and counted, one that ends after it is neither (time mode stops from another thread)
MARKER_LOCK = threading.RLock()


class ProfileSession:
    """One profiler start/stop, its run directory, metadata file and (optional) analysis.

    Use as a context manager (``with tfadvisor.profile(...) as p:``) or call
    :meth:`start` and :meth:`stop`. After the stop: ``run_dir`` (None when nothing was
    written), ``metadata_path``, ``steps`` (steps marked with :func:`step` while it ran),
    ``result`` (when ``analyze=True``) and ``error`` (why it did not profile, if so).
    """

    def __init__(
        self,
        logdir: str | os.PathLike,
        options: Any = None,
        *,
        host_tracer_level: int | None = None,
        python_tracer_level: int | None = None,
        device_tracer_level: int | None = None,
        delay_ms: int | None = None,
        memory: bool = False,
        model: Any = None,
        batch_size: int | None = None,
        metadata: dict[str, Any] | None = None,
        analyze: bool = False,
        report_json: str | os.PathLike | None = None,
        report_html: str | os.PathLike | None = None,
        top: int = 3,
        verbose: bool = True,
        source: str = "tfadvisor.profile",
        stream=None,
        system: bool | float | None = None,
    ) -> None:
        self.logdir = os.fspath(logdir)
        # system samples (tfadvisor/system_sampler.py): None -> TFADVISOR_SYSTEM or 10 Hz; False: off; a number: Hz
        if system is None:
            self.system_hz = env_hz()
        elif system is True:
            self.system_hz = env_hz() or DEFAULT_HZ
        else:
            self.system_hz = float(system) if system else None
        self.sampler: SystemSampler | None = None
        self.system_path: str | None = None
        self.options = profiler_options(options, host_tracer_level=host_tracer_level,
                                        python_tracer_level=python_tracer_level,
                                        device_tracer_level=device_tracer_level, delay_ms=delay_ms)
        self.memory = memory
        self.model = model
        self.batch_size = batch_size
        self.extra = dict(metadata or {})
        self.analyze = analyze or bool(report_json) or bool(report_html)
        self.report_json = report_json
        self.report_html = report_html
        self.top = top
        self.verbose = verbose
        self.source = source
        self.stream = stream
        self.label = ""  # e.g. "steps 10-19", for the printed line
        self.hint = True  # print how to analyse it (when not analysing here)
        self.run_dir: str | None = None
        self.metadata_path: str | None = None
        self.result = None
        self.error: str | None = None
        self.steps = 0
        self.step_first: int | None = None
        self.step_last: int | None = None
        self.started = False
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self.busy = False  # the last start failed because another profiler was running
        self.quiet_busy = False  # then say nothing (the caller says it, e.g. the Keras callback's retries)
        self._before: dict[str, tuple[int, int]] = {}
        self._state_lock = threading.Lock()

    # markers made with tfadvisor.step while this session runs
    def _count_step(self, n: Any) -> None:
        self.steps += 1
        try:
            n = int(n)
        except (TypeError, ValueError):
            return
        if self.step_first is None:
            self.step_first = n
        self.step_last = n

    def start(self) -> bool:
        """Start the profiler; False (with a warning) when it cannot."""
        global _ACTIVE
        with self._state_lock:
            if self.started:
                return True
            if self.memory:
                enable_memory_events()
            try:
                tf = import_tf()
            except TensorFlowMissing as err:
                self.error = str(err)
                warn(f"not profiling: {err}")
                return False
            try:
                if "://" not in self.logdir:
                    os.makedirs(self.logdir, exist_ok=True)
                _check_levels(tf, self.options)
                self._before = snapshot_runs(self.logdir)
                t_call = time.time()
                tf.profiler.experimental.start(self.logdir, options=_tf_options(tf, self.options))
            except Exception as err:  # noqa: BLE001
                self.error = f"the profiler did not start: {type(err).__name__}: {one_line(err)}"
                self.busy = "AlreadyExists" in type(err).__name__ or "nother profiler" in str(err)
                if self.busy:
                    self.error += " (another profiler session is running in this process)"
                if not (self.busy and self.quiet_busy):
                    warn(f"not profiling: {self.error}")
                return False
            self.busy = False
            self.error = None
            self.started = True
            self.started_at = time.time()
            self._start_sampler(t_call)
            with _LOCK:
                _ACTIVE = self
            logger.info("profiler started, writing to %s", self.logdir)
            return True

    def stop(self) -> str | None:
        """Stop the profiler, write the metadata file, analyse if asked; the run directory."""
        global _ACTIVE
        with self._state_lock:
            if not self.started:
                return self.run_dir
            self.started = False
            self.stopped_at = time.time()
            if self.sampler is not None:
                self.sampler.stop()
            try:
                tf = import_tf()
                # no step marker ends while the profiler stops: each is in the trace exactly when counted
                with MARKER_LOCK:
                    try:
                        tf.profiler.experimental.stop()
                    finally:
                        with _LOCK:
                            if _ACTIVE is self:
                                _ACTIVE = None
            except Exception as err:  # noqa: BLE001
                self.error = f"the profiler did not stop cleanly: {type(err).__name__}: {one_line(err)}"
                warn(self.error)
                return None
            self.run_dir = new_run_dir(self.logdir, self._before)
            if self.run_dir is None:
                self.error = f"the profiler wrote no file under {_profile_root(self.logdir)}"
                warn(self.error)
                return None
            self._write_samples()
            self.metadata_path = write_run_metadata(self.run_dir, self.metadata())
        logger.info("profile written to %s", self.run_dir)
        if self.verbose:
            what = f" of {self.label}" if self.label else ""
            print(f"tfadvisor: profile{what} written to {self.run_dir}", file=self.stream or sys.stdout, flush=True)
        if self.analyze:
            self.result = analyze_run(self.run_dir, report_json=self.report_json, report_html=self.report_html,
                                      top=self.top, verbose=self.verbose, stream=self.stream)
        elif self.verbose and self.hint:
            print(f"tfadvisor: analyse it with: tfadvisor analyze {self.run_dir}", file=self.stream or sys.stdout,
                  flush=True)
        return self.run_dir

    def _start_sampler(self, t_call: float) -> None:
        if not self.system_hz:
            return
        try:
            sampler = SystemSampler(hz=self.system_hz)
            # the profiler's clock starts inside start(): take the middle of the call
            sampler.profile_start_unix_s = (t_call + self.started_at) / 2 if self.started_at else t_call
            if sampler.start():
                self.sampler = sampler
            else:
                warn(f"no system samples: {sampler.error}")
        except Exception as err:  # noqa: BLE001
            warn(f"no system samples: {type(err).__name__}: {err}")

    def _write_samples(self) -> None:
        sampler = self.sampler
        if sampler is None or self.run_dir is None:
            return
        try:
            # the host file this session wrote names the samples (several hosts may share the run directory)
            hosts = [f for f in _list_names(self.run_dir) if f.endswith(".xplane.pb")]
            changed = {f.rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1] for f, sig in snapshot_runs(self.logdir).items()
                       if self._before.get(f) != sig}
            mine = [f for f in hosts if f in changed]
            pick = mine if len(mine) == 1 else hosts
            host = pick[0][: -len(".xplane.pb")] if len(pick) == 1 else None
            self.system_path = sampler.write(self.run_dir, host)
            logger.info("system samples written to %s", self.system_path)
        except Exception as err:  # noqa: BLE001
            warn(f"could not write the system samples into {self.run_dir}: {type(err).__name__}: {err}")

    def metadata(self) -> dict[str, Any]:
        """The facts for ``tfadvisor_run.json``."""
        facts = environment_facts()
        facts.update({k: v for k, v in _MODEL_INFO.items() if v is not None})
        facts.update(model_facts(self.model, self.batch_size))
        steps: dict[str, Any] = {"count": self.steps}
        if self.step_first is not None:
            steps.update(first=self.step_first, last=self.step_last)
        facts["steps"] = steps
        facts["capture"] = {
            "by": self.source,
            "options": {k: v for k, v in self.options.items() if v is not None},
            "memory_events": os.environ.get(MEMORY_ENV, "").lower() == "true",
            "duration_s": round(self.stopped_at - self.started_at, 3)
            if self.started_at and self.stopped_at else None,
        }
        if _STARTUP:
            facts["startup"] = dict(_STARTUP)
        if self.sampler is not None:
            m = self.sampler.meta()
            facts["system"] = {"samples": os.path.basename(self.system_path) if self.system_path else None,
                               "hz": m.get("hz"), "gpu_sampler": m.get("gpu_sampler"), "gpu_note": m.get("gpu_note"),
                               "sampler_cpu_s": m.get("sampler_cpu_s"), "error": self.sampler.error}
        elif not self.system_hz:
            facts["system"] = {"samples": None, "note": "system sampling was switched off"}
        facts.update(self.extra)
        return facts

    def __enter__(self) -> ProfileSession:
        self.start()
        return self

    def __exit__(self, *exc) -> bool:
        self.stop()
        return False


def profile(logdir: str | os.PathLike, options: Any = None, **kwargs: Any) -> ProfileSession:
    """Profile a block of TensorFlow code: ``with tfadvisor.profile("logs/prof"): ...``.

    ``options``: a ``tf.profiler.experimental.ProfilerOptions`` or dict; or give
    ``host_tracer_level`` (1-3), ``python_tracer_level`` (0/1), ``device_tracer_level``
    (0/1), ``delay_ms`` directly. ``memory=True`` records CPU memory events (see the
    module docs: it must happen before TensorFlow starts). ``model=`` and ``batch_size=``
    go into the metadata file; ``metadata=`` adds any other keys (e.g. ``link``,
    ``bandwidth_gbps``). When the block ends the profile is analysed, as the Keras callback
    does: a short summary (steps, step time, the top findings) is printed and the Result is
    ``session.result``; ``analyze=False`` turns that off, ``verbose=False`` keeps it quiet,
    ``report_json=``/``report_html=`` also write the reports.
    """
    kwargs.setdefault("analyze", True)
    return ProfileSession(logdir, options, **kwargs)


def active_session() -> ProfileSession | None:
    return _ACTIVE


