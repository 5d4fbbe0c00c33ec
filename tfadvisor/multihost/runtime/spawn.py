"""Starting worker processes: ``fork`` where it is safe, else ``spawn``; and ``__main__`` hidden while
workers start (so that spawned ones do not re-run the caller's script)."""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager, suppress

_MAIN_LOCK = threading.Lock()

#: Modules that keep threads or device state of their own: with one of them loaded a worker is spawned.
THREADED_MODULES = ("tensorflow", "jax", "torch")


def start_method() -> str:
    """``fork`` on Linux when this process runs no other Python thread and has none of
    :data:`THREADED_MODULES` loaded (a command-line run): the worker starts in milliseconds with everything
    imported. Else ``spawn``: fresh interpreters that share nothing with this (possibly threaded) process,
    each ~0.6 s to import numpy and tfadvisor on this machine. A forkserver would start workers no faster
    than spawn (they import tfadvisor either way) and is one more process to hold memory."""
    import multiprocessing as mp

    safe = (sys.platform.startswith("linux") and threading.active_count() == 1
            and not any(m in sys.modules for m in THREADED_MODULES) and "fork" in mp.get_all_start_methods())
    return "fork" if safe else "spawn"


def mp_context():
    """The multiprocessing context for worker processes (:func:`start_method`). Call it before this process
    starts a thread of its own: the choice reads the threads running now."""
    import multiprocessing as mp

    return mp.get_context(start_method())


@contextmanager
def main_module_hidden():
    """Start worker processes without re-running the caller's ``__main__``.

    spawn/forkserver workers normally import the parent's main script first (and an unguarded
    script would start a second analysis there). The per-host task needs nothing from it, so
    while workers start, ``__main__`` shows neither ``__file__`` nor ``__spec__``."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    with _MAIN_LOCK:
        saved = {a: getattr(main, a) for a in ("__file__", "__spec__") if a in vars(main)}
        try:
            if "__file__" in saved:
                del main.__file__
            main.__spec__ = None
            yield
        finally:
            if "__spec__" in saved:
                main.__spec__ = saved["__spec__"]
            else:
                with suppress(AttributeError):
                    del main.__spec__
            if "__file__" in saved:
                main.__file__ = saved["__file__"]


__all__ = ["THREADED_MODULES", "main_module_hidden", "mp_context", "start_method"]
