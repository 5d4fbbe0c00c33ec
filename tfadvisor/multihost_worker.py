"""The per-host task of a multi-host analysis: load ONE host file, analyse it, return a small result.

:func:`analyze_host` is what :mod:`tfadvisor.multihost` runs in a worker process (local
``ProcessPoolExecutor``) or on a Dask worker. It is a plain module-level function so that both
pickle it by reference; a Dask worker needs tfadvisor installed and the profile files readable
(a shared file system or ``gs://``).

What comes back is a plain dict: the host's metrics (with units and meanings), its notes, the
small tables (the steps table with the per-step category times, collective ops, ...), the trace's
``summary()`` and the options used. The :class:`~tfadvisor.trace.Trace` itself never leaves the
worker: it is dropped before the function returns, so a worker holds one host's events at most.

Bad input is returned as ``{"error": {"path", "problem"}}`` rather than raised, because
:class:`~tfadvisor.errors.TraceError` does not survive pickling with its two arguments; the
parent raises it again.

Instrumentation for tests: when ``TFADVISOR_MULTIHOST_COUNTER`` names a file (in the parent's
environment: the parent passes it along with each task), every task adds one to the count in
that file (under an exclusive ``flock``) before it loads its host and takes one off after the
trace is dropped, and records the highest count seen (``{"now": n, "max": m, "loads": k}``).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import time
from contextlib import contextmanager
from typing import Any

#: Environment variable naming the shared in-flight counter file (tests only).
COUNTER_ENV = "TFADVISOR_MULTIHOST_COUNTER"
#: Tables longer than this are not sent back from a worker (they are per-event detail,
#: e.g. a long memory timeline); the per-host note says which were left out.
MAX_TABLE_ROWS = 200_000


@contextmanager
def _counted(path: str | None):
    """Count this task as holding a host's events while the block runs (when instrumented)."""
    if not path:
        yield
        return
    _bump(path, +1)
    try:
        yield
    finally:
        _bump(path, -1)


def _bump(path: str, delta: int) -> None:
    import fcntl

    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            text = fh.read().strip()
            state = json.loads(text) if text else {"now": 0, "max": 0, "loads": 0}
            state["now"] += delta
            state["max"] = max(state["max"], state["now"])
            if delta > 0:
                state["loads"] += 1
            fh.seek(0)
            fh.truncate()
            fh.write(json.dumps(state))
            fh.flush()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_counter(path: str) -> dict:
    """The counter state written by instrumented tasks ({"now", "max", "loads"})."""
    with open(path) as fh:
        text = fh.read().strip()
    return json.loads(text) if text else {"now": 0, "max": 0, "loads": 0}


def _set_threads(threads: int | None) -> None:
    """Share the machine's cores between the worker processes (the decoder's threads)."""
    if not threads:
        return
    import tfadvisor.wire as wire

    wire.set_num_threads(max(1, int(threads)))


def _trim() -> None:
    """Give freed heap memory back to the OS (glibc), so the next host starts from a low base."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _small_tables(tables: dict, notes: list[str]) -> dict:
    out = {}
    for name, df in tables.items():
        if df is None:
            continue
        if len(df) > MAX_TABLE_ROWS:
            notes.append(f"multihost: table {name!r} ({len(df):,} rows) is not kept for multi-host runs")
            continue
        # A deep copy: a table must not keep a view into the trace's columns alive.
        out[name] = df.copy(deep=True)
    return out


def analyze_host(run, host: str, options=None, threads: int | None = None,
                 counter: str | None = None) -> dict[str, Any]:
    """Load host ``host`` of ``run`` (a :class:`~tfadvisor.discovery.Run`), analyse it, and return
    the small per-host result (see the module docstring).

    ``threads``: decoding threads for this task (None: the decoder's default, every CPU). ``counter``: the in-flight
    counter file (tests); default ``$TFADVISOR_MULTIHOST_COUNTER``. The parent passes its own
    value along, because a forkserver's or a Dask worker's environment is fixed when it starts."""
    from tfadvisor.analyses import Options, analyze_trace, options_from
    from tfadvisor.errors import TraceError
    from tfadvisor.reader import load_run

    _set_threads(threads)
    t0 = time.perf_counter()
    opts = dataclasses.replace(options) if options is not None else Options()
    try:
        with _counted(counter or os.environ.get(COUNTER_ENV)):
            trace = load_run(run, hosts=[host])
            t_load = time.perf_counter() - t0
            opts = options_from(trace, opts)
            ha = analyze_trace(trace, opts, host=host)
            summary = trace.summary()
            notes = list(ha.notes)
            tables = _small_tables(ha.tables, notes)
            # Drop the trace and everything that may point into its columns before the count
            # goes down: the analyses' own objects and the original tables.
            ha.results = {}
            ha.tables = {}
            del trace
            gc.collect()
            _trim()
    except TraceError as err:
        return {"host": host, "error": {"path": err.path, "problem": err.problem}}
    m = ha.metrics
    return {
        "host": host,
        "metrics": dict(m),
        "units": dict(m.units),
        "docs": dict(m.docs),
        "source": dict(m.source),
        "tables": tables,
        "notes": notes,
        "summary": summary,
        "options": dataclasses.asdict(opts),
        "load_s": t_load,
        "seconds": time.perf_counter() - t0,
        "pid": os.getpid(),
    }


__all__ = ["COUNTER_ENV", "MAX_TABLE_ROWS", "analyze_host", "read_counter"]
