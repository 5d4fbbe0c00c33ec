"""tfadvisor's capture hook for ``tfadvisor capture run`` (not for direct use).

``tfadvisor capture run`` puts this directory first on ``PYTHONPATH`` and describes the
capture in the ``TFADVISOR_CAPTURE`` environment variable (JSON). Python imports this
``sitecustomize`` module at start-up; it then

* takes the variable out of the environment (and this directory out of ``PYTHONPATH``),
  so that processes the script starts are not armed too; processes it forks inherit the
  hook but are not armed either (only the process it armed profiles, reports and saves);
* watches for the import of ``keras`` and wraps ``keras.Model.fit`` so that every
  ``fit`` call gets one shared ``tfadvisor.keras.AdvisorCallback``: in step mode it
  profiles the step window; in time mode it only marks steps;
* in step mode, for custom loops, watches the step markers too (TensorFlow's
  ``tf.profiler.experimental.Trace(name, step_num=i, _r=1)``, which ``tfadvisor.step`` also
  records): the profiler starts before the marker of step ``start_step`` (or the first one
  after it) and stops after ``steps`` markers have ended, unless the script trains with
  ``fit``, whose callback then keeps the window;
* in time mode, starts a timer thread that starts the profiler ``start_after_s`` seconds
  after start-up (once TensorFlow is imported) and stops it ``duration_s`` later;
* when a profiling window opens, says so in the status file (a process that then dies
  without stopping the profiler, e.g. ``os._exit`` or a crash, is reported as a lost window);
* at exit, stops a profiler that is still running and writes what happened (run
  directory, steps seen, errors) to the status file the parent reads; on SIGTERM too
  (then the signal does what it did: by default it ends the process);
* finally runs the ``sitecustomize`` module this one shadows, if there is one.

Nothing here imports TensorFlow, Keras or tfadvisor at start-up, and nothing here may
break the script: every problem becomes a ``tfadvisor: ...`` line on stderr.
"""

import os
import sys
import time

_ENV = "TFADVISOR_CAPTURE"
_TRACE_MODULE = "tensorflow.python.profiler.trace"  # tf.profiler.experimental.Trace: the step markers
_HERE = os.path.dirname(os.path.abspath(__file__))


