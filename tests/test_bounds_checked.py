"""Bounds safety as a property: the analysis, run with numba's bounds checking on, over every sample,
every fuzz reproducer in ``tests/data/fuzz_cases/`` and ~100 fuzz mutations, never indexes out of bounds.

Runs in a child process with ``NUMBA_BOUNDSCHECK=1`` and a fresh, empty ``NUMBA_CACHE_DIR``. The fresh
cache is required: numba's on-disk cache does not key on the bounds-check flag (checked with numba 0.68:
the index key is the signature, the target machine and the bytecode hash), so with the package's own
``__pycache__`` the unchecked machine code would be loaded and nothing would be checked; conversely a
checked build must never land in the package's cache. The child proves both: a probe kernel raises
``IndexError``, and tfadvisor's kernels appear in the fresh cache (compiled there, not loaded).

With the check on, an out-of-bounds access in compiled code is ``IndexError: index is out of bounds``
instead of silent memory corruption or a segfault; any ``IndexError`` (or a crash) fails this test.
Cost: the cold compile of every kernel with checks takes ~35 s on a 2-core machine; then ~0.2-0.5 s
per input, ~1.5 min in all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import fuzzlib

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
FUZZ_CASES = ROOT / "tests" / "data" / "fuzz_cases"
FUZZ_SEED = 424242
FUZZ_N = 100
PER_INPUT_LIMIT_S = 120
TOTAL_LIMIT_S = 900

CHILD = r"""
import faulthandler, json, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
faulthandler.enable()
import numpy as np
from numba import njit

@njit
def _probe(a, i):
    return a[i]

try:
    _probe(np.zeros(3), 7)
    probe = "no IndexError: bounds checking is OFF"
except IndexError:
    probe = "ok"
print(json.dumps({"probe": probe}), flush=True)

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
    except IndexError as err:
        rec["status"], rec["detail"], rec["tb"] = "index_error", str(err), traceback.format_exc()[-3000:]
    except Exception as err:
        rec["status"], rec["detail"], rec["tb"] = "other", f"{type(err).__name__}: {err}"[:300], \
            traceback.format_exc()[-1500:]
    faulthandler.cancel_dump_traceback_later()
    print(json.dumps(rec), flush=True)
"""


def _sample_targets() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if p.is_dir() and any(p.rglob("*.xplane.pb")))


def _fuzz_case_targets() -> list[Path]:
    if not FUZZ_CASES.is_dir():
        return []
    out = []
    for case in sorted(p for p in FUZZ_CASES.iterdir() if p.is_dir()):
        logdir = case / "logdir" if (case / "logdir").is_dir() else case
        if any(logdir.rglob("*.xplane.pb")):
            out.append(logdir)
    return out


def test_analysis_is_in_bounds_with_numba_boundscheck(tmp_path):
    seeds = fuzzlib.load_seeds()
    fuzz = [fuzzlib.make_input(seeds, FUZZ_SEED, i).write(tmp_path / "fuzz" / f"input_{i}") for i in range(FUZZ_N)]
    samples, cases = _sample_targets(), _fuzz_case_targets()
    assert len(samples) >= 20
    cache = tmp_path / "numba_cache"
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(cache)}
    env.pop("NUMBA_DISABLE_JIT", None)
    targets = [str(p) for p in samples + cases + fuzz]
    proc = subprocess.run([sys.executable, "-c", CHILD, str(PER_INPUT_LIMIT_S), *targets], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=TOTAL_LIMIT_S)
    records = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    done = {r["target"]: r for r in records if "target" in r}
    tail = proc.stderr[-4000:]
    assert records and records[0].get("probe") == "ok", f"bounds checking not active: {records[:1]} {tail}"
    missing = [t for t in targets if t not in done]
    assert proc.returncode == 0 and not missing, (
        f"child exited {proc.returncode} (negative: signal) at {missing[:1]}; stderr:\n{tail}")
    kernels = {p.name.split("-")[0] for p in cache.rglob("*.nbi")}
    assert any(k.startswith("wire.") for k in kernels) and any(k.startswith("steps.") for k in kernels), kernels

    oob = [r for r in done.values() if r["status"] == "index_error"]
    assert not oob, "out-of-bounds access in compiled code:\n" + "\n\n".join(
        f"{r['target']}: {r['detail']}\n{r['tb']}" for r in oob[:3])
    bad_samples = [r for t, r in done.items() if Path(t) in samples and r["status"] != "ok"
                   and not Path(t).name.startswith("bad_input")]
    assert not bad_samples, f"samples that did not analyse: {bad_samples}"
    assert done[str(SAMPLES / "bad_input")]["status"] == "trace_error"
    others = [r for r in done.values() if r["status"] == "other"]
    counts = {s: sum(r["status"] == s for r in done.values()) for s in ("ok", "trace_error", "other")}
    print(f"bounds-checked: {len(done)} inputs ({len(samples)} samples, {len(cases)} fuzz cases, {FUZZ_N} fuzz "
          f"mutations): {counts}; other exceptions (the fuzz test's business): "
          + "; ".join(f"{Path(r['target']).name}: {r['detail'][:80]}" for r in others[:5]))
