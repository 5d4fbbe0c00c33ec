"""The ``tfadvisor`` process: where the console script and ``python -m tfadvisor`` start.

:func:`tfadvisor.cli.app.main` runs one command (tests and other programs call it in their own process). This
module only makes the short process around it cheaper; on the small sample (``tfadvisor analyze
sample_traces/input_bound_defaults_off --format json``, 2 CPUs, best of 15, 2026-12-02):

* the cyclic garbage collector is off while the command line's modules load (their imports allocate without
  leaving cycles to collect), then runs with a larger first generation: ~5 ms of a 0.2 s run;
* a reading command (:data:`QUICK_EXIT`) ends with ``os._exit`` once its ``atexit`` handlers have run and its
  output is flushed, skipping the interpreter's teardown of every module and array: ~25 ms. A command that
  writes or captures (``capture``, ``export``...) ends as Python does, and so does any process with a thread
  besides the main one still alive (Python waits for those).
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading

#: Commands that read a profile and print (or write one report file with a ``with`` block, ``--html``).
QUICK_EXIT = frozenset({"analyze", "diff", "runs", "rules", "schema", "scaling"})
#: The collector's first-generation threshold once the modules are loaded (Python's default: 700).
GEN0_THRESHOLD = 10_000


def main() -> None:
    """Run the command named on the command line, then end the process."""
    gc.disable()
    from tfadvisor.cli.app import main as run_command

    gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
    gc.enable()
    try:
        run_command()
    except SystemExit as stop:
        _end(stop.code)
    _end(0)


def _end(code: object) -> None:
    """Exit with ``code`` as ``sys.exit`` would, through ``os._exit`` where that loses nothing."""
    quick = len(sys.argv) > 1 and sys.argv[1] in QUICK_EXIT
    if not quick or threading.active_count() > 1:
        sys.exit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()  # what Python runs at exit: logging's flush, temporary directories' removal...
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # started with the descriptor closed (cron, a daemon): nothing to flush
            continue
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's own exit ends with status 120 then
            status = 120
    os._exit(status)
