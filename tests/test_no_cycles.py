"""An analysis leaves no reference cycles among its own objects: the context, the results, the trace's
planes and what the analyses built from them are freed by reference counting as soon as they are dropped.

A run of many hosts analyses one host after the other in the same process; when a context kept itself
in its memo (``Context.once`` stored its arguments, the context among them), every host's objects became
cyclic garbage, freed only by the collector's passes: 256 SYNTHETIC pod hosts spent 0.6 s in them.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import tfadvisor
from tfadvisor.analyses import Context, analyze_trace

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"

#: The package's own types that must never be found in a cycle after an analysis.
OURS = ("Context", "AnalysisResult", "Trace", "Plane", "Activity", "Measure", "Metric", "Table", "Tables",
        "StatColumn", "StepSet")


def ours(obj) -> bool:
    """One of :data:`OURS`, by module too: other libraries' objects share names (``contextvars.Context``, which
    an event loop left running by an earlier test in this worker, such as dask's client thread, makes and drops
    as garbage at any time)."""
    t = type(obj)
    return t.__name__ in OURS and t.__module__.split(".")[0] == "tfadvisor"


@pytest.mark.parametrize("sample", ["synthetic_multihost_straggler", "real_tf_gpu_multiworker", "tfdata_repeat_map"])
def test_an_analysis_leaves_no_cycles_of_its_objects(sample):
    trace = tfadvisor.load(str(SAMPLES / sample))
    analyze_trace(trace)  # warm the per-process caches: they are meant to stay
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        ha = analyze_trace(trace)
        assert ha.metrics  # the analysis ran
        del ha
        gc.collect()
        cyclic = [type(o).__name__ for o in gc.garbage if ours(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not cyclic, sorted(set(cyclic))


def test_the_memo_does_not_keep_its_context():
    ctx = Context()
    ctx.once(lambda c, x: x + 1, ctx, 1)
    (kept, _), = ctx._once.values()
    assert all(a is not ctx for a in kept)
