"""Reader benchmark: tfadvisor.load + a full column pass vs xprof's overview page, same file, same run.

Usage::

    python benchmarks/reader_benchmark.py --mb 275            # writes the trace if absent, then measures
    python benchmarks/reader_benchmark.py --mb 50 --no-xprof  # quick look

The trace is SYNTHETIC (written by ``tfadvisor_dev.synthetic.write_large_trace``: host plane with
TF ops, kernel launches with correlation_id, tf.data events; a GPU plane with stream lines,
kernels with kernel_details/tf_op ref stats, H2D memcpy and NCCL all-reduce). Each measurement
runs in a fresh subprocess; peak RSS is ``ru_maxrss`` of that process minus the peak of a
process that only imports tfadvisor (the bare interpreter with our imports).
Cold = empty bytecode cache (a fresh ``PYTHONPYCACHEPREFIX``; the kernels are compiled at install
time, nothing is compiled at run time); warm = cache filled by the cold run. Peak RSS is
taken after the column pass ("peak_rss_above_baseline_mb": the reader) and after the analyses
("peak_rss_with_analyses_mb"); "columns_mb" is what the loaded columns themselves hold.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BASELINE = """
import resource, json, tfadvisor, tfadvisor.io.wire, tfadvisor.io.reader
print(json.dumps({"rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

LOAD = r"""
import resource, json, sys, time
t0 = time.perf_counter()
import numpy as np
import tfadvisor
t_import = time.perf_counter() - t0
t1 = time.perf_counter()
trace = tfadvisor.load(sys.argv[1])
t_load = time.perf_counter() - t1
# A full column pass: every event and stat column is read once. Then all the analyses.
t2 = time.perf_counter()
acc = 0
for p in trace.planes:
    acc += int(p.ev_dur_ps.sum()) + int(p.ev_start_ps.max(initial=0)) + int(np.bincount(p.ev_meta + 1).max(initial=0))
    acc += int(np.bincount(p.ev_line).max(initial=0))
    acc += int(np.bincount(p.st_stat + 1).max(initial=0)) + int(p.st_value.sum()) + int(p.st_event.max(initial=0))
    acc += int(p.st_kind.sum())
t_pass = time.perf_counter() - t2
rss_load_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t3 = time.perf_counter()
from tfadvisor.analyses import analyze_trace, options_from
analyze_trace(trace, options_from(trace))
analyses_s = time.perf_counter() - t3
print(json.dumps({
    "import_s": t_import, "load_s": t_load, "pass_s": t_pass, "analyses_s": analyses_s,
    "events": trace.n_events, "stats": sum(p.n_stats for p in trace.planes),
    "rss_load_kb": rss_load_kb, "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "checksum": acc,
    "columns_mb": sum(p.nbytes() for p in trace.planes) / 1e6,
}))
"""

XPROF = r"""
import resource, json, sys, time, os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from xprof.convert import raw_to_tool_data
t0 = time.perf_counter()
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "overview_page", {"use_saved_result": False})
print(json.dumps({"xprof_s": time.perf_counter() - t0, "ok": data is not None,
                  "rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def run(code: str, *args: str, env: dict | None = None) -> dict:
    e = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=e)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"benchmark step failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=275.0, help="size of the synthetic trace")
    ap.add_argument("--trace", type=Path, help="use this .xplane.pb instead of writing one")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "tfadvisor-bench")
    ap.add_argument("--no-xprof", action="store_true", help="skip xprof's overview page")
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.trace or args.out / f"synthetic_{int(args.mb)}mb.xplane.pb"
    if not trace.exists():
        sys.path.insert(0, str(ROOT))
        from tfadvisor_dev.synthetic import write_large_trace

        t0 = time.perf_counter()
        write_large_trace(str(trace), target_mb=args.mb)
        print(f"wrote {trace} ({trace.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")
    size_mb = trace.stat().st_size / 1e6

    cache = Path(tempfile.mkdtemp(prefix="pycache-"))
    env = {"PYTHONPYCACHEPREFIX": str(cache)}
    base = run(BASELINE, env=env)
    cold = run(LOAD, str(trace), env=env)
    warm = [run(LOAD, str(trace), env=env) for _ in range(args.warm_runs)]
    shutil.rmtree(cache, ignore_errors=True)
    best = min(warm, key=lambda w: w["load_s"] + w["pass_s"])
    res = {
        "file_mb": round(size_mb, 1),
        "events": best["events"],
        "stats": best["stats"],
        "cold_load_s": round(cold["load_s"], 2),
        "warm_load_s": round(best["load_s"], 2),
        "warm_pass_s": round(best["pass_s"], 3),
        "warm_load_pass_s": round(best["load_s"] + best["pass_s"], 2),
        "cold_analyses_s": round(cold["analyses_s"], 2),
        "warm_analyses_s": round(min(w["analyses_s"] for w in warm), 2),
        "events_per_s_m": round(best["events"] / best["load_s"] / 1e6, 2),
        "mb_per_s": round(size_mb / best["load_s"], 1),
        "peak_rss_above_baseline_mb": round((max(w["rss_load_kb"] for w in warm) - base["rss_kb"]) / 1024, 1),
        "peak_rss_with_analyses_mb": round((max(w["rss_kb"] for w in warm) - base["rss_kb"]) / 1024, 1),
        "baseline_rss_mb": round(base["rss_kb"] / 1024, 1),
        "columns_mb": round(best["columns_mb"], 1),
    }
    if not args.no_xprof:
        tmp = Path(tempfile.mkdtemp(prefix="xprof-bench-"))
        try:
            copy = tmp / trace.name
            shutil.copyfile(trace, copy)  # xprof writes a cache next to what it reads
            x = run(XPROF, str(copy))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        res["xprof_overview_s"] = round(x["xprof_s"], 1)
        res["xprof_peak_rss_mb"] = round(x["rss_kb"] / 1024, 1)
        res["speedup_vs_xprof"] = round(x["xprof_s"] / res["warm_load_pass_s"], 1)
        res["rss_ratio_vs_xprof"] = round(x["rss_kb"] / 1024 / max(res["peak_rss_above_baseline_mb"], 1), 1)
    print(json.dumps(res, indent=2))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
