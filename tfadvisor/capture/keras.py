"""The Keras callback: profile a window of ``model.fit`` steps and say what is slow.

::

    from tfadvisor.keras import AdvisorCallback

    model.fit(x, y, epochs=3, callbacks=[AdvisorCallback("logs/prof", steps=(10, 20))])

The callback starts the TensorFlow profiler at global training step 10 (steps count from
0 across epochs and ``fit`` calls of the same callback), marks every profiled step with
``tf.profiler.experimental.Trace('train', step_num=n, _r=1)``, stops the profiler after
10 steps, writes ``tfadvisor_run.json`` (parameter count, batch size, replicas, strategy,
devices, versions, the step window) into the run directory and, by default, analyses
the profile and prints the top findings. ``report_json=``/``report_html=`` also write
reports. ``steps=None`` only marks steps (for captures started elsewhere: a profiler
server, ``tfadvisor capture run --start-after-s``), and never starts the profiler.

With ``steps_per_execution=k`` Keras runs k steps per call and calls the batch hooks
once per call: each call is one marker (``step_num`` = its first step) and counts as k
steps. The window starts at the first call at or after ``start`` and lasts at least
``stop - start`` steps, and at least ``min_executions`` calls (default 5: one call of 10
steps cannot show steady state), e.g. 50 steps under ``steps_per_execution=10``.

Each marker opens in ``on_train_batch_begin`` and closes in ``on_train_batch_end``, after
Keras has read the step's logs (which waits for the step to finish on a GPU), so the
marker spans the whole step. (With the TensorFlow backend Keras calls the batch-end
hooks synchronously whatever the callbacks, so overriding ``on_train_batch_end`` adds
no device sync.) Outside the window the callback costs two Python calls per step.

A SIGTERM (a Vertex AI cancel or preemption) or SIGINT (Ctrl-C, a notebook's "interrupt the
kernel") inside the window stops the profiler and writes what was collected, then the signal
does what it did before. If ``fit`` raises inside the window, the profile is written at the
next ``fit`` (of this callback or another one), at exit, or by ``close()``. A window cut short
like that re-arms: the next ``fit`` of the same callback profiles a full window again, starting
``start`` steps into it.

When another profiler is running as the window opens (a stock ``TensorBoard(profile_batch=...)``
callback, TensorBoard's "Capture profile"), the callback says so and tries again at each of
the next ``retries`` executions; the window then starts late and keeps its length
(``tfadvisor_run.json`` ``steps.delayed``).

Unprofiled truth: the callback times every execution of training steps with a plain clock (``time.perf_counter``
at each ``on_train_batch_begin``, no profiler): up to ``clock_steps`` executions before the window, those inside it
and up to ``clock_steps`` after it, each interval from an execution's start to the next one's (or the end of
``fit``) with what came between (``validation``, ``epoch_end``) and the evaluation's own time. The first execution
of each ``fit`` and, when a ``fit`` has two epochs or more, its whole first epoch are left out (tracing, the first
evaluation's tracing, autotuning). They go into ``tfadvisor_run.json`` ``clock`` when the window closes (before
and inside) and again when ``fit`` ends (with after): the report compares the profiled steps with them.

It never raises into training: profiler, metadata and analysis problems become
:class:`tfadvisor.capture.profiling.CaptureWarning` warnings, and what it prints is best-effort (a
full disk or a closed pipe on stdout is skipped). Arguments are checked when it is made.

This module imports Keras (and TensorFlow) only when ``AdvisorCallback`` is first used: the
callback's logic is the plain class :class:`_AdvisorCallbackImpl`, and ``AdvisorCallback`` (that class
mixed into ``keras.callbacks.Callback``) is made on first access. What it captures is one
:class:`~tfadvisor.capture.options.CaptureOptions`, checked when the callback is made; each window's
:class:`~tfadvisor.capture.session.ProfileSession` is made from it.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from typing import TYPE_CHECKING, Any

from tfadvisor.capture import markers, signals
from tfadvisor.capture.base import logger, say, warn
from tfadvisor.capture.options import CaptureOptions, CaptureOptionsView, enable_memory_events, whole, whole_at_least

if TYPE_CHECKING:
    from tfadvisor.capture.session import ProfileSession

__all__ = ["AdvisorCallback"]  # noqa: F822 - built on first access (module __getattr__)

#: ``tfadvisor_run.json`` ``capture.by`` of the callback's profiles
SOURCE = "tfadvisor.keras.AdvisorCallback"

_CLASS = None

WAITING = "waiting"  # before the window
PROFILING = "profiling"  # window open
DONE = "done"  # window closed, profile written
FAILED = "failed"  # the profiler did not start: nothing more to do
BUSY = "busy"  # another profiler was running when the window opened: trying again at the next steps
MARKING = "marking"  # steps=None: mark steps, never start the profiler


def __getattr__(name: str):
    if name == "AdvisorCallback":
        return _callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + ["AdvisorCallback"])


#: Under ``steps_per_execution=k`` a window lasts at least this many executions (AdvisorCallback(min_executions=)).
MIN_EXECUTIONS = 5
#: Executions timed by the plain clock on each side of the window (AdvisorCallback(clock_steps=)).
CLOCK_STEPS = 5000


def parse_window(steps: Any) -> tuple[int, int] | None:
    """``(start, stop)`` (global step indexes, stop exclusive) from a pair or ``"10,20"``; a
    ``ValueError`` naming ``steps`` for anything else (``"abc"``, ``(2.9, 4.1)``, ``(5, 2)``)."""
    if steps is None:
        return None
    problem = ("steps must be (start, stop): whole step numbers with 0 <= start < stop (e.g. (10, 20) or "
               f"\"10,20\"), or None to only mark steps; got {steps!r}")
    parts: Any = steps
    if isinstance(steps, str):
        parts = [p for p in steps.replace(":", ",").split(",") if p.strip()]
    try:
        pair = list(parts)
    except TypeError:
        raise ValueError(problem) from None
    if len(pair) != 2:
        raise ValueError(problem)
    start, stop = (whole(p) for p in pair)
    if start is None or stop is None or start < 0 or stop <= start:
        raise ValueError(problem)
    return start, stop


def _fit_running(model: Any) -> bool:
    """Whether ``model.fit`` is on this thread's stack (a window it opened may still be in use)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "fit" and f.f_locals.get("self") is model:
            return True
        f = f.f_back
    return False


