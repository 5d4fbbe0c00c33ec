"""Whole processes of ``python -m tfadvisor ARGS`` in two or more checkouts, alternated: median wall and CPU seconds.

Usage::

    python benchmarks/ab.py 11 /path/to/old-checkout . -- analyze sample_traces/input_bound_defaults_off
    python benchmarks/ab.py 9 .:TFADVISOR_CACHE_DIR= . -- analyze sample_traces/input_bound_defaults_off

Each DIR runs ``python -m tfadvisor ARGS`` with DIR as its working directory (so DIR's ``tfadvisor`` is the one
imported; relative paths in ARGS are DIR's), stdout and stderr discarded; ``DIR:NAME=VALUE,...`` adds environment
variables for that DIR (the second line: the rules' cache off against on, in one checkout). The order of the DIRs
alternates run by run, so a machine getting busier or quieter weighs on each alike. CPU seconds (user + system, from
``os.wait4``) are steadier than wall time on a shared machine. Compile each checkout's bytecode first
(``python -m compileall -q tfadvisor``, with ``PYTHONDONTWRITEBYTECODE`` unset), or the runs compile it every time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if "--" not in argv or len(argv) < 4:
        print(__doc__)
        return 2
    cut = argv.index("--")
    runs, dirs, args = int(argv[0]), argv[1:cut], argv[cut + 1:]
    wall: dict[str, list[float]] = {d: [] for d in dirs}
    cpu: dict[str, list[float]] = {d: [] for d in dirs}
    load = os.getloadavg()[0]
    for r in range(runs):
        for d in dirs if r % 2 == 0 else dirs[::-1]:
            cwd, _, extra = d.partition(":")
            env = dict(os.environ, **dict(e.split("=", 1) for e in extra.split(",") if e))
            t = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-m", "tfadvisor", *args], cwd=cwd, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            wall[d].append(time.perf_counter() - t)
            cpu[d].append(usage.ru_utime + usage.ru_stime)
            if os.waitstatus_to_exitcode(status) != 0:
                print(f"{d}: exit code {os.waitstatus_to_exitcode(status)}")
                return 1
    for d in dirs:
        print(f"{d}: wall median {statistics.median(wall[d]):.3f} s (min {min(wall[d]):.3f}), "
              f"CPU median {statistics.median(cpu[d]):.3f} s")
    print(f"{runs} runs each, alternated; load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
