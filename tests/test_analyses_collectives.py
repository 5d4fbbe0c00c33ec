"""collectives: measured all-reduce per step, and the expectation from params and link."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, expected, load_sample
from test_analyses_device import run, values

import tfadvisor
from tfadvisor.analyses import collectives, options_from
from tfadvisor.analyses.base import Options
from tfadvisor.model import interconnects as links
from tfadvisor.model.trace import Trace
from tfadvisor_dev import synthetic as syn

# --- the expectation, against figures worked out by hand ----------------------------------

def test_expectation_by_hand():
    # 25 M params x 4 B = 100 MB; at 300 GB/s: 0.333 ms; ring over 8: x 2*7/8 = 1.75.
    v = values(run(collectives, Trace(planes=[], files=[]),
                   Options(param_count=25_000_000, link="nvlink3", replicas=8), steps=False))
    assert v["param_count"] == 25_000_000 and v["replicas"] == 8
    assert v["link_bandwidth_gbps"] == 300.0
    assert v["allreduce_expected_ms"] == pytest.approx(1e8 / 300e9 * 1e3)  # 0.3333 ms
    assert v["allreduce_expected_ms"] == pytest.approx(0.3333, abs=1e-4)
    assert v["allreduce_expected_ring_ms"] == pytest.approx(0.3333333 * 1.75, rel=1e-6)
    assert v["allreduce_present"] is False and v["allreduce_ratio"] is None


def test_expectation_plain_bandwidth_and_two_replicas():
    # 1 M params over 12.5 GB/s (100 Gbit EFA): 4e6 / 12.5e9 s = 0.32 ms; N=2: x 1.0.
    v = values(run(collectives, Trace(planes=[], files=[]),
                   Options(param_count=1_000_000, bandwidth_gbps=12.5, replicas=2), steps=False))
    assert v["allreduce_expected_ms"] == pytest.approx(0.32)
    assert v["allreduce_expected_ring_ms"] == pytest.approx(0.32)


def test_bandwidth_option_wins_over_link():
    v = values(run(collectives, Trace(planes=[], files=[]),
                   Options(param_count=1_000_000, bandwidth_gbps=10.0, link="nvlink4"), steps=False))
    assert v["link_bandwidth_gbps"] == 10.0
    assert v["allreduce_expected_ring_ms"] is None  # replicas unknown


@pytest.mark.parametrize("spec, gbps", [
    ("nvlink3", 300.0), ("NVLink-3", 300.0), ("nvlink4", 450.0), ("nvlink2", 150.0), ("pcie3", 16.0),
    ("pcie4", 32.0), ("PCIe_gen5", 64.0), ("efa-100g", 12.5), ("efa-400g", 50.0), ("ib-hdr", 25.0),
    ("eth-25g", 3.125), ("eth_100g", 12.5), (300, 300.0), ("300", 300.0), ("25 GB/s", 25.0), ("100Gbps", 12.5),
    ("400 Gbit/s", 50.0), (None, None),
])
def test_links(spec, gbps):
    assert links.bandwidth_gbps(spec) == gbps


@pytest.mark.parametrize("bad", ["warp-drive", "-3", "12 furlongs"])
def test_links_reject(bad):
    with pytest.raises(ValueError):
        links.bandwidth_gbps(bad)


def test_unknown_link_is_a_note_not_a_crash():
    t = load_sample("synthetic_gpu_allreduce")
    res = run(collectives, t, Options(param_count=10, link="warp-drive"))
    assert res.metrics["link_bandwidth_gbps"].value is None
    assert res.metrics["allreduce_expected_ms"].value is None


# --- measured --------------------------------------------------------------------------

def test_synthetic_nccl_allreduce():
    sample = SAMPLES / "synthetic_gpu_allreduce"
    truth = expected(sample)["truth"]
    t = load_sample("synthetic_gpu_allreduce")
    opts = options_from(t, Options())  # tfadvisor_run.json: param_count, replicas, link
    res = run(collectives, t, opts)
    v = values(res)
    assert v["allreduce_present"] is True and v["allreduce_source"] == "device"
    lo, hi = truth["allreduce_ms"]
    assert lo <= v["allreduce_ms_per_step"] <= hi
    assert v["allreduce_count_per_step"] == pytest.approx(1.0)
    assert v["param_count"] == truth["param_count"]
    assert v["replicas"] == 8 and v["link_bandwidth_gbps"] == 300.0
    # 25 M fp32 gradients over NVLink3 at 300 GB/s: 0.333 ms plain, x 2(n-1)/n = 0.583 ms as a ring;
    # the planted NCCL kernel (~1.66 ms, the generator's bookkeeping) is ~5x the plain figure
    planted = syn.build_xspaces(syn._samples()["synthetic_gpu_allreduce"].specs)[1]["hosts"]["synth-a100"]
    # measured: 0.75 % apart (the trace's kernels against the bookkeeping)
    assert v["allreduce_ms_per_step"] == pytest.approx(planted["allreduce_ms"], rel=0.02)
    assert v["allreduce_expected_ms"] == pytest.approx(25e6 * 4 / 300e9 * 1e3, rel=1e-3)
    assert v["allreduce_expected_ring_ms"] == pytest.approx(25e6 * 4 / 300e9 * 1e3 * 2 * 7 / 8, rel=1e-3)
    # measured: 0.43 % apart
    assert planted["allreduce_ms"] / v["allreduce_expected_ms"] == pytest.approx(5.0, rel=0.05)
    # measured: 0.75 % apart
    assert v["allreduce_ratio"] == pytest.approx(planted["allreduce_ms"] / (25e6 * 4 / 300e9 * 1e3 * 1.75), rel=0.02)
    assert 0 <= v["allreduce_overlap_pct"] <= 100 and 0 < v["allreduce_pct"] < 100
    ops = res.tables["collective_ops"]
    assert set(ops["kind"]) == {"allreduce"} and ops["name"].str.contains("AllReduce").all()
    assert ops["plane"].nunique() == 8


def test_multiworker_both_hosts():
    sample = SAMPLES / "multiworker_allreduce"
    truth = expected(sample)["truth"]
    t = load_sample("multiworker_allreduce")
    assert len(t.hosts) == 2
    for h in t.hosts:
        res = run(collectives, t.host(h), Options(param_count=truth["param_count"], replicas=2, link="eth-10g"))
        v = values(res)
        assert v["allreduce_present"] is True and v["allreduce_source"] == "host", h
        assert v["allreduce_ms_per_step"] > 0 and v["allreduce_count_per_step"] >= 1, h
        assert v["param_count"] == truth["param_count"]
        # 399,370 params x 4 B / 1.25 GB/s = 1.278 ms; N=2 ring factor 1.
        assert v["allreduce_expected_ring_ms"] == pytest.approx(truth["param_count"] * 4 / 1.25e9 * 1e3)
        assert v["allreduce_ratio"] == pytest.approx(v["allreduce_ms_per_step"] / v["allreduce_expected_ring_ms"])
        assert res.tables["collective_ops"]["name"].str.endswith(":CollectiveReduceV2").all()


def test_without_steps_totals_only():
    t = load_sample("multiworker_allreduce")
    res = run(collectives, t.host(t.hosts[0]), steps=False)
    v = values(res)
    assert v["allreduce_present"] is True and v["allreduce_total_ms"] > 0
    assert v["allreduce_ms_per_step"] is None and v["allreduce_count_per_step"] is None
    assert any("step" in n for n in res.notes)
    # Missing inputs: None + a note saying what to pass.
    assert v["param_count"] is None and v["allreduce_ratio"] is None
    assert any("--params" in n for n in res.notes) and any("--bandwidth" in n for n in res.notes)


def test_no_allreduce():
    res = run(collectives, load_sample("memory_heavy"))
    v = values(res)
    assert v["allreduce_present"] is False
    for k in collectives.MEASURED + ("allreduce_ratio",):
        assert v[k] is None, k
    assert res.notes


def test_per_step_is_per_training_step():
    """Under Keras steps_per_execution=k a step marker holds k training steps, and figures per step are per training
    step, as the step time: the same trace read as markers of 2 steps has half the all-reduce time and count per step,
    and half each device's work per step (the ratios between devices unchanged)."""
    from test_analyses_device import _steps

    from tfadvisor.analyses import devices
    from tfadvisor.analyses.base import Context
    from tfadvisor.analyses.inputs import run as run_analysis

    t = load_sample("synthetic_gpu_allreduce")
    opts = options_from(t, Options())
    got = {}
    for k in (1, 2):
        ctx = Context(options=opts)
        ctx.results["steps"] = _steps(t)
        tbl = ctx.results["steps"].tables.raw("steps")
        tbl["train_steps"] = tbl["train_steps"] * k
        got[k] = {**values(run_analysis(collectives.analyze, t, ctx)), **values(run_analysis(devices.analyze, t, ctx))}
    for name in ("allreduce_ms_per_step", "allreduce_count_per_step", "allreduce_ratio"):
        assert got[2][name] == pytest.approx(got[1][name] / 2, rel=1e-9), name
    assert got[1]["allreduce_count_per_step"] == pytest.approx(1.0)
    assert got[2]["allreduce_pct"] == pytest.approx(got[1]["allreduce_pct"], rel=1e-9)
    assert got[2]["device_slowest_ratio"] == pytest.approx(got[1]["device_slowest_ratio"], rel=1e-9)


