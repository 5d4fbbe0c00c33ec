"""Step markers (``tfadvisor.step``) and the profiling session they count into.

``step(n)`` records ``tf.profiler.experimental.Trace(name, step_num=n, _r=1)`` while any
profiler runs; the analyses find step boundaries in custom loops by it. Outside a profiling
session it costs about a microsecond; TensorFlow is imported at the first marker.

A marker is counted by the active session (:func:`active_session`) when it ends before that
session stops the profiler: :data:`MARKER_LOCK` is held while a marker ends and while the
profiler stops, so a counted marker is in the trace and one left out of the trace is not counted.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

from tfadvisor.capture.base import import_tf, warn


class StepCounter(Protocol):
    """A profiling session, as step markers see it."""

    def count_step(self, n: Any) -> None: ...


_ACTIVE: StepCounter | None = None
_ACTIVE_LOCK = threading.Lock()
#: held while a step marker ends and while the profiler stops (see the module docs)
MARKER_LOCK = threading.RLock()


def active_session() -> StepCounter | None:
    """The session whose profiler runs now (None outside one)."""
    return _ACTIVE


def set_active(session: StepCounter) -> None:
    global _ACTIVE
    with _ACTIVE_LOCK:
        _ACTIVE = session


def clear_active(session: StepCounter) -> None:
    """``session`` is no longer active (if it was); hold :data:`MARKER_LOCK` while its profiler stops."""
    global _ACTIVE
    with _ACTIVE_LOCK:
        if _ACTIVE is session:
            _ACTIVE = None


_Trace: Any = None  # tf.profiler.experimental.Trace, once imported
_trace_failed = False


def _trace_class() -> Any:
    global _Trace, _trace_failed
    if _Trace is None and not _trace_failed:
        try:
            _Trace = import_tf().profiler.experimental.Trace
        except Exception as err:  # noqa: BLE001 - no TensorFlow: markers do nothing
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
        self._t: Any = None
        self._session: StepCounter | None = None

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

    def __exit__(self, *exc: Any) -> bool:
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
                    session.count_step(self.n)
        return False
