"""Does ``tfadvisor diff`` give the same verdict on the same change, captured again and again?

One fix pair from ``sample_traces/make_loop_samples.py`` (default: a Keras ``fit`` with a callback that
sleeps 20 ms per batch, and its twin under ``steps_per_execution=10``) is captured ``--repeats`` times each
(interleaved), the ``--burn`` rounds with a CPU-burning process running beside the capture (one busy core,
started before the capture and stopped after it). Then every before capture is compared with every
after capture (``diff_results``, in this process), repeats x repeats verdicts.

What must hold: no diff says "slower" for the faster configuration, and every diff whose two captures ran
under different loads says that its conditions differ. The figures (verdicts, speedups, how many pairs
were flagged) are printed and written as JSON.

    PYTHONPATH=. python benchmarks/repeatability.py --out /tmp/rep --json /tmp/rep.json   # ~4 min on 2 cores
    PYTHONPATH=. python benchmarks/repeatability.py --out /tmp/rep --reuse                 # re-diff only

Exit 1 when a must-hold fails.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAKER = ROOT / "sample_traces" / "make_loop_samples.py"


def _burn(stop: float) -> None:
    x = 0
    while time.time() < stop:
        x = (x * 1103515245 + 12345) % 2147483648


def capture(case: str, out: Path, burn: bool) -> Path:
    """One capture of ``case`` into ``out`` (a fresh directory); with a busy core beside it when ``burn``."""
    out.mkdir(parents=True, exist_ok=True)
    burner = None
    if burn:
        burner = mp.Process(target=_burn, args=(time.time() + 600,), daemon=True)
        burner.start()
        time.sleep(1.0)
    try:
        subprocess.run([sys.executable, str(MAKER), str(out), "--one", case], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        if burner is not None:
            burner.terminate()
            burner.join()
    return out / case


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="where the captures go")
    ap.add_argument("--before", default="loop_callback_slow")
    ap.add_argument("--after", default="loop_callback_spe10")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--burn", default="1,3", help="rounds (from 0) captured beside a CPU burner")
    ap.add_argument("--reuse", action="store_true", help="diff the captures already in --out")
    ap.add_argument("--json", type=Path, help="write the figures here")
    a = ap.parse_args(argv)
    burn = {int(x) for x in a.burn.split(",") if x.strip()}
    runs: dict[str, list[tuple[Path, bool]]] = {a.before: [], a.after: []}
    for r in range(a.repeats):
        order = (a.before, a.after) if r % 2 == 0 else (a.after, a.before)
        for case in order:
            d = a.out / f"r{r}"
            if not a.reuse:
                capture(case, d, r in burn)
            runs[case].append((d / case, r in burn))

    import tfadvisor
    from tfadvisor.report.diff import diff_results

    res = {case: [(tfadvisor.analyze(p), b) for p, b in lst] for case, lst in runs.items()}
    rows = []
    for i, (rb, bb) in enumerate(res[a.before]):
        for j, (ra, ba) in enumerate(res[a.after]):
            d = diff_results(rb, ra)
            rows.append({"before": i, "after": j, "burn_before": bb, "burn_after": ba, "verdict": d["verdict"],
                         "speedup": d["step_time"]["speedup"], "conditions_differ": d["conditions"]["differ"],
                         "other_cpu": [rb.metrics.get("system_other_cpu_pct"), ra.metrics.get("system_other_cpu_pct")]})
    steps = {case: [round(float(r.metrics["step_time_mean_ms"]), 3) for r, _ in lst] for case, lst in res.items()}
    verdicts = {v: sum(r["verdict"] == v for r in rows) for v in ("faster", "unchanged", "slower", "unknown")}
    mixed = [r for r in rows if r["burn_before"] != r["burn_after"]]
    flagged = sum(bool(r["conditions_differ"]) for r in mixed)
    sp = [r["speedup"] for r in rows if r["speedup"]]
    fig = {"pair": [a.before, a.after], "repeats": a.repeats, "burn_rounds": sorted(burn),
           "step_time_mean_ms": steps, "verdicts": verdicts, "speedup_median": statistics.median(sp) if sp else None,
           "speedup_min": min(sp) if sp else None, "speedup_max": max(sp) if sp else None,
           "mixed_load_pairs": len(mixed), "mixed_load_pairs_flagged": flagged, "rows": rows}
    print(f"{a.before} -> {a.after}, {a.repeats} captures each, burner beside rounds {sorted(burn)}")
    print(f"step time (ms, wall clock per step): {a.before} {steps[a.before]}; {a.after} {steps[a.after]}")
    print(f"verdicts over {len(rows)} pairs: {verdicts}; speedup median {fig['speedup_median']:.2f}x "
          f"(min {fig['speedup_min']:.2f}x, max {fig['speedup_max']:.2f}x)")
    print(f"pairs captured under different loads: {len(mixed)}, of which the diff said the conditions differ: "
          f"{flagged}")
    if a.json:
        a.json.write_text(json.dumps(fig, indent=1, default=str) + "\n")
    ok = verdicts["slower"] == 0 and flagged == len(mixed)
    print("ok" if ok else "FAILED: a 'slower' verdict, or a pair under different loads not flagged")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
