"""Hosts in flight: what an executor reports as it hands hosts out and takes their results back.

Every executor of :mod:`tfadvisor.multihost.runtime` takes an optional ``observe`` callable (also
``tfadvisor.multihost.analysis.analyze_hosts(..., observe=...)``) and calls it, in the calling thread,
with a :class:`HostEvent`:

* ``"started"`` when a host is handed to a slot (the in-process thread, a worker process, a Dask
  task): from then on that host's events may be in memory;
* ``"finished"`` when its result is back in this process, with ``held``: the wall-clock interval
  (``time.time()`` as the worker saw it) from the start of the host's load until its trace was
  dropped, and the worker's ``pid``.

``in_flight`` counts the hosts started and not yet finished, this event included. An executor
never lets it exceed its bound (``jobs``), and the ``held`` intervals, each inside its host's
started..finished, overlap at most as much. :class:`InFlight` is a ready-made observer that keeps
the events and both peaks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class HostEvent:
    """One host handed to a slot of the executor (``"started"``) or back from it (``"finished"``)."""

    kind: str  # "started" | "finished"
    host: str
    slot: str  # "in-process" | "thread" | "process" | "dask"
    in_flight: int  # hosts started and not finished, this event included
    held: tuple[float, float] | None = None  # on "finished": load start .. trace dropped (time.time(), the worker's)
    pid: int | None = None  # on "finished": the process that analysed the host


Observer = Callable[[HostEvent], None]


class Dispatch:
    """An executor's account of its hosts in flight: it tells ``observe`` (when given) of each change."""

    def __init__(self, observe: Observer | None = None) -> None:
        self._observe = observe
        self._slots: dict[str, str] = {}

    @property
    def in_flight(self) -> int:
        return len(self._slots)

    def started(self, host: str, slot: str) -> None:
        self._slots[host] = slot
        if self._observe is not None:
            self._observe(HostEvent("started", host, slot, len(self._slots)))

    def finished(self, host: str, payload: dict) -> None:
        slot = self._slots.pop(host, "")
        if self._observe is not None:
            held = payload.get("held")
            self._observe(HostEvent("finished", host, slot, len(self._slots),
                                    tuple(held) if held else None, payload.get("pid")))


class InFlight:
    """An observer that keeps every :class:`HostEvent`; ``max_in_flight`` and ``max_held`` are the peaks."""

    def __init__(self) -> None:
        self.events: list[HostEvent] = []

    def __call__(self, event: HostEvent) -> None:
        self.events.append(event)

    def hosts(self, kind: str) -> list[str]:
        """The hosts of the ``kind`` events (``"started"`` / ``"finished"``), in order."""
        return [e.host for e in self.events if e.kind == kind]

    @property
    def max_in_flight(self) -> int:
        """The most hosts handed out at once, as the executor counted them."""
        return max((e.in_flight for e in self.events), default=0)

    @property
    def max_held(self) -> int:
        """The most hosts whose events were in memory at once, from the intervals the workers measured
        (one ending as another starts is not an overlap)."""
        edges = sorted((t, d) for e in self.events if e.held for t, d in ((e.held[0], 1), (e.held[1], -1)))
        now = peak = 0
        for _, d in edges:
            now += d
            peak = max(peak, now)
        return peak


__all__ = ["Dispatch", "HostEvent", "InFlight", "Observer"]
