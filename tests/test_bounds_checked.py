"""Bounds safety as a property: the analysis, with tfadvisor's C kernels built under AddressSanitizer and
UBSan (``asanlib``), over every sample, the real traces, every fuzz reproducer (``tests/data/fuzz_cases/``
and ``../shared/fuzz_cases``) and ~100 fuzz mutations, never reads or writes out of bounds.

Runs in a child process that imports an instrumented copy of the package (the child checks that the
kernels it imported are that build, not the installed one): an access outside any array the kernels
touch (the file's bytes, the columns) ends the child with a sanitizer report, which fails this test; so
does a crash. Cost: ~3 s to build, then ~0.1-0.5 s per input.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import asanlib
import fuzzlib

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
FUZZ_CASES = ROOT / "tests" / "data" / "fuzz_cases"
SHARED = ROOT.parent / "shared"
FUZZ_SEED = 424242
FUZZ_N = 100
PER_INPUT_LIMIT_S = 120
TOTAL_LIMIT_S = 900

CHILD = r"""
import faulthandler, json, sys, traceback
faulthandler.enable()
import tfadvisor
from tfadvisor.errors import TraceError

for target in sys.argv[2:]:
    faulthandler.dump_traceback_later(float(sys.argv[1]), exit=True)
    rec = {"target": target}
    try:
        result = tfadvisor.analyze(target)
        json.dumps(result.to_dict(), default=str)
        rec["status"] = "ok"
    except TraceError as err:
        rec["status"], rec["detail"] = "trace_error", str(err)[:300]
    except Exception as err:
        rec["status"], rec["detail"], rec["tb"] = "other", f"{type(err).__name__}: {err}"[:300], \
            traceback.format_exc()[-1500:]
    faulthandler.cancel_dump_traceback_later()
    print(json.dumps(rec), flush=True)