def _say(line):
    try:
        sys.stderr.write("tfadvisor: " + line + "\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


class _Capture:
    def __init__(self, cfg):
        import threading

        self.cfg = cfg
        self.mode = cfg.get("mode", "steps")
        self.logdir = cfg["logdir"]
        self.options = cfg.get("options") or {}
        self.callback = None
        self.callback_error = None
        self.fit_calls = 0
        self.keras_loaded = False
        self.session = None
        self.timer_note = None
        self.lock = threading.Lock()
        self.exiting = threading.Event()
        self.thread = None
        self.t0 = time.time()
        self.terminating = False
        self.signal_name = None
        self.prev_sigterm = None
        self.pid = os.getpid()  # the process armed; forked children are not
        self.window = None  # the open window, as written to the status file
        self.loop_state = None  # custom loops: None (waiting), "profiling", "done" or "failed"
        self.loop_session = None
        self.loop_first = None
        self.loop_last = None
        self.loop_count = 0
        self.markers_seen = 0
        self.last_marker = None

    def armed(self):
        """Only the process that was armed captures (not a child it forked)."""
        return os.getpid() == self.pid

    def window_opened(self, session):
        """A profiler started in this process: record it, so that dying in the window is reported."""
        if not self.armed():
            return
        cb = self.callback
        self.window = {"logdir": self.logdir, "pid": self.pid, "opened_after_s": round(time.time() - self.t0, 1)}
        if cb is not None and getattr(cb, "session", None) is session:
            self.window["first_step"] = getattr(cb, "_exec_first", None)
        elif session is self.loop_session:
            self.window["first_step"] = self.loop_first
        self.write_status({"mode": self.mode, "run_dir": None, "error": None, "window_open": self.window})

    def watch_windows(self):
        try:
            from tfadvisor.capture.session import ON_START

            if self.window_opened not in ON_START:
                ON_START.append(self.window_opened)
        except Exception as err:  # noqa: BLE001
            _say(f"cannot watch the profiling window ({type(err).__name__}: {err})")

    def new_session(self, source, label=None, asked_s=None):
        """A session of the parent's options (it prints on stderr; the parent analyses the profile)."""
        from tfadvisor.capture.options import CaptureOptions
        from tfadvisor.capture.session import ProfileSession

        return ProfileSession.from_options(CaptureOptions.make(self.logdir, self.options, source=source, verbose=True,
                                                               stream=sys.stderr, hint=False),
                                           label=label, asked_s=asked_s)

    # --- Keras ---------------------------------------------------------------------------
    def make_callback(self):
        if self.callback is None and self.callback_error is None:
            try:
                from tfadvisor.capture.keras import AdvisorCallback

                self.watch_windows()
                if self.mode == "steps":
                    start = int(self.cfg.get("start_step", 10))
                    window = (start, start + int(self.cfg.get("steps", 10)))
                    self.callback = AdvisorCallback(self.logdir, steps=window, options=self.options,
                                                    analyze=False, verbose=True, stream=sys.stderr)
                    self.callback.hint = False  # the parent analyses it
                else:
                    self.callback = AdvisorCallback(self.logdir, steps=None, analyze=False, verbose=False,
                                                    stream=sys.stderr)
            except Exception as err:  # noqa: BLE001
                self.callback_error = f"{type(err).__name__}: {err}"
                _say(f"cannot arm the Keras callback ({self.callback_error}); the script runs unprofiled")
        return self.callback

    def keras_imported(self, keras):
        import functools
        import inspect

        self.keras_loaded = True
        model_cls = getattr(keras, "Model", None)
        if model_cls is None or getattr(model_cls.fit, "_tfadvisor_wrapped", False):
            return
        orig_fit = model_cls.fit
        sig = inspect.signature(orig_fit)
        capture = self

        @functools.wraps(orig_fit)
        def fit(self, *args, **kwargs):
            if not capture.armed():  # a forked child: trains as the script wrote it
                return orig_fit(self, *args, **kwargs)
            capture.fit_calls += 1
            try:
                cb = capture.make_callback()
                if cb is not None:
                    bound = sig.bind_partial(self, *args, **kwargs)
                    given = bound.arguments.get("callbacks")
                    if given is None or isinstance(given, (list, tuple)):
                        cbs = list(given or [])
                        if not any(c is cb for c in cbs):
                            cbs.append(cb)
                        bound.arguments["callbacks"] = cbs
                        args, kwargs = bound.args[1:], bound.kwargs
                    else:
                        _say("fit(callbacks=...) is not a list; the tfadvisor callback is not added")
            except Exception as err:  # noqa: BLE001
                _say(f"cannot add the tfadvisor callback to fit ({type(err).__name__}: {err})")
            return orig_fit(self, *args, **kwargs)

        fit._tfadvisor_wrapped = True
        model_cls.fit = fit

    # --- custom loops: step markers (step mode) --------------------------------------------
    def trace_imported(self, module):
        """Wrap TensorFlow's ``Trace`` so that step markers (``_r=1`` with ``step_num``) drive the window."""
        cls = getattr(module, "Trace", None)
        if cls is None or getattr(cls.__init__, "_tfadvisor_wrapped", False) or self.mode != "steps":
            return
        orig_init, orig_exit = cls.__init__, cls.__exit__
        capture = self

        def __init__(self, name, **kwargs):
            n = kwargs.get("step_num")
            if kwargs.get("_r") == 1 and n is not None and capture.loop_wanted():
                self._tfadvisor_step = n
                capture.loop_step_begins(n)  # the profiler must run before the marker is made
            orig_init(self, name, **kwargs)

        def __exit__(self, *exc):
            out = orig_exit(self, *exc)
            n = self.__dict__.get("_tfadvisor_step")
            if n is not None:
                capture.loop_step_ends(n)
            return out

        __init__._tfadvisor_wrapped = True
        cls.__init__, cls.__exit__ = __init__, __exit__

    def loop_wanted(self):
        return self.armed() and self.fit_calls == 0 and self.loop_state in (None, "profiling")

    def loop_step_begins(self, n):
        try:
            n = int(n)
        except (TypeError, ValueError):
            return
        self.markers_seen += 1
        self.last_marker = n
        start, steps = int(self.cfg.get("start_step", 10)), int(self.cfg.get("steps", 10))
        if self.loop_state is not None or n < start:
            return
        try:
            self.watch_windows()
            self.loop_first = n
            session = self.new_session("tfadvisor capture run (step markers)")
            self.loop_session = session
            if not session.start():
                self.loop_state = "failed"
                return
            self.loop_state = "profiling"
            _say(f"profiling from step {n} ({steps} steps, counted by step markers) into {self.logdir}")
        except Exception as err:  # noqa: BLE001
            self.loop_state = "failed"
            _say(f"cannot profile the step window ({type(err).__name__}: {err}); the script runs unprofiled")

    def loop_step_ends(self, n):
        if self.loop_state != "profiling":
            return
        self.loop_count += 1
        self.loop_last = n
        if self.loop_count >= int(self.cfg.get("steps", 10)):
            self.stop_loop()

    def stop_loop(self, note=None):
        session = self.loop_session
        self.loop_state = "done"
        if session is None or not session.started:
            return
        try:
            start, steps = int(self.cfg.get("start_step", 10)), int(self.cfg.get("steps", 10))
            first, last = self.loop_first, self.loop_last
            window = {"start": first, "stop": (last + 1) if last is not None else first, "count": self.loop_count,
                      "markers": self.loop_count, "requested": [start, start + steps], "by": "step markers"}
            if note:
                window["note"] = note
                _say(note)
            session.stop(label=f"steps {first}-{last}" if last is not None else "no steps", facts={"steps": window},
                         interrupted=self.signal_name)
        except Exception as err:  # noqa: BLE001
            _say(f"the step window did not close cleanly ({type(err).__name__}: {err})")

    def watch_for_steps(self):
        """Step mode: say so while the script runs when, ``no_steps_warn_s`` (30 s) after start-up, it has neither
        called ``fit`` nor made a step marker: a custom loop without markers never arms the window, and waiting for
        the script's end to learn it wastes the run."""
        import threading

        delay = float(self.cfg.get("no_steps_warn_s", 30.0))
        if delay <= 0:
            return
        timer = threading.Timer(delay, self._no_steps_yet, args=(delay,))
        timer.daemon = True
        timer.name = "tfadvisor-step-watch"
        timer.start()

    def _no_steps_yet(self, delay):
        if not self.armed() or self.exiting.is_set() or self.fit_calls or self.markers_seen:
            return
        _say(f"{delay:g} s and neither keras Model.fit nor a step marker yet: the step window opens at step "
             f"{int(self.cfg.get('start_step', 10))} of fit, or of a custom loop that marks its steps "
             "(with tfadvisor.step(i): train_step(batch), or tf.profiler.experimental.Trace('train', step_num=i, "
             "_r=1)); a loop without markers is never profiled: mark its steps, or capture by time with "
             "--start-after-s/--duration-s")

    # --- time mode -------------------------------------------------------------------------
    def start_timer(self):
        import threading

        self.thread = threading.Thread(target=self._timer, name="tfadvisor-capture", daemon=True)
        self.thread.start()

    def _timer(self):
        try:
            start = float(self.cfg.get("start_after_s", 0.0))
            duration = float(self.cfg.get("duration_s", 5.0))
            if self.exiting.wait(start):
                return
            while "tensorflow" not in sys.modules:
                if self.exiting.wait(0.1):
                    self.timer_note = "the script never imported TensorFlow"
                    return
            import importlib

            importlib.import_module("tensorflow")  # waits for an import in progress to finish
            self.watch_windows()
            with self.lock:
                if self.exiting.is_set():
                    return
                # what the window is, known from its start: a stop by the session's own signal handler says it too
                self.session = self.new_session("tfadvisor capture run", asked_s=duration,
                                                label=f"the stretch from {time.time() - self.t0:.1f} s after start")
                if not self.session.start():
                    return
            _say(f"profiling for {duration:g} s into {self.logdir}")
            self.exiting.wait(duration)
            with self.lock:
                if self.session.started:
                    if self.exiting.is_set():
                        self.timer_note = "the script ended before the capture did"
                    self.session.stop()
        except Exception as err:  # noqa: BLE001
            self.timer_note = f"{type(err).__name__}: {err}"
            _say(f"timed capture failed ({self.timer_note})")

    # --- exit ----------------------------------------------------------------------------------
    def on_sigterm(self, signum, frame):
        """Save the profile and the status, then let SIGTERM do what it did before."""

        if self.terminating or not self.armed():
            self._chain_signal(signum, frame, self.prev_sigterm)
            return
        self.terminating = True
        self.signal_name = "SIGTERM"
        self.at_exit()
        self._chain_signal(signum, frame, self.prev_sigterm)

    @staticmethod
    def _chain_signal(signum, frame, prev):
        """What the signal did before this hook: the previous handler (by default: end the process)."""
        import signal

        prev = prev if prev is not None else signal.SIG_DFL
        try:
            signal.signal(signum, prev)
        except Exception:  # noqa: BLE001
            pass
        if callable(prev):
            prev(signum, frame)
        elif prev == signal.SIG_DFL:
            os.kill(os.getpid(), signum)

    def watch_sigterm(self):
        import signal

        try:
            self.prev_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self.on_sigterm)
        except Exception as err:  # noqa: BLE001
            _say(f"cannot watch SIGTERM ({err}); a SIGTERM loses the profile")

    def at_exit(self):
        if not self.armed():  # a forked child that exits normally: the parent reports
            return
        status = {"mode": self.mode, "fit_calls": self.fit_calls, "keras_imported": self.keras_loaded,
                  "tensorflow_imported": "tensorflow" in sys.modules, "run_dir": None, "error": None}
        try:
            self.exiting.set()
            cb = self.callback
            if cb is not None and getattr(cb, "state", None) == "profiling":
                if self.signal_name:
                    cb._on_signal(self.signal_name)
                else:
                    cb.close()
            if self.mode == "time":
                with self.lock:
                    if self.session is not None and self.session.started:
                        self.timer_note = "the script ended before the capture did"
                        self.session.stop(interrupted=self.signal_name)
                if self.session is not None:
                    status["run_dir"] = self.session.run_dir
                    status["error"] = self.session.error
                    status["steps_marked"] = self.session.steps
                status["note"] = self.timer_note
            elif cb is not None and self.fit_calls:
                status.update(run_dir=cb.run_dir, error=cb.error, state=cb.state, steps_seen=cb.steps_seen,
                              steps_profiled=cb.profiled_steps)
            if self.loop_state == "profiling":
                self.stop_loop(f"the script ended during the step window, after {self.loop_count} step(s)")
            if self.loop_session is not None:
                status.update(run_dir=self.loop_session.run_dir, error=self.loop_session.error,
                              steps_profiled=self.loop_count)
            status.update(markers_seen=self.markers_seen, last_marker=self.last_marker)
            if self.callback_error:
                status["error"] = status["error"] or self.callback_error
            if self.signal_name:
                status["signal"] = self.signal_name
        except Exception as err:  # noqa: BLE001
            status["error"] = f"{type(err).__name__}: {err}"
        if self.window is not None:
            status["window"] = self.window
        self.write_status(status)

    def write_status(self, status):
        """The status file the parent reads (replaced whole, so it never reads half of one)."""
        path = self.cfg.get("status")
        if not path:
            return
        try:
            import json

            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                json.dump(status, fh)
            os.replace(tmp, path)
        except Exception as err:  # noqa: BLE001
            _say(f"cannot write the status file {path} ({err})")


