"""Ablation truth for one generated program: what each component costs per step, by wall clock.

1. One profiled run (``program.py --profile DIR/logdir``): tfadvisor's Keras callback with TF's defaults on one
   epoch's worth of steps (a custom loop: ``tf.profiler.experimental`` start/stop and a
   ``Trace('train', step_num=i, _r=1)`` around each step call, as ``sample_traces/make_loop_samples.py``).
2. Unprofiled, in one process, back to back: the full program and the program once per ablation key (that key's
   components removed or made cheap, see ``mapping.py``), each built and warmed once, one untimed round, then
   ``repeats`` rounds interleaved. Each run's figure is the program's own clock: the epochs' wall time (steps,
   callbacks, evaluation) over the steps.

A key's cost per step is median(full) - median(without it). The spread of each variant's runs
((max - min) / median) is recorded beside it. This module imports nothing of tfadvisor's.

    python benchmarks/ablation/truth.py DIR [--repeats 3]    # DIR holds program.py and draw.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

MARK = "ABLATION_RESULT "


def _run(cmd: list[str], cwd: Path, timeout: float) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONHASHSEED": "0"}
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith(MARK)), None)
    if p.returncode != 0 or line is None:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(line[len(MARK):])


def spread_pct(runs: list[float]) -> float:
    """(max - min) / median of a variant's runs, %."""
    return 100.0 * (max(runs) - min(runs)) / statistics.median(runs) if runs else float("nan")


def measure(d: Path, repeats: int = 3, timeout: float = 900.0, max_repeats: int = 0,
            precision_ms: float = 0.0) -> dict:
    """Profile and ablate the program in ``d``; writes ``d/truth.json`` and ``d/logdir``; returns the truth. With
    ``precision_ms``, rounds go on (up to ``max_repeats``) while a variant's median has a robust standard error above
    ``precision_ms`` or 3 % of it; ``other_cpu_pct`` is the other processes' CPU use during the timed rounds."""
    draw = json.loads((d / "draw.json").read_text())
    prog = d / "program.py"
    logdir = d / "logdir"
    shutil.rmtree(logdir, ignore_errors=True)
    t0 = time.time()
    prof = _run([sys.executable, str(prog), "--profile", str(logdir)], d, timeout)
    t1 = time.time()
    names = ["full", *draw["ablations"]]
    res = _run([sys.executable, str(prog), "--measure", ",".join(names), "--repeats", str(repeats),
                "--max-repeats", str(max_repeats), "--precision-ms", str(precision_ms)], d, timeout)
    t2 = time.time()
    runs = res["ms_per_step"]
    full = statistics.median(runs["full"])
    truth = {
        "seed": draw["seed"],
        "description": draw.get("description", ""),
        "clock": "the program's own: the epochs' wall time (steps, callbacks, evaluation) over the steps; "
                 "median of the interleaved runs",
        "repeats": repeats,
        "rounds": res.get("rounds", repeats),
        "other_cpu_pct": res.get("other_cpu_pct"),
        "full_ms": full,
        "full_runs_ms": runs["full"],
        "full_spread_pct": spread_pct(runs["full"]),
        "profiled_run_ms": prof["ms_per_step"],
        "variants_ms": {k: runs[k] for k in draw["ablations"]},
        "spread_pct": {k: spread_pct(runs[k]) for k in names},
        "cost_ms": {k: full - statistics.median(runs[k]) for k in draw["ablations"]},
        "seconds": {"profile": round(t1 - t0, 1), "ablations": round(t2 - t1, 1)},
    }
    (d / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def main() -> None:
    p = argparse.ArgumentParser(description="Measure a generated program's ablation truth.")
    p.add_argument("dir", type=Path)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-repeats", type=int, default=0)
    p.add_argument("--precision-ms", type=float, default=0.0)
    a = p.parse_args()
    t = measure(a.dir, a.repeats, max_repeats=a.max_repeats, precision_ms=a.precision_ms)
    print(json.dumps({k: t[k] for k in ("full_ms", "full_spread_pct", "cost_ms")}, indent=1))


if __name__ == "__main__":
    main()
