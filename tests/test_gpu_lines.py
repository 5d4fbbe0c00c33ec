"""Device planes as real writers lay them out: each line kind used for what it is, never twice.

* line kinds (``Stream #N(...)``, ``TensorFlow Ops``/``Framework Ops``, name scopes, ``Steps``,
  ``XLA Modules``, ``XLA Ops``, ``Launch Stats``, ``CUPTI overhead``, ...);
* the real TF 2.4 GPU trace: device busy time from the streams only, checked against a union
  computed here with protobuf; H2D copies found although its ``memcpy_details`` has no kinds;
* a TPU-shaped trace (SYNTHETIC, ``tfadvisor_dev.synthetic.build_tpu_xspace``): steps from ``Steps``,
  busy time from ``XLA Ops``, op attribution from ``Framework Ops``;
* bounds safety: the GPU layout that made ``_device_sets`` write out of bounds, run in a
  subprocess with the C kernels built under AddressSanitizer (``asanlib``).
"""

from __future__ import annotations

from pathlib import Path

import asanlib
import numpy as np
import pytest
from conftest import SAMPLES

import tfadvisor
from tfadvisor.analyses import device_lines as dl
from tfadvisor.analyses.activity import _bucket
from tfadvisor.proto import xplane_pb2
from tfadvisor_dev.synthetic import build_tpu_xspace, write_tpu_run

GPU_REAL = SAMPLES / "real_tf_gpu_multiworker"


def _xspace(logdir: Path) -> xplane_pb2.XSpace:
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(next(logdir.glob("plugins/profile/*/*.xplane.pb")).read_bytes())
    return xs


