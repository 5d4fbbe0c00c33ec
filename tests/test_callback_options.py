"""The capture options, one object for ``tfadvisor.profile``'s session and the Keras callback, and the callback's
logic as a plain class (``tfadvisor.capture.keras._AdvisorCallbackImpl``), driven here without Keras or TensorFlow:
a fake session and fake step markers stand in for the profiler."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tfadvisor.capture import markers
from tfadvisor.capture.keras import DONE, MARKING, PROFILING, SOURCE, WAITING, _AdvisorCallbackImpl
from tfadvisor.capture.options import DEFAULT_LEVELS, CaptureOptions
from tfadvisor.capture.session import ProfileSession

ROOT = Path(__file__).resolve().parent.parent


# --- CaptureOptions ------------------------------------------------------------------------------

def test_options_are_checked_and_completed_once():
    opts = CaptureOptions.make(Path("logs"), {"python_tracer_level": 1}, python_tracer_level=0, host_tracer_level=3,
                               report_html="r.html", top="4", metadata={"link": "pcie4"})
    assert opts.logdir == "logs"
    assert opts.profiler == {**DEFAULT_LEVELS, "host_tracer_level": 3, "python_tracer_level": 0, "delay_ms": None}
    assert opts.analyze and opts.top == 4 and opts.metadata == {"link": "pcie4"}
    assert CaptureOptions("d").profiler == {**DEFAULT_LEVELS, "delay_ms": None}


@pytest.mark.parametrize("kwargs, words", [
    ({"top": 0}, "top must be a whole number >= 1"),
    ({"top": 2.5}, "top must be a whole number >= 1"),
    ({"options": {"nope": 1}}, "unknown profiler option(s): nope"),
])
def test_bad_options_are_one_error_for_both(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        CaptureOptions.make("d", **kwargs)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        ProfileSession("d", **kwargs)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        _AdvisorCallbackImpl("d", **kwargs)


@pytest.mark.parametrize("kwargs, words", [
    ({"steps": "abc"}, "steps must be (start, stop)"),
    ({"retries": -1}, "retries must be a whole number >= 0"),
    ({"min_executions": "x"}, "min_executions must be a whole number >= 0"),
])
def test_bad_window_arguments(kwargs, words):
    with pytest.raises(ValueError) as err:
        _AdvisorCallbackImpl("d", **kwargs)
    assert words in str(err.value)


def test_the_callback_shares_its_options_with_its_sessions():
    cb = _AdvisorCallbackImpl(Path("logs"), steps=(1, 3), host_tracer_level=3, report_json="r.json", top=5,
                              metadata={"link": "nvlink"}, verbose=False)
    assert (cb.logdir, cb.top, cb.verbose, cb.analyze) == ("logs", 5, False, True)
    assert cb.options["host_tracer_level"] == 3 and cb.extra_metadata == {"link": "nvlink"}
    cb.hint = False  # as `tfadvisor capture run`'s hook does
    session = cb._new_session()
    assert session.capture is cb.capture and session.owner is cb and session.quiet_busy
    assert (session.logdir, session.top, session.hint, session.source) == ("logs", 5, False, SOURCE)
    assert session.extra == {"link": "nvlink"}


def test_a_session_made_from_arguments():
    s = ProfileSession("d", host_tracer_level=1, analyze=False, metadata={"a": 1}, system=False)
    assert s.capture.source == "tfadvisor.profile" and s.options["host_tracer_level"] == 1
    assert not s.analyze and s.system_hz is None and s.extra == {"a": 1} and s.owner is None
    s.hint = False
    assert s.capture.hint is False


def test_stop_takes_what_only_the_window_knows():
    s = ProfileSession.from_options(CaptureOptions("d", metadata={"link": "pcie4"}))
    assert s.stop(label="steps 1-2", facts={"link": "guess", "steps": {"count": 2}}, interrupted="SIGTERM") is None
    assert s.label == "steps 1-2" and s.interrupted == "SIGTERM"
    assert s.extra == {"link": "pcie4", "steps": {"count": 2}}  # the metadata given wins over the facts


# --- the callback's logic, without Keras ---------------------------------------------------------

class FakeSession:
    """Starts and stops no profiler: is the active session between start and stop, like a real one."""

    def __init__(self, busy: bool = False) -> None:
        self.busy = busy
        self.error = "another profiler is running" if busy else None
        self.started = False
        self.stopped: dict[str, Any] | None = None
        self.result = None

    def start(self) -> bool:
        if self.busy:
            return False
        self.started = True
        markers.set_active(self)
        return True

    def stop(self, **kwargs: Any) -> str:
        self.stopped = kwargs
        markers.clear_active(self)
        self.started = False
        return "run_dir"

    def count_step(self, n: Any) -> None:
        pass


class FakeMarker:
    entered: list[int] = []

    def __init__(self, n: int, name: str) -> None:
        self.n = n

    def __enter__(self) -> FakeMarker:
        FakeMarker.entered.append(self.n)
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


class Callback(_AdvisorCallbackImpl):
    """What keras.callbacks.Callback gives the callback: ``model`` and ``params``."""

    model = None

    def __init__(self, *args: Any, busy: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params = {"steps": 8}
        self._step = FakeMarker
        self._startup = False  # no start-up milestones into this process's facts
        self.sessions: list[FakeSession] = []
        self._busy = busy

    def _new_session(self) -> Any:
        self.sessions.append(FakeSession(self._busy))
        return self.sessions[-1]

    def _model_info(self) -> dict[str, Any]:
        return {"param_count": 7}


def _fit(cb: Callback, steps: int) -> None:
    cb.on_train_begin()
    for b in range(steps):
        cb.on_train_batch_begin(b)
        cb.on_train_batch_end(b)
    cb.on_train_end()


def test_the_window_closes_after_its_steps_with_its_facts():
    FakeMarker.entered = []
    cb = Callback("d", steps=(2, 5), verbose=False, metadata={"link": "pcie4"})
    assert cb.state is WAITING
    _fit(cb, 8)
    assert cb.state is DONE and cb.profiled_steps == 3 and cb.steps_seen == 8 and cb.run_dirs == ["run_dir"]
    assert FakeMarker.entered == [2, 3, 4]
    (session,) = cb.sessions
    assert session.stopped["label"] == "steps 2-4" and session.stopped["interrupted"] is None
    facts = session.stopped["facts"]
    assert facts["param_count"] == 7 and "link" not in facts  # the metadata is the session's own (shared options)
    assert facts["steps"]["start"] == 2 and facts["steps"]["count"] == 3 and facts["steps"]["requested"] == [2, 5]


def test_a_signal_in_the_window_cuts_it_and_the_next_fit_rearms():
    cb = Callback("d", steps=(1, 6), verbose=False)
    cb.on_train_begin()
    for b in range(3):
        cb.on_train_batch_begin(b)
        cb.on_train_batch_end(b)
    assert cb.state is PROFILING
    cb._on_signal("SIGTERM")
    first = cb.sessions[0]
    assert cb.state is DONE and first.stopped["interrupted"] == "SIGTERM" and "SIGTERM" in cb.cut_short
    cb.on_train_end()
    _fit(cb, 8)  # re-armed: steps 1-5 of this fit (global 4-8)
    assert len(cb.sessions) == 2 and cb.sessions[1].stopped["label"] == "steps 4-8"


def test_a_busy_profiler_is_retried_then_given_up():
    cb = Callback("d", steps=(1, 3), verbose=False, retries=2, busy=True)
    with pytest.warns(UserWarning, match="another profiler was still running"):
        _fit(cb, 8)
    assert cb.state == "failed" and cb.attempts == 3 and len(cb.sessions) == 1


def test_steps_none_only_marks():
    FakeMarker.entered = []
    cb = Callback("d", steps=None, verbose=False)
    assert cb.state is MARKING
    _fit(cb, 3)
    assert cb.state is MARKING and FakeMarker.entered == [0, 1, 2] and not cb.sessions


def test_importing_the_callback_module_imports_neither_keras_nor_tensorflow():
    code = "import sys, tfadvisor.keras; print('keras' in sys.modules, 'tensorflow' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.stdout.split() == ["False", "False"], proc.stderr
