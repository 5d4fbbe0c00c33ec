"""The host planes' events of a sample read with the protobuf's own parser (``tfadvisor.proto.xplane_pb2``), outside
the tool's reader: the truth the component tests count op time from."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from conftest import SAMPLES

from tfadvisor.proto import xplane_pb2


@cache
def host_events(sample: str | Path) -> tuple[tuple[str, int, int, str], ...]:
    """(event name, start ps, duration ps, plane name) of every event on the host planes of ``sample`` (a directory
    under sample_traces/, or a path), in time order."""
    root = sample if isinstance(sample, Path) else SAMPLES / sample
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(next(root.rglob("*.xplane.pb")).read_bytes())
    out = []
    for plane in xs.planes:
        if not plane.name.startswith("/host:"):
            continue
        meta = {k: v.name for k, v in plane.event_metadata.items()}
        for line in plane.lines:
            for ev in line.events:
                out.append((meta.get(ev.metadata_id, ""), line.timestamp_ns * 1000 + ev.offset_ps, ev.duration_ps,
                            plane.name))
    return tuple(sorted(out, key=lambda e: (e[1], e[2], e[0])))
