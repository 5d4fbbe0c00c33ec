"""Step detection and the step-time split: interval arithmetic, then every sample's planted truth.

The sample checks are data-driven: every ``sample_traces/*/expected.toml`` adds cases.
Step time in the truth files has two definitions: captured samples measure it inside the
step marker (``make_samples.py``: perf_counter around the marked body), which is our
``step_time_mean_ms`` (and xprof's); synthetic samples define it as the period from one
step's start to the next (``synthetic.py``: ``periods.mean()``), which is our
``step_period_mean_ms``. Each truth is compared with the figure of the same definition.
"""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from conftest import SAMPLES, expected, load_sample, sample_dirs

from tfadvisor.analyses.base import Context, Options
from tfadvisor.analyses.inputs import run
from tfadvisor.spans.intervals import (
    LazyUnion,
    Measure,
    Runs,
    _union2_linear,
    _union_small,
    priority_split,
    union,
    union_of,
)

MINE = ("steps", "variation", "gaps", "input", "tfdata", "eager", "overhead")
_RUNS: dict[tuple[str, str], Context] = {}


def run_mine(name: str, host: str | None = None) -> Context:
    """Run this package's analyses (in their ORDER) on one host of a sample, once per session."""
    key = (name, host or "")
    if key not in _RUNS:
        trace = load_sample(name)
        if host is not None and len(trace.hosts) > 1:
            trace = trace.host(host)
        ctx = Context(options=Options())
        for m in MINE:
            ctx.results[m] = run(importlib.import_module(f"tfadvisor.analyses.{m}").analyze, trace, ctx)
        _RUNS[key] = ctx
    return _RUNS[key]


def metric(ctx: Context, name: str):
    return ctx.metric(name)


def sample_hosts() -> list[tuple[str, str]]:
    out = []
    for p in sample_dirs():
        hosts = sorted({f.name.split(".xplane.pb")[0] for f in p.rglob("*.xplane.pb")})
        for h in hosts or [""]:
            out.append((p.name, h))
    return out


CASES = sample_hosts()
IDS = [f"{s}:{h}" if h else s for s, h in CASES]


def cases_with(key: str) -> list:
    """The (sample, host) cases whose expected.toml [truth] plants ``key`` (no case that can only skip)."""
    return [pytest.param(s, h, id=i) for (s, h), i in zip(CASES, IDS)
            if key in expected(SAMPLES / s).get("truth", {})]


def _host_arg(sample: str, host: str) -> str | None:
    return host if host and len(load_sample(sample).hosts) > 1 else None


# ------------------------------------------------------------------------------------------
# Interval arithmetic against brute force
# ------------------------------------------------------------------------------------------

def _paint(intervals, lo, hi):
    cover = np.zeros(hi - lo, bool)
    for a, b in intervals:
        cover[max(a, lo) - lo:max(min(b, hi), lo) - lo] = True
    return cover


def _random_set(rng, n, span=400, maxlen=40):
    s = rng.integers(0, span, n)
    return s, s + rng.integers(0, maxlen, n)


def test_union_and_unions_of_sets_match_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(200):
        s, e = _random_set(rng, rng.integers(0, 60))
        ms, me = union(s, e)
        assert np.all(ms[1:] > me[:-1])  # disjoint, not touching
        assert np.array_equal(_paint(zip(ms, me), 0, 500), _paint(zip(s, e), 0, 500))
        s2, e2 = union(*_random_set(rng, rng.integers(0, 8)))
        lin = _union2_linear(ms, me, s2, e2)
        small = _union_small(ms, me, s2, e2)
        assert np.array_equal(lin[0], small[0]) and np.array_equal(lin[1], small[1])
        want = _paint(list(zip(ms, me)) + list(zip(s2, e2)), 0, 500)
        assert np.array_equal(_paint(zip(*lin), 0, 500), want)


def test_measure_within_and_priority_split():
    rng = np.random.default_rng(2)
    for _ in range(100):
        layers = [Measure.union(*_random_set(rng, rng.integers(0, k))) for k in (40, 3, 30, 2)]
        w0 = np.sort(rng.choice(np.arange(0, 460, 2), 6, replace=False))
        a, b = w0[0::2], w0[1::2]
        split = priority_split((a, b), [(f"l{i}", m) for i, m in enumerate(layers)])
        painted = [_paint(zip(m.s, m.e), 0, 500) for m in layers]
        taken = np.zeros(500, bool)
        for i, p in enumerate(painted):
            own = p & ~taken
            want = np.array([own[x:y].sum() for x, y in zip(a, b)])
            assert np.array_equal(split[f"l{i}"], want)
            taken |= p
        assert np.array_equal(split["_rest"], np.array([(~taken)[x:y].sum() for x, y in zip(a, b)]))
        # the accumulator's within equals the plain union's
        acc = LazyUnion()
        for m in layers:
            acc.add(m)
        assert np.array_equal(acc.within(a, b), union_of(*layers).within(a, b))