def test_device_figures_per_training_step(tmp_path):
    """The devices compared per training step: one slow GPU of four (SYNTHETIC, 1.4x) read as markers of 2 steps has
    half the work and the straggler's wait per step, the same wait as a share of the step (the rule's impact)."""
    from test_analyses_device import _steps

    from tfadvisor.analyses import devices
    from tfadvisor.analyses.base import Context
    from tfadvisor.analyses.inputs import run as run_analysis

    spec = syn.SyntheticSpec(steps=8, num_gpus=4, allreduce_ms=20.0, host="h", seed=3, ops_per_step=24,
                             step_time_ms=80.0, gpu_slowdown=((3, 1.4),))
    syn.write_run(str(tmp_path), [spec])
    t = tfadvisor.load(str(tmp_path))
    got = {}
    for k in (1, 2):
        ctx = Context()
        ctx.results["steps"] = _steps(t)
        tbl = ctx.results["steps"].tables.raw("steps")
        tbl["train_steps"] = tbl["train_steps"] * k
        res = run_analysis(devices.analyze, t, ctx)
        got[k] = {**values(res), "work": res.tables.raw("device_balance")["work_ms"]}
    assert got[1]["device_straggler"] is not None and got[1]["device_straggler_wait_pct"] > 5
    assert got[2]["work"] == pytest.approx(got[1]["work"] / 2, rel=1e-9)
    assert got[2]["device_straggler_wait_ms"] == pytest.approx(got[1]["device_straggler_wait_ms"] / 2, rel=1e-9)
    assert got[2]["device_straggler_wait_pct"] == pytest.approx(got[1]["device_straggler_wait_pct"], rel=1e-9)