def _union_len(iv: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for a, b in sorted(iv):
        if b <= a:
            continue
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _events(plane: xplane_pb2.XPlane, pred) -> list[tuple[int, int, str]]:
    out = []
    for ln in plane.lines:
        if pred(ln.name or ln.display_name):
            for e in ln.events:
                a = ln.timestamp_ns * 1000 + e.offset_ps
                out.append((a, a + e.duration_ps, plane.event_metadata[e.metadata_id].name))
    return out


# ------------------------------------------------------------------------------------------ line kinds

@pytest.mark.parametrize("name, kind", [
    ("Stream #7(Compute)", "stream"), ("Stream #135(MemcpyH2D)", "stream"), ("Stream #3", "stream"),
    ("TensorFlow Ops", "ops"), ("Framework Ops", "ops"), ("TensorFlow Name Scope", "name_scope"),
    ("Framework Name Scope", "name_scope"), ("Steps", "steps"), ("XLA Modules", "xla_modules"),
    ("XLA Ops", "xla_ops"), ("Async XLA Ops", "async_xla_ops"), ("Launch Stats", "launch_stats"),
    ("CUPTI overhead", "overhead"), ("Source code", "source"), ("Sparse Core Steps", "sparse_core_steps"),
    ("some thread", "other"),
])
def test_line_kind(name, kind):
    assert dl.line_kind(name) == kind
    assert dl.line_kind("", name) == kind  # a line with only a name, no display name


def test_real_gpu_plane_line_kinds():
    trace = tfadvisor.load(GPU_REAL)
    gpu4 = next(p for p in trace.device_planes if p.name == "/device:GPU:4")
    kinds = dict(zip(map(str, gpu4.line_names), dl.plane_line_kinds(gpu4)))
    assert kinds["TensorFlow Ops"] == "ops" and kinds["Steps"] == "steps"
    assert kinds["TensorFlow Name Scope"] == "name_scope"
    assert sorted(n for n, k in kinds.items() if k == "stream") == sorted(
        n for n in kinds if n.startswith("Stream #"))
    act = [str(gpu4.line_names[i]) for i in dl.activity_lines(gpu4)]
    assert act and all(n.startswith("Stream #") for n in act)
    assert [str(gpu4.line_names[i]) for i in dl.op_lines(gpu4)] == ["TensorFlow Ops"]


# -------------------------------------------------------------------- the real TF 2.4 GPU trace

def test_real_gpu_busy_time_counts_streams_only():
    """Per device busy time = union of the stream events, computed here from the protobuf; the
    TensorFlow Ops / Name Scope / Steps lines (which span the same time again) add nothing."""
    xs = _xspace(GPU_REAL)
    want = {}
    for p in xs.planes:
        if p.name.startswith("/device:GPU"):
            ev = _events(p, lambda n: n.startswith("Stream"))
            if ev:
                want[p.name.split(":", 1)[1]] = _union_len([(a, b) for a, b, _ in ev]) / 1e9
    everything = {p.name.split(":", 1)[1]: _union_len([(a, b) for a, b, _ in _events(p, lambda n: True)]) / 1e9
                  for p in xs.planes if p.name.startswith("/device:GPU")}
    res = tfadvisor.analyze(GPU_REAL)
    got = {r.device: r.busy_ms for r in res.tables["devices"].itertuples()}
    assert set(got) == set(want)
    for dev, ms in want.items():
        assert got[dev] == pytest.approx(ms, rel=1e-9), dev
    # the derived lines really do overlap the streams: counting them would change the figure
    assert any(everything[d] > want[d] * 1.01 for d in want)


def test_legacy_memcpy_details_are_read_from_names():
    """TF 2.4's ``memcpy_details`` ('size:112 dest:4 async:0') has no kind_src/kind_dst: the copies
    on ``Stream #N(MemcpyH2D)`` named ``MemcpyH2D`` are host-to-device copies all the same."""
    from tfadvisor.analyses.activity import activity
    from tfadvisor.analyses.base import Context

    xs = _xspace(GPU_REAL)
    h2d = [(a, b) for p in xs.planes if p.name.startswith("/device:GPU")
           for a, b, n in _events(p, lambda n: n.startswith("Stream")) if n == "MemcpyH2D"]
    assert len(h2d) == 202  # the README's count
    details = {s.str_value for p in xs.planes for ln in p.lines for e in ln.events for s in e.stats
               if p.stat_metadata[s.metadata_id].name == "memcpy_details"}
    assert details and not any("kind_" in d for d in details)
    trace = tfadvisor.load(GPU_REAL)
    act = activity(trace, Context())
    assert act.get("dev_h2d").total() == _union_len(h2d)
    res = tfadvisor.analyze(GPU_REAL)
    assert res.metrics["h2d_pageable_pct"] is None  # pinned or pageable: the legacy format cannot tell


def _gpu_copy_trace(tmp_path: Path, details: str, event: str, line: str) -> Path:
    """A host plane with three steps and a GPU plane with one kernel and one copy per step."""
    xs = xplane_pb2.XSpace()
    hp = xs.planes.add(id=1, name="/host:CPU")
    hp.event_metadata[1].id, hp.event_metadata[1].name = 1, "TraceContext"
    hl = hp.lines.add(id=1, name="python")
    gp = xs.planes.add(id=2, name="/device:GPU:0")
    for i, n in ((1, "kernel_a"), (2, event)):
        gp.event_metadata[i].id, gp.event_metadata[i].name = i, n
    gp.stat_metadata[1].id, gp.stat_metadata[1].name = 1, "memcpy_details"
    ks = gp.lines.add(id=1, name="Stream #7(Compute)")
    cs = gp.lines.add(id=2, name=line)
    for k in range(3):
        t = k * 10_000_000
        hl.events.add(metadata_id=1, offset_ps=t, duration_ps=9_000_000)
        ks.events.add(metadata_id=1, offset_ps=t + 4_000_000, duration_ps=4_000_000)
        ev = cs.events.add(metadata_id=2, offset_ps=t + 1_000_000, duration_ps=2_000_000)
        ev.stats.add(metadata_id=1, str_value=details)
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "h.xplane.pb").write_bytes(xs.SerializeToString())
    return tmp_path