"""


def _sample_targets() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if p.is_dir() and any(p.rglob("*.xplane.pb")))


def _fuzz_case_targets() -> list[Path]:
    out = []
    cases = [p for root in (FUZZ_CASES, SHARED / "fuzz_cases") if root.is_dir() for p in root.iterdir()]
    for case in sorted(p for p in cases if p.is_dir()):
        logdir = case / "logdir" if (case / "logdir").is_dir() else case
        if any(logdir.rglob("*.xplane.pb")):
            out.append(logdir)
    return out


def _real_targets() -> list[Path]:
    real = SHARED / "real_traces"
    if not real.is_dir():
        return []
    return sorted(p for p in real.iterdir() if p.is_dir() and any(p.rglob("*.xplane.pb")))


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _read_varint(b: bytes, i: int) -> tuple[int, int]:
    v = shift = 0
    while True:
        v |= (b[i] & 0x7F) << shift
        shift += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i


#: Submessage fields of the records a line holds: XLine.events (4) -> XEvent, XEvent.stats (4) -> XStat.
_SUB = {"line": {4: "event"}, "event": {4: "stat"}, "stat": {}}


def _cut(msg: bytes, k: int, kind: str) -> bytes:
    """``msg`` (a well-formed message of ``kind``) cut at byte ``k``, the lengths of the submessages that
    enclose the cut rewritten so that each of them, and the innermost field, ends exactly at the cut."""
    i = 0
    while i < len(msg):
        tag, j = _read_varint(msg, i)
        field, wt = tag >> 3, tag & 7
        if wt == 2:
            n, body = _read_varint(msg, j)
            end = body + n
        else:
            end = _read_varint(msg, j)[1] if wt == 0 else j + (8 if wt == 1 else 4)
        if end >= k:
            if wt == 2 and field in _SUB[kind] and k > body:
                inner = _cut(msg[body:end], k - body, _SUB[kind][field])
                return msg[:i] + msg[i:j] + _varint(len(inner)) + inner
            return msg[:k]
        i = end
    return msg[:k]


def _truncated_line_inputs(dest: Path, per_sample: int = 40) -> list[Path]:
    """Files whose plane ENDS inside a record: a line is cut at a random byte (inside an event, a stat, a
    varint or a string) and written as the plane's last field, with the lengths of the line, event and
    stat around the cut rewritten to end there. The cut field runs into the very end of the decoder's
    buffer, where a missing bounds check reads outside it (into the sanitizer's red zone); whole-message
    mutations (fuzzlib) rarely end a buffer inside a record."""
    import random

    from tfadvisor.proto import xplane_pb2

    rnd = random.Random(16)
    out = []
    for name in ("synthetic_kernel_launch", "input_bound_defaults_off", "real_tf_gpu_multiworker"):
        src = min((SAMPLES / name).rglob("*.xplane.pb"))
        space = xplane_pb2.XSpace.FromString(src.read_bytes())
        planes = [p for p in space.planes if any(len(ln.events) for ln in p.lines)]
        for i in range(per_sample):
            plane = xplane_pb2.XPlane()
            plane.CopyFrom(planes[i % len(planes)])
            lines = [j for j, ln in enumerate(plane.lines) if len(ln.events)]
            j = lines[rnd.randrange(len(lines))]
            line = plane.lines[j]
            del line.events[64:]
            data = line.SerializeToString()
            del plane.lines[j]
            cut = _cut(data, rnd.randrange(1, len(data)), "line")
            body = plane.SerializeToString() + b"\x1a" + _varint(len(cut)) + cut
            run = dest / f"{name}_{i}" / "plugins" / "profile" / "run"
            run.mkdir(parents=True)
            (run / "h.xplane.pb").write_bytes(b"\x0a" + _varint(len(body)) + body)
            out.append(dest / f"{name}_{i}")
    return out


#: Children run at once, each over every CHILDREN-th target (the suite runs one test at a time: the other
#: cores would idle through this one's ~80 s).
CHILDREN = max(1, min(2, os.cpu_count() or 1))


def run_instrumented(tmp_path: Path, targets: list[str], source: Path | None = None):
    """The analysis of each target in a child under the sanitizers (:data:`CHILDREN` children at once):
    (records by target, the children's processes)."""
    from concurrent.futures import ThreadPoolExecutor

    env = asanlib.instrumented(tmp_path / "asan", source)
    parts = [targets[k::CHILDREN] for k in range(CHILDREN) if targets[k::CHILDREN]]
    with ThreadPoolExecutor(len(parts)) as pool:
        procs = list(pool.map(lambda part: asanlib.run_child(CHILD, [str(PER_INPUT_LIMIT_S), *part], env,
                                                             TOTAL_LIMIT_S), parts))
    records = [json.loads(ln) for proc in procs for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return {r["target"]: r for r in records if "target" in r}, procs


def test_analysis_is_in_bounds_under_address_sanitizer(tmp_path):
    seeds = fuzzlib.load_seeds()
    fuzz = [fuzzlib.make_input(seeds, FUZZ_SEED, i).write(tmp_path / "fuzz" / f"input_{i}") for i in range(FUZZ_N)]
    samples, cases, real = _sample_targets(), _fuzz_case_targets(), _real_targets()
    cut = _truncated_line_inputs(tmp_path / "cut")
    assert len(samples) >= 20
    targets = [str(p) for p in samples + real + cases + fuzz + cut]
    done, procs = run_instrumented(tmp_path, targets)
    for proc in procs:
        report = asanlib.sanitizer_report(proc.stderr)
        assert report is None, f"out-of-bounds access or undefined behaviour in the C kernels:\n{report}"
    missing = [t for t in targets if t not in done]
    bad = [proc for proc in procs if proc.returncode != 0]
    assert not bad and not missing, (
        f"child exited {[p.returncode for p in bad]} (negative: signal) at {missing[:1]}; stderr:\n"
        + "".join(p.stderr[-4000:] for p in bad))

    bad_samples = [r for t, r in done.items() if Path(t) in samples and r["status"] != "ok"
                   and not Path(t).name.startswith("bad_input")]
    assert not bad_samples, f"samples that did not analyse: {bad_samples}"
    assert done[str(SAMPLES / "bad_input")]["status"] == "trace_error"
    others = [r for r in done.values() if r["status"] == "other"]
    counts = {s: sum(r["status"] == s for r in done.values()) for s in ("ok", "trace_error", "other")}
    print(f"ASan/UBSan-checked: {len(done)} inputs ({len(samples)} samples, {len(real)} real traces, "
          f"{len(cases)} fuzz cases, {FUZZ_N} fuzz mutations, {len(cut)} cut lines): {counts}; other "
          "exceptions (the fuzz test's business): "
          + "; ".join(f"{Path(r['target']).name}: {r['detail'][:80]}" for r in others[:5]))


PARALLEL_COVER = r"""
import numpy as np
from tfadvisor import _native
import tfadvisor.io.wire as wire
rng = np.random.default_rng(5)
for case in range(6):
    k = int(rng.integers(1, 33))
    layers = []
    for _ in range(k):
        cuts = np.sort(rng.integers(0, 10**9, 2 * (300_000 // k + 1))).astype(np.int64)
        layers.append((cuts[0::2].copy(), cuts[1::2].copy()))
    w = [1, 2, 300, 7, 1, 40][case]
    a = np.sort(rng.integers(-10**8, 11 * 10**8, w)).astype(np.int64)
    b = np.sort(a + rng.integers(0, 4 * 10**8, w)).astype(np.int64)
    got = []
    for threads in (1, 2, 5):
        wire.set_num_threads(threads)
        got.append(np.asarray(_native.priority_cover([s for s, _ in layers], [e for _, e in layers], a, b)).tolist())
    assert got[0] == got[1] == got[2], case
print("ok")
"""


def test_parallel_priority_sweep_is_in_bounds_under_address_sanitizer(tmp_path):
    """The priority sweep on parts of the time on several threads (from 2**18 intervals on, more than any sample
    has), each part's clipped windows and output, under the sanitizers; same answers as one sweep."""
    env = asanlib.instrumented(tmp_path / "asan")
    proc = asanlib.run_child(PARALLEL_COVER, [], env, 600)
    report = asanlib.sanitizer_report(proc.stderr)
    assert report is None, f"out-of-bounds access or undefined behaviour in priority_cover:\n{report}"
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


ROW_RANGES = r"""
import numpy as np
from tfadvisor import _native
rng = np.random.default_rng(11)
for case in range(40):
    n = int(rng.integers(0, 400))
    start = np.sort(rng.integers(0, 10**6, n)).astype(np.int64)
    dur = rng.integers(0, 5000, n).astype(np.int64)
    rows = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False)).astype([np.int32, np.int64][case % 2])
    codes = rng.integers(0, 3, rows.shape[0]).astype(np.int8) if case % 3 else None
    cut = np.sort(rng.integers(0, rows.shape[0] + 1, 2 * int(rng.integers(0, 4))))
    lo, hi = cut[0::2].astype(np.int64), cut[1::2].astype(np.int64)
    s, e, ok = _native.union_row_ranges(start, dur, rows, lo, hi, codes, 1)
    assert ok and np.all(e > s) and np.all(s[1:] > e[:-1]), case
    if rows.shape[0]:  # rows out of the columns, and ranges out of the rows: refused, nothing read
        bad = rows.copy()
        bad[-1] = n + 5
        assert not _native.union_row_ranges(start, dur, bad, np.array([0]), np.array([bad.shape[0]]), None, 0)[2]
    for a, b in ((-1, 1), (0, rows.shape[0] + 1), (2, 1)):
        try:
            _native.union_row_ranges(start, dur, rows, np.array([a]), np.array([b]), codes, 1)
        except IndexError:
            pass
        else:
            assert a <= b <= rows.shape[0] and a >= 0, (a, b)
print("ok")
"""


def test_row_ranges_union_is_in_bounds_under_address_sanitizer(tmp_path):
    """``union_row_ranges`` (a RowSet's chunk: ranges of rows, codes, rows out of the columns, ranges out of the rows)
    under the sanitizers: big traces' sets only (more than a million rows), which no sample has."""
    env = asanlib.instrumented(tmp_path / "asan")
    proc = asanlib.run_child(ROW_RANGES, [], env, 600)
    report = asanlib.sanitizer_report(proc.stderr)
    assert report is None, f"out-of-bounds access or undefined behaviour in union_row_ranges:\n{report}"
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
