"""Executors on this machine: one host after the other in this process, or a bounded pool of
worker processes plus one thread of this process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from tfadvisor.analyses import Options
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import Run, host_name, host_runs
from tfadvisor.multihost_worker import analyze_host, start_worker
from tfadvisor.runtime.inflight import Dispatch, Observer
from tfadvisor.runtime.spawn import main_module_hidden, mp_context

#: ``more()``, asked once when every host's result is in: the hosts to analyse again with every analysis and
#: table (``tables="all"``), by the same workers; their results follow on the same stream.
More = Callable[[], list[str]]


def run_inline(run: Run, hosts: list[str], options: Options | None,
               observe: Observer | None = None, tables: str = "all",
               more: More | None = None) -> Iterator[tuple[str, dict]]:
    """In this process, one host after the other."""
    dispatch = Dispatch(observe)
    runs = host_runs(run)
    while hosts:
        for h in hosts:
            dispatch.started(h, "in-process")
            payload = analyze_host(runs[h], h, options, None, tables)
            dispatch.finished(h, payload)
            yield h, payload
        hosts, tables = (more() if more is not None else []), "all"
        more = None


def run_pool(run: Run, hosts: list[str], options: Options | None, jobs: int, local_slot: bool = True,
             observe: Observer | None = None, tables: str = "all",
             more: More | None = None) -> Iterator[tuple[str, dict]]:
    """At most ``jobs`` hosts in flight; results as they complete (``tables``: as
    :func:`~tfadvisor.multihost_worker.analyze_host`'s; ``more``: see :data:`More`).

    With ``local_slot`` one of the ``jobs`` slots is a thread of this process (which has
    tfadvisor imported already and would otherwise only wait) and ``jobs - 1`` are worker
    processes; without it all ``jobs`` are worker processes."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    threads = max(1, (os.cpu_count() or 1) // jobs)
    n_proc = jobs - 1 if local_slot else jobs
    queue = list(hosts)
    runs = host_runs(run)
    pending: dict = {}  # future -> (host, "thread" | "process")
    dispatch = Dispatch(observe)
    procs = (ProcessPoolExecutor(max_workers=n_proc, mp_context=mp_context(), initializer=start_worker)
             if n_proc else None)
    local = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfadvisor-host") if local_slot else None
    failed = False
    try:
        while queue or pending or more is not None:
            if not queue and not pending:  # every result is in: the hosts to analyse in full, if any
                queue, tables, more = list(more()), "all", None
                continue
            kinds = [k for _, k in pending.values()]
            # the workers first: they start on the first submits, a forked one before this process' own thread
            while procs is not None and queue and kinds.count("process") < n_proc:
                h = queue.pop(0)
                with main_module_hidden():
                    pending[procs.submit(analyze_host, runs[h], h, options, threads, tables)] = (h, "process")
                dispatch.started(h, "process")
                kinds.append("process")
            if local is not None and queue and "thread" not in kinds:
                h = queue.pop(0)
                pending[local.submit(analyze_host, runs[h], h, options, threads, tables)] = (h, "thread")
                dispatch.started(h, "thread")
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                h, _kind = pending.pop(fut)
                try:
                    payload = fut.result()
                except BrokenProcessPool:
                    raise TraceError(file_of(run, h), "the worker process analysing this host died (out of "
                                                      "memory? try fewer --jobs, or --jobs 1)") from None
                dispatch.finished(h, payload)
                yield h, payload
    except BaseException:
        failed = True
        raise
    finally:
        if procs is not None:
            procs.shutdown(wait=True, cancel_futures=True)
        if local is not None:
            local.shutdown(wait=not failed, cancel_futures=True)


def file_of(run: Run, host: str) -> str:
    """The (first) file of ``host`` in ``run``, else the run's directory: where an error points."""
    return next((f for f in run.files if host_name(f) == host), run.directory)


__all__ = ["More", "file_of", "run_inline", "run_pool"]