class _ImportWatcher:
    """A meta path finder that calls ``callbacks[name](module)`` once module ``name`` has been imported."""

    def __init__(self, callbacks):
        self.callbacks = dict(callbacks)
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.callbacks or self.busy:
            return None
        self.busy = True
        spec = None
        try:
            for finder in list(sys.meta_path):
                if finder is self:
                    continue
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # importlib.util.find_spec("keras") also lands here without importing (TensorFlow does
        # that): stay on sys.meta_path until a spec is actually executed.
        original = spec.loader.exec_module
        watcher = self

        def exec_module(module):
            original(module)
            callback = watcher.callbacks.pop(fullname, None)
            if not watcher.callbacks:
                try:
                    sys.meta_path.remove(watcher)
                except ValueError:
                    pass
            try:
                if callback is not None:
                    callback(module)
            except Exception as err:  # noqa: BLE001
                _say(f"cannot watch {fullname} ({type(err).__name__}: {err})")

        try:
            spec.loader.exec_module = exec_module
        except Exception as err:  # noqa: BLE001
            _say(f"cannot watch the keras import ({err})")
        return spec


def _disarm_children(cfg):
    """Processes the script starts must not be armed: restore the environment."""
    os.environ.pop(_ENV, None)
    original = cfg.get("pythonpath")
    if original is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = original


