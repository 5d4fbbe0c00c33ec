"""Capture quality as a finding: what the window holds, and no step verdicts on a fragment.

The real TF 2.4 GPU trace (8 x V100, one step on each of two GPUs) is checked against figures
computed here straight from the protobuf; the JAX micro-benchmarks (no steps) must get no
step-based or batch-size verdict; overlapping or negative step markers never give a share
outside 0..100 or a negative time.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import SAMPLES

import tfadvisor
from tfadvisor.proto import xplane_pb2

GPU_REAL = SAMPLES / "real_tf_gpu_multiworker"
JAX_REAL = sorted(p for p in SAMPLES.glob("real_jax_rocm_*") if (p / "expected.toml").exists())
STEP_RULES = {"input_bound", "step_gaps", "step_outliers", "memory_headroom", "python_overhead",
              "kernel_launch_bound", "host_ops_with_device", "h2d_pageable", "allreduce_share", "allreduce_overhead",
              "capture_not_steady_state"}
_MEMCPY = ("Memcpy", "Memset")


def _plane_facts(logdir: Path) -> dict:
    """Figures a careful reader gets with protobuf alone."""
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(next(logdir.glob("plugins/profile/*/*.xplane.pb")).read_bytes())
    lo, hi = None, None
    devices, active, busy, steps = [], [], {}, {}
    for p in xs.planes:
        is_dev = p.name.startswith("/device:")
        if not (is_dev or p.name.startswith("/host:CPU")):
            continue
        name = p.name.split(":", 1)[1] if is_dev else p.name
        if is_dev:
            devices.append(name)
        stream_iv, kernels = [], 0
        for ln in p.lines:
            for e in ln.events:
                a = ln.timestamp_ns * 1000 + e.offset_ps
                b = a + e.duration_ps
                lo, hi = (a if lo is None else min(lo, a)), (b if hi is None else max(hi, b))
                if is_dev and ln.name.startswith("Stream"):
                    stream_iv.append((a, b))
                    kernels += not p.event_metadata[e.metadata_id].name.startswith(_MEMCPY)
                if is_dev and ln.name == "Steps":
                    steps.setdefault(name, []).append((a, b))
        if kernels:
            active.append(name)
            busy[name] = _union_len(stream_iv)
    return {"window": hi - lo, "devices": devices, "active": active, "busy": busy, "steps": steps}


def _union_len(iv: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for a, b in sorted(iv):
        if end is None or a > end:
            total, end = total + b - a, b
        elif b > end:
            total, end = total + b - end, b
    return total


@pytest.fixture(scope="module")
def gpu():
    return tfadvisor.analyze(GPU_REAL), _plane_facts(GPU_REAL)


def test_devices_active_and_idle(gpu):
    res, facts = gpu
    m = res.metrics
    assert m["devices_total"] == len(facts["devices"]) == 8
    assert m["devices_active"] == len(facts["active"]) == 2
    assert m["devices_active_list"].split(", ") == facts["active"] == ["GPU:4", "GPU:6"]
    idle = [d for d in facts["devices"] if d not in facts["active"]]
    assert m["devices_idle"].split(", ") == idle and m["devices_idle_count"] == 6
    assert "GPU:1" in idle  # 19 copies, no kernel: not active


def test_busy_share_window_and_steps(gpu):
    res, facts = gpu
    m = res.metrics
    assert m["capture_window_ms"] == pytest.approx(facts["window"] / 1e9, rel=1e-9)
    share = [100.0 * facts["busy"][d] / facts["window"] for d in facts["active"]]
    assert m["device_busy_pct"] == pytest.approx(sum(share) / len(share), rel=1e-9)
    assert m["device_busy_pct"] < 2  # the devices idle ~99 % of the window
    assert m["complete_steps"] == max(len(s) for s in facts["steps"].values()) == 1
    (a4, _), (a6, _) = facts["steps"]["GPU:4"][0], facts["steps"]["GPU:6"][0]
    assert m["step_skew_ms"] == pytest.approx(abs(a6 - a4) / 1e9, rel=1e-9)
    assert m["capture_steady_state"] is False


def test_top_finding_is_the_capture(gpu):
    res, _ = gpu
    ids = [f.rule for f in res.findings]
    assert ids[0] == "capture_not_steady_state", ids
    top = res.findings[0]
    assert top.severity == "critical"
    assert "GPU:4" in top.message and "GPU:6" in top.message and "1 step" in top.message
    assert "tf.profiler.experimental.start" in top.fix and "profile_batch" in top.fix
    # step-based findings on the fragment are given, each with the caveat (issue 52: a caveat, never a gate)
    for f in res.findings[1:]:
        assert [c["id"] for c in f.caveats] == ["not_steady"], (f.rule, f.caveats)


@pytest.mark.parametrize("sample", JAX_REAL, ids=[p.name for p in JAX_REAL])
def test_no_step_verdicts_without_steps(sample):
    res = tfadvisor.analyze(sample)
    ids = {f.rule for f in res.findings}
    assert res.metrics["complete_steps"] == 0 and res.metrics["capture_steady_state"] is False
    assert not ids & STEP_RULES, ids
    assert "capture_no_steps" in ids


def test_steady_samples_keep_their_verdicts():
    res = tfadvisor.analyze(SAMPLES / "synthetic_gpu_input_bound")
    assert res.metrics["capture_steady_state"] is True
    ids = [f.rule for f in res.findings]
    also = [a["rule"] for a in res.findings[0].also]
    assert ids[0] == "tfdata_sequential_map" and "input_bound" in also  # the planted cause leads, the wait in it
    assert all(not f.caveats for f in res.findings)


# ---------------------------------------------------------------- absurd step markers

def _markers_trace(tmp_path: Path, markers: list[tuple[str, int, int]]) -> Path:
    """A CPU plane whose lines hold TraceContext markers (line name, offset ps, duration ps)."""
    xs = xplane_pb2.XSpace()
    p = xs.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].id, p.event_metadata[1].name = 1, "TraceContext"
    p.event_metadata[2].id, p.event_metadata[2].name = 2, "model/dense/MatMul:MatMul"
    lines: dict[str, xplane_pb2.XLine] = {}
    for name, off, dur in markers:
        if name not in lines:
            lines[name] = p.lines.add(id=len(lines) + 1, name=name)
        lines[name].events.add(metadata_id=1, offset_ps=off, duration_ps=dur)
    work = p.lines.add(id=99, name="tf_Compute/1")
    work.events.add(metadata_id=2, offset_ps=100, duration_ps=300)
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "h.xplane.pb").write_bytes(xs.SerializeToString())
    return tmp_path


def _sane(res) -> None:
    for k, v in res.metrics.items():
        if isinstance(v, float):
            assert math.isfinite(v), k
        if k.endswith("_pct") and isinstance(v, (int, float)) and not isinstance(v, bool):
            assert 0.0 <= v <= 100.0, (k, v)
    tbl = res.tables.get("steps")
    if tbl is not None:
        assert (tbl["duration_ms"] > 0).all()
        s, e = tbl["start_ps"].to_numpy(), tbl["end_ps"].to_numpy()
        assert (s[1:] >= e[:-1]).all()  # disjoint


def test_duplicate_markers_on_two_threads(tmp_path):
    """The fuzz case: two python lines, each one TraceContext 0..1000 ps (idle_pct was 200 %)."""
    res = tfadvisor.analyze(_markers_trace(tmp_path, [("python", 0, 1000), ("python2", 0, 1000)]))
    _sane(res)
    assert res.metrics["steps_count"] == 1
    assert any("rejected" in n for n in res.notes)


def test_partly_overlapping_markers_are_clipped(tmp_path):
    ms = 1_000_000_000
    marks = [("python", k * 10 * ms, 10 * ms) for k in range(4)] + [("python2", 39 * ms, 10 * ms)]
    res = tfadvisor.analyze(_markers_trace(tmp_path, marks))
    _sane(res)
    assert res.metrics["steps_count"] == 5
    assert res.tables["steps"]["duration_ms"].iloc[-1] == pytest.approx(9.0)  # 39..49 ms, clipped to 40..49
    assert any("clipped" in n for n in res.notes)


def test_negative_markers_give_no_negative_time(tmp_path):
    ms = 1_000_000_000
    marks = [("python", k * 10 * ms, 9 * ms) for k in range(4)]
    xs_dir = _markers_trace(tmp_path, marks)
    pb = next(xs_dir.glob("plugins/profile/*/*.xplane.pb"))
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(pb.read_bytes())
    xs.planes[0].lines[0].events[1].duration_ps = -5 * ms  # one marker ends before it starts
    pb.write_bytes(xs.SerializeToString())
    res = tfadvisor.analyze(xs_dir)
    _sane(res)
    assert res.metrics["steps_count"] == 3
    assert res.metrics["step_time_min_ms"] > 0
