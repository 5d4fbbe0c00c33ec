"""The copies' kinds read in one pass (``_native.copy_kinds``) against the values read as any stat.

``activity._copy_directions`` reads each copy's ``memcpy_details`` string in one C pass where it can
(``_copy_flags``) and as a stat column otherwise; both must give the same directions, kinds-known and
pageable flags. Checked on every device plane of every sample and real trace (every row taken as a copy),
and on SYNTHETIC planes built here with the cases the one pass hands back (values at the metadata level, a
reference instead of a string, the stat twice on one event) and the ones it keeps (bytes that are not UTF-8
around the words it looks for, empty and missing values).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import trace_dirs

import tfadvisor
from tfadvisor.analyses import activity, event_stats
from tfadvisor.analyses.base import Context
from tfadvisor.io.reader import load
from tfadvisor.proto import xplane_pb2

TRACES = trace_dirs()


def _both(p, rows: np.ndarray, monkeypatch) -> tuple[tuple, tuple, bool]:
    """_copy_directions of ``rows`` with the one pass where it applies, then without it; whether it applied."""
    by_name = (rows % 3) == 0  # any direction by name: the kinds must override it where they say
    fast = activity._copy_flags(p, rows) is not None
    got = activity._copy_directions(p, rows, by_name, Context())
    with monkeypatch.context() as m:
        m.setattr(activity, "_copy_flags", lambda *_: None)
        ref = activity._copy_directions(p, rows, by_name, Context())
    return got, ref, fast


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_one_pass_gives_what_the_stat_columns_give(path, monkeypatch):
    trace = load(str(path), stats=event_stats())
    for p in trace.device_planes:
        rows = np.arange(p.n_events, dtype=np.int64)
        got, ref, _ = _both(p, rows, monkeypatch)
        for a, b, what in zip(got, ref, ("h2d", "known", "pageable")):
            assert np.array_equal(a, b), (p.name, what)


def _plane(events: list[dict], meta_details: str | None = None) -> xplane_pb2.XSpace:
    """One GPU plane of copies, each event ``{"details": str | bytes | None, "twice": bool, "ref": bool}``."""
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/device:GPU:0")
    p.event_metadata[1].name = "MemcpyH2D"
    p.stat_metadata[1].name = "memcpy_details"
    p.stat_metadata[2].name = "kind_src:pageable kind_dst:device"  # what a reference points to
    if meta_details is not None:
        p.event_metadata[1].stats.add(metadata_id=1, str_value=meta_details)
    line = p.lines.add(id=1, name="Stream #13(MemcpyH2D)", timestamp_ns=1000)
    for i, e in enumerate(events):
        ev = line.events.add(metadata_id=1, offset_ps=10 * i, duration_ps=5)
        for _ in range(2 if e.get("twice") else 1):
            d = e.get("details")
            if e.get("ref"):
                ev.stats.add(metadata_id=1, ref_value=2)
            elif isinstance(d, bytes):
                ev.stats.add(metadata_id=1, bytes_value=d)
            elif d is not None:
                ev.stats.add(metadata_id=1, str_value=d)
    return space


EVENTS = [
    {"details": "kind_src:pinned kind_dst:device size:12 dest:0 async:1"},
    {"details": "kind_src:device kind_dst:device size:12"},  # device to device: not H2D by its kinds
    {"details": "kind_src:pageable kind_dst:device size:4"},
    {"details": "kind_src:device kind_dst:pinned size:8"},
    {"details": "size:112 dest:4 async:0"},  # TF 2.4: no kinds, the name decides
    {"details": ""},
    {"details": None},  # no value at all
    {"details": b"\xff\xfekind_src:pageable\xe2 kind_dst:device\x80"},  # not UTF-8 around the words
    {"details": b"kind_\xe2\x82dst:device"},  # a word cut by bytes that are not UTF-8: not the word
]


@pytest.mark.parametrize("case", ["strings", "metadata", "ref", "twice"])
def test_synthetic_planes(case, tmp_path: Path, monkeypatch):
    events = [dict(e) for e in EVENTS]
    meta = None
    if case == "metadata":
        meta = "kind_src:pageable kind_dst:device"  # the events without their own value take it
    elif case == "ref":
        events[2]["ref"] = True
    elif case == "twice":
        events[0]["twice"] = True
    f = tmp_path / "plugins" / "profile" / "r" / "h.xplane.pb"
    f.parent.mkdir(parents=True)
    f.write_bytes(_plane(events, meta).SerializeToString())
    p = tfadvisor.load(str(tmp_path), stats=event_stats()).device_planes[0]
    got, ref, fast = _both(p, np.arange(p.n_events, dtype=np.int64), monkeypatch)
    assert fast == (case == "strings")  # the cases it hands back, handed back
    for a, b, what in zip(got, ref, ("h2d", "known", "pageable")):
        assert np.array_equal(a, b), what
    h2d, known, pageable = got
    if case == "strings":  # and the answers themselves, as the module's docstring says
        assert known.tolist() == [True, True, True, True, False, False, False, True, False]
        assert h2d.tolist()[:4] == [True, False, True, False]
        assert pageable.tolist() == [False, False, True, False, False, False, False, True, False]