def _arm():
    raw = os.environ.get(_ENV)
    if not raw:
        return
    try:
        import json

        cfg = json.loads(raw)
    except Exception as err:  # noqa: BLE001
        _say(f"bad {_ENV} ({err}); the script runs unprofiled")
        os.environ.pop(_ENV, None)
        return
    _disarm_children(cfg)
    try:
        import atexit

        capture = _Capture(cfg)
        atexit.register(capture.at_exit)
        capture.watch_sigterm()
        watch = {"keras": capture.keras_imported}
        if capture.mode == "steps":
            watch[_TRACE_MODULE] = capture.trace_imported
        for name in list(watch):
            if name in sys.modules:
                watch.pop(name)(sys.modules[name])
        if watch:
            sys.meta_path.insert(0, _ImportWatcher(watch))
        if capture.mode == "time":
            capture.start_timer()
        else:
            capture.watch_for_steps()
        globals()["_capture"] = capture
    except Exception as err:  # noqa: BLE001
        _say(f"cannot arm the capture ({type(err).__name__}: {err}); the script runs unprofiled")


def _chain():
    """Run the sitecustomize module this one shadows (e.g. a distribution's), if any."""
    try:
        import importlib.machinery
        import importlib.util

        here = os.path.normcase(os.path.realpath(_HERE))
        rest = [p for p in sys.path if os.path.normcase(os.path.realpath(p or os.getcwd())) != here]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001
        _say(f"the shadowed sitecustomize failed ({type(err).__name__}: {err})")


_arm()
_chain()
