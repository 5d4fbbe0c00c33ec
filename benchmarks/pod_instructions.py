"""Instructions per pod host, by phase: where a run of many small hosts spends its CPU, counted, not timed.

Usage::

    python benchmarks/pod_instructions.py                 # 8 hosts of 1 GPU, 8 hosts of 8 GPUs
    python benchmarks/pod_instructions.py --hosts 4 --gpus 1,2,8

A pod run's time is its hosts' CPU (``benchmarks/multihost.py --pods``), and on a shared machine wall and
CPU times of one host (~40 ms) move by 10 % from one minute to the next: too much to tell a 3 % change from
noise. Instructions do not move. This script writes SYNTHETIC pod hosts (made as
``multihost.py --pods`` makes them, :func:`benchmarks.multihost.write_pod`) with 1 and with 8
GPUs, and analyses each host as a pod's worker does (``multihost_worker.analyze_host``, comparison
analyses only) under valgrind's callgrind, which writes its counters at a marker call between phases:
the load, each input an analysis declares (built once per host), each analysis' own work, the rest. It
prints instructions per host by phase for each GPU count, and what one more GPU costs (the difference
per GPU): in a pod the device planes are most of a host's cost, each a few hundred events.

Needs ``valgrind`` (Debian: ``apt-get install valgrind``); the files go to a temporary directory, removed
after. The first hosts warm the process' caches and are not counted.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.multihost import write_pod  # noqa: E402 - after the path: the pods' hosts, made as they are there

#: Hosts analysed before the counted ones (imports, caches).
WARM_HOSTS = 2

CHILD = r"""
import sys
from tfadvisor.io.discovery import host_runs, resolve
import tfadvisor.analyses.inputs as inputs
import tfadvisor.io.reader as reader
from tfadvisor.multihost.worker import analyze_host, start_worker

from tfadvisor._native import get_num_threads as _mark  # callgrind dumps its counters before each call (--dump-before)
labels, now = [], ["other"]

def phase(label):
    labels.append(now[0])
    _mark()
    now[0] = label

def run(fn, trace, ctx):
    back = now[0]
    kw = {}
    for name in inputs._declared(fn):
        phase("input " + name)
        kw[name] = inputs.INPUTS[name](trace, ctx)
    phase("analysis " + fn.__module__.rsplit(".", 1)[-1])
    try:
        return fn(trace, ctx, **kw)
    finally:
        phase(back)

load_run = reader.load_run
def counted_load(*a, **k):
    back = now[0]
    phase("load")
    try:
        return load_run(*a, **k)
    finally:
        phase(back)

inputs.run = run
reader.load_run = counted_load
start_worker()
runs = host_runs(resolve(sys.argv[1]))
hosts = list(runs)
warm = int(sys.argv[2])
for h in hosts[:warm]:
    analyze_host(runs[h], h, None, 1, "host")
phase("other")  # counting starts here: what came before is the first dump's
labels.clear()
for h in hosts[warm:]:
    analyze_host(runs[h], h, None, 1, "host")
phase("end")
print("LABELS " + "|".join(labels))
"""


def _dump_ir(path: str) -> int:
    """The instructions counted in one callgrind dump (its ``summary:`` or ``totals:`` line)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0


def count(run_dir: Path, hosts: int, work: Path) -> dict[str, float]:
    """Instructions per host by phase (callgrind)."""
    out_dir = work / f"cg-{run_dir.parent.parent.parent.name}"
    out_dir.mkdir()
    exe = os.path.realpath(sys.executable)
    cmd = ["valgrind", "--tool=callgrind", "--dump-before=py_get_num_threads", "--dump-instr=no", "--dump-line=no",
           f"--callgrind-out-file={out_dir}/cg.out", exe, "-c", CHILD, str(run_dir), str(WARM_HOSTS)]
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"valgrind failed ({proc.returncode}): {proc.stderr[-2000:]}")
    labels = next(x[7:].split("|") for x in proc.stdout.splitlines() if x.startswith("LABELS "))
    dumps = sorted(glob.glob(f"{out_dir}/cg.out.*"), key=lambda p: int(p.rsplit(".", 1)[-1]))
    # dump k holds what ran before marker k; labels[j] names what ran before the (j+1)-th marker after the warm-up
    start = len(dumps) - len(labels)  # the dumps at the markers are numbered; the one at exit is not
    got: dict[str, float] = defaultdict(float)
    for label, path in zip(labels, dumps[start:start + len(labels)]):
        got[label] += _dump_ir(path)
    return {k: v / hosts for k, v in got.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=8, help="hosts counted per GPU count (default 8)")
    ap.add_argument("--gpus", default="1,8", help="GPUs per host, comma-separated (default 1,8)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (Debian: apt-get install valgrind)")
    gpus = [int(x) for x in a.gpus.split(",")]
    with tempfile.TemporaryDirectory(prefix="tfadvisor-podir-") as tmp:
        work = Path(tmp)
        per: dict[int, dict[str, float]] = {}
        for g in gpus:
            run_dir = write_pod(work / f"g{g}", a.hosts + WARM_HOSTS, g)
            per[g] = count(run_dir, a.hosts, work)
    phases = sorted({k for d in per.values() for k in d}, key=lambda k: -max(d.get(k, 0) for d in per.values()))
    head = "".join(f"{f'{g} GPU/host':>14}" for g in gpus)
    lo, hi = min(gpus), max(gpus)
    print(f"SYNTHETIC pod hosts, instructions per host (M), {a.hosts} hosts counted per column")
    print(f"{'phase':28s}{head}{'per GPU':>12}")
    for k in phases:
        vals = "".join(f"{per[g].get(k, 0) / 1e6:14.2f}" for g in gpus)
        step = (per[hi].get(k, 0) - per[lo].get(k, 0)) / (hi - lo) / 1e6 if hi > lo else 0.0
        print(f"{k:28s}{vals}{step:12.2f}")
    tot = {g: sum(per[g].values()) for g in gpus}
    step = (tot[hi] - tot[lo]) / (hi - lo) / 1e6 if hi > lo else 0.0
    print(f"{'total':28s}" + "".join(f"{tot[g] / 1e6:14.2f}" for g in gpus) + f"{step:12.2f}")


if __name__ == "__main__":
    main()
