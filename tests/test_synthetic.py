"""The synthetic trace generator (tfadvisor_dev.synthetic): both writers produce XSpaces that protobuf
parses, with the planes, lines, events and stat values that were meant to be written."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from tfadvisor.io import wire
from tfadvisor.proto import xplane_pb2
from tfadvisor_dev import synthetic as syn

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
TENSOR_CORE = re.compile(r"16816|h884|s884|h1688|s1688|hmma|xmma|bf16|fp16|half", re.I)
DETAILS = re.compile(r"^regs:\d+ static_shared:\d+ dynamic_shared:\d+ grid:\d+,\d+,\d+ block:\d+,\d+,\d+ "
                     r"occ_pct:[0-9.]+$")
TF_OP = re.compile(r"^[\w/.\-]+:[A-Za-z0-9]+$")


# -- helpers ------------------------------------------------------------------------------------
def _stat_value(plane, st):
    kind = st.WhichOneof("value")
    v = getattr(st, kind)
    return plane.stat_metadata[v].name if kind == "ref_value" else v


def _stats(plane, ev) -> dict:
    return {plane.stat_metadata[s.metadata_id].name: _stat_value(plane, s) for s in ev.stats}


def _events(plane, line):
    """(name, start_ps, dur_ps, stats) of a line."""
    base = line.timestamp_ns * 1000
    for ev in line.events:
        yield plane.event_metadata[ev.metadata_id].name, base + ev.offset_ps, ev.duration_ps, _stats(plane, ev)


def _plane(xs, name):
    return next(p for p in xs.planes if p.name == name)


def _roundtrip(xs):
    return xplane_pb2.XSpace.FromString(xs.SerializeToString())


def _check_timeline(xs):
    """Events sorted per line; host events nest, device events never overlap on a stream."""
    for p in xs.planes:
        device = p.name.startswith("/device:")
        for line in p.lines:
            stack: list[int] = []
            prev = -1
            for _, start, dur, _ in _events(p, line):
                assert start >= prev, (p.name, line.name)
                prev = start
                end = start + dur
                if device:
                    assert not stack or start >= stack[-1], (p.name, line.name)
                    stack = [end]
                else:
                    while stack and stack[-1] <= start:
                        stack.pop()
                    assert not stack or end <= stack[-1], (p.name, line.name, start)
                    stack.append(end)


def _launches(host):
    out = {}
    for line in host.lines:
        for name, start, _, st in _events(host, line):
            if "correlation_id" in st:
                out[st["correlation_id"]] = (name, line.name, start)
    return out


# -- small writer -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small():
    spec = syn.SyntheticSpec(steps=3, ops_per_step=40, host="tester", fp16_frac=0.5, bf16_frac=0.2,
                             allreduce_ms=1.0, num_gpus=2, seed=3)
    xs, truth = syn.build_xspace(spec)
    return _roundtrip(xs), truth, spec


def test_small_planes_and_lines(small):
    xs, _, _ = small
    assert list(xs.hostnames) == ["tester"]
    assert [p.name for p in xs.planes] == ["/host:CPU", "/device:GPU:0", "/device:GPU:1", "Task Environment"]
    host = _plane(xs, "/host:CPU")
    names = [line.name for line in host.lines]
    assert "python" in names
    assert sum(n.startswith("tf_Compute/") for n in names) == 4
    assert sum(n.startswith("tf_data_iterator_get_next/") for n in names) == 2
    for line in host.lines:
        if "/" in line.name:
            assert line.name.endswith(f"/{line.id}")
    gpu = _plane(xs, "/device:GPU:1")
    assert {line.name for line in gpu.lines} == {"Stream #39(Compute)", "Stream #45(MemcpyH2D)",
                                                  "Stream #46(Compute,MemcpyD2H)", "Stream #63(Compute)"}
    caps = {gpu.stat_metadata[s.metadata_id].name: _stat_value(gpu, s) for s in gpu.stats}
    assert caps["compute_cap_major"] == 8 and caps["compute_cap_minor"] == 0
    assert caps["core_count"] == 108 and caps["clock_rate"] == 1_410_000
    assert caps["memory_bandwidth"] == 1_555_200_000_000 and caps["memory_size"] == 42_505_273_344
    env = _plane(xs, "Task Environment")
    env_stats = {env.stat_metadata[s.metadata_id].name: _stat_value(env, s) for s in env.stats}
    assert env_stats["profile_start_time"] == syn.PROFILE_START_NS
    assert env_stats["profile_stop_time"] > syn.PROFILE_START_NS
    _check_timeline(xs)


def test_small_steps_and_function_events(small):
    xs, truth, spec = small
    host = _plane(xs, "/host:CPU")
    py = next(line for line in host.lines if line.name == "python")
    evs = list(_events(host, py))
    train = [e for e in evs if e[0] == "train"]
    assert [e[3] for e in train] == [{"step_num": i, "_r": 1} for i in range(spec.steps)]
    assert sum(e[0].startswith("__inference_train_function_") for e in evs) == spec.steps
    assert all(e[3] == {"eager_op": evs[3][0], "is_func": 1} for e in evs if e[0] == "EagerExecute")
    assert truth["hosts"]["tester"]["steps"] == spec.steps
    # step period measured on the trace equals the truth (measured: 0.2 % apart: the first step's start jitter)
    starts = [e[1] for e in train]
    assert np.mean(np.diff(starts)) / 1e9 == pytest.approx(truth["hosts"]["tester"]["step_time_ms"], rel=0.05)


def test_small_kernels_match_launches(small):
    xs, truth, spec = small
    host = _plane(xs, "/host:CPU")
    launches = _launches(host)
    ops_per_host_line = {}
    for line in host.lines:
        if line.name.startswith("tf_Compute/"):
            ops_per_host_line[line.name] = [(s, s + d, n) for n, s, d, _ in _events(host, line) if ":" in n]
    seen = Counter()
    for g in range(spec.num_gpus):
        gpu = _plane(xs, f"/device:GPU:{g}")
        for line in gpu.lines:
            for name, start, _, st in _events(gpu, line):
                api, tline, lstart = launches[st["correlation_id"]]
                assert lstart < start
                if name == "MemcpyH2D":
                    assert api == "cuMemcpyHtoDAsync_v2"
                    assert st["memcpy_details"].startswith("kind_src:pinned kind_dst:device size:12000000 ")
                    seen["h2d"] += 1
                    continue
                if name == "MemcpyD2H":
                    seen["d2h"] += 1
                    continue
                assert api in ("cudaLaunchKernel", "cuLaunchKernel")
                assert DETAILS.match(st["kernel_details"]), st["kernel_details"]
                assert TF_OP.match(st["tf_op"]), st["tf_op"]
                assert st["context_id"] == "$$1"
                if name.startswith("ncclDevKernel_AllReduce_Sum_f32_RING_LL"):
                    seen["nccl"] += 1
                    assert st["tf_op"].endswith(":NcclAllReduce")
                else:
                    # the launch sits inside the host op event named by tf_op
                    assert any(a <= lstart < b and n == st["tf_op"] for a, b, n in ops_per_host_line[tline])
                    seen["kernel"] += 1
    assert seen["h2d"] == seen["d2h"] == seen["nccl"] == spec.steps * spec.num_gpus
    assert seen["kernel"] > spec.steps * spec.num_gpus * 30


def test_tfdata_events(small):
    xs, _, _ = small
    host = _plane(xs, "/host:CPU")
    chains = Counter()
    for line in host.lines:
        for name, _, _, st in _events(host, line):
            if name.startswith("Iterator::"):
                chains[name] += 1
                if name == "Iterator::Root::Prefetch::MapAndBatch":
                    assert st == {"name": "MapAndBatch", "parallelism": 8, "autotune": 1, "buffered_elements": 3,
                                  "batch_size": 256}
    assert chains["Iterator::Root::Prefetch"] == 6
    assert chains["Iterator::Root::Prefetch::MapAndBatch::TensorSlice"] == 24


def _kernel_share_16bit(xs):
    tc = total = 0
    for p in xs.planes:
        if p.name.startswith("/device:"):
            for line in p.lines:
                for name, _, dur, _ in _events(p, line):
                    if name.startswith(("Memcpy", "ncclDevKernel")):
                        continue
                    total += dur
                    tc += dur if TENSOR_CORE.search(name) else 0
    return 100.0 * tc / total


def test_precision_mix():
    fp32, t32 = syn.build_xspace(syn.SyntheticSpec(steps=2, ops_per_step=60, seed=1))
    assert _kernel_share_16bit(fp32) == 0.0 and t32["hosts"]["localhost"]["fp16_pct"] == 0.0
    mixed, tm = syn.build_xspace(syn.SyntheticSpec(steps=2, ops_per_step=60, seed=1, fp16_frac=0.55, bf16_frac=0.15))
    share = _kernel_share_16bit(mixed)
    assert share == pytest.approx(tm["hosts"]["localhost"]["fp16_pct"], abs=0.01)
    assert 60.0 < share < 80.0
    names = {md.name for md in _plane(mixed, "/device:GPU:0").event_metadata.values()}
    assert any("s16816gemm" in n or "h16816gemm" in n for n in names)
    assert any("bf16" in n for n in names)


def test_input_bound_pageable_and_gaps():
    spec = syn.SyntheticSpec(steps=3, ops_per_step=40, input_wait_ms=30.0, h2d_pinned=False, h2d_mb=24.0,
                             prefetch=False, map_parallelism=1, idle_gap_frac=0.2, seed=2)
    xs, truth = syn.build_xspace(spec)
    t = truth["hosts"]["localhost"]
    host = _plane(xs, "/host:CPU")
    waits = [d for line in host.lines for n, _, d, _ in _events(host, line) if n == "IteratorGetNextOp::DoCompute"]
    # the planted 30 ms with the generator's jitter (measured: 0.65 % apart)
    assert len(waits) == 3 and np.mean(waits) / 1e9 == pytest.approx(30.0, rel=0.05)
    gpu = _plane(xs, "/device:GPU:0")
    h2d = [(d, st) for line in gpu.lines for n, _, d, st in _events(gpu, line) if n == "MemcpyH2D"]
    assert all("kind_src:pageable" in st["memcpy_details"] and st["memcpy_details"].endswith("async:0")
               for _, st in h2d)
    wall = t["step_time_ms"] * spec.steps
    # the bookkeeping against the events written (measured: equal to 1e-12)
    assert t["input_pct"] == pytest.approx(100 * (sum(waits) + sum(d for d, _ in h2d)) / 1e9 / wall, rel=0.02)
    assert 15.0 < t["idle_pct"] < 25.0
    names = {md.name for md in host.event_metadata.values()}
    assert "Iterator::Root::MapAndBatch" in names and not any("Prefetch" in n for n in names)
    assert "$train.py:212 log_metrics" in names


def test_multihost_straggler_waits_in_allreduce():
    specs = [syn.SyntheticSpec(steps=2, ops_per_step=30, host=f"h{i}", allreduce_ms=2.0,
                               strategy="MultiWorkerMirroredStrategy", slowdown=1.6 if i == 1 else 1.0, seed=4)
             for i in range(3)]
    spaces, truth = syn.build_xspaces(specs)
    assert [list(x.hostnames) for x in spaces] == [["h0"], ["h1"], ["h2"]]
    ar = {h: v["allreduce_ms"] for h, v in truth["hosts"].items()}
    assert ar["h1"] < 2.5 and ar["h0"] > 10 * ar["h1"] and ar["h2"] > 10 * ar["h1"]
    # the collective's tf_op names the MWMS op
    gpu = _plane(spaces[0], "/device:GPU:0")
    tf_ops = {st["tf_op"] for line in gpu.lines for n, _, _, st in _events(gpu, line) if n.startswith("nccl")}
    assert tf_ops == {"StatefulPartitionedCall/CollectiveReduceV2:CollectiveReduceV2"}


def test_deterministic():
    spec = syn.SyntheticSpec(steps=2, ops_per_step=30, seed=9)
    a = syn.build_xspace(spec)[0].SerializeToString(deterministic=True)
    b = syn.build_xspace(spec)[0].SerializeToString(deterministic=True)
    assert a == b


# -- fast writer --------------------------------------------------------------------------------
def test_varint_encoding():
    vals = [0, 1, 127, 128, 300, 16383, 16384, 2**32, 2**56 - 1, 2**63, 2**64 - 1]
    vals += list(np.random.default_rng(0).integers(0, 2**62, 200))
    v = np.array(vals, dtype=np.uint64)
    n = syn._vlen(v)
    m = syn._varint_matrix(v, n, np.full((v.size, 1), 0x10, np.uint8))
    for i, x in enumerate(vals):
        want = bytes([0x10]) + wire.encode_varint(int(x))
        assert n[i] + 1 == len(want)
        assert bytes(m[i, : n[i] + 1]) == want


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    path = tmp_path_factory.mktemp("large") / "big.xplane.pb"
    info = syn.write_large_trace(str(path), target_mb=1.5, seed=1)
    data = path.read_bytes()
    return xplane_pb2.XSpace.FromString(data), info, len(data)


def test_large_size_and_counts(large):
    xs, info, size = large
    assert size == info["bytes"]
    assert abs(size - 1.5e6) / 1.5e6 < 0.1
    assert list(xs.hostnames) == ["synth-large"]
    assert [p.name for p in xs.planes] == ["/host:CPU", "/device:GPU:0", "Task Environment"]
    assert sum(len(line.events) for p in xs.planes for line in p.lines) == info["events"]
    host, gpu = xs.planes[0], xs.planes[1]
    S = info["steps"]
    py = next(line for line in host.lines if line.name == "python")
    train = [st for n, _, _, st in _events(host, py) if n == "train"]
    assert train == [{"step_num": i, "_r": 1} for i in range(S)]
    streams = {line.name: len(line.events) for line in gpu.lines}
    assert streams["Stream #13(MemcpyH2D)"] == S and streams["Stream #31(Compute)"] == S
    assert streams["Stream #7(Compute)"] % S == 0 and streams["Stream #7(Compute)"] // S > 1000
    assert sum(n.startswith("tf_data_iterator_get_next/") for n in (line.name for line in host.lines)) == 1
    env = xs.planes[2]
    stop = next(s.uint64_value for s in env.stats if env.stat_metadata[s.metadata_id].name == "profile_stop_time")
    last = max(line.timestamp_ns * 1000 + ev.offset_ps + ev.duration_ps for p in xs.planes[:2] for line in p.lines
               for ev in line.events)
    assert last // 1000 < stop - syn.PROFILE_START_NS


def test_large_correlation_and_stats(large):
    xs, info, _ = large
    host, gpu = xs.planes[0], xs.planes[1]
    launches = _launches(host)
    n_kernels = 0
    for line in gpu.lines:
        for name, start, _, st in _events(gpu, line):
            api, _, lstart = launches.pop(st["correlation_id"])
            assert lstart < start
            if name.startswith("Memcpy"):
                assert st["memcpy_details"].startswith("kind_src:")
            else:
                n_kernels += 1
                assert DETAILS.match(st["kernel_details"]) and TF_OP.match(st["tf_op"])
    assert not launches  # every launch has its device activity
    assert n_kernels > 1000 * info["steps"]
    _check_timeline(xs)


def test_large_first_step_equals_small_writer(large):
    """Step 0 of the tiled trace is the simulated step (host lines exactly; kernels up to jitter)."""
    xs, _, _ = large
    ref, _ = syn.build_xspace(syn._large_spec(1))
    for pname in ("/host:CPU", "/device:GPU:0"):
        a, b = _plane(xs, pname), _plane(ref, pname)
        for la, lb in zip(a.lines, b.lines):
            assert la.name == lb.name and la.timestamp_ns == lb.timestamp_ns
            eb = list(_events(b, lb))
            ea = list(_events(a, la))[: len(eb)]
            assert [e[0] for e in ea] == [e[0] for e in eb]
            assert [e[1] for e in ea] == [e[1] for e in eb]
            assert [e[3] for e in ea] == [e[3] for e in eb]
            if pname == "/host:CPU":
                assert [e[2] for e in ea] == [e[2] for e in eb]
            else:
                assert all(0.95 * y <= x <= y for x, y in zip((e[2] for e in ea), (e[2] for e in eb)))


def test_cli_large(tmp_path, capsys):
    out = tmp_path / "cli.xplane.pb"
    assert syn.main(["large", str(out), "--mb", "0.3"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bytes"] == out.stat().st_size
    xplane_pb2.XSpace.FromString(out.read_bytes())


# -- committed samples --------------------------------------------------------------------------
@pytest.mark.parametrize("name", syn.SAMPLES)
def test_sample_committed_and_reproducible(name, tmp_path):
    info = syn.write_sample(name, str(tmp_path))
    fresh = tmp_path / name
    committed = SAMPLES / name
    with open(fresh / "expected.toml", "rb") as fh:
        exp = tomllib.load(fh)
    assert exp["kind"] == "synthetic" and "SYNTHETIC" in exp["description"]
    assert exp["hosts"] == len(info["files"])
    assert exp["truth"]["steps"] == 10
    lo, hi = exp["truth"]["step_time_ms"]
    host0 = next(iter(info["truth"]["hosts"].values()))
    assert lo <= host0["step_time_ms"] <= hi
    assert set(exp["findings"]) <= {"top", "top_any", "present", "absent"}
    for p in info["files"]:
        assert Path(p).stat().st_size < 2_000_000
        xs = xplane_pb2.XSpace.FromString(Path(p).read_bytes())
        assert list(xs.hostnames) == [Path(p).name.split(".")[0]]
        _check_timeline(xs)
        launches = _launches(xs.planes[0])
        for gp in xs.planes[1:-1]:
            for line in gp.lines:
                assert all(st["correlation_id"] in launches for _, _, _, st in _events(gp, line))
    if committed.is_dir():  # the committed copy is what this code writes
        for p in info["files"]:
            rel = Path(p).relative_to(fresh)
            assert (committed / rel).read_bytes() == Path(p).read_bytes(), rel
        assert (committed / "expected.toml").read_text() == (fresh / "expected.toml").read_text()


def test_sample_run_metadata(tmp_path):
    syn.write_sample("synthetic_multihost_straggler", str(tmp_path))
    run = tmp_path / "synthetic_multihost_straggler" / "plugins" / "profile" / syn.RUN_NAME
    assert sorted(p.name for p in run.glob("*.xplane.pb")) == [f"host{i}.xplane.pb" for i in range(4)]
    meta = json.loads((run / "tfadvisor_run.json").read_text())
    assert meta["hosts"] == 5 and meta["host_names"][4] == "host4"
    with open(tmp_path / "synthetic_multihost_straggler" / "expected.toml", "rb") as fh:
        exp = tomllib.load(fh)
    assert exp["truth"]["straggler"] == "host2" and exp["truth"]["missing_hosts"] == ["host4"]