@pytest.mark.parametrize("details, event, line, h2d, pageable", [
    ("size:112 dest:0 async:0", "MemcpyH2D", "Stream #13(MemcpyH2D)", True, None),  # TF 2.4
    ("size:112 dest:0 async:0", "Memcpy", "Stream #13(MemcpyH2D)", True, None),  # the stream says it
    ("size:112 dest:0 async:0", "MemcpyD2H", "Stream #13(MemcpyD2H)", False, None),
    ("kind_src:pageable kind_dst:device size:112 dest:0 async:0", "MemcpyH2D", "Stream #13(MemcpyH2D)", True, 100.0),
    ("kind_src:pinned kind_dst:device size:112 dest:0 async:1", "Memcpy", "Stream #13(Memcpy)", True, 0.0),
    # the kinds win over a misleading name
    ("kind_src:device kind_dst:pageable size:112 dest:0 async:0", "MemcpyH2D", "Stream #13(MemcpyH2D)", False, None),
])
def test_copy_direction(tmp_path, details, event, line, h2d, pageable):
    res = tfadvisor.analyze(_gpu_copy_trace(tmp_path, details, event, line))
    m = res.metrics
    assert m["steps_count"] == 3
    if h2d:
        # 2 ms of copy in each step of 10 ms, start to next start (9 ms markers)
        assert m["input_h2d_pct"] == pytest.approx(100.0 * 2 / 10)
    else:
        assert not m["input_h2d_pct"]
    assert m["h2d_pageable_pct"] == pageable


# ------------------------------------------------------------------------- TPU (SYNTHETIC)

@pytest.fixture(scope="module")
def tpu(tmp_path_factory):
    d = tmp_path_factory.mktemp("synthetic_tpu")
    _, truth = write_tpu_run(str(d), steps=6, step_ms=20.0, busy_frac=0.8, n_tpus=2, skew_us=30.0)
    return tfadvisor.analyze(d), truth


def test_tpu_trace_has_xprofs_lines():
    xs, _ = build_tpu_xspace()
    tpu = [p for p in xs.planes if p.name.startswith("/device:TPU")]
    assert len(tpu) == 2
    for p in tpu:
        names = {ln.name for ln in p.lines}
        assert {"Steps", "XLA Modules", "XLA Ops", "Framework Ops", "Framework Name Scope"} <= names
        assert not any(n.startswith("Stream") for n in names)


def test_tpu_steps_from_steps_line(tpu):
    res, truth = tpu
    m = res.metrics
    assert m["steps_source"] == "device_steps"
    assert m["steps_count"] == truth["steps"]
    # the generator's steps: step_ms each, 200 us apart (build_tpu_xspace's gap): the step time is start to
    # next start, the busy part the Steps line's event
    assert m["step_time_mean_ms"] == pytest.approx(truth["step_ms"] + 0.2)
    assert m["step_busy_mean_ms"] == pytest.approx(truth["step_ms"])
    assert m["step_skew_ms"] == pytest.approx(0.03)  # skew_us
    assert m["capture_steady_state"] is True


def test_tpu_busy_time_from_xla_ops_only(tpu):
    """Busy = the XLA ops; XLA Modules (each spans its whole step) and Framework Ops (the same
    time again) must not count, or the devices would look busy for every whole step."""
    res, truth = tpu
    got = {r.device: r for r in res.tables["devices"].itertuples()}
    assert set(got) == {"TPU:0", "TPU:1"}
    for dev, t in truth["devices"].items():
        assert got[dev].activity_lines == "xla_ops"
        assert got[dev].busy_ms * 1e9 == pytest.approx(t["busy_ps"], rel=1e-9)
    step_total = sum(b - a for a, b in truth["devices"]["TPU:0"]["steps"])
    assert res.metrics["device_busy_pct"] < 100 * truth["busy_frac"] * step_total / (
        res.metrics["capture_window_ms"] * 1e9) * 1.05
    # collectives (all-reduce HLO ops) are told apart from compute
    assert res.metrics["step_collective_pct"] > 0
    dev_share = res.metrics["step_device_compute_pct"] + res.metrics["step_collective_pct"]
    # measured: 0.6 points apart (the step's edges: the first op starts after the step marker); 3 points
    assert dev_share == pytest.approx(100 * truth["busy_frac"], abs=3)


