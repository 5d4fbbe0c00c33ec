"""memory: peak, capacity, timeline and the buffers live at the peak."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import SAMPLES, load_sample
from test_analyses_device import run, values

from tfadvisor.analyses import memory
from tfadvisor.model.trace import Trace


@pytest.fixture(scope="module")
def mem():
    return run(memory, load_sample("memory_heavy"))


def test_peak_and_capacity(mem):
    v = values(mem)
    assert v["memory_present"] is True
    assert v["memory_allocator"] == "bfc_cpu_allocator_for_gpu"
    assert v["memory_peak_bytes"] > 10e6  # a CNN on 16 x 128 x 128 x 3 inputs
    assert v["memory_peak_bytes"] <= v["memory_peak_bytes_lifetime"]
    assert v["memory_capacity_bytes"] > v["memory_peak_bytes"]
    assert 0 < v["memory_peak_pct"] < 100
    assert 0.0 <= v["memory_fragmentation"] <= 1.0
    assert v["memory_peak_time_ms"] >= 0
    assert v["memory_peak_step"] is not None  # the peak is inside a training step


def test_lifetime_peak_matches_tf_parse(mem):
    """The allocator's peak_bytes_in_use as TF's own xplane_pb2 parse saw it (measured.json)."""
    measured = json.loads((SAMPLES / "memory_heavy" / "measured.json").read_text())
    files = measured.get("files", {})
    peaks = [f["peak_bytes_in_use"] for f in files.values() if f.get("peak_bytes_in_use")]
    assert peaks, "measured.json has no peak_bytes_in_use"
    assert values(mem)["memory_peak_bytes_lifetime"] == max(peaks)


def _protobuf_window_peak(sample: str, allocator: str) -> int:
    """Max ``bytes_allocated`` of one allocator over the profile, decoded by protobuf (not the wire reader)."""
    from tfadvisor.proto import xplane_pb2

    peak = 0
    for f in (SAMPLES / sample).rglob("*.xplane.pb"):
        xs = xplane_pb2.XSpace.FromString(f.read_bytes())
        for plane in xs.planes:
            names = {k: m.name for k, m in plane.stat_metadata.items()}
            kinds = {k: m.name for k, m in plane.event_metadata.items()}
            for line in plane.lines:
                for e in line.events:
                    if kinds.get(e.metadata_id) not in ("MemoryAllocation", "MemoryDeallocation"):
                        continue
                    st = {names[x.metadata_id]: x for x in e.stats}
                    a = st["allocator_name"]
                    if (a.str_value or names.get(a.ref_value)) == allocator:
                        b = st["bytes_allocated"]
                        peak = max(peak, b.int64_value or b.uint64_value or int(b.double_value))
    return peak


def test_window_peak_matches_protobuf_parse(mem):
    """The peak inside the profile, against a protobuf decode of the same file."""
    v = values(mem)
    assert v["memory_peak_bytes"] == _protobuf_window_peak("memory_heavy", v["memory_allocator"])


def test_live_at_peak(mem):
    live = mem.tables["memory_live_at_peak"]
    assert len(live) > 0
    named = live[live["tf_op"] != ""]
    assert len(named) > 0 and named["bytes"].sum() > 0.5 * live["bytes"].sum()
    assert {"tf_op", "shape", "region_type", "data_type", "count", "bytes"} <= set(live.columns)
    v = values(mem)
    # The live buffers explain most of the peak, and never more than it.
    assert 0.5 * v["memory_peak_bytes"] <= v["memory_live_at_peak_bytes"] <= v["memory_peak_bytes"]


def test_timeline(mem):
    tl = mem.tables["memory_timeline"]
    assert 0 < len(tl) <= memory.TIMELINE_POINTS + 3
    assert tl["bytes_in_use"].max() == values(mem)["memory_peak_bytes"]
    assert (np.diff(tl["time_ps"].to_numpy()) >= 0).all()
    alloc = mem.tables["memory_allocators"]
    assert alloc.iloc[0]["allocator"] == "bfc_cpu_allocator_for_gpu"


def test_downsample_keeps_peak():
    rng = np.random.default_rng(0)
    v = rng.random(100_000)
    v[77_777] = 5.0
    t = np.arange(v.size)
    keep = memory._downsample(t, v, 2000)
    assert keep.size <= 2003
    assert v[keep].max() == 5.0 and v[keep].min() == v.min()
    assert (np.diff(keep) > 0).all()
    assert memory._downsample(t[:10], v[:10], 2000).tolist() == list(range(10))


def test_live_at_peak_pairs_by_address():
    # seq: 0 alloc A, 1 alloc B, 2 free A, 3 alloc A (reused), 4 = peak (alloc C), 5 free B, 6 free X
    # (X was allocated before the profile), 7 free C
    ev = pd.DataFrame({
        "seq": [0, 1, 2, 3, 4, 5, 6, 7],
        "addr": [10, 20, 10, 10, 30, 20, 40, 30],
        "alloc": [True, True, False, True, True, False, False, False],
    })
    live = memory._live_at_peak(ev, peak_seq=4)
    assert sorted(live["seq"].tolist()) == [1, 3, 4, 6]
    assert live.set_index("seq")["before_window"].to_dict() == {1: False, 3: False, 4: False, 6: True}


def test_no_memory_events():
    for trace in (Trace(planes=[], files=[]), load_sample("eager")):
        res = run(memory, trace)
        v = values(res)
        assert v["memory_present"] is False
        assert all(v[k] is None for k in memory.METRICS)
        assert any("TF_CPU_ALLOCATOR_USE_BFC" in n for n in res.notes)


# --- a GPU-shaped trace built by hand ------------------------------------------------------

MB = 1 << 20


def _gpu_trace(tmp_path):
    """Host plane with GPU_0_bfc + cuda_host_bfc memory events, one GPU plane with kernels."""
    import tfadvisor
    from tfadvisor.proto import xplane_pb2

    xs = xplane_pb2.XSpace()

    def plane(pid, name):
        p = xs.planes.add(id=pid, name=name)
        ids = {"ev": {}, "st": {}}

        def ev_id(n):
            if n not in ids["ev"]:
                i = len(ids["ev"]) + 1
                ids["ev"][n] = i
                md = p.event_metadata[i]
                md.id, md.name = i, n
            return ids["ev"][n]

        def st_id(n):
            if n not in ids["st"]:
                i = len(ids["st"]) + 1
                ids["st"][n] = i
                md = p.stat_metadata[i]
                md.id, md.name = i, n
            return ids["st"][n]

        def stat(target, n, v):
            s = target.stats.add(metadata_id=st_id(n))
            if isinstance(v, str) and n in ("allocator_name", "tf_op", "region_type"):
                s.ref_value = st_id(v)
            elif isinstance(v, str):
                s.str_value = v
            elif isinstance(v, float):
                s.double_value = v
            else:
                s.uint64_value = v
        return p, ev_id, stat

    host, hev, hstat = plane(1, "/host:CPU")
    line = host.lines.add(id=1, name="tf_Compute/1", timestamp_ns=0)
    # the allocator already holds model/old's 1 MB block (allocated before the profile): its
    # bytes_allocated counts it, as a real BFC allocator's does, so live-at-peak never exceeds the peak
    in_use = {"GPU_0_bfc": 1 * MB, "cuda_host_bfc": 0}
    peak = dict(in_use)
    # (t_ns, alloc?, allocator, addr, bytes, tf_op, dtype)
    script = [
        (1000, True, "GPU_0_bfc", 0x1000, 4 * MB, "model/dense/MatMul", 19),
        (1500, True, "cuda_host_bfc", 0x9000, 100 * MB, "IteratorGetNext", 1),
        (2000, True, "GPU_0_bfc", 0x2000, 8 * MB, "model/dense/Relu", 19),
        (3000, False, "GPU_0_bfc", 0x1000, 4 * MB, "model/dense/MatMul", 19),
        (4000, True, "GPU_0_bfc", 0x1000, 2 * MB, "model/loss", 1),
        (5000, False, "GPU_0_bfc", 0x2000, 8 * MB, "model/dense/Relu", 19),
        (6000, False, "GPU_0_bfc", 0x7000, 1 * MB, "model/old", 1),  # allocated before the profile
    ]
    for t_ns, is_alloc, alloc, addr, nbytes, op, dt in script:
        in_use[alloc] += nbytes if is_alloc else -nbytes
        peak[alloc] = max(peak[alloc], in_use[alloc])
        e = line.events.add(metadata_id=hev("MemoryAllocation" if is_alloc else "MemoryDeallocation"),
                            offset_ps=t_ns * 1000, duration_ps=0)
        for n, v in (("allocator_name", alloc), ("bytes_allocated", max(in_use[alloc], 0)),
                     ("peak_bytes_in_use", peak[alloc]), ("requested_bytes", nbytes),
                     ("allocation_bytes", nbytes), ("addr", addr), ("tf_op", op), ("region_type", "output"),
                     ("data_type", dt), ("shape", "[1024]"), ("fragmentation", 0.25)):
            hstat(e, n, v)

    gpu, gev, gstat = plane(2, "/device:GPU:0")
    for n, v in (("memory_size", 16_000_000_000), ("compute_cap_major", 7), ("compute_cap_minor", 0)):
        gstat(gpu, n, v)
    stream = gpu.lines.add(id=7, name="Stream #7(Compute)", timestamp_ns=0)
    for i, (kname, op) in enumerate((("my_custom_kernel", "model/dense/MatMul:MatMul"),
                                     ("volta_sgemm_128x64_nn", "model/loss:Mul"))):
        e = stream.events.add(metadata_id=gev(kname), offset_ps=(10 + 2 * i) * 1_000_000_000,
                              duration_ps=1_000_000_000)
        gstat(e, "tf_op", op)
    d = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    d.mkdir(parents=True)
    (d / "gpuhost.xplane.pb").write_bytes(xs.SerializeToString())
    return tfadvisor.load(tmp_path)


def test_gpu_allocator_and_capacity(tmp_path):
    res = run(memory, _gpu_trace(tmp_path), steps=False)
    v = values(res)
    assert v["memory_allocator"] == "GPU_0_bfc"  # the device allocator, not the bigger host one
    assert v["memory_peak_bytes"] == 13 * MB
    assert v["memory_peak_time_ms"] == pytest.approx(2000 / 1e6 - 1000 / 1e6)  # from the first event
    assert v["memory_capacity_bytes"] == 16_000_000_000  # no bytes_available: the GPU's memory_size
    assert v["memory_peak_pct"] == pytest.approx(100 * 13 * MB / 16e9)
    assert v["memory_fragmentation"] == pytest.approx(0.25)
    live = res.tables["memory_live_at_peak"].set_index("tf_op")
    assert live.loc["model/dense/MatMul", "bytes"] == 4 * MB
    assert live.loc["model/dense/Relu", "bytes"] == 8 * MB
    assert live.loc["model/old", "before_window"] == 1
    assert "model/loss" not in live.index  # allocated after the peak
    assert v["memory_live_at_peak_bytes"] == 13 * MB == v["memory_peak_bytes"]  # 12 MB seen + 1 MB before
    alloc = res.tables["memory_allocators"].set_index("allocator")
    assert alloc.loc["cuda_host_bfc", "peak_bytes"] == 100 * MB and not alloc.loc["cuda_host_bfc", "device"]


def test_memory_events_tell_kernel_dtypes(tmp_path):
    from tfadvisor.analyses import precision

    v = values(run(precision, _gpu_trace(tmp_path), steps=False))
    # my_custom_kernel's name tells nothing; its op allocates float16 outputs.
    assert v["fp16_pct"] == pytest.approx(50.0)
    assert v["fp32_pct"] == pytest.approx(50.0)
    assert v["precision_unknown_pct"] == 0.0
    assert v["xprof_16bit_pct"] == 0.0
    assert v["compute_capability"] == "7.0" and v["tensor_core_capable"] is True
