"""The mutation check runs in CI: each headline figure (step time, input %, idle %, AllReduce ms,
memory peak, each device's memory peak, the step's busy part, the top op category's share, the attribution's
top part) scaled by
1.5x in a copy of the package must fail at least one truth test, with xprof made unimportable (so parity
with xprof cannot be what catches it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_headline_figure_scaled_by_1_5_fails_a_test():
    # --first: each mutant's run stops at its first failure (the control must be clean, so that failure is the
    # mutation's); the whole modules ran one after another cost the suite ~6 min, the first failures ~3
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mutation_check.py"), "--first"],
                       capture_output=True, text=True, timeout=1200, cwd=ROOT)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "every figure caught" in out
    # the control run is clean: nothing counted as caught was failing anyway
    assert "fails anyway" not in out, out[-4000:]
    for metric in ("step_time_mean_ms", "input_pct", "idle_pct", "allreduce_ms_per_step", "memory_peak_bytes",
                   "step_busy_mean_ms", "op_top_category_pct", "attr_top_part_pct", "column:peak_bytes"):
        row = next(ln for ln in out.splitlines() if len(ln.split()) == 4 and ln.split()[1] == metric)
        assert int(row.split()[-1]) >= 1, row
