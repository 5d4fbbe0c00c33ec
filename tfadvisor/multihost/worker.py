"""The per-host task of a multi-host analysis: load ONE host file, analyse it, return a small result.

:func:`analyze_host` is what the executors of :mod:`tfadvisor.multihost.runtime` run in a worker process
(local ``ProcessPoolExecutor``), in a thread of the parent, or on a Dask worker. It is a plain
module-level function so that both pickle it by reference; a Dask worker needs tfadvisor installed
and the profile files readable (a shared file system or ``gs://``).

What comes back is a plain dict: the host's metrics (with units and meanings), its notes, the
small tables (all of them, or with ``tables="host"`` only :data:`HOST_TABLES`, and the metrics of the
comparison analyses only, :data:`tfadvisor.analyses.COMPARISON`), the trace's
``summary()``, the options used, and ``held``: the wall-clock interval (``time.time()``) from the
start of the load until the trace was dropped, which the executors report to their observer
(:mod:`tfadvisor.multihost.runtime.inflight`). The :class:`~tfadvisor.model.trace.Trace` itself never leaves the
worker: it is dropped before the function returns, so a worker holds one host's events at most.

Bad input is returned as ``{"error": {"path", "problem"}}`` rather than raised, because
:class:`~tfadvisor.errors.TraceError` does not survive pickling with its two arguments; the
parent raises it again.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import time
from typing import Any

#: Tables longer than this are not sent back from a worker (they are per-event detail,
#: e.g. a long memory timeline); the per-host note says which were left out.
MAX_TABLE_ROWS = 200_000

#: After a host file at least this large, cycles are collected and freed heap is given back to the
#: OS before the next host (~20 ms: below this size a host's memory is too small to matter).
COLLECT_ABOVE_BYTES = 16_000_000

#: The tables read for every host of a run of many hosts (the cross-host comparison, the Perfetto export's
#: step and gap marks); the others are read for the hosts analysed in full only.
HOST_TABLES = ("steps", "gaps")


#: Set in the worker processes this package starts (:func:`start_worker`): there, once the host files
#: analysed since the last time add up to :data:`COLLECT_ABOVE_BYTES` (every host of that size or more), the
#: host ends with a collection and freed heap given back, so a worker's memory stays that of one host; what
#: survives the collection is frozen, so each costs about 1 ms (measured 0.6 ms; 12 ms when only the imports
#: were frozen, 34 ms with nothing frozen). An analysis leaves no reference cycles (tests/test_no_cycles.py):
#: a small host's objects are freed as it ends, and the heap it leaves is reused by the next.
_OWN_WORKER = False
#: Bytes of host files analysed by this worker since its last collection.
_SINCE_COLLECT = [0]


def import_analyses() -> None:
    """Import the reader and every analysis (~0.1 s on this machine's 2 CPUs). A pool's parent calls it before it
    forks its workers, so that they start with them imported."""
    import importlib

    from tfadvisor.analyses import ORDER
    from tfadvisor.io import reader  # noqa: F401

    for name in ORDER:
        importlib.import_module(f"tfadvisor.analyses.{name}")


def start_worker() -> None:
    """Initialise a worker process of a local pool: import the analyses (:func:`import_analyses`), then freeze
    what the imports made (the collections after each host skip it; see :data:`_OWN_WORKER`)."""
    global _OWN_WORKER
    import_analyses()
    gc.collect()
    gc.freeze()
    _OWN_WORKER = True


def _set_threads(threads: int | None) -> None:
    """Share the machine's cores between the worker processes (the decoder's threads)."""
    if not threads:
        return
    import tfadvisor.io.wire as wire

    wire.set_num_threads(max(1, int(threads)))


def _trim() -> None:
    """Give freed heap memory back to the OS (glibc), so the next host starts from a low base."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _small_tables(tables, notes: list[str], keep: str) -> dict:
    """The tables sent back (``tables``: a :class:`~tfadvisor.model.table.Tables`): a :class:`Table` as
    columns (the parent builds its DataFrame when a report reads it), anything else as its DataFrame."""
    from tfadvisor.model.table import Table

    out = {}
    names = list(tables) if keep == "all" else [n for n in HOST_TABLES if n in tables]
    for name in names:
        cols = tables.table(name)
        df = cols if cols is not None else tables[name]
        if df is None:
            continue
        if len(df) > MAX_TABLE_ROWS:
            notes.append(f"multihost: table {name!r} ({len(df):,} rows) is not kept for multi-host runs")
            continue
        # A copy: a table must not keep a view into the trace's columns alive.
        out[name] = Table({c: df[c].copy() for c in df.columns}, n=len(df)) if df is cols else df.copy(deep=True)
    return out


def analyze_host(run, host: str, options=None, threads: int | None = None, tables: str = "all") -> dict[str, Any]:
    """Load host ``host`` of ``run`` (a :class:`~tfadvisor.io.discovery.Run`), analyse it, and return
    the small per-host result (see the module docstring).

    ``threads``: decoding threads for this task (None: the decoder's default, every CPU). ``tables``:
    ``"all"``, or ``"host"`` for :data:`HOST_TABLES` and the comparison analyses only (the others never run),
    without the metrics they list as ``DETAIL_METRICS`` (:attr:`tfadvisor.analyses.base.Context.detail`)."""
    if tables not in ("all", "host"):
        raise ValueError(f"tables must be 'all' or 'host', not {tables!r}")
    from tfadvisor.analyses import COMPARISON, Options, analyze_trace, event_stats, options_from
    from tfadvisor.errors import TraceError
    from tfadvisor.io.reader import load_run

    _set_threads(threads)
    t0 = time.perf_counter()
    opts = dataclasses.replace(options) if options is not None else Options()
    held_from = time.time()
    try:
        trace = load_run(run, hosts=[host], stats=event_stats())
        t_load = time.perf_counter() - t0
        opts = options_from(trace, opts)
        compared = tables == "host"  # compared only: the comparison analyses, without their DETAIL_METRICS
        ha = analyze_trace(trace, opts, host=host, only=COMPARISON if compared else None, detail=not compared)
        summary = trace.summary()
        notes = list(ha.notes)
        kept = _small_tables(ha.tables, notes, tables)
        # Drop the trace and everything that may point into its columns before the held interval
        # ends: the analyses' own objects and the original tables.
        ha.results = {}
        ha.tables = {}
        del trace
        size = int(summary.get("file_bytes") or 0)
        _SINCE_COLLECT[0] += size
        if (_SINCE_COLLECT[0] if _OWN_WORKER else size) >= COLLECT_ABOVE_BYTES:
            _SINCE_COLLECT[0] = 0
            gc.collect()
            if _OWN_WORKER:  # what survives is the caches the next hosts use: the next collection skips them
                gc.freeze()
            _trim()
        held = (held_from, time.time())
    except TraceError as err:
        return {"host": host, "error": {"path": err.path, "problem": err.problem}}
    m = ha.metrics
    return {
        "host": host,
        "metrics": dict(m),
        "units": dict(m.units),
        "docs": dict(m.docs),
        "source": dict(m.source),
        "qualified": {k: list(v) for k, v in m.notes.items()},
        "tables": kept,
        "tables_kept": tables,
        "notes": notes,
        "summary": summary,
        "options": dataclasses.asdict(opts),
        "load_s": t_load,
        "seconds": time.perf_counter() - t0,
        "held": held,
        "pid": os.getpid(),
    }


__all__ = ["COLLECT_ABOVE_BYTES", "HOST_TABLES", "MAX_TABLE_ROWS", "analyze_host", "import_analyses", "start_worker"]