def _runfacts():
    """:mod:`tfadvisor.capture.runfacts`, imported when first used (not by ``import tfadvisor.keras``)."""
    from tfadvisor.capture import runfacts

    return runfacts


def _callback_class():
    """``AdvisorCallback``: :class:`_AdvisorCallbackImpl` mixed into ``keras.callbacks.Callback``, made once."""
    global _CLASS
    if _CLASS is None:
        try:
            import keras  # the top-level Keras package (absolute import)
        except ImportError as err:
            raise ImportError(f"tfadvisor.keras.AdvisorCallback needs Keras 3 and TensorFlow ({err}): "
                              "pip install 'tfadvisor[tf]'") from err

        class AdvisorCallback(_AdvisorCallbackImpl, keras.callbacks.Callback):
            __doc__ = _AdvisorCallbackImpl.__doc__

        AdvisorCallback.__qualname__ = "AdvisorCallback"  # pickled by name: tfadvisor.keras.AdvisorCallback
        _CLASS = AdvisorCallback
    return _CLASS


def _infer_batch_size(model: Any) -> int | None:
    """The batch size of the running ``fit``, read from its frame (numpy arrays, tf.data)."""
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "fit" and f.f_locals.get("self") is model:
            loc = f.f_locals
            it = loc.get("epoch_iterator")
            adapter = getattr(it, "data_adapter", None) if it is not None else None
            size = None
            if adapter is not None:
                try:
                    size = adapter.batch_size
                except Exception:  # noqa: BLE001
                    size = None
            if size is None and adapter is not None:
                size = dataset_batch_size(getattr(adapter, "_dataset", None))
            if size is None:
                size = loc.get("batch_size")
            if size is None:
                size = dataset_batch_size(loc.get("x"))
            try:
                return int(size) if size is not None else None
            except (TypeError, ValueError):
                return None
        f = f.f_back
    return None


