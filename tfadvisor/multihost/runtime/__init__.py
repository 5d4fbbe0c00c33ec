"""Executors of a multi-host analysis: they run the per-host task
(:func:`tfadvisor.multihost.worker.analyze_host`: load ONE host file, analyse it, send back only the
small result, never the trace) for every host of a run, at most ``jobs`` hosts in flight, so at
most ``jobs`` hosts' events are in memory at once and a run whose files add up to more than the
machine's RAM is still analysed. Results come back as they complete, as ``(host, payload)``.

* ``jobs=1`` (:func:`~tfadvisor.multihost.runtime.local.run_inline`): in this process, one host after the other.
* ``jobs=N`` (default ``os.cpu_count()``; :func:`~tfadvisor.multihost.runtime.local.run_pool`): N hosts at once:
  N - 1 in the worker processes of a ``concurrent.futures.ProcessPoolExecutor`` (forked where this
  process runs no other thread and no framework, else spawned; they do not re-run the caller's
  ``__main__``: :mod:`tfadvisor.multihost.runtime.spawn`) and one in a thread
  of this process, which has everything imported already and would otherwise only wait. The
  decoder's threads are split between the N. Measured (benchmarks/multihost.py): this uses less
  memory than N worker processes plus an idle parent (the parent's own ~150 MB, and the in-process
  host starts while the workers are still starting, so the N peaks do not coincide), and it is
  faster. After each host the task gives freed heap back to the OS (``malloc_trim``), so a worker's
  memory does not creep from host to host.
  Hosts too big to run side by side wait: a host starts beside others only while every host in flight,
  counted at ~2.2 bytes of memory per byte of its files, fits in the memory available when the pool starts
  (one host alone always starts); the run's summary says how many waited (``waited_for_memory``).
* ``dask="tcp://scheduler:8786"`` (:mod:`tfadvisor.multihost.runtime.dask`): the same per-host function
  submitted to an existing Dask distributed cluster (``distributed.Client(address)``); at most
  ``jobs`` (default: the cluster's thread count) hosts in flight.

Each executor reports the hosts it starts and finishes to an optional ``observe`` callable
(:mod:`tfadvisor.multihost.runtime.inflight`: :class:`HostEvent`, and :class:`InFlight`, which keeps the
peak number of hosts in flight).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from tfadvisor.analyses import Options
from tfadvisor.io.discovery import Run
from tfadvisor.multihost.runtime.dask import run_dask
from tfadvisor.multihost.runtime.inflight import HostEvent, InFlight, Observer
from tfadvisor.multihost.runtime.local import More, available_memory, run_inline, run_pool

#: Without an explicit ``jobs``, runs whose files add up to less than this are analysed in-process.
INLINE_BELOW_BYTES = 32_000_000


def run_hosts(run: Run, hosts: list[str], options: Options | None, *, jobs: int | None = None,
              dask: str | None = None, total_bytes: int = 0,
              observe: Observer | None = None,
              tables: str = "all", more: More | None = None,
              sizes: dict[str, int] | None = None) -> tuple[Iterator[tuple[str, dict]], dict[str, Any]]:
    """The executor for these arguments, started lazily: its ``(host, payload)`` stream (close it to
    cancel what has not started and stop the workers) and how it runs (``executor``, ``jobs``, ...:
    they go into the run's summary). ``tables``: which tables each host sends back
    (:func:`~tfadvisor.multihost.worker.analyze_host`). ``more``: hosts to analyse again in full once every
    result is in (:data:`~tfadvisor.multihost.runtime.local.More`; the local executors only: Dask ignores it).
    ``sizes``:
    bytes of each host's files; the local pool starts a host beside others only while their counted peaks fit
    in the memory available when it starts (:func:`~tfadvisor.multihost.runtime.local.run_pool`)."""
    if dask:
        return run_dask(run, hosts, options, dask, jobs, observe, tables), {"executor": "dask", "scheduler": dask}
    n = min(jobs or os.cpu_count() or 1, len(hosts))
    if jobs is None and total_bytes < INLINE_BELOW_BYTES:
        n = 1  # starting worker processes costs more than analysing small files here
    if n <= 1:
        return run_inline(run, hosts, options, observe, tables, more), {"executor": "in-process", "jobs": 1}
    memory = available_memory() if sizes is not None else None
    info: dict[str, Any] = {"executor": "processes", "jobs": n, "worker_processes": n - 1}
    return run_pool(run, hosts, options, n, observe=observe, tables=tables, more=more, sizes=sizes, memory=memory,
                    info=info), info


__all__ = ["INLINE_BELOW_BYTES", "HostEvent", "InFlight", "More", "Observer", "run_dask", "run_hosts", "run_inline",
           "run_pool"]