def test_thread_runs_add_up():
    r = Runs([(np.array([0, 10]), np.array([5, 20])), (np.array([3]), np.array([12]))])
    assert r.total() == 5 + 10 + 9
    assert r.within(np.array([0]), np.array([10])).tolist() == [5 + 7]
    assert r.wall().total() == 20


# ------------------------------------------------------------------------------------------
# Samples: planted truth
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sample,host", CASES, ids=IDS)
def test_steps_against_truth(sample, host):
    truth = expected(SAMPLES / sample).get("truth", {})
    ctx = run_mine(sample, _host_arg(sample, host))
    n = metric(ctx, "steps_count")
    if "steps" in truth:
        assert n == truth["steps"], f"{sample}: {n} steps found, truth {truth['steps']} " \
                                    f"(source {metric(ctx, 'steps_source')})"
    kind = expected(SAMPLES / sample).get("kind", "captured")
    if kind == "synthetic" and "step_time_ms" in truth:  # the generator's +-5 % around its period
        lo, hi = truth["step_time_ms"]
        v = metric(ctx, "step_period_mean_ms")
        assert v is not None and lo <= v <= hi, f"{sample}: step_period_mean_ms {v} outside {truth['step_time_ms']}"
    measured = SAMPLES / sample / "measured.json"
    if kind == "captured" and host in ("", "localhost", "worker0") and measured.exists():
        # the truth is the script's own clock (measured.json), within 2 %
        meas = json.loads(measured.read_text())
        wall = np.asarray(meas["measured_step_ms"], dtype=float)
        wall = wall[1:-1] if wall.size > 5 else wall[:-1] if wall.size > 1 else wall
        # a clock from start to start is the step time; one inside the marker, its busy part
        name = "step_time_mean_ms" if meas["step_clock"] == "wall" else "step_busy_mean_ms"
        v = metric(ctx, name)
        assert v == pytest.approx(wall.mean(), rel=0.02), f"{sample}: {name} {v} vs measured.json"
        if "step_time_ms" in truth:  # expected.toml's range: that clock's mean +-15 % (a 1.5x error fails)
            lo, hi = truth["step_time_ms"]
            assert lo <= v <= hi and hi / lo < 1.36, (sample, v, truth["step_time_ms"])


@pytest.mark.parametrize("sample,host", cases_with("idle_pct"))
def test_idle_against_truth(sample, host):
    truth = expected(SAMPLES / sample)["truth"]
    ctx = run_mine(sample, _host_arg(sample, host))
    lo, hi = truth["idle_pct"]
    v = metric(ctx, "idle_pct")
    assert v is not None and lo <= v <= hi, f"{sample}: idle_pct {v} outside {truth['idle_pct']}"


def test_keras_fit_with_tensorboard_callback_has_steps():
    """Keras 3's callback writes ``Profiled batch`` without ``_r``: xprof finds no steps, we must."""
    names = [p.name for p in sample_dirs() if expected(p).get("capture_api") == "tensorboard_callback"]
    assert names, "no sample captured with the TensorBoard callback"
    for name in names:
        ctx = run_mine(name)
        assert metric(ctx, "steps_source") == "profiled_batch"
        assert metric(ctx, "steps_count") >= 1


def test_no_markers_uses_function_cadence():
    names = [p.name for p in sample_dirs() if expected(p).get("capture_api") == "start_stop_no_markers"]
    assert names, "no marker-less sample"
    for name in names:
        ctx = run_mine(name)
        assert metric(ctx, "steps_source") == "function_cadence"


@pytest.mark.parametrize("sample,host", [pytest.param(s, h, id=i) for (s, h), i in zip(CASES, IDS)
                                         if expected(SAMPLES / s).get("truth", {}).get("steps") != 0])
def test_step_table_is_consistent(sample, host):
    ctx = run_mine(sample, _host_arg(sample, host))
    tbl = ctx.table("steps").to_pandas()
    assert tbl is not None, f"{sample}: no steps table"
    cats = [c for c in tbl.columns if c.endswith("_ms") and c not in ("duration_ms", "period_ms", "wall_ms")]
    assert len(cats) == 8
    # the categories split each step's wall time (start to next start) exactly
    np.testing.assert_allclose(tbl[cats].sum(axis=1), tbl["wall_ms"], rtol=1e-9, atol=1e-6)
    assert (tbl[cats] >= -1e-9).all().all()
    # the between-steps part lies after the marker (where device work or an input wait does not take it first)
    assert (tbl["between_steps_ms"] <= tbl["wall_ms"] - tbl["duration_ms"] + 1e-6).all()
    # statistics leave out the first and last step when there are more than five (as xprof), the last with
    # two to five
    n = len(tbl)
    assert int(tbl["in_stats"].sum()) == (n - 2 if n > 5 else n - 1 if n > 1 else n)
    pcts = [metric(ctx, f"step_{c[:-3]}_pct") for c in cats]
    assert abs(sum(p for p in pcts if p is not None) - 100.0) < 1e-6