def dataset_batch_size(ds: Any) -> int | None:
    """The batch size of a ``tf.data`` pipeline whose batch dimension is not static.

    ``ds.batch(64)`` without ``drop_remainder`` has element shapes ``(None, ...)``, yet its
    batches (all but maybe the last) hold 64 elements: read the size given to the last
    ``batch``/``padded_batch`` in the chain (``map``, ``prefetch``, ``repeat`` ... after it
    keep it). Reads no data. None when there is no such op or the size is not a constant.
    """
    seen = 0
    while ds is not None and seen < 1000:
        seen += 1
        size = getattr(ds, "_batch_size", None)
        if size is not None:
            try:
                from tensorflow.python.framework import tensor_util

                value = tensor_util.constant_value(size)
                return int(value) if value is not None and int(value) > 0 else None
            except Exception:  # noqa: BLE001
                return None
        if type(ds).__name__ in ("_UnbatchDataset", "_RebatchDataset"):
            return None
        ds = getattr(ds, "_input_dataset", None)
    return None


class _AdvisorCallbackImpl(CaptureOptionsView):
    """Profile steps ``[start, stop)`` of ``fit``, write metadata, print the top findings.

    Args:
        logdir: where the profiler writes (``<logdir>/plugins/profile/<run>/``); local or gs://.
        steps: ``(start, stop)``, global step indexes from 0, stop exclusive; default
            ``(10, 20)`` skips 10 warm-up steps (tracing, autotuning). ``None``: only mark
            steps, never start the profiler.
        options: ``tf.profiler.experimental.ProfilerOptions`` or dict; or the levels:
        host_tracer_level: 1 (critical) .. 3 (verbose); default 2.
        python_tracer_level: 1 traces Python calls (costly); default 0.
        device_tracer_level: 0/1 GPU/TPU activity; default 1.
        memory: record CPU memory events (``TF_CPU_ALLOCATOR_USE_BFC=true``; must be set
            before TF starts, so it warns when too late).
        analyze: analyse the profile when the window closes and print the top findings.
        report_json, report_html: also write these reports.
        top: how many findings to print.
        verbose: print ``tfadvisor: ...`` lines (findings are logged either way).
        batch_size: global batch size for the metadata (default: read from ``fit``).
        metadata: extra keys for ``tfadvisor_run.json`` (e.g. ``link``, ``bandwidth_gbps``).
        name: the step marker's name.
        retries: when another profiler is running as the window opens, try again at this
            many following executions (0: give up at once).
        min_executions: under ``steps_per_execution=k`` the window lasts at least this many
            executions (k steps each), so that it can show steady state; 0: exactly ``steps``.
        clock_steps: time at most this many executions on each side of the window with a plain clock (no
            profiler; ``tfadvisor_run.json`` ``clock``); 0: none.
    """

    def __init__(
        self,
        logdir: str | os.PathLike,
        steps: Any = (10, 20),
        *,
        options: Any = None,
        host_tracer_level: int | None = None,
        python_tracer_level: int | None = None,
        device_tracer_level: int | None = None,
        memory: bool = False,
        analyze: bool = True,
        report_json: str | os.PathLike | None = None,
        report_html: str | os.PathLike | None = None,
        top: int = 3,
        verbose: bool = True,
        batch_size: int | None = None,
        metadata: dict[str, Any] | None = None,
        name: str = "train",
        stream=None,
        retries: int = 20,
        min_executions: int = MIN_EXECUTIONS,
        clock_steps: int = CLOCK_STEPS,
    ) -> None:
        super().__init__()
        self.window = parse_window(steps)
        self.requested = self.window  # the window asked for (self.window moves when a cut-short one re-arms)
        # what each window captures, checked here; every window's ProfileSession is made from it (_new_session)
        self.capture = CaptureOptions.make(
            logdir, options, host_tracer_level=host_tracer_level, python_tracer_level=python_tracer_level,
            device_tracer_level=device_tracer_level, memory=memory, analyze=analyze, report_json=report_json,
            report_html=report_html, top=top, verbose=verbose, stream=stream, metadata=metadata, source=SOURCE)
        self.retries = whole_at_least("retries", retries, 0)
        self.min_executions = whole_at_least("min_executions", min_executions, 0)
        self.clock_steps = whole_at_least("clock_steps", clock_steps, 0)
        self._pending: list | None = None  # the clock's open interval: [t0, side, steps, kind, eval_s, skip]
        self._test_t0: float | None = None
        self._fit_epochs = 0  # epochs begun in this fit
        self._fit_planned_epochs = 1
        self._epoch_begin_step = 0  # the global step the running epoch began at
        self.batch_size = batch_size
        self.name = name
        self.state = MARKING if self.window is None else WAITING
        self.steps_seen = 0  # global steps started so far (all epochs and fit calls)
        self._new_window()
        self.run_dir: str | None = None
        self.result = None
        self.error: str | None = None
        self._spe = 1
        self._epoch_steps: int | None = None
        self._exec_first = 0
        self._exec_n = 1
        self._marker = None
        self._step = markers.step
        self._fit_batch_size: int | None = None
        self._startup = not _runfacts().STARTUP  # record start-up milestones (first fit of the process)
        self.epoch: int | None = None  # the epoch running now
        self.in_fit = False  # between on_train_begin and on_train_end (stays True when fit raised)
        self.run_dirs: list[str] = []  # every window's run directory (several after a re-arm)
        if memory:  # now, to warn while it can still be fixed (the session's start would be too late)
            enable_memory_events()

    @property
    def extra_metadata(self) -> dict[str, Any]:
        """The ``metadata=`` keys, written into ``tfadvisor_run.json`` over the window's facts."""
        return self.capture.metadata

    # --- Keras hooks -------------------------------------------------------------
    def on_train_begin(self, logs=None):
        if self.in_fit and self.state is PROFILING:  # the fit that opened the window raised
            self._cut(f"the fit that ran the window ended with an error after {self.profiled_steps} step(s)")
        self.in_fit = True
        if self.state is DONE and self.cut_short and self.requested is not None:
            self._rearm()
        if self._startup:
            self._startup_mark("fit_start")
        try:
            spe = getattr(self.model, "steps_per_execution", 1)
            self._spe = max(1, int(spe if spe is not None else 1))
        except Exception:  # noqa: BLE001
            self._spe = 1
        steps = (self.params or {}).get("steps")
        self._epoch_steps = int(steps) if isinstance(steps, int) and steps > 0 else None
        epochs = (self.params or {}).get("epochs")
        self._fit_planned_epochs = int(epochs) if isinstance(epochs, int) and epochs > 0 else 1
        self._fit_epochs = 0
        self._pending = None
        try:
            self._fit_batch_size = self.batch_size or _infer_batch_size(self.model)
        except Exception:  # noqa: BLE001
            self._fit_batch_size = self.batch_size
        if self.state is MARKING:
            try:
                _runfacts().MODEL_INFO.update(self._model_info())
            except Exception:  # noqa: BLE001
                pass

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = int(epoch) if isinstance(epoch, int) else None
        self._fit_epochs += 1
        self._epoch_begin_step = self.steps_seen

    def on_epoch_end(self, epoch, logs=None):
        if self.state is PROFILING:
            self.epoch_ends.append(self.steps_seen)
        if self._pending is not None and not self._pending[3]:
            self._pending[3] = "epoch_end"

    def on_test_begin(self, logs=None):
        if self.state is PROFILING:
            self.validation_runs += 1
        if self._pending is not None:
            self._pending[3] = "validation"
            self._test_t0 = time.perf_counter()

    def on_test_end(self, logs=None):
        if self._pending is not None and self._test_t0 is not None:
            self._pending[4] += time.perf_counter() - self._test_t0
        self._test_t0 = None

    # --- the plain clock (no profiler) ----------------------------------------------
    def _clock_end(self, t: float) -> None:
        """Close the clock's open interval at ``t`` (the next execution's start, or the end of fit)."""
        p, self._pending = self._pending, None
        if p is None or p[5]:
            return
        side = self.clock.setdefault(p[1], {"ms": [], "steps": [], "kind": [], "eval_ms": []})
        if p[1] != "inside" and len(side["ms"]) >= self.clock_steps:
            return
        side["ms"].append(round((t - p[0]) * 1000.0, 4))
        side["steps"].append(int(p[2]))
        side["kind"].append(p[3])
        side["eval_ms"].append(round(p[4] * 1000.0, 4))

    def _clock_start(self, t: float, first_of_fit: bool) -> None:
        """Open the interval of the execution starting at ``t``, on its side of the window."""
        side = {WAITING: "before", BUSY: "before", PROFILING: "inside", DONE: "after"}.get(self.state)
        if side is None or (self.clock_steps == 0 and side != "inside"):
            return
        # the fit's first execution traces the step function; a fit of several epochs: its first epoch (the first
        # evaluation traces too, tf.data autotunes)
        skip = first_of_fit or (self._fit_epochs <= 1 and self._fit_planned_epochs >= 2)
        self._pending = [t, side, self._exec_n, "", 0.0, skip]

    def _clock_facts(self) -> dict[str, Any]:
        """``tfadvisor_run.json`` ``clock``: the sides timed so far."""
        return {k: {f: list(v) for f, v in side.items()} for k, side in self.clock.items()}

    def _write_clock(self) -> None:
        """The clock with the after side, into the window's run file (it was written without it at the close)."""
        if not self.run_dir or not self.clock.get("after"):
            return
        try:
            _runfacts().write_run_metadata(self.run_dir, {"clock": self._clock_facts()})
        except Exception as err:  # noqa: BLE001
            warn(f"the unprofiled step times were not recorded: {type(err).__name__}: {err}")
            return
        if self.verbose:
            self._say(f"tfadvisor: {self._clock_line()}")

    def _clock_line(self) -> str:
        """One line on the clock's sides: ms per training step outside the window and inside it."""
        bits = []
        for side in ("before", "inside", "after"):
            c = self.clock.get(side)
            if c and c["ms"]:
                n = sum(c["steps"])
                bits.append(f"{side} {sum(c['ms']) / max(n, 1):.3g} ms per step over {n} steps")
        return "unprofiled clock (wall time per training step, evaluation and epoch ends included): " + "; ".join(bits)

    def on_train_batch_begin(self, batch, logs=None):
        t = time.perf_counter()
        first_of_fit = self._pending is None and self._fit_epochs <= 1 and batch == 0
        self._clock_end(t)
        if self._startup and "first_batch" not in _runfacts().STARTUP:
            self._startup_mark("first_batch")
        if self._marker is not None:  # left open: a step that raised, then fit was called again
            self._end_marker()
        n = self._spe
        if n > 1 and self._epoch_steps is not None and isinstance(batch, int):
            n = max(1, min(n, self._epoch_steps - batch))
        first = self.steps_seen
        self.steps_seen = first + n
        self._exec_first = first
        self._exec_n = n
        state = self.state
        if state is WAITING or state is BUSY:
            if first < self.window[0]:
                self._clock_start(t, first_of_fit)
                return
            self._open()
            state = self.state
        if state is PROFILING and self.epoch is not None and self.epoch not in self.window_epochs:
            self.window_epochs.append(self.epoch)
        if state is PROFILING or state is MARKING:
            marker = self._step(first, self.name)
            marker.__enter__()
            self._marker = marker
        self._clock_start(t, first_of_fit)

    def on_train_batch_end(self, batch, logs=None):
        if self._startup:
            self._startup_mark("first_step")
        marker = self._marker
        if marker is None:
            return
        self._marker = None
        # a session stopped from another thread (time mode) is no longer the active one: its trace lacks
        # this marker, so the step is not counted (as tfadvisor.step does); the lock keeps the stop
        # from falling between the marker's end and this check
        with markers.MARKER_LOCK:
            marker.__exit__(None, None, None)
            in_trace = markers.active_session() is self.session
        if self.state is PROFILING and in_trace:
            self.profiled_steps += self._exec_n
            self.marked_executions += 1
            if self.profiled_steps >= self.window_length():
                self._close()

    def on_train_end(self, logs=None):
        self.in_fit = False
        self._end_marker()
        self._clock_end(time.perf_counter())
        if self.state is DONE:
            self._write_clock()
        if self.state is BUSY:
            self._give_up(f"training ended while another profiler was running ({self.attempts} tries)")
        if self.state is PROFILING:
            self._close(note=f"training ended after {self.profiled_steps} of "
                             f"{self.window_length()} window steps")
        elif self.state is WAITING and self.verbose:
            self._say(f"tfadvisor: profiling window (steps {self.window[0]}-{self.window[1] - 1}) not reached: "
                      f"{self.steps_seen} step(s) trained so far")

    def close(self) -> str | None:
        """Stop a window that is still open (e.g. after ``fit`` raised); the run directory."""
        open_marker = self._marker is not None
        self._end_marker()
        if self.state is PROFILING:
            self.marked_executions += int(open_marker)
            self._close(note=f"closed after {self.profiled_steps} of {self.window_length()} "
                             "window steps")
        return self.run_dir

    # --- the window --------------------------------------------------------------
    def _open(self) -> None:
        retrying = self.state is BUSY
        ok = False
        try:
            if self.session is None:
                self.session = self._new_session()
            self.attempts += 1
            ok = self.session.start()
            if not ok and self.session.busy and self._close_orphan():
                ok = self.session.start()  # the profiler was an abandoned window of ours: stopped now
        except Exception as err:  # noqa: BLE001
            self.error = f"{type(err).__name__}: {err}"
            warn(f"not profiling: {self.error}")
        if not ok:
            session = self.session
            if session is not None and session.busy and self.attempts <= self.retries:
                if not retrying:
                    self.clash = session.error
                    self.state = BUSY
                    msg = (f"another profiler is running at step {self._exec_first} ({self._who_profiles()}); "
                           f"trying again at the next {self.retries} step(s)")
                    logger.warning(msg)
                    if self.verbose:
                        self._say(f"tfadvisor: {msg}")
                return
            if session is not None and session.busy:
                self._give_up(f"another profiler was still running after {self.attempts} tries")
                return
            self.state = FAILED
            self.error = self.error or (session.error if session else None)
            return
        self.state = PROFILING
        self.first_profiled = self._exec_first
        self.window_epoch_offset = self._exec_first - self._epoch_begin_step
        self.error = None
        atexit.register(self._at_exit)
        signals.on_signal(self._on_signal)
        if self.verbose:
            late = (f", {self._exec_first - self.window[0]} step(s) late: another profiler was running"
                    if self.clash else "")
            length = self.window_length()
            grown = (f" = {length // self._spe} executions of steps_per_execution={self._spe}"
                     if self._spe > 1 else "")
            self._say(f"tfadvisor: profiling from step {self._exec_first} ({length} steps{grown}) into "
                      f"{self.logdir}{late}")

    def _new_session(self) -> ProfileSession:
        """The window's profiling session, made from this callback's options (one object: ``hint`` set on the
        callback reaches it). It says nothing when another profiler runs: :meth:`_open` says it, once."""
        from tfadvisor.capture.session import ProfileSession

        return ProfileSession.from_options(self.capture, owner=self, quiet_busy=True)

    def window_length(self) -> int:
        """Training steps the window lasts: as asked, and at least ``min_executions`` executions."""
        asked = self.window[1] - self.window[0]
        return max(asked, self.min_executions * self._spe) if self._spe > 1 else asked

    def _give_up(self, why: str) -> None:
        self.state = FAILED
        self.error = f"not profiling: {why} ({self.clash})"
        warn(self.error)

    def _who_profiles(self) -> str:
        """Who holds the profiler, as far as this process knows."""
        other = markers.active_session()
        if other is None or other is self.session:
            return "a TensorBoard callback's profile_batch, \"Capture profile\" in TensorBoard, or another tool"
        owner = getattr(other, "owner", None)
        where = getattr(other, "logdir", "?")
        if owner is not None:
            return f"another tfadvisor AdvisorCallback's window, into {where}"
        return f"a tfadvisor.profile() block, into {where}"

    def _close_orphan(self) -> bool:
        """Stop a window of another AdvisorCallback whose fit is over (it raised or was interrupted)."""
        other = markers.active_session()
        owner = getattr(other, "owner", None)
        if owner is None or owner is self or getattr(owner, "state", None) is not PROFILING:
            return False
        if _fit_running(owner.model):  # a fit inside a fit: that window is still in use
            return False
        owner._cut(f"its fit ended with an error or an interrupt after {owner.profiled_steps} step(s); saved "
                   "when the next fit started")
        return markers.active_session() is not other

    def _cut(self, why: str, signal_name: str | None = None) -> None:
        """Close a window that ends early (a signal, fit raising); the next fit re-arms it."""
        if self.state is not PROFILING:
            return
        self.cut_short = why
        open_marker = self._marker is not None
        self._end_marker()
        self.marked_executions += int(open_marker)
        self._close(note=f"window cut short: {why}", signal_name=signal_name)

    def _new_window(self) -> None:
        """What one window counts, from nothing (at construction, and when a cut-short window re-arms)."""
        self.session: ProfileSession | None = None
        self.profiled_steps = 0
        self.marked_executions = 0
        self.first_profiled: int | None = None
        self.attempts = 0  # profiler starts tried
        self.clash: str | None = None  # the first "another profiler is running" error
        self.window_epochs: list[int] = []  # epochs with profiled steps
        self.epoch_ends: list[int] = []  # global steps after which an epoch ended inside the window
        self.validation_runs = 0  # validation passes inside the window
        self.window_epoch_offset: int | None = None  # the window's first step's index in its epoch
        self.clock: dict[str, dict[str, list]] = {}  # the plain clock's sides (tfadvisor_run.json "clock")
        self.cut_short: str | None = None  # why the window ended early (a signal, fit raising)

    def _rearm(self) -> None:
        start, stop = self.requested
        self.window = (self.steps_seen + start, self.steps_seen + stop)
        self.state = WAITING
        self._new_window()
        if self.verbose:
            say(f"tfadvisor: the last window was cut short; profiling steps {self.window[0]}-"
                f"{self.window[1] - 1} of this fit ({start} steps into it)", self.stream)

    def _on_signal(self, what: str) -> None:
        if self.state is PROFILING:
            self._cut(f"{what} during the window, after {self.profiled_steps} step(s)", signal_name=what)

    def _at_exit(self) -> None:
        if self.state is PROFILING:  # the step that was running when the program stopped is counted
            self._cut(f"the program ended during the window, after {self.profiled_steps} step(s)")

    def _end_marker(self) -> None:
        marker = self._marker
        if marker is not None:
            self._marker = None
            marker.__exit__(None, None, None)

    def _close(self, note: str | None = None, signal_name: str | None = None) -> None:
        """Stop the window's session, with what only the window knows: its facts, label and the signal that cut
        it short."""
        self.state = DONE
        if self._pending is not None:  # the last window step's interval holds the profiler stopping and writing
            self._pending[5] = True
        try:
            atexit.unregister(self._at_exit)
            signals.forget_signal(self._on_signal)
        except Exception:  # noqa: BLE001
            pass
        session = self.session
        if session is None:
            return
        first = self.first_profiled if self.first_profiled is not None else self.window[0]
        facts: dict[str, Any] = {}  # for tfadvisor_run.json, under the metadata= keys
        try:  # a failure here must not keep the profiler from stopping
            facts.update(self._model_info())
            facts["steps"] = self._window_facts(first, note)
            if self.clock:
                facts["clock"] = self._clock_facts()
        except Exception as err:  # noqa: BLE001
            warn(f"the window's facts were not all recorded: {type(err).__name__}: {err}")
        if note and self.verbose:
            self._say(f"tfadvisor: {note}")
        last = first + self.profiled_steps - 1
        label = f"steps {first}-{last}" if self.profiled_steps else "no steps"
        try:
            self.run_dir = session.stop(label=label, facts=facts, interrupted=signal_name)
        except Exception as err:  # noqa: BLE001
            self.error = f"{type(err).__name__}: {err}"
            warn(f"profiling window did not close cleanly: {self.error}")
            return
        if self.run_dir and self.run_dir not in self.run_dirs:
            self.run_dirs.append(self.run_dir)
        self.result = session.result
        if self.error is None:
            self.error = session.error

    def _window_facts(self, first: int, note: str | None) -> dict[str, Any]:
        """``tfadvisor_run.json`` ``steps``: the window as profiled."""
        steps: dict[str, Any] = {
            "start": first,
            "stop": first + self.profiled_steps,
            "count": self.profiled_steps,
            "markers": self.marked_executions,
            "steps_per_execution": self._spe,
            "requested": list(self.window),
            "length": self.window_length(),
        }
        if self.cut_short:
            steps["cut_short"] = self.cut_short
        if note:
            steps["note"] = note
        if self.clash:
            steps["delayed"] = {"by_steps": first - self.window[0], "tries": self.attempts,
                                "because": self.clash}
        if self.window_epochs:
            steps["epochs"] = list(self.window_epochs)
        ends = [e for e in self.epoch_ends if first < e < first + self.profiled_steps]
        steps["crosses_epoch_end"] = bool(ends)
        if ends:
            steps["epoch_ends_after_step"] = [e - 1 for e in ends]
        steps["validation_runs"] = self.validation_runs
        if self._epoch_steps:
            steps["steps_per_epoch"] = self._epoch_steps
            # where in its epochs the window starts and ends: step index in the epoch (0: at its start; ends at
            # steps_per_epoch: at its end)
            if self.window_epoch_offset is not None:
                steps["starts_at_epoch_step"] = self.window_epoch_offset
            steps["ends_at_epoch_step"] = first + self.profiled_steps - self._epoch_begin_step
        return steps

    def _startup_mark(self, what: str) -> None:
        """Start-up milestones: process start -> fit start -> first batch -> first step done."""
        try:
            from tfadvisor.capture.system_sampler import process_start_unix_s, startup_point

            st = _runfacts().STARTUP
            if what == "fit_start":
                if "fit_start" in st:  # another fit of the same process: nothing new to record
                    self._startup = False
                    return
                st["process_start_unix_s"] = process_start_unix_s()
                p = self.params or {}
                epochs, steps = p.get("epochs"), p.get("steps")
                if isinstance(epochs, int) and isinstance(steps, int):
                    st["planned_steps"] = epochs * steps
                st["source"] = SOURCE
            st[what] = startup_point()
            if what == "first_step":
                st["first_step_index"] = self.steps_seen - self._exec_n
                st["first_step_in_window"] = self.state is PROFILING
                self._startup = False
        except Exception as err:  # noqa: BLE001 - never break fit for a timestamp
            self._startup = False
            warn(f"start-up facts not recorded: {type(err).__name__}: {err}")

    def _model_info(self) -> dict[str, Any]:
        runfacts = _runfacts()
        info = runfacts.model_facts(self.model, self._fit_batch_size)
        try:
            strategy = self.model.distribute_strategy
        except Exception:  # noqa: BLE001
            strategy = None
        facts = runfacts.environment_facts(strategy)
        facts.update(info)
        return facts

    def _say(self, line: str) -> None:
        say(line, self.stream)
