"""SIGTERM during a capture window (a Vertex AI cancel or preemption, ``kill``): write what was
collected, then let the signal do what it did before."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

#: ``closer(signal name)``: stops a profiler and writes its profile
Closer = Callable[[str], None]

_CLOSERS: list[Closer] = []
_PREV: Any = None
_INSTALLED = False
_RUNNING = False


def on_sigterm(closer: Closer) -> bool:
    """Call ``closer("SIGTERM")`` when the process gets SIGTERM, then act as before.

    The handler calls each registered closer (newest first), puts the previous handler back
    and hands the signal to it (the default one ends the process with SIGTERM as it would
    have). Installed from the main thread only; False elsewhere.
    """
    global _PREV, _INSTALLED
    if closer not in _CLOSERS:
        _CLOSERS.append(closer)
    if _INSTALLED:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        _PREV = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _handle_sigterm)
    except (ValueError, OSError, AttributeError):
        return False
    _INSTALLED = True
    return True


def forget_sigterm(closer: Closer) -> None:
    """Undo :func:`on_sigterm` for ``closer``; the previous handler is back once none is left."""
    global _INSTALLED
    if closer in _CLOSERS:
        _CLOSERS.remove(closer)
    if _CLOSERS or not _INSTALLED or _RUNNING:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is _handle_sigterm:
            signal.signal(signal.SIGTERM, _PREV if _PREV is not None else signal.SIG_DFL)
    except (ValueError, OSError):
        return
    _INSTALLED = False


def _handle_sigterm(signum: int, frame: Any) -> None:
    global _RUNNING, _INSTALLED
    if _RUNNING:  # a second SIGTERM while writing: finish writing first
        return
    _RUNNING = True
    prev: Any = signal.SIG_DFL
    try:
        name = signal.Signals(signum).name
        for closer in reversed(list(_CLOSERS)):
            try:
                closer(name)
            except Exception as err:  # noqa: BLE001
                print(f"tfadvisor: could not save the profile on {name}: {type(err).__name__}: {err}",
                      file=sys.stderr, flush=True)
        _CLOSERS.clear()
        prev = _PREV if _PREV is not None else signal.SIG_DFL
        signal.signal(signum, prev)
        _INSTALLED = False
    finally:
        _RUNNING = False
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_DFL:
        os.kill(os.getpid(), signum)  # what the signal did before: end the process
