"""Starting worker processes: the ``spawn`` context, and ``__main__`` hidden while workers start
(so they do not re-run the caller's script)."""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager, suppress

_MAIN_LOCK = threading.Lock()


def mp_context():
    """``spawn``: fresh interpreters that share nothing with this (possibly threaded) process.
    A forkserver would start workers no faster here (they import tfadvisor either way) and is
    one more process to hold memory, with its environment fixed when it first starts."""
    import multiprocessing as mp

    return mp.get_context("spawn")


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


__all__ = ["main_module_hidden", "mp_context"]