def _nested_marker_trace(reverse: bool = False):
    """Three steps: ``Profiled batch`` wrapping a ``train`` root marker wrapping ``FunctionRun``
    (an implicit root), and one op on a compute thread; optionally written in reverse order."""
    import tempfile
    from pathlib import Path

    import tfadvisor
    from tfadvisor.proto import xplane_pb2

    xs = xplane_pb2.XSpace()
    pl = xs.planes.add(id=1, name="/host:CPU")
    for k, v in {1: "Profiled batch", 2: "train", 3: "FunctionRun", 4: "Add:AddV2"}.items():
        pl.event_metadata[k].id = k
        pl.event_metadata[k].name = v
    for k, v in {1: "step_num", 2: "_r"}.items():
        pl.stat_metadata[k].id = k
        pl.stat_metadata[k].name = v
    py = pl.lines.add(id=1, name="python", timestamp_ns=0)
    tc = pl.lines.add(id=2, name="tf_Compute/1", timestamp_ns=0)
    us = 1_000_000
    steps = range(3)[::-1] if reverse else range(3)
    for i in steps:
        t0 = i * 100 * us
        ev = py.events.add(metadata_id=1, offset_ps=t0, duration_ps=80 * us)
        ev.stats.add(metadata_id=1, int64_value=i + 5)
        ev = py.events.add(metadata_id=2, offset_ps=t0 + 5 * us, duration_ps=70 * us)
        ev.stats.add(metadata_id=1, int64_value=i)
        ev.stats.add(metadata_id=2, int64_value=1)
        ev = py.events.add(metadata_id=3, offset_ps=t0 + 10 * us, duration_ps=50 * us)
        ev.stats.add(metadata_id=2, int64_value=1)  # an implicit root: never a step by itself
        tc.events.add(metadata_id=4, offset_ps=t0 + 20 * us, duration_ps=30 * us)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "h.xplane.pb"
        f.write_bytes(xs.SerializeToString())
        return tfadvisor.load(str(f))


@pytest.mark.parametrize("reverse", [False, True], ids=["sorted", "reversed"])
def test_outermost_marker_and_profiled_batch_nesting(reverse):
    """A ``Profiled batch`` wrapping a ``train`` root marker: the outer one is the step.
    Events written out of time order give the same answer."""
    trace = _nested_marker_trace(reverse)
    ctx = Context(options=Options())
    res = run(importlib.import_module("tfadvisor.analyses.steps").analyze, trace, ctx)
    tbl = res.tables["steps"]
    assert res.metrics["steps_source"].value == "trace_context"
    assert len(tbl) == 3
    assert tbl["duration_ms"].round(6).tolist() == [0.08] * 3  # the Profiled batch span
    assert tbl["step"].tolist() == [0, 1, 2]  # numbered by the root marker inside
    # CPU-only: the op is device compute; the FunctionRun around it is TF runtime ("other")
    assert tbl["device_compute_ms"].round(6).tolist() == [0.03] * 3
    assert tbl["other_ms"].round(6).tolist() == [0.02] * 3


def test_trace_without_steps_reports_missing():
    """A device plane alone (no host markers, no Steps line): metrics None with a note."""
    from tfadvisor.model.trace import Trace

    full = load_sample("synthetic_gpu_fp32")
    trace = Trace(planes=[p for p in full.planes if p.name.startswith("/device:")], files=full.files)
    ctx = Context(options=Options())
    for m in MINE:
        ctx.results[m] = run(importlib.import_module(f"tfadvisor.analyses.{m}").analyze, trace, ctx)
    steps = ctx.results["steps"]
    assert steps.metrics["steps_count"].value == 0
    assert steps.metrics["step_time_mean_ms"].value is None and steps.notes
    for name, m in (("input", "input_pct"), ("overhead", "python_overhead_pct"), ("eager", "eager_pct"),
                    ("tfdata", "tfdata_pipeline"), ("gaps", "gaps_count")):
        r = ctx.results[name]
        assert r.metrics[m].value is None, (name, m)
        assert r.notes, name
