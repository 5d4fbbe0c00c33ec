"""A profiling session: one profiler start/stop (``tfadvisor.profile``), its run directory, the run's
facts file (``tfadvisor_run.json``), the system samples and, when asked, the analysis at the end.

TensorFlow is imported when a session starts. Nothing here raises into training: when the
profiler cannot start or stop a :class:`~tfadvisor.capture.base.CaptureWarning` is issued, and
every line printed is best-effort (:func:`~tfadvisor.capture.base.say`). A SIGTERM or SIGINT
while the profiler runs stops it and writes the profile first (:mod:`tfadvisor.capture.signals`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from tfadvisor.capture import signals
from tfadvisor.capture.analysis import analyze_run
from tfadvisor.capture.base import TensorFlowMissing, import_tf, logger, say, warn
from tfadvisor.capture.markers import MARKER_LOCK, clear_active, set_active
from tfadvisor.capture.options import (
    MEMORY_ENV,
    CaptureOptions,
    CaptureOptionsView,
    check_levels,
    enable_memory_events,
    tf_options,
)
from tfadvisor.capture.rundirs import (
    Snapshot,
    changed_files,
    drop_stage,
    list_names,
    new_run_dir,
    profile_root,
    publish,
    snapshot_runs,
    staging_dir,
)
from tfadvisor.capture.runfacts import MODEL_INFO, STARTUP, environment_facts, model_facts, write_run_metadata
from tfadvisor.capture.system_sampler import DEFAULT_HZ, SystemSampler, env_hz
from tfadvisor.errors import one_line
from tfadvisor.io.discovery import RUN_METADATA_FILE, XPLANE_SUFFIX

#: Called with each session right after its profiler started (``tfadvisor capture run``'s hook records
#: that a window is open, so a process that dies in it is reported as a lost window). Best-effort.
ON_START: list[Callable[[ProfileSession], None]] = []


class ProfileSession(CaptureOptionsView):
    """One profiler start/stop, its run directory, metadata file and (optional) analysis.

    Use as a context manager (``with tfadvisor.profile(...) as p:``) or call
    :meth:`start` and :meth:`stop`. After the stop: ``run_dir`` (None when nothing was
    written), ``metadata_path``, ``steps`` (steps marked with ``tfadvisor.step`` while it ran),
    ``result`` (when ``analyze=True``) and ``error`` (why it did not profile, if so).

    What it is asked for is one :class:`~tfadvisor.capture.options.CaptureOptions` (``capture``), made from
    these arguments, or given to :meth:`from_options`; ``logdir``, ``options``, ``top`` ... read it.
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
        stream: TextIO | None = None,
        system: bool | float | None = None,
    ) -> None:
        capture = CaptureOptions.make(
            logdir, options, host_tracer_level=host_tracer_level, python_tracer_level=python_tracer_level,
            device_tracer_level=device_tracer_level, delay_ms=delay_ms, memory=memory, metadata=metadata,
            analyze=analyze, report_json=report_json, report_html=report_html, top=top, verbose=verbose,
            source=source, stream=stream, system=system)
        self._setup(capture, model=model, batch_size=batch_size)

    @classmethod
    def from_options(cls, capture: CaptureOptions, *, model: Any = None, batch_size: int | None = None,
                     owner: Any = None, quiet_busy: bool = False, label: str | None = None,
                     asked_s: float | None = None) -> ProfileSession:
        """A session for options already made and checked (the Keras callback's: one session per window, all
        reading the callback's options). ``owner``: the callback that opens it (it saves its window on a signal
        itself, with its step counts); ``quiet_busy``: say nothing when the profiler cannot start because another
        one is running (the owner says it, once, and tries again)."""
        session = cls.__new__(cls)
        session._setup(capture, model=model, batch_size=batch_size, owner=owner, quiet_busy=quiet_busy)
        session.label, session.asked_s = label or session.label, asked_s  # what the window is, if known at start
        return session

    def _setup(self, capture: CaptureOptions, *, model: Any = None, batch_size: int | None = None,
               owner: Any = None, quiet_busy: bool = False) -> None:
        self.capture = capture
        # system samples (capture/system_sampler.py): None -> TFADVISOR_SYSTEM or 10 Hz; False: off; a number: Hz
        system = capture.system
        if system is None:
            self.system_hz = env_hz()
        elif system is True:
            self.system_hz = env_hz() or DEFAULT_HZ
        else:
            self.system_hz = float(system) if system else None
        self.sampler: SystemSampler | None = None
        self.system_path: str | None = None
        self.model = model
        self.batch_size = batch_size
        self.extra = dict(capture.metadata)  # the keys written into tfadvisor_run.json over the facts
        self.label = ""  # e.g. "steps 10-19", for the printed line
        self.owner: Any = owner  # the Keras callback that opened this session, if one did
        self.interrupted: str | None = None  # the signal that stopped it ("SIGTERM"), if one did
        self.asked_s: float | None = None  # time mode: the seconds asked for
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
        self.quiet_busy = quiet_busy  # then say nothing (the caller says it, e.g. the Keras callback's retries)
        self.pid: int | None = None  # the process whose profiler this session started
        self._before: Snapshot = {}
        self._stage: str | None = None  # a local logdir: where this process's profiler writes (rundirs.publish)
        self._written: list[str] = []  # the host files this session wrote
        self._state_lock = threading.RLock()  # a signal handler may stop the session mid-call

    def count_step(self, n: Any) -> None:
        """A ``tfadvisor.step`` marker that ended while this session's profiler ran."""
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
            remote = "://" in self.logdir
            try:
                self._before = snapshot_runs(self.logdir) if remote else {}
            except Exception:  # noqa: BLE001 - a remote logdir not listed now: the stop says why, if it still is not
                self._before = {}
            try:
                self._stage = None if remote else staging_dir(self.logdir)
                if self._stage is not None:
                    os.makedirs(self._stage, exist_ok=True)
                check_levels(tf, self.options)
                t_call = time.time()
                tf.profiler.experimental.start(self._stage or self.logdir, options=tf_options(tf, self.options))
            except Exception as err:  # noqa: BLE001
                self._drop_stage()
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
            self.pid = os.getpid()
            self.started_at = time.time()
            self._start_sampler(t_call)
            set_active(self)
            if self.owner is None:  # a callback saves its own window on a signal, with its step counts
                signals.on_signal(self._on_signal)
            logger.info("profiler started, writing to %s", self.logdir)
        for observer in list(ON_START):
            try:
                observer(self)
            except Exception as err:  # noqa: BLE001
                logger.debug("start observer failed: %s", err)
        return True

    def _on_signal(self, name: str) -> None:
        if self.started:
            self.interrupted = name
            say(f"tfadvisor: {name} while profiling: saving the profile first", sys.stderr)
            self.stop()

    def stop(self, *, label: str | None = None, facts: dict[str, Any] | None = None,
             interrupted: str | None = None, asked_s: float | None = None) -> str | None:
        """Stop the profiler, write the metadata file, analyse if asked; the run directory.

        What only whoever ends the window knows (the Keras callback's window): ``label``, what the profile
        holds (``"steps 10-19"``, for the printed line); ``facts``, keys for ``tfadvisor_run.json`` (the
        ``metadata`` the session was given wins over them); ``interrupted``, the signal that cut it short
        (then it is not analysed); ``asked_s``, the seconds a timed capture was asked for.
        """
        with self._state_lock:
            if label is not None:
                self.label = label
            if asked_s is not None:
                self.asked_s = asked_s
            if facts:
                self.extra = {**facts, **self.extra}
            if interrupted:
                self.interrupted = interrupted
            if not self.started:
                return self.run_dir
            self.started = False
            if self.pid != os.getpid():  # a forked child: the profile is its parent's to write
                self.error = "the profiler was started by the parent process, which writes its profile"
                return None
            self.stopped_at = time.time()
            signals.forget_signal(self._on_signal)
            if self.sampler is not None:
                self.sampler.stop()
            try:
                tf = import_tf()
                # no step marker ends while the profiler stops: each is in the trace exactly when counted
                with MARKER_LOCK:
                    try:
                        tf.profiler.experimental.stop()
                    finally:
                        clear_active(self)
            except Exception as err:  # noqa: BLE001
                self.error = f"the profiler did not stop cleanly: {type(err).__name__}: {one_line(err)}"
                warn(self.error)
                return None
            try:
                self.run_dir = self._find_run()
            except Exception as err:  # noqa: BLE001 - a remote logdir that cannot be listed, a move that failed
                where = self._stage or profile_root(self.logdir)
                self.error = (f"the profile was written under {where}, but it cannot be listed or moved "
                              f"to add {RUN_METADATA_FILE}: {type(err).__name__}: {one_line(err)}")
                warn(self.error)
                return None
            if self.run_dir is None:
                self.error = f"the profiler wrote no file under {profile_root(self.logdir)}"
                warn(self.error)
                return None
            self._write_samples()
            self.metadata_path = write_run_metadata(self.run_dir, self.metadata())
        logger.info("profile written to %s", self.run_dir)
        if self.verbose:
            say(f"tfadvisor: profile of {self.captured()} written to {self.run_dir}", self.stream)
        if self.analyze and not self.interrupted:
            self.result = analyze_run(self.run_dir, report_json=self.report_json, report_html=self.report_html,
                                      top=self.top, verbose=self.verbose, stream=self.stream)
        elif self.verbose and self.hint:
            say(f"tfadvisor: analyse it with: tfadvisor analyze {self.run_dir}", self.stream)
        return self.run_dir

    def _find_run(self) -> str | None:
        """The run directory this session wrote (its files published from the staging directory)."""
        if self._stage is None:
            self._written = changed_files(self.logdir, self._before)
            return new_run_dir(self.logdir, self._before)
        self._written = publish(self._stage, self.logdir)
        self._stage = None
        return os.path.dirname(self._written[-1]) if self._written else None

    def _written_bytes(self) -> int:
        total = 0
        for f in self._written:
            if "://" not in f:
                try:
                    total += os.path.getsize(f)
                except OSError:
                    pass
        return total

    def _drop_stage(self) -> None:
        stage, self._stage = self._stage, None
        if stage is not None:
            drop_stage(stage)

    def seconds(self) -> float | None:
        """How long the profiler ran (so far, while it runs)."""
        if self.started_at is None:
            return None
        return (self.stopped_at if self.stopped_at and not self.started else time.time()) - self.started_at

    def captured(self) -> str:
        """What the profile holds, as measured: the label (or the steps marked), the seconds the profiler ran
        (of those asked for) and the signal that cut it short."""
        what = self.label or (f"{self.steps} step(s)" if self.steps else "the window")
        details = []
        secs = self.seconds()
        if secs is not None:
            details.append(f"{secs:.1f} s" + (f" of {self.asked_s:g} s asked" if self.asked_s else ""))
        size = self._written_bytes()
        if size:
            details.append(f"{size / 1024:,.0f} KiB" if size < 10 * 2**20 else f"{size / 2**20:,.1f} MiB")
        if self.interrupted:
            details.append(f"cut short by {self.interrupted}")
        return what + (f" ({', '.join(details)})" if details else "")

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
            hosts = [f for f in list_names(self.run_dir) if f.endswith(XPLANE_SUFFIX)]
            changed = {f.rsplit("/", 1)[-1].rsplit(os.sep, 1)[-1] for f in self._written}
            mine = [f for f in hosts if f in changed]
            pick = mine if len(mine) == 1 else hosts
            host = pick[0][: -len(XPLANE_SUFFIX)] if len(pick) == 1 else None
            self.system_path = sampler.write(self.run_dir, host)
            logger.info("system samples written to %s", self.system_path)
        except Exception as err:  # noqa: BLE001
            warn(f"could not write the system samples into {self.run_dir}: {type(err).__name__}: {err}")

    def metadata(self) -> dict[str, Any]:
        """The facts for ``tfadvisor_run.json``."""
        facts = environment_facts()
        facts.update({k: v for k, v in MODEL_INFO.items() if v is not None})
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
        if STARTUP:
            facts["startup"] = dict(STARTUP)
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

    def __exit__(self, *exc: Any) -> bool:
        self.stop()
        return False


def profile(logdir: str | os.PathLike, options: Any = None, **kwargs: Any) -> ProfileSession:
    """Profile a block of TensorFlow code: ``with tfadvisor.profile("logs/prof"): ...``.

    ``options``: a ``tf.profiler.experimental.ProfilerOptions`` or dict; or give
    ``host_tracer_level`` (1-3), ``python_tracer_level`` (0/1), ``device_tracer_level``
    (0/1), ``delay_ms`` directly. ``memory=True`` records CPU memory events (it must happen
    before TensorFlow starts: :mod:`tfadvisor.capture.options`). ``model=`` and ``batch_size=``
    go into the metadata file; ``metadata=`` adds any other keys (e.g. ``link``,
    ``bandwidth_gbps``). When the block ends the profile is analysed, as the Keras callback
    does: the terminal report with the top findings is printed and the Result is
    ``session.result``; ``analyze=False`` turns that off, ``verbose=False`` keeps it quiet,
    ``report_json=``/``report_html=`` also write the reports.
    """
    kwargs.setdefault("analyze", True)
    return ProfileSession(logdir, options, **kwargs)
