"""What the host ran in the gaps between steps (``gaps._host_classes``), against the whole sets.

The gaps analysis keeps of the Python threads' events those that touch a gap only (a long run has millions,
the gaps a few); the time each set covers inside each gap must be the whole set's. Checked on every sample
and real trace with steps and gaps.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import trace_dirs

from tfadvisor.analyses import event_stats
from tfadvisor.analyses.activity import activity
from tfadvisor.analyses.base import Context
from tfadvisor.analyses.gaps import _host_classes
from tfadvisor.analyses.step_detect import detect_steps
from tfadvisor.analyses.steps import analyze as steps_analyze
from tfadvisor.io.reader import load
from tfadvisor.spans.intervals import Measure

TRACES = trace_dirs()


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_gap_coverage_is_the_whole_sets(path):
    trace = load(str(path), stats=event_stats())
    ctx = Context()
    act = activity(trace, ctx)
    steps = detect_steps(trace, ctx)
    tbl = steps_analyze(trace, ctx, act=act, steps=steps).tables.get("steps")
    if act.host is None or tbl is None or len(tbl) < 2:
        pytest.skip("no host plane or fewer than two steps: no gaps between steps")
    order = np.argsort(tbl["start_ps"], kind="stable")
    s, e = np.asarray(tbl["start_ps"])[order], np.asarray(tbl["end_ps"])[order]
    ok = s[1:] > e[:-1]
    gs, ge = e[:-1][ok], s[1:][ok]
    if not gs.shape[0]:
        pytest.skip("no time between steps")
    got = _host_classes(act, ctx, gs, ge)
    p = act.host
    rows = act.rows.get("python_all", np.empty(0, np.int64))
    if rows.shape[0]:  # the whole set, built here from every Python-thread event
        whole = Measure.union(p.ev_start_ps[rows], p.ends(rows))
        assert np.array_equal(got["python"].within(gs, ge) if "python" in got else np.zeros(gs.shape[0], np.int64),
                              whole.within(gs, ge))
    assert set(got) >= {"input", "ops"}


def test_a_keras_markers_batch_end_is_a_row_between_steps():
    """A callback listed before AdvisorCallback runs its batch-end hook inside the step marker (ablation seed 1, a
    real program): the gaps table holds each marker's end after the train function's work as a ``batch_end`` row,
    inside that marker, marked (the ``gaps`` mark selects it) but not counted; per training step they are at most
    the attribution's between_steps (which holds them and the gaps between markers) and most of it here."""
    from conftest import ROOT

    import tfadvisor

    res = tfadvisor.analyze(ROOT / "tests" / "data" / "ablation" / "1" / "logdir")
    g, st = res.tables["gaps"], res.tables["steps"]
    tails = g[g["kind"] == "batch_end"]
    assert len(tails) >= len(st) - 1 > 0, len(tails)
    assert not tails["counted"].any() and tails["marked"].all()
    ends = set(st["end_ps"].tolist())
    assert set(tails["end_ps"].tolist()) <= ends
    k = np.searchsorted(st["start_ps"].to_numpy(), tails["start_ps"].to_numpy(), side="right") - 1
    assert (tails["start_ps"].to_numpy() >= st["start_ps"].to_numpy()[k]).all()
    per_step = float(tails["duration_ms"].sum()) / float(st["train_steps"].sum())
    assert 0.3 * res.metrics["attr_between_steps_ms"] <= per_step <= res.metrics["attr_between_steps_ms"] + 1e-9
