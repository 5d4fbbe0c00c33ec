"""The Dask executor: the per-host tasks on an existing ``dask.distributed`` cluster, at most
``jobs`` (default: the cluster's thread count) in flight. The workers need tfadvisor installed and
the profile files readable at the same path (shared file system or ``gs://``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

from tfadvisor.analyses import Options
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import Run, host_runs, is_remote
from tfadvisor.multihost.runtime.inflight import Dispatch, Observer
from tfadvisor.multihost.worker import analyze_host


def absolute(run: Run) -> Run:
    """The run with local paths made absolute (Dask workers may run elsewhere)."""
    files = tuple(f if is_remote(f) else os.path.abspath(f) for f in run.files)
    directory = run.directory if is_remote(run.directory) else os.path.abspath(run.directory)
    return dataclasses.replace(run, files=files, directory=directory)


#: How long to wait for the scheduler before the run fails with a TraceError.
CONNECT_TIMEOUT_S = 20


def run_dask(run: Run, hosts: list[str], options: Options | None, address: str, jobs: int | None,
             observe: Observer | None = None, tables: str = "all") -> Iterator[tuple[str, dict]]:
    """The same per-host tasks on the Dask scheduler at ``address``; results as they complete."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise TraceError(address, "--dask needs dask.distributed: pip install 'tfadvisor[dist]'") from None
    try:
        client = Client(address, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as err:
        raise TraceError(address, f"cannot connect to the Dask scheduler ({type(err).__name__}: {err})") from None
    try:
        nthreads = sum(client.nthreads().values()) or 1
        limit = max(1, jobs or nthreads)
        runs = host_runs(absolute(run))
        queue = list(hosts)
        token = os.urandom(4).hex()
        names: dict[str, str] = {}
        dispatch = Dispatch(observe)

        def submit(h: str):
            fut = client.submit(analyze_host, runs[h], h, options, None, tables, key=f"tfadvisor-host-{h}-{token}",
                                pure=False)
            names[fut.key] = h
            dispatch.started(h, "dask")
            return fut

        first = [submit(queue.pop(0)) for _ in range(min(limit, len(queue)))]
        ac = as_completed(first, loop=client.loop)
        for fut in ac:
            h = names.pop(fut.key)
            payload = fut.result()
            fut.release()
            dispatch.finished(h, payload)
            if queue:
                ac.add(submit(queue.pop(0)))
            yield h, payload
    finally:
        client.close()


__all__ = ["absolute", "run_dask"]
