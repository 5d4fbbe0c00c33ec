"""The reader keeps only the event-level stats the analyses declare (``EVENT_STATS`` in their modules,
:func:`tfadvisor.analyses.event_stats`): issue 28's "the same answers" with less held in memory.

* Every sample and real trace: the analysis of a trace loaded with only the declared stats gives the same
  JSON and tables as the analysis of the same trace loaded with every stat, value for value.
* The kept stats are the full load's, row for row (values, kinds, strings), the skipped ones are counted,
  the strings they alone held are gone, and a name no module declared is refused, not silently empty.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import SAMPLES, analysed, real_trace_dirs, trace_dirs

import tfadvisor
from tfadvisor import api
from tfadvisor.io.discovery import resolve
from tfadvisor.report.json_report import tables_to_dict

TRACES = trace_dirs()
#: Fields that differ between any two runs (wall-clock timings of the tool itself).
_TIMINGS = ("seconds", "load_s", "held", "pid")


def _plain(result) -> str:
    d = result.to_dict()
    d["tables"] = tables_to_dict(result.tables)

    def walk(x):
        if isinstance(x, dict):
            return {k: "X" if k in _TIMINGS or k.startswith("elapsed") or k.endswith("_s") else walk(v)
                    for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    return json.dumps(walk(d), sort_keys=True, default=str)


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_declared_stats_give_the_same_answers(path):
    every = tfadvisor.load(path)  # every stat kept
    assert all(p.kept_stats is None and p.stats_skipped == 0 for p in every.planes)
    # the reader keeps the declared stats only; a one-file run's analysis is the shared one (jobs is for many hosts)
    declared = analysed(path) if len(resolve(str(path)).files) == 1 else api.analyze(str(path), jobs=1)
    assert _plain(declared) == _plain(api.analyze(str(path), jobs=1, trace=every))


def test_kept_stats_are_the_full_loads_and_others_are_refused():
    sample = SAMPLES / "custom_loop_python"
    full = tfadvisor.load(sample)
    keep = frozenset(("step_num", "tf_function_call", "name"))
    part = tfadvisor.load(sample, stats=keep)
    skipped_somewhere = False
    for a, b in zip(full.planes, part.planes, strict=True):
        assert b.kept_stats == keep
        named = np.isin(a.stat_names[a.st_stat], list(keep))
        assert b.n_stats == int(named.sum()) and b.stats_skipped == a.n_stats - b.n_stats
        skipped_somewhere |= b.stats_skipped > 0
        assert np.array_equal(b.st_event, a.st_event[named]) and np.array_equal(b.st_kind, a.st_kind[named])
        for n in keep:
            ca, cb = a.stat(n), b.stat(n)
            assert np.array_equal(ca.rows, cb.rows) and np.array_equal(ca.kind, cb.kind)
            assert ca.strings().tolist() == cb.strings().tolist()  # strings renumbered, the same text
        assert len(b.str_off) <= len(a.str_off)
        other = next((str(n) for n in a.stat_names if str(n) not in keep), None)
        if other is not None:
            with pytest.raises(KeyError, match="EVENT_STATS"):
                b.stat(other)
    assert skipped_somewhere
    # the summary counts every event stat of the plane, read or skipped
    assert [p["stats"] for p in part.summary()["planes"]] == [p["stats"] for p in full.summary()["planes"]]



@pytest.mark.parametrize("path", [SAMPLES / "custom_loop_python", *real_trace_dirs()[:1]], ids=lambda p: p.name)
def test_stats_kept_chunk_by_chunk_equal_one_chunk(path, monkeypatch):
    """With a stat filter both decoding passes count, place and fill only the declared stats (the others are read
    through, never stored): lines cut into chunks of 256 bytes, each placed by the kept stats and strings before it
    and filled on the decoder's threads, give the same columns, strings and counts as whole lines."""
    import tfadvisor.io.reader as reader
    from tfadvisor.analyses import event_stats

    cols = ("ev_line", "ev_meta", "ev_start_ps", "ev_dur_ps", "st_event", "st_stat", "st_kind", "st_value",
            "str_pool", "str_off", "str_len")
    one = tfadvisor.load(path, stats=event_stats())
    monkeypatch.setattr(reader, "CHUNK_BYTES", 256)
    monkeypatch.setattr(reader, "SERIAL_BELOW_BYTES", 0)  # the threaded passes, on any plane
    many = tfadvisor.load(path, stats=event_stats())
    assert sum(p.stats_skipped for p in one.planes) > 0
    for a, b in zip(one.planes, many.planes, strict=True):
        assert b.stats_skipped == a.stats_skipped
        for c in cols:
            assert np.array_equal(getattr(a, c), getattr(b, c)), c
