"""SIGTERM or SIGINT during a capture window (a Vertex AI cancel or preemption, ``kill``, Ctrl-C or
a notebook's "interrupt the kernel"): write what was collected, then let the signal do what it
did before (SIGTERM ends the process, SIGINT raises ``KeyboardInterrupt``).

Every way of capturing registers here: the Keras callback, ``tfadvisor.profile`` and, through
them, ``tfadvisor capture run`` and the in-job Vertex ``init()``.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

from tfadvisor.capture.base import say_err

#: ``closer(signal name)``: stops a profiler and writes its profile
Closer = Callable[[str], None]

#: the signals a capture window is saved on
SIGNALS = (signal.SIGTERM, signal.SIGINT)

_CLOSERS: list[Closer] = []
_PREV: dict[int, Any] = {}  # signal -> the handler before ours, while ours is installed
_RUNNING = False
_PID: int | None = None  # the process that installed the handlers (a forked child inherits them)


def on_signal(closer: Closer) -> bool:
    """Call ``closer("SIGTERM")`` (or ``"SIGINT"``) when the process gets that signal, then act as before.

    The handler calls each registered closer (newest first), puts the previous handlers back and
    hands the signal to the previous one (the default SIGTERM ends the process as it would have;
    the default SIGINT raises ``KeyboardInterrupt``). Installed from the main thread only; False
    elsewhere (the window is then saved at exit, or by ``close()``).
    """
    if closer not in _CLOSERS:
        _CLOSERS.append(closer)
    if _PREV:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    global _PID
    _PID = os.getpid()
    for sig in SIGNALS:
        try:
            prev = signal.getsignal(sig)
            if prev is None:  # a handler not installed from Python: leave that signal alone
                continue
            signal.signal(sig, _handle)
            _PREV[sig] = prev
        except (ValueError, OSError, AttributeError):
            continue
    return bool(_PREV)


def forget_signal(closer: Closer) -> None:
    """Undo :func:`on_signal` for ``closer``; the previous handlers are back once none is left."""
    if closer in _CLOSERS:
        _CLOSERS.remove(closer)
    if _CLOSERS or not _PREV or _RUNNING:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    _restore()


def _restore() -> None:
    for sig, prev in list(_PREV.items()):
        try:
            if signal.getsignal(sig) is _handle:
                signal.signal(sig, prev)
        except (ValueError, OSError):
            continue
        _PREV.pop(sig, None)


def _handle(signum: int, frame: Any) -> None:
    global _RUNNING
    if _RUNNING:  # a second signal while writing: finish writing first
        return
    _RUNNING = True
    prev: Any = _PREV.get(signum, signal.SIG_DFL)
    mine = os.getpid() == _PID  # a forked child saves nothing of its parent's
    try:
        name = signal.Signals(signum).name
        for closer in reversed(list(_CLOSERS) if mine else []):
            try:
                closer(name)
            except Exception as err:  # noqa: BLE001
                say_err(f"tfadvisor: could not save the profile on {name}: {type(err).__name__}: {err}")
        _CLOSERS.clear()
        _restore()
    finally:
        _RUNNING = False
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        os.kill(os.getpid(), signum)  # what the signal did before: end the process
