"""Executors on this machine: one host after the other in this process, or a bounded pool of
worker processes plus one thread of this process."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from tfadvisor.analyses import Options
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import Run, host_name, host_runs
from tfadvisor.multihost.runtime.inflight import Dispatch, Observer
from tfadvisor.multihost.runtime.spawn import main_module_hidden, mp_context
from tfadvisor.multihost.worker import analyze_host, import_analyses, start_worker

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


#: Peak memory of analysing one host, per byte of its files: the 1 GB and 4 GB SYNTHETIC traces peaked at 2.11 and
#: 1.99 bytes per byte (README, "big traces"; one process, its ~150 MB base included), so a host is counted at
#: :data:`PEAK_PER_FILE_BYTE` times its size plus :data:`PEAK_BASE_BYTES`.
PEAK_PER_FILE_BYTE = 2.2
PEAK_BASE_BYTES = 150 << 20


def host_peak_bytes(file_bytes: int) -> int:
    """The memory analysing a host of ``file_bytes`` is counted at (:data:`PEAK_PER_FILE_BYTE`)."""
    return int(PEAK_PER_FILE_BYTE * max(0, int(file_bytes))) + PEAK_BASE_BYTES


def available_memory() -> int | None:
    """Bytes of memory available to new work now (Linux ``MemAvailable``), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: A worker process is handed its next host while it still analyses one (the host waits in the pool's queue, and is
#: reported ``started`` when the one before it is back) where that host's files are below this size. Between small
#: hosts the worker would otherwise wait for this process' threads and pipes to take its result and hand it the next:
#: a median 1.6-1.8 ms of each 17 ms host (a 256-host SYNTHETIC pod on two CPUs: 0.27-0.31 s of a worker's 2.2 s).
#: A big host is never queued early: its memory is counted from the moment it is handed out.
QUEUE_AHEAD_BELOW_BYTES = 16_000_000


def run_pool(run: Run, hosts: list[str], options: Options | None, jobs: int, local_slot: bool = True,
             observe: Observer | None = None, tables: str = "all",
             more: More | None = None, sizes: dict[str, int] | None = None, memory: int | None = None,
             info: dict | None = None) -> Iterator[tuple[str, dict]]:
    """At most ``jobs`` hosts in flight; results as they complete (``tables``: as
    :func:`~tfadvisor.multihost.worker.analyze_host`'s; ``more``: see :data:`More`).

    With ``local_slot`` one of the ``jobs`` slots is a thread of this process (which has
    tfadvisor imported already and would otherwise only wait) and ``jobs - 1`` are worker
    processes; without it all ``jobs`` are worker processes.

    ``memory`` (bytes; None: no bound) with ``sizes`` (bytes of each host's files): a host starts beside the
    hosts in flight only while all of them are counted (:func:`host_peak_bytes`) within ``memory``; alone it
    always starts. So big hosts run fewer at once instead of running the machine out of memory. Where a host
    waited for memory (not for a slot), ``info`` gets ``waited_for_memory`` (how many did) and
    ``memory_available_mb`` (``memory``).

    Each worker process has one more small host queued behind the one it analyses (see
    :data:`QUEUE_AHEAD_BELOW_BYTES`; with ``sizes`` only), counted in ``memory`` as handed out."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    threads = max(1, (os.cpu_count() or 1) // jobs)
    n_proc = jobs - 1 if local_slot else jobs
    queue = list(hosts)
    runs = host_runs(run)
    pending: dict = {}  # future -> (host, "thread" | "process")
    dispatch = Dispatch(observe)
    context = mp_context() if n_proc else None
    if local_slot or (context is not None and context.get_start_method() == "fork"):
        import_analyses()  # forked workers start with them imported; this process' own slot needs them anyway
    procs = (ProcessPoolExecutor(max_workers=n_proc, mp_context=context, initializer=start_worker)
             if n_proc else None)
    local = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tfadvisor-host") if local_slot else None
    failed = False
    waited: list = [None, 0]  # the host last counted as waiting for memory, how many did
    peak = {h: host_peak_bytes((sizes or {}).get(h, 0)) for h in hosts} if memory is not None else {}

    def fits(h: str) -> bool:
        """Whether host ``h`` fits beside the hosts handed out (see ``memory``)."""
        return memory is None or sum(peak[x] for x, _ in pending.values()) + peak[h] <= memory

    def admit() -> str | None:
        """The first queued host that fits beside those in flight (see ``memory``), taken off the queue."""
        if memory is None or not pending:
            return queue.pop(0)
        return next((queue.pop(i) for i, h in enumerate(queue) if fits(h)), None)

    def ahead() -> str | None:
        """The next host, taken off the queue, where it is small enough to wait behind a worker's host (and fits
        beside those handed out, see ``memory``)."""
        h = queue[0]
        if sizes is None or sizes.get(h, QUEUE_AHEAD_BELOW_BYTES) >= QUEUE_AHEAD_BELOW_BYTES or not fits(h):
            return None
        return queue.pop(0)

    def promote() -> None:
        """A worker process took the oldest host queued behind the one just back (the pool hands hosts out in
        order): it is in flight now."""
        for f, (h, kind) in pending.items():  # in the order handed out
            if kind == "queued":
                pending[f] = (h, "process")
                dispatch.started(h, "process")
                return

    try:
        while queue or pending or more is not None:
            if not queue and not pending:  # every result is in: the hosts to analyse in full, if any
                queue, tables, more = list(more()), "all", None
                continue
            kinds = [k for _, k in pending.values()]
            # the workers first: they start on the first submits, a forked one before this process' own thread
            while procs is not None and queue and kinds.count("process") < n_proc and (h := admit()) is not None:
                with main_module_hidden():
                    pending[procs.submit(analyze_host, runs[h], h, options, threads, tables)] = (h, "process")
                dispatch.started(h, "process")
                kinds.append("process")
            if local is not None and queue and "thread" not in kinds and (h := admit()) is not None:
                pending[local.submit(analyze_host, runs[h], h, options, threads, tables)] = (h, "thread")
                dispatch.started(h, "thread")
                kinds.append("thread")
            while (procs is not None and queue and kinds.count("process") == n_proc and kinds.count("queued") < n_proc
                   and (h := ahead()) is not None):
                with main_module_hidden():
                    pending[procs.submit(analyze_host, runs[h], h, options, threads, tables)] = (h, "queued")
                kinds.append("queued")
            if queue and len(pending) - kinds.count("queued") < jobs and waited[0] != queue[0]:
                waited[0] = queue[0]  # a slot is free, and the next host waits for memory
                waited[1] += 1
                if info is not None:
                    info["waited_for_memory"] = waited[1]
                    info["memory_available_mb"] = round(memory / 2**20)
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in sorted(finished, key=lambda f: pending[f][1] == "queued"):  # those in flight first
                h, kind = pending.pop(fut)
                try:
                    payload = fut.result()
                except BrokenProcessPool:
                    raise TraceError(file_of(run, h), "the worker process analysing this host died (out of "
                                                      "memory? try fewer --jobs, or --jobs 1)") from None
                if kind == "queued":  # back before the host ahead of it was seen back: never the case in order
                    dispatch.started(h, "process")
                dispatch.finished(h, payload)
                if kind == "process":
                    promote()
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


__all__ = ["PEAK_BASE_BYTES", "PEAK_PER_FILE_BYTE", "QUEUE_AHEAD_BELOW_BYTES", "More", "available_memory", "file_of",
           "host_peak_bytes", "run_inline", "run_pool"]
