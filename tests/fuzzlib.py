"""Fuzz inputs for tfadvisor: structure-aware and byte-level mutations of the sample traces.

Test-only (not part of the package, so it never ships in the wheel). Every input is a logdir
``<root>/plugins/profile/<run>/<host>.xplane.pb`` (one file per host, maybe a
``tfadvisor_run.json`` beside them), made from one seed run of ``sample_traces/`` by:

* ``struct``: decode the XSpace with the project's generated protobuf module, then 1-4 hostile edits
  that keep the file valid protobuf: renamed planes/lines/events/stats (the names real writers use,
  and junk), int64-extreme times, dangling metadata and ref ids, odd stat values, hostile values for
  every stat it knows (non-finite doubles, int64 extremes, uint64 past int64, negative sizes and counts,
  text for a number and a number for text: ``m_hostile_stat``), shuffled, dropped or duplicated events,
  duplicated planes, many empty planes, huge metadata ids, ...;
* ``bytes``: bit flips, truncation, splices, insertions, deletions of the serialized file;
* ``runjson``: a bad ``tfadvisor_run.json`` beside a valid profile;
* ``multihost``: the run written as several hosts, each mutated on its own.

``make_input(seeds, seed, index)`` is a pure function of its arguments: the same (seed, index)
gives byte-identical files on every machine (``random.Random`` seeded with a string, protobuf
serialized deterministically).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tfadvisor.proto import xplane_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
RUN_JSON = "tfadvisor_run.json"
MAX_SEED_FILE_BYTES = 4 * 1024 * 1024
MAX_SEED_EVENTS = 20_000  # larger seed files keep the first events of each line
MAX_STRING = 1 << 20  # the longest string a mutation writes

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
UINT64_MAX = 2**64 - 1
EXTREMES = [0, -1, 1, INT64_MAX, INT64_MIN, 2**62, -(2**62), 2**53, 10**18, -(10**18), 2**31, -(2**31), 1000]

PLANE_NAMES = [
    "/device:GPU:0", "/device:GPU:1", "/device:GPU:7", "/device:TPU:0", "/device:TPU:3", "/host:CPU",
    "/host:metadata", "Task Environment", "/device:CUSTOM:0", "/device:GPU:-1", "/device:GPU:99999999999999999999",
    "/device:GPU:", "/device:TPU:0 SparseCore 0", "/device:XLA_GPU:0", "", "/host:CPU/x", "\u00e9\u4e2d",
]
LINE_NAMES = [
    "TensorFlow Ops", "TensorFlow Name Scope", "Framework Ops", "Framework Name Scope", "XLA Ops", "XLA Modules",
    "Steps", "Launch Stats", "Async XLA Ops", "Source code", "XLA TraceMe", "SparseCore", "Stream #7(Compute)",
    "Stream #135(MemcpyH2D)", "Stream #14(MemcpyD2H)", "Stream #16(Kernel)", "Stream #2",
    "Stream #3(Compute,MemcpyH2D)",
    "Stream #-1(Compute)", "Stream #99999999999999999999(Compute)", "Stream #", "CUPTI overhead", "python", "python3",
    "tf_Compute/123", "tf_data_iterator_get_next/5", "tf_data_iterator_resource/6", "tf_data_private_threadpool/9",
    "tf_numa_-1_Eigen/7", "collective_ops/1", "tf_GPU_Event_Manager/2", "", "\u00e9\u4e2d", "x" * 300,
]
EVENT_NAMES = [
    "TraceContext", "train", "Profiled batch", "IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute",
    "Iterator::Root::Prefetch::ParallelMapV2::TensorSlice", "Iterator::Root::MapAndBatch::TensorSlice",
    "Iterator::Root", "MapAndBatchProduce", "ParallelMapProduce", "PrefetchProduce", "EagerExecute",
    "EagerKernelExecute", "__inference_train_step_123", "__inference_multi_step_on_iterator_7",
    "ExecutorState::Process", "StatefulPartitionedCall/adam/mul_12:Mul", "model/dense/MatMul:MatMul",
    "MemoryAllocation", "MemoryDeallocation", "cudaLaunchKernel", "cuLaunchKernel", "hipModuleLaunchKernel",
    "MemcpyH2D", "MemcpyD2H", "MemcpyD2D", "volta_h884gemm_128x128_ldg8_nn", "ampere_sgemm_128x64_nn",
    "sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n", "Cijk_Ailk_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN",
    "gemm_fusion_dot.1", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "ncclKernel_AllReduce_RING_LL_Sum_float", "HorovodAllreduce_grads_0", "all-reduce.1", "fusion.12",
    "convolution.3", "dot.4", "CollectiveReduceV2", "$core:TfOp", "0", "", "\x00", "a" * 2000,
]
STAT_NAMES = [
    "_r", "step_num", "step_id", "group_id", "iter_num", "id", "_pt", "_p", "_ct", "_c", "correlation_id",
    "kernel_details", "tf_op", "memcpy_details", "bytes_allocated", "bytes_reserved", "bytes_available",
    "peak_bytes_in_use", "requested_bytes", "allocation_bytes", "fragmentation", "data_type", "allocator_name",
    "region_type", "shape", "addr", "tf_function_call", "tracing_count", "is_func", "eager_op", "is_eager",
    "compute_cap_major", "compute_cap_minor", "core_count", "clock_rate", "memory_bandwidth", "memory_size",
    "profile_start_time", "profile_stop_time", "hlo_proto", "hlo_module", "program_id", "flops", "bytes_accessed",
    "name", "parallelism", "autotune", "buffered_elements", "buffered_bytes_MB", "batch_size", "cpu_budget",
    "threadpool_size", "long_name", "level 0", "device_id", "context_id", "stream_id", "device_ordinal",
    "theoretical_occupancy_pct", "run_id", "host_name", "num_replicas", "", "\u00e9",
]
#: Plane-level stats (GPU capabilities, TPU peaks, the capture window).
PLANE_STAT_NAMES = [
    "compute_cap_major", "compute_cap_minor", "core_count", "clock_rate", "memory_bandwidth", "memory_size",
    "profile_start_time", "profile_stop_time", "device_vendor", "hlo_proto", "peak_teraflops_per_second",
    "peak_hbm_bw_gigabytes_per_second",
]


def _known_stats() -> tuple[list[str], set[str]]:
    """Every stat name the fuzzer knows: the names real writers use, and every stat tfadvisor reads (its own
    table of what each holds), so that a stat an analysis starts reading is fuzzed from then on; and those that
    hold text (names: any text is a name, so text is no hostile value for them)."""
    from tfadvisor.model.values import EVENT_STATS, PLANE_STATS

    text = {n for n, e in {**EVENT_STATS, **PLANE_STATS}.items() if e.kind == "text"}
    return sorted(set(STAT_NAMES) | set(PLANE_STAT_NAMES) | set(EVENT_STATS) | set(PLANE_STATS)), text


KNOWN_STATS, TEXT_STATS = _known_stats()
#: Values no writer gives a stat, by what they test: (class, protobuf field, value). Each class is given to
#: every known stat (:func:`m_hostile_stat`): numbers to text stats (a name, a ``tf_op``) are the wrong type too;
#: text given to a text stat is just a name (``inf`` is one) and is left out (:func:`hostile_values_for`).
HOSTILE_VALUES: list[tuple[str, str, object]] = [
    ("nonfinite", "double", math.inf), ("nonfinite", "double", -math.inf), ("nonfinite", "double", math.nan),
    ("int64_extreme", "int64", INT64_MAX), ("int64_extreme", "int64", INT64_MIN), ("int64_extreme", "double", 1e308),
    ("int64_extreme", "double", -1e308), ("int64_extreme", "double", 2.0**63), ("int64_extreme", "int64", 2**62),
    ("int64_extreme", "double", 9.2e18),
    ("past_int64", "uint64", 2**63), ("past_int64", "uint64", 2**63 + 1), ("past_int64", "uint64", UINT64_MAX),
    ("negative", "int64", -1), ("negative", "int64", -(10**12)), ("negative", "double", -1.0),
    ("negative", "double", -0.5), ("negative", "int64", -2),
    ("text_for_number", "str", "inf"), ("text_for_number", "str", "-inf"), ("text_for_number", "str", "nan"),
    ("text_for_number", "str", "-1"), ("text_for_number", "str", "1e400"),
    ("text_for_number", "str", "18446744073709551616"), ("text_for_number", "str", "9223372036854775807"),
    ("text_for_number", "str", "abc"), ("text_for_number", "str", ""), ("text_for_number", "str", "unavailable"),
    ("text_for_number", "str", " 12 "), ("text_for_number", "bytes", b"\xff\x00"),
    ("number_for_text", "int64", 7), ("number_for_text", "double", 0.5), ("number_for_text", "int64", 0),
]
HOSTILE_CLASSES = sorted({c for c, _, _ in HOSTILE_VALUES})


def hostile_values_for(name: str, cls: str) -> list[tuple[str, object]]:
    """(field, value) of hostile class ``cls`` for stat ``name``: a text stat gets no text (any text is a name)."""
    vals = [(f, v) for c, f, v in HOSTILE_VALUES if c == cls]
    if name in TEXT_STATS:
        vals = [(f, v) for f, v in vals if f not in ("str", "bytes")] or \
            [(f, v) for c, f, v in HOSTILE_VALUES if c == "number_for_text"]
    return vals


STR_VALUES = [
    "", "nan", "-1", "inf", "0", "18446744073709551616", "size:abc dest:x async:", "size:112 dest:4 async:0",
    "kind_src:pageable kind_dst:device size:-5", "regs:-1 static_shared:x grid:0,0,0 block:-1,2 occ_pct:nan",
    "scope/name:Type", ":", "DT_HALF", "DT_BFLOAT16", "half", "bf16[8,8]{1,0}", "\x00\x01\x02", "\ud7ff\u4e2d\u00e9",
]


def _i64(v: int) -> int:
    """``v`` wrapped into int64 (two's complement), as a writer's overflowing arithmetic would."""
    return (v + 2**63) % 2**64 - 2**63


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


# --------------------------------------------------------------------------- seeds


@dataclass(frozen=True)
class Seed:
    """One run of ``sample_traces/``: its host files (serialized XSpace bytes) and run metadata."""

    name: str
    run: str
    files: tuple[tuple[str, bytes], ...]  # (host, bytes)
    run_json: bytes | None
    parses: bool  # False: the files are not valid XSpace (byte mutations only)


def _subsample(space: pb.XSpace, max_events: int) -> bool:
    total = sum(len(ln.events) for p in space.planes for ln in p.lines)
    if total <= max_events:
        return False
    keep = max_events / total
    for p in space.planes:
        for ln in p.lines:
            n = max(1, int(len(ln.events) * keep)) if len(ln.events) else 0
            del ln.events[n:]
    return True


def load_seeds(root: Path = SAMPLES, max_file_bytes: int = MAX_SEED_FILE_BYTES,
               max_events: int = MAX_SEED_EVENTS) -> list[Seed]:
    """Every run under ``root`` (sorted by path), big files subsampled, files over ``max_file_bytes`` skipped."""
    runs: dict[Path, list[Path]] = {}
    for f in sorted(root.rglob("*.xplane.pb")):
        runs.setdefault(f.parent, []).append(f)
    seeds = []
    for run_dir, files in sorted(runs.items()):
        name = run_dir.relative_to(root).parts[0]
        out, parses = [], True
        for f in files:
            if f.stat().st_size > max_file_bytes:
                continue
            data = f.read_bytes()
            space = pb.XSpace()
            try:
                space.ParseFromString(data)
            except Exception:  # noqa: BLE001 - a corrupt sample: byte mutations only
                parses = False
            else:
                if _subsample(space, max_events):
                    data = space.SerializeToString(deterministic=True)
            out.append((f.name[: -len(".xplane.pb")], data))
        if not out:
            continue
        meta = run_dir / RUN_JSON
        seeds.append(Seed(name=name, run=run_dir.name, files=tuple(out),
                          run_json=meta.read_bytes() if meta.is_file() else None, parses=parses))
    return seeds


# --------------------------------------------------------------------------- structure-aware mutations


def _pick_plane(rng: random.Random, space: pb.XSpace, need_lines: bool = False,
                need: str | None = None) -> pb.XPlane | None:
    """A random plane; with lines, or with a non-empty ``need`` field (``event_metadata``, ...), if any has."""
    planes = [p for p in space.planes if (not need_lines or p.lines) and (need is None or len(getattr(p, need)))]
    if not planes and need is not None:
        planes = [p for p in space.planes if not need_lines or p.lines]
    return rng.choice(planes) if planes else None


def _pick_line(rng: random.Random, space: pb.XSpace, need_events: bool = True) -> tuple[pb.XPlane, pb.XLine] | None:
    pairs = [(p, ln) for p in space.planes for ln in p.lines if ln.events or not need_events]
    return rng.choice(pairs) if pairs else None


def _copy(msg):
    out = type(msg)()
    out.CopyFrom(msg)
    return out


def _set_events(line: pb.XLine, events: list) -> None:
    copies = [_copy(e) for e in events]
    del line.events[:]
    line.events.extend(copies)


def _odd_int(rng: random.Random) -> int:
    return rng.choice(EXTREMES) if rng.random() < 0.8 else rng.randint(-10**6, 10**6)


def _missing_id(rng: random.Random, used) -> int:
    while True:
        v = rng.choice([0, -1, 7777777, 2**40, INT64_MAX, INT64_MIN, rng.randint(1, 10**6)])
        if v not in used:
            return v


def _set_odd_value(rng: random.Random, stat: pb.XStat, plane: pb.XPlane) -> str:
    """Give ``stat`` an odd value of a random kind; return what was set."""
    kind = rng.choice(["double", "double", "int64", "uint64", "str", "str", "bytes", "ref", "gzip"])
    if kind == "double":
        v = rng.choice([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, -0.0, -1.0, 1e19, 2.0**63])
        stat.double_value = v
    elif kind == "int64":
        v = _odd_int(rng)
        stat.int64_value = v
    elif kind == "uint64":
        v = rng.choice([0, UINT64_MAX, 2**63, 2**63 + 1, 2**64 - 2, 1])
        stat.uint64_value = v
    elif kind == "str":
        v = rng.choice(STR_VALUES + ["x" * rng.choice([1000, 100_000, MAX_STRING])])
        stat.str_value = v
        v = repr(v[:40]) + (f"...({len(v)} chars)" if len(v) > 40 else "")
    elif kind == "bytes":
        v = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 1, 16, 300])))
        stat.bytes_value = v
        v = f"{len(v)} random bytes"
    elif kind == "ref":
        used = set(plane.stat_metadata.keys())
        # a reference is a uint64: ids mutated negative (m_ids, m_huge_ids) are referred to as they wrap
        v = rng.choice([UINT64_MAX, 2**63, 2**63 + 5, _missing_id(rng, used) % 2**64]
                       + [u % 2**64 for u in sorted(used)[:3]])
        stat.ref_value = v
    else:
        which = rng.choice(["bad", "truncated", "junk", "big", "empty"])
        good = _gz(b"regs:32 static_shared:0 grid:1,1,1 block:128,1,1 occ_pct:50")
        v = {"bad": b"\x1f\x8b\x08\x00garbage" + bytes(range(40)), "truncated": good[: len(good) // 2],
             "junk": _gz(bytes(rng.getrandbits(8) for _ in range(200))), "big": _gz(b"A" * (8 << 20)),
             "empty": b""}[which]
        stat.compressed_str_value = v
        v = f"gzip {which} ({len(v)} bytes)"
    return f"{kind}={v}"


def set_stat(stat: pb.XStat, field_: str, value: object) -> None:
    """Give ``stat`` ``value`` in its ``field_`` (``double``, ``int64``, ``uint64``, ``str``, ``bytes``)."""
    setattr(stat, f"{field_}_value", value)


def stats_named(plane: pb.XPlane, name: str) -> list[pb.XStat]:
    """Every stat of ``plane`` named ``name``: plane, event metadata and event level."""
    ids = {k for k, m in plane.stat_metadata.items() if m.name == name}
    if not ids:
        return []
    out = [s for s in plane.stats if s.metadata_id in ids]
    for m in plane.event_metadata.values():
        out.extend(s for s in m.stats if s.metadata_id in ids)
    for ln in plane.lines:
        for e in ln.events:
            out.extend(s for s in e.stats if s.metadata_id in ids)
    return out


def _stats_of(rng: random.Random, plane: pb.XPlane, names: set[str] | None = None) -> list[pb.XStat]:
    """Up to a few hundred stats of ``plane`` (event, metadata and plane level), optionally by stat name."""
    ids = None
    if names is not None:
        ids = {k for k, m in plane.stat_metadata.items() if m.name in names}
        if not ids:
            return []
    out: list[pb.XStat] = [s for s in plane.stats if ids is None or s.metadata_id in ids]
    for m in plane.event_metadata.values():
        out.extend(s for s in m.stats if ids is None or s.metadata_id in ids)
    lines = list(plane.lines)
    rng.shuffle(lines)
    for ln in lines[:4]:
        for e in ln.events[:2000]:
            out.extend(s for s in e.stats if ids is None or s.metadata_id in ids)
            if len(out) > 400:
                return out
    return out


Mutator = Callable[[random.Random, pb.XSpace], str]


def m_rename_line(rng: random.Random, space: pb.XSpace) -> str:
    picked = _pick_line(rng, space, need_events=False)
    if picked is None:
        return "rename line: none"
    plane, line = picked
    old, line.name = line.name, rng.choice(LINE_NAMES)
    if rng.random() < 0.3:
        line.display_name = rng.choice(LINE_NAMES)
    return f"rename line {plane.name!r}/{old[:40]!r} -> {line.name[:40]!r}"


def m_rename_plane(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space)
    if plane is None:
        return "rename plane: none"
    old, plane.name = plane.name, rng.choice(PLANE_NAMES)
    return f"rename plane {old!r} -> {plane.name!r}"


def m_device_line(rng: random.Random, space: pb.XSpace) -> str:
    """A line of a GPU/TPU kind (``XLA Ops``, ``Steps``, ...) filled with copies of another line's events."""
    picked = _pick_line(rng, space)
    if picked is None:
        return "device line: none"
    plane, src = picked
    if rng.random() < 0.5:
        plane.name = rng.choice(["/device:GPU:0", "/device:TPU:0", "/device:GPU:3"])
    new = plane.lines.add()
    new.CopyFrom(src)
    new.id = _i64(src.id + rng.choice([0, 1, 1000]))
    new.name = rng.choice(LINE_NAMES[:22])
    if rng.random() < 0.5:
        del new.events[rng.randint(0, len(new.events)):]
    return f"add line {new.name!r} to {plane.name!r} with {len(new.events)} events copied from {src.name[:40]!r}"


def m_rename_event(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space, need="event_metadata")
    if plane is None or not plane.event_metadata:
        return "rename event: none"
    keys = sorted(plane.event_metadata.keys())
    out = []
    for k in rng.sample(keys, min(len(keys), rng.choice([1, 1, 3, 20]))):
        m = plane.event_metadata[k]
        m.name = rng.choice(EVENT_NAMES)
        if rng.random() < 0.3:
            m.display_name = rng.choice(EVENT_NAMES)
        out.append(f"{k}->{m.name[:30]!r}")
    return f"rename events in {plane.name!r}: {', '.join(out)}"


def m_rename_stat(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space, need="stat_metadata")
    if plane is None or not plane.stat_metadata:
        return "rename stat: none"
    keys = sorted(plane.stat_metadata.keys())
    out = []
    for k in rng.sample(keys, min(len(keys), rng.choice([1, 2, 5]))):
        m = plane.stat_metadata[k]
        m.name = rng.choice(STAT_NAMES)
        out.append(f"{k}->{m.name!r}")
    return f"rename stats in {plane.name!r}: {', '.join(out)}"


def m_extreme_time(rng: random.Random, space: pb.XSpace) -> str:
    picked = _pick_line(rng, space, need_events=rng.random() < 0.8)
    if picked is None:
        return "extreme time: none"
    plane, line = picked
    target = rng.choice(["line.timestamp_ns", "line.duration_ps", "event.offset_ps", "event.duration_ps"])
    v = _odd_int(rng)
    if target.startswith("line."):
        setattr(line, target[5:], v)
        return f"{plane.name!r}/{line.name[:40]!r} {target} = {v}"
    scope = rng.choice(["one", "some", "all"])
    evs = list(line.events)
    if not evs:
        return "extreme time: empty line"
    if scope == "one":
        chosen = [rng.choice(evs)]
    else:
        chosen = evs if scope == "all" else rng.sample(evs, max(1, len(evs) // 10))
    for e in chosen:
        setattr(e, target[6:], v if rng.random() < 0.9 else _odd_int(rng))
    return f"{plane.name!r}/{line.name[:40]!r} {target} = {v} on {scope} ({len(chosen)}) events"


def m_num_occurrences(rng: random.Random, space: pb.XSpace) -> str:
    picked = _pick_line(rng, space)
    if picked is None:
        return "num_occurrences: none"
    plane, line = picked
    n = 0
    for e in line.events:
        if rng.random() < 0.3:
            e.num_occurrences = _odd_int(rng)
            n += 1
    return f"{plane.name!r}/{line.name[:40]!r}: {n} events get num_occurrences instead of offset_ps"


def m_dangling(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space, need="stat_metadata")
    if plane is None:
        return "dangling: none"
    what = rng.choice(["event_ref", "stat_ref", "ref_value", "del_event_meta", "del_stat_meta"])
    if what == "del_event_meta" and plane.event_metadata:
        k = rng.choice(sorted(plane.event_metadata.keys()))
        del plane.event_metadata[k]
        return f"{plane.name!r}: delete event metadata {k}"
    if what == "del_stat_meta" and plane.stat_metadata:
        k = rng.choice(sorted(plane.stat_metadata.keys()))
        del plane.stat_metadata[k]
        return f"{plane.name!r}: delete stat metadata {k}"
    if what == "event_ref":
        picked = [(ln, e) for ln in plane.lines for e in ln.events[:500]]
        if picked:
            bad = _missing_id(rng, plane.event_metadata)
            for _, e in rng.sample(picked, min(len(picked), rng.choice([1, 10, 100]))):
                e.metadata_id = bad
            return f"{plane.name!r}: events point at missing event metadata {bad}"
    stats = _stats_of(rng, plane)
    if not stats:
        return "dangling: no stats"
    s = rng.choice(stats)
    if what == "ref_value":
        s.ref_value = _missing_id(rng, plane.stat_metadata) % 2**64
        return f"{plane.name!r}: stat ref_value -> missing id {s.ref_value}"
    s.metadata_id = _missing_id(rng, plane.stat_metadata)
    return f"{plane.name!r}: stat metadata_id -> missing id {s.metadata_id}"


def m_stat_value(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space, need="stat_metadata")
    if plane is None:
        return "stat value: none"
    named = rng.random() < 0.6
    names = set(rng.sample(STAT_NAMES, 8)) if named else None
    stats = _stats_of(rng, plane, names) or _stats_of(rng, plane)
    if not stats:
        return "stat value: no stats"
    chosen = rng.sample(stats, min(len(stats), rng.choice([1, 1, 5, 50])))
    vals = [_set_odd_value(rng, s, plane) for s in chosen]
    return f"{plane.name!r}: {len(chosen)} stats get odd values, e.g. {vals[0][:80]}"


def m_plane_stat(rng: random.Random, space: pb.XSpace) -> str:
    """A plane-level stat (GPU capabilities, profile start/stop) with an odd value."""
    plane = _pick_plane(rng, space)
    if plane is None:
        return "plane stat: none"
    name = rng.choice(PLANE_STAT_NAMES)
    ids = [k for k, m in plane.stat_metadata.items() if m.name == name]
    sid = ids[0] if ids else _i64(max(list(plane.stat_metadata.keys()) + [0]) + 1)
    plane.stat_metadata[sid].id = sid
    plane.stat_metadata[sid].name = name
    s = plane.stats.add()
    s.metadata_id = sid
    return f"{plane.name!r}: plane stat {name} {_set_odd_value(rng, s, plane)[:80]}"


def m_hostile_stat(rng: random.Random, space: pb.XSpace) -> str:
    """One known stat (:data:`KNOWN_STATS`, mostly one the plane has) given a hostile value (:data:`HOSTILE_VALUES`:
    non-finite, int64 extremes, past int64, negative, text for a number, a number for text) on all, some or one
    of its values; a stat the plane lacks is added to some events or to the plane."""
    known = set(KNOWN_STATS)
    have = [(p, n) for p in space.planes for n in sorted({m.name for m in p.stat_metadata.values()} & known)]
    if have and rng.random() < 0.85:  # each (plane, stat) alike: not mostly the stats of planes with many
        plane, name = rng.choice(have)
    else:
        plane, name = _pick_plane(rng, space), rng.choice(KNOWN_STATS)
    if plane is None:
        return "hostile stat: none"
    cls = rng.choice(HOSTILE_CLASSES)
    field_, value = rng.choice(hostile_values_for(name, cls))
    stats = stats_named(plane, name)
    if not stats:  # add it: to the plane, or to some events of a line
        sid = _i64(max(list(plane.stat_metadata.keys()) + [0]) + 1)
        plane.stat_metadata[sid].id = sid
        plane.stat_metadata[sid].name = name
        lines = [ln for ln in plane.lines if ln.events]
        if lines and rng.random() < 0.7:
            for e in rng.choice(lines).events[: rng.choice([1, 10, 1000])]:
                stats.append(e.stats.add(metadata_id=sid))
        else:
            stats.append(plane.stats.add(metadata_id=sid))
    scope = rng.choice(["all", "all", "some", "one"])
    chosen = stats if scope == "all" else [rng.choice(stats)] if scope == "one" else \
        rng.sample(stats, max(1, len(stats) // 3))
    for s in chosen:
        set_stat(s, field_, value)
    return f"{plane.name!r}: {name} = {field_} {value!r} ({cls}) on {scope} ({len(chosen)} of {len(stats)})"


def m_shuffle(rng: random.Random, space: pb.XSpace) -> str:
    picked = _pick_line(rng, space)
    if picked is None:
        return "shuffle: none"
    plane, line = picked
    evs = list(line.events)
    how = rng.choice(["shuffle", "reverse", "drop", "dup", "drop_all"])
    if how == "shuffle":
        rng.shuffle(evs)
    elif how == "reverse":
        evs.reverse()
    elif how == "drop":
        evs = [e for e in evs if rng.random() < 0.5]
    elif how == "dup":
        evs = evs + [e for e in evs if rng.random() < 0.3]
        rng.shuffle(evs)
    else:
        evs = []
    _set_events(line, evs)
    return f"{plane.name!r}/{line.name[:40]!r}: {how} events -> {len(evs)}"


def m_drop(rng: random.Random, space: pb.XSpace) -> str:
    what = rng.choice(["line", "plane", "metadata"])
    if what == "plane" and space.planes:
        i = rng.randrange(len(space.planes))
        name = space.planes[i].name
        del space.planes[i]
        return f"drop plane {name!r}"
    plane = _pick_plane(rng, space, need_lines=what == "line")
    if plane is None:
        return "drop: none"
    if what == "line":
        i = rng.randrange(len(plane.lines))
        name = plane.lines[i].name
        del plane.lines[i]
        return f"drop line {plane.name!r}/{name[:40]!r}"
    plane.ClearField("event_metadata" if rng.random() < 0.5 else "stat_metadata")
    return f"drop all metadata of one kind in {plane.name!r}"


def m_dup_plane(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space)
    if plane is None or space.ByteSize() > (8 << 20):
        return "dup plane: none"
    n = rng.choice([1, 1, 2, 5])
    for _ in range(n):
        space.planes.add().CopyFrom(plane)
    return f"duplicate plane {plane.name!r} x{n}"


def m_dup_line(rng: random.Random, space: pb.XSpace) -> str:
    picked = _pick_line(rng, space)
    if picked is None:
        return "dup line: none"
    plane, line = picked
    new = plane.lines.add()
    new.CopyFrom(line)
    shift = rng.choice([0, 1, 1000])
    for e in new.events:
        e.offset_ps = _i64(e.offset_ps + shift)
    return f"duplicate line {plane.name!r}/{line.name[:40]!r} shifted {shift} ps"


def m_overlap_steps(rng: random.Random, space: pb.XSpace) -> str:
    """Copies of step-like events (``TraceContext``, ``Steps`` lines, events with ``_r``/``step_num``) shifted."""
    hits = []
    for p in space.planes:
        step_meta = {k for k, m in p.event_metadata.items() if m.name in ("TraceContext", "train", "Profiled batch")
                     or m.name.isdigit()}
        step_stats = {k for k, m in p.stat_metadata.items() if m.name in ("_r", "step_num", "group_id", "step_id")}
        for ln in p.lines:
            for e in ln.events:
                stepish = e.metadata_id in step_meta or any(s.metadata_id in step_stats for s in e.stats)
                if ln.name == "Steps" or stepish:
                    hits.append((ln, e))
    if not hits:
        return "overlap steps: no step events"
    frac = rng.choice([0.5, 0.9, 1.5, -0.5])
    chosen = rng.sample(hits, min(len(hits), rng.choice([1, 5, 50])))
    for ln, e in chosen:
        c = ln.events.add()
        c.CopyFrom(e)
        c.offset_ps = _i64(e.offset_ps + int(e.duration_ps * frac))
        if rng.random() < 0.3:
            c.duration_ps = _i64(e.duration_ps * rng.choice([3, 100, -1]))
    return f"{len(chosen)} step events copied, shifted by {frac} x their duration"


def m_empty_planes(rng: random.Random, space: pb.XSpace) -> str:
    n = rng.choice([10, 100, 500, 1000])
    for i in range(n):
        p = space.planes.add()
        p.id = rng.choice([i, 0, -1, INT64_MAX])
        p.name = rng.choice(PLANE_NAMES) if rng.random() < 0.5 else f"/device:GPU:{i}"
    return f"add {n} empty planes"


def m_huge_ids(rng: random.Random, space: pb.XSpace) -> str:
    which = rng.choice(["event", "stat"])
    plane = _pick_plane(rng, space, need=f"{which}_metadata")
    if plane is None:
        return "huge ids: none"
    table = plane.event_metadata if which == "event" else plane.stat_metadata
    if not table:
        return "huge ids: empty table"
    old = rng.choice(sorted(table.keys()))
    new = rng.choice([4194303, 2**31 - 1, 2**32, 2**40, 2**62, INT64_MAX, -1, INT64_MIN, -7])
    if new in table:
        return "huge ids: taken"
    table[new].CopyFrom(table[old])
    if rng.random() < 0.7:
        table[new].id = new
    del table[old]
    n = 0
    for ln in plane.lines:
        for e in ln.events:
            if which == "event" and e.metadata_id == old:
                e.metadata_id = new
                n += 1
            elif which == "stat":
                for s in e.stats:
                    if s.metadata_id == old:
                        s.metadata_id = new
                        n += 1
                    if s.WhichOneof("value") == "ref_value" and s.ref_value == old:
                        s.ref_value = new % 2**64
    return f"{plane.name!r}: {which} metadata id {old} -> {new} ({n} references)"


def m_meta_children(rng: random.Random, space: pb.XSpace) -> str:
    plane = _pick_plane(rng, space, need="event_metadata")
    if plane is None or not plane.event_metadata:
        return "children: none"
    k = rng.choice(sorted(plane.event_metadata.keys()))
    m = plane.event_metadata[k]
    how = rng.choice(["self", "missing", "many", "stats"])
    if how == "self":
        m.child_id.append(k)
    elif how == "missing":
        m.child_id.append(_missing_id(rng, plane.event_metadata))
    elif how == "many":
        m.child_id.extend(rng.randint(-5, 10**6) for _ in range(1000))
    else:
        sid = rng.choice(sorted(plane.stat_metadata.keys()) or [1])
        s = m.stats.add()
        s.metadata_id = sid
        _set_odd_value(rng, s, plane)
    if rng.random() < 0.3:
        m.metadata = bytes(rng.getrandbits(8) for _ in range(64))
    return f"{plane.name!r}: event metadata {k} children/stats: {how}"


def m_ids(rng: random.Random, space: pb.XSpace) -> str:
    picked = _pick_line(rng, space, need_events=False)
    if picked is None:
        return "ids: none"
    plane, line = picked
    v = rng.choice([0, -1, INT64_MAX, INT64_MIN, plane.lines[0].id])
    line.id, line.display_id = v, rng.choice([v, -1])
    if rng.random() < 0.5:
        plane.id = rng.choice([0, -1, INT64_MAX, INT64_MIN])
    return f"{plane.name!r}/{line.name[:40]!r}: line id {v}"


def m_space_strings(rng: random.Random, space: pb.XSpace) -> str:
    space.hostnames[:] = rng.choice([[], [""], ["a"] * 50, ["\u00e9\u4e2d", "x" * 5000], ["localhost"]])
    if rng.random() < 0.5:
        space.errors.append("x" * rng.choice([0, 10, 100_000]))
        space.warnings.append("\u00e9")
    return f"hostnames {len(space.hostnames)}, errors/warnings"


def m_host_as_device(rng: random.Random, space: pb.XSpace) -> str:
    """Copy a plane under a device name with its lines renamed to device line kinds."""
    plane = _pick_plane(rng, space, need_lines=True)
    if plane is None:
        return "host as device: none"
    new = space.planes.add()
    new.CopyFrom(plane)
    new.name = rng.choice(["/device:GPU:0", "/device:TPU:0", "/device:GPU:1"])
    for ln in new.lines:
        ln.name = rng.choice(LINE_NAMES[:22])
    return f"copy {plane.name!r} as {new.name!r} with device line names"


STRUCT_MUTATORS: list[tuple[Mutator, int]] = [
    (m_rename_line, 6), (m_rename_plane, 4), (m_device_line, 6), (m_rename_event, 5), (m_rename_stat, 4),
    (m_extreme_time, 8), (m_num_occurrences, 2), (m_dangling, 5), (m_stat_value, 8), (m_plane_stat, 3),
    (m_shuffle, 5), (m_drop, 3), (m_dup_plane, 2), (m_dup_line, 3), (m_overlap_steps, 4), (m_empty_planes, 1),
    (m_huge_ids, 3), (m_meta_children, 2), (m_ids, 2), (m_space_strings, 1), (m_host_as_device, 3),
    (m_hostile_stat, 10),
]


def mutate_struct(rng: random.Random, data: bytes, n: int) -> tuple[bytes, list[str]]:
    space = pb.XSpace()
    space.ParseFromString(data)
    funcs, weights = zip(*STRUCT_MUTATORS)
    steps = []
    for fn in rng.choices(funcs, weights=weights, k=n):
        steps.append(f"{fn.__name__}: {fn(rng, space)}")
    return space.SerializeToString(deterministic=True), steps


# --------------------------------------------------------------------------- byte-level mutations


def mutate_bytes(rng: random.Random, data: bytes, donors: list[bytes], n: int) -> tuple[bytes, list[str]]:
    buf = bytearray(data)
    steps = []
    for _ in range(n):
        how = rng.choice(["flip", "flip", "truncate", "splice", "insert", "delete", "overwrite", "repeat", "byte"])
        size = len(buf)
        pos = rng.randrange(size) if size else 0
        if how == "flip" and size:
            for _ in range(rng.choice([1, 2, 8, 32])):
                i = rng.randrange(size)
                buf[i] ^= 1 << rng.randrange(8)
        elif how == "truncate":
            buf = buf[: rng.choice([0, 1, pos, max(0, size - 1), size // 2])]
        elif how == "splice" and donors:
            d = rng.choice(donors)
            start = rng.randrange(len(d)) if d else 0
            chunk = d[start: start + rng.choice([16, 256, 4096, 65536])]
            buf[pos: pos + len(chunk)] = chunk
        elif how == "insert":
            buf[pos:pos] = bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 4, 64, 1000])))
        elif how == "delete":
            del buf[pos: pos + rng.choice([1, 4, 100, 10000])]
        elif how == "overwrite":
            fill = rng.choice([b"\xff", b"\x00", b"\x80", b"\x7f"])
            k = rng.choice([4, 10, 100])
            buf[pos: pos + k] = fill * k
        elif how == "repeat" and size:
            chunk = bytes(buf[pos: pos + rng.choice([8, 200, 5000])])
            at = rng.randrange(size)
            buf[at:at] = chunk * rng.choice([1, 3])
        elif size:
            buf[pos] = rng.getrandbits(8)
        steps.append(f"{how}@{pos}")
    return bytes(buf), steps


# --------------------------------------------------------------------------- tfadvisor_run.json


def _odd_json_value(rng: random.Random):
    return rng.choice([
        math.nan, math.inf, -math.inf, -1, 0, 10**30, 2**63, -(2**63), 1.5, -0.5, "abc", "12", "", [], {}, [1, 2],
        {"a": 1}, True, False, None, "\x00", list(range(10_000)), 1e308,
    ])


def mutate_run_json(rng: random.Random, original: bytes | None) -> tuple[bytes, str]:
    """A bad ``tfadvisor_run.json``: broken JSON, not an object, or odd values for the keys tfadvisor reads."""
    how = rng.choice(["text", "not_object", "values", "values", "values", "startup", "deep"])
    if how == "text":
        raw = rng.choice([b"", b"{", b"nan", b"\xff\xfe{}", b"\xef\xbb\xbf{}", b"{\"param_count\": 1e400}",
                          b"{\"hosts\": NaN}", b"{\"replicas\": -Infinity}", b"{\"a\": \"\xc3\x28\"}",
                          b" " * 1_000_000 + b"{}", b"{}" * 3])
        return raw, f"text {raw[:40]!r}"
    if how == "not_object":
        raw = json.dumps(rng.choice([[], 1, "x", None, True, [{"param_count": 1}]])).encode()
        return raw, f"not an object: {raw[:40]!r}"
    if how == "deep":
        depth = rng.choice([100, 5000, 100_000])
        return b"{\"startup\": " + b"[" * depth + b"]" * depth + b"}", f"nested {depth} deep"
    try:
        base = json.loads(original) if original else {}
    except ValueError:
        base = {}
    if not isinstance(base, dict):
        base = {}
    if how == "startup":
        st = {"process_start_unix_s": _odd_json_value(rng), "fit_start": {"t_unix_s": _odd_json_value(rng)},
              "first_batch": rng.choice([{"t_unix_s": _odd_json_value(rng)}, _odd_json_value(rng)]),
              "first_step": {"t_unix_s": _odd_json_value(rng), "read_calls": _odd_json_value(rng)},
              "steps_planned": _odd_json_value(rng)}
        base["startup"] = rng.choice([st, _odd_json_value(rng)])
        return json.dumps(base).encode(), "startup record with odd values"
    keys = ["param_count", "batch_size", "replicas", "bandwidth_gbps", "link", "hosts", "host_names", "startup",
            "steps", "devices", "strategy"]
    changed = rng.sample(keys, rng.choice([1, 2, 4]))
    for k in changed:
        base[k] = _odd_json_value(rng)
    desc = ", ".join(f"{k}={str(base[k])[:20]}" for k in changed)
    return json.dumps(base).encode(), f"values: {desc}"


# --------------------------------------------------------------------------- inputs


@dataclass
class FuzzInput:
    """One generated logdir: its origin, the mutations applied, and its files."""

    seed: int
    index: int
    base: str  # the seed run's sample name
    family: str
    steps: list[str]
    run: str
    files: list[tuple[str, bytes]]  # (host, bytes)
    run_json: bytes | None = None
    extra: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"seed={self.seed} index={self.index}"

    def describe(self) -> str:
        """Several lines: where the input came from and every mutation applied."""
        head = f"{self.label} base={self.base} family={self.family} files={len(self.files)}"
        return "\n".join([head] + [f"  - {s}" for s in self.steps])

    def write(self, logdir: Path) -> Path:
        """Write the logdir (``plugins/profile/<run>/``) and return it."""
        run_dir = Path(logdir) / "plugins" / "profile" / self.run
        run_dir.mkdir(parents=True, exist_ok=True)
        for host, data in self.files:
            (run_dir / f"{host}.xplane.pb").write_bytes(data)
        if self.run_json is not None:
            (run_dir / RUN_JSON).write_bytes(self.run_json)
        return Path(logdir)


FAMILIES = [("struct", 50), ("bytes", 22), ("struct+bytes", 4), ("runjson", 10), ("struct+runjson", 4),
            ("multihost", 10)]


def make_input(seeds: list[Seed], seed: int, index: int) -> FuzzInput:
    """The ``index``-th input of the run seeded with ``seed`` (a pure function of its arguments)."""
    rng = random.Random(f"tfadvisor-fuzz:{seed}:{index}")
    base = seeds[rng.randrange(len(seeds))]
    names, weights = zip(*FAMILIES)
    family = rng.choices(names, weights=weights)[0]
    if not base.parses and family != "bytes":
        family = "bytes" if rng.random() < 0.8 else "runjson"
    files = list(base.files)
    steps: list[str] = []
    run_json = base.run_json
    target = rng.randrange(len(files))
    host, data = files[target]
    if "struct" in family:
        data, s = mutate_struct(rng, data, rng.choice([1, 1, 2, 3, 4]))
        steps += [f"[{host}] {x}" for x in s]
    if "bytes" in family:
        donors = [d for sd in seeds for _, d in sd.files[:1]]
        data, s = mutate_bytes(rng, data, donors, rng.choice([1, 1, 2, 3]))
        steps.append(f"[{host}] bytes: {', '.join(s)}")
    files[target] = (host, data)
    if "runjson" in family:
        run_json, s = mutate_run_json(rng, base.run_json)
        steps.append(f"{RUN_JSON}: {s}")
    if family == "multihost":
        n = rng.choice([2, 3, 4])
        extra = []
        for i in range(n):
            h, d = files[i % len(files)]
            d, s = mutate_struct(rng, d, rng.choice([0, 1, 2]))
            if rng.random() < 0.2:
                d, b = mutate_bytes(rng, d, [], 1)
                s.append(f"bytes: {', '.join(b)}")
            name = rng.choice([f"{h}_{i}", f"host{i}", f"w{i}:6009".replace(":", "_")])
            extra.append((name, d))
            steps += [f"[{name}] {x}" for x in s] or [f"[{name}] copy of {h}"]
        files = extra
        if rng.random() < 0.5:
            run_json = json.dumps({"hosts": rng.choice([n, n + 1, 0, -1, 2.5]),
                                   "host_names": [h for h, _ in files] + rng.choice([[], ["missing"]])}).encode()
            steps.append(f"{RUN_JSON}: hosts {run_json[:80]!r}")
    return FuzzInput(seed=seed, index=index, base=base.name, family=family, steps=steps, run=base.run,
                     files=files, run_json=run_json)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with (size, mtime_ns): to prove nothing was written there."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size if name in filenames else -1, st.st_mtime_ns)
    return out