def test_tpu_op_attribution_from_framework_ops(tpu):
    res, truth = tpu
    ops = res.tables["device_ops"]
    assert "model/dense/MatMul:MatMul" in set(ops["op"])
    assert set(ops["type"]) >= {"MatMul", "AddN", "ResourceApplyAdam"}
    busy = sum(t["busy_ps"] for t in truth["devices"].values())
    assert ops["total_ms"].sum() * 1e9 == pytest.approx(busy, rel=1e-9)  # each op once, not per line kind


def test_tpu_no_host_verdicts_on_device_steps(tpu):
    res, _ = tpu
    assert "python_overhead" not in {f.rule for f in res.findings}


# -------------------------------------------------------------------------- bounds safety

def test_bucket_checks_its_arguments():
    line = np.array([0, 1, 5, -1, 0], np.int32)  # 5 and -1: no such line
    meta = np.array([0, 1, 0, 0, 99], np.int32)  # 99: no such metadata -> unknown
    order, bounds = _bucket(line, meta, np.array([0, 1, 1]), np.array([2, 3, 4]), 4, 8, 2)
    assert bounds.shape[0] == 2 * 8 + 2
    assert sorted(order.tolist()) == list(range(5))
    rows = {c: order[bounds[c]:bounds[c + 1]].tolist() for c in range(16) if bounds[c + 1] > bounds[c]}
    assert rows == {2: [0], 4: [4], 8 + 3: [1]}  # rows 2 and 3 went to the overflow bucket
    assert order[bounds[16]:bounds[17]].tolist() == [2, 3]
    with pytest.raises(ValueError):
        _bucket(line, meta, np.array([0, 2, 1]), np.array([2, 3, 4]), 4, 8, 2)  # line class 2 of 2
    with pytest.raises(ValueError):
        _bucket(line, meta, np.array([0, 1, 1]), np.array([2, 3, 8]), 4, 8, 2)  # metadata class 8, stride 8


def _crash_layout(tmp_path: Path) -> Path:
    """The layout that wrote out of bounds: a GPU plane with a stream and derived lines."""
    xs = xplane_pb2.XSpace()
    gp = xs.planes.add(id=1, name="/device:GPU:0")
    for i, n in enumerate(("kernel", "MemcpyH2D", "ncclAllReduce", "op/a:Add", "0", "fusion.1"), start=1):
        gp.event_metadata[i].id, gp.event_metadata[i].name = i, n
    lines = [("Stream #1(Compute)", (1, 2, 3)), ("XLA Ops", (6,)), ("TensorFlow Ops", (4,)), ("Steps", (5,)),
             ("Launch Stats", (1,)), ("CUPTI overhead", (2,)), ("Source code", (3,))]
    for lid, (name, metas) in enumerate(lines, start=1):
        ln = gp.lines.add(id=lid, name=name)
        for k in range(40):
            ln.events.add(metadata_id=metas[k % len(metas)], offset_ps=k * 1000, duration_ps=900)
    run = tmp_path / "crash" / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    (run / "h.xplane.pb").write_bytes(xs.SerializeToString())
    return tmp_path / "crash"


def test_bounds_checked_run(tmp_path):
    """With the C kernels built under AddressSanitizer and UBSan an out-of-bounds access ends the child
    with a report instead of corrupting memory; the crash layout, the real traces and the shared fuzz
    reproducer must analyse cleanly."""
    dirs = [_crash_layout(tmp_path)] + sorted(p for p in SAMPLES.glob("real_*") if p.is_dir())
    shared = SAMPLES.parent.parent / "shared" / "fuzz_cases" / "segfault_device_sets_bucket" / "logdir"  # ../shared
    if shared.is_dir():
        dirs.append(shared)
    code = ("import sys, tfadvisor\n"
            "for d in sys.argv[1:]:\n"
            "    r = tfadvisor.analyze(d)\n"
            "    assert r.metrics['devices_total'] >= 1, d\n"
            "print('ok', len(sys.argv) - 1)\n")
    env = asanlib.instrumented(tmp_path / "asan")
    proc = asanlib.run_child(code, list(map(str, dirs)), env, 600)
    assert asanlib.sanitizer_report(proc.stderr) is None, asanlib.sanitizer_report(proc.stderr)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == f"ok {len(dirs)}"
