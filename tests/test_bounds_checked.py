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


def run_instrumented(tmp_path: Path, targets: list[str], source: Path | None = None):
    """The analysis of each target in a child under the sanitizers: (records by target, process)."""
    env = asanlib.instrumented(tmp_path / "asan", source)
    proc = asanlib.run_child(CHILD, [str(PER_INPUT_LIMIT_S), *targets], env, tmp_path, TOTAL_LIMIT_S)
    records = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return {r["target"]: r for r in records if "target" in r}, proc


def test_analysis_is_in_bounds_under_address_sanitizer(tmp_path):
    seeds = fuzzlib.load_seeds()
    fuzz = [fuzzlib.make_input(seeds, FUZZ_SEED, i).write(tmp_path / "fuzz" / f"input_{i}") for i in range(FUZZ_N)]
    samples, cases, real = _sample_targets(), _fuzz_case_targets(), _real_targets()
    assert len(samples) >= 20
    targets = [str(p) for p in samples + real + cases + fuzz]
    done, proc = run_instrumented(tmp_path, targets)
    tail = proc.stderr[-4000:]
    report = asanlib.sanitizer_report(proc.stderr)
    assert report is None, f"out-of-bounds access or undefined behaviour in the C kernels:\n{report}"
    missing = [t for t in targets if t not in done]
    assert proc.returncode == 0 and not missing, (
        f"child exited {proc.returncode} (negative: signal) at {missing[:1]}; stderr:\n{tail}")

    bad_samples = [r for t, r in done.items() if Path(t) in samples and r["status"] != "ok"
                   and not Path(t).name.startswith("bad_input")]
    assert not bad_samples, f"samples that did not analyse: {bad_samples}"
    assert done[str(SAMPLES / "bad_input")]["status"] == "trace_error"
    others = [r for r in done.values() if r["status"] == "other"]
    counts = {s: sum(r["status"] == s for r in done.values()) for s in ("ok", "trace_error", "other")}
    print(f"ASan/UBSan-checked: {len(done)} inputs ({len(samples)} samples, {len(real)} real traces, "
          f"{len(cases)} fuzz cases, {FUZZ_N} fuzz mutations): {counts}; other exceptions (the fuzz test's "
          "business): " + "; ".join(f"{Path(r['target']).name}: {r['detail'][:80]}" for r in others[:5]))
