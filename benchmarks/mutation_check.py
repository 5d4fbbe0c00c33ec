"""Mutation check: scale each headline figure by 1.5x and show that tests catch it, without xprof.

Usage::

    python benchmarks/mutation_check.py                 # all five figures, the truth-holding test modules
    python benchmarks/mutation_check.py --only step_time --tests tests/test_truth.py

For each figure the script copies the ``tfadvisor`` package into a temporary directory, rewrites the
one ``res.add("<metric>", value, ...)`` call (or calls) that computes the figure so its value is
multiplied by 1.5 (found with ``ast``; the shipped package is never touched), and runs a subset of
the test suite against the copy in a subprocess. xprof is made unimportable in that subprocess (a
stub package that raises ImportError comes first on ``sys.path``) and the xprof parity module is not
run, so what fails is caught by the truth checks alone. A control run on an unpatched copy gives the
tests that fail anyway (work in progress elsewhere); a mutant's count is the tests that fail with
the mutation and pass in the control. Exit status 1 if any figure goes uncaught.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FACTOR = 1.5

#: figure -> (module under tfadvisor/, metric whose computed value is scaled); the test modules each figure runs
#: are TESTS, or those in :data:`OWN_TESTS` (the suite runs this check: each module run costs it time)
FIGURES: dict[str, tuple[str, str]] = {
    "step_time": ("analyses/steps.py", "step_time_mean_ms"),
    "input_pct": ("analyses/input.py", "input_pct"),
    "idle_pct": ("analyses/gaps.py", "idle_pct"),
    "allreduce_ms": ("analyses/collectives.py", "allreduce_ms_per_step"),
    "memory_peak": ("analyses/memory.py", "memory_peak_bytes"),
    "step_busy": ("analyses/steps.py", "step_busy_mean_ms"),  # the busy part inside the markers
    "op_share": ("analyses/opcost.py", "op_top_category_pct"),  # the largest category's share of op time
    "top_part": ("analyses/attribution.py", "attr_top_part_pct"),  # the attribution's largest part
    "device_memory": ("analyses/memory.py", "column:peak_bytes"),  # each allocator's (each chip's) peak
}

#: the modules that hold truth checks (measured.json, generator bookkeeping, protobuf decodes)
TESTS = ["tests/test_truth.py", "tests/test_analyses_steps.py", "tests/test_analyses_input.py",
         "tests/test_analyses_misc.py", "tests/test_analyses_memory.py", "tests/test_analyses_collectives.py"]
#: figures whose truth checks are in one module: only that runs for them
OWN_TESTS: dict[str, list[str]] = {"step_busy": ["tests/test_truth.py"], "op_share": ["tests/test_attribution.py"],
                                   "memory_peak": ["tests/test_analyses_memory.py"],
                                   "top_part": ["tests/test_attribution.py"],
                                   "device_memory": ["tests/test_attribution.py"]}

#: tests that caught each figure when last checked, run first by a ``--first`` run (the rest of its modules follow in
#: their order, so any other test still catches a mutant they miss): each had run behind a module's other tests
#: (test_attribution's 221 for op_share and device_memory, ~15 s each)
CATCHERS: dict[str, list[str]] = {
    "step_time": ["tests/test_truth.py::test_captured_step_time_is_the_wall_clock"],
    "input_pct": ["tests/test_truth.py::test_captured_input_share"],
    "idle_pct": ["tests/test_truth.py::test_captured_idle_share"],
    "allreduce_ms": ["tests/test_truth.py::test_synthetic_against_the_generator"],
    "memory_peak": ["tests/test_analyses_memory.py::test_peak_and_capacity"],
    "step_busy": ["tests/test_truth.py::test_captured_step_time_is_the_wall_clock"],
    "op_share": ["tests/test_attribution.py::test_host_offload_trace_per_chip"],
    "top_part": ["tests/test_attribution.py::test_parts_sum_to_100"],
    "device_memory": ["tests/test_attribution.py::test_host_offload_trace_per_chip"],
}


class CatchersFirst:
    """pytest plugin: the collected tests whose id starts with one of ``first`` go first, in that order (a stable
    sort after conftest's own)."""

    def __init__(self, first: list[str]):
        self.first = first

    def _rank(self, nodeid: str) -> int:
        return next((i for i, f in enumerate(self.first) if nodeid == f or nodeid.startswith((f + "[", f + "::"))),
                    len(self.first))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        items.sort(key=lambda it: self._rank(it.nodeid))


_HELPER = f"""

def _mutation_scaled(value):
    \"\"\"Added by benchmarks/mutation_check.py in a temporary copy: the figure x {FACTOR}.\"\"\"
    return None if value is None else value * {FACTOR}
"""


def mutate_source(src: str, metric: str) -> tuple[str, int]:
    """Wrap the value argument of every ``<x>.add("<metric>", value, ...)`` call, or for ``column:<name>`` the
    value of every ``"<name>": value`` entry of a dict literal (a table's row or column); returns (source, count)."""
    tree = ast.parse(src)
    spans = []
    column = metric[len("column:"):] if metric.startswith("column:") else None
    for node in ast.walk(tree):
        values = []
        if column is not None and isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == column]
        elif (column is None and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "add" and len(node.args) >= 2 and isinstance(node.args[0], ast.Constant)
              and node.args[0].value == metric):
            values = [node.args[1]]
        spans += [(v.lineno, v.col_offset, v.end_lineno, v.end_col_offset) for v in values]
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def off(line: int, col: int) -> int:  # ast columns are UTF-8 byte offsets
        return starts[line - 1] + len(lines[line - 1].encode()[:col].decode())

    # rewrite from the end so the offsets of earlier calls stay valid
    for l0, c0, l1, c1 in sorted(spans, reverse=True):
        a, b = off(l0, c0), off(l1, c1)
        src = src[:a] + "_mutation_scaled(" + src[a:b] + ")" + src[b:]
    return src + _HELPER, len(spans)


def make_copy(dest: Path, figure: str | None) -> int:
    """The package (with its compiled kernels, mtimes kept) and its rules under ``dest``; patched for ``figure``."""
    shutil.copytree(ROOT / "tfadvisor", dest / "tfadvisor")
    (dest / "rules").symlink_to(ROOT / "rules")
    stub = dest / "no_xprof" / "xprof"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('raise ImportError("xprof is hidden by benchmarks/mutation_check.py")\n')
    if figure is None:
        return 0
    rel, metric = FIGURES[figure]
    path = dest / "tfadvisor" / rel
    src, n = mutate_source(path.read_text(), metric)
    if n == 0:
        raise SystemExit(f"mutation_check: no {metric!r} add() call in tfadvisor/{rel}")
    path.write_text(src)
    return n


def run_tests(copy: Path, tests: list[str], timeout: int, first: bool = False,
              catchers: list[str] = ()) -> tuple[set[str], str]:
    """Run pytest on ``tests`` importing tfadvisor from ``copy`` (with ``first``: up to the first failure, in one
    process, the ``catchers`` first: :class:`CatchersFirst`); returns (failed test ids, summary line)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(copy / "no_xprof"), str(copy)])
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    cmd = [sys.executable, "-c",
           "import sys, tfadvisor; assert tfadvisor.__file__.startswith(sys.argv[1]), tfadvisor.__file__; "
           "import pytest; sys.path.append(sys.argv[2]); from mutation_check import CatchersFirst; "
           "sys.exit(pytest.main(sys.argv[4:], plugins=[CatchersFirst(sys.argv[3].split())]))",
           str(copy), str(Path(__file__).resolve().parent), " ".join(catchers if first else ()),
           "-q", "-rfE", "-p", "no:cacheprovider", "--rootdir", str(ROOT), *(["-x"] if first else []),
           # one module's tests stay on one xdist worker (--dist loadgroup): a second worker would only start up;
           # a run up to its first failure, the catchers first, ends before a worker would have started
           *(["-n", "0"] if first or len({t.split("::")[0] for t in tests}) == 1 else []),
           *[str(ROOT / t) for t in tests]]
    p = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    out = p.stdout + p.stderr
    failed = {re.sub(r"^.*?(?=tests/)", "", t) for t in re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)}
    summary = next((ln for ln in reversed(out.splitlines()) if re.search(r"\d+ (passed|failed|error)", ln)), "")
    # under pytest-xdist (the project's addopts) a run that -x stops ends "Interrupted", exit 2
    stopped = first and p.returncode == 2 and re.search(r"Interrupted: stopping after \d+ failure", out)
    if p.returncode not in (0, 1) and not stopped:
        raise SystemExit(f"mutation_check: pytest exited {p.returncode}:\n{out[-3000:]}")
    return failed, summary.strip("= ")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", choices=sorted(FIGURES), help="figures to mutate (default: all)")
    ap.add_argument("--tests", nargs="*", default=TESTS, help="test modules to run (default: %(default)s)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per pytest run")
    ap.add_argument("--show", type=int, default=3, help="failing test ids to print per figure")
    ap.add_argument("--first", action="store_true",
                    help="stop each mutant's run at its first failure (caught or not is all it tells; the "
                         "suite's way), then run the control on those failing tests alone: each must pass there, so "
                         "that failure is the mutation's")
    args = ap.parse_args()
    figures = args.only or list(FIGURES)
    custom = args.tests != TESTS

    def tests_of(fig: str) -> list[str]:
        return args.tests if custom or fig not in OWN_TESTS else OWN_TESTS[fig]

    every = list(dict.fromkeys(t for fig in figures for t in tests_of(fig)))
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfa_mutation_") as tmp:
        control_dir = Path(tmp) / "control"
        make_copy(control_dir, None)

        def control_run(tests: list[str]) -> set[str]:
            t0 = time.perf_counter()
            failed, summary = run_tests(control_dir, tests, args.timeout)
            print(f"control (no mutation, {len(tests)} test(s) or module(s)): {summary} "
                  f"[{time.perf_counter() - t0:.0f} s]", flush=True)
            for t in sorted(failed):
                print(f"    fails anyway: {t}")
            return failed

        sites_of: dict[str, int] = {}

        def mutant_run(fig: str, first: bool) -> tuple[int, set[str], str, float]:
            t0 = time.perf_counter()
            d = Path(tmp) / fig
            if fig not in sites_of:
                sites_of[fig] = make_copy(d, fig)
            sites = sites_of[fig]
            failed, summary = run_tests(d, tests_of(fig), args.timeout, first=first, catchers=CATCHERS.get(fig, []))
            return sites, failed, summary, time.perf_counter() - t0

        results: dict[str, tuple[int, set[str], str, float]] = {}
        if args.first:
            # Each mutant up to its first failure, then the control on those failing tests alone: a failure counts
            # when the same test passes unmutated (the suite's way; the control on every module cost it ~50 s). A
            # mutant whose first failure fails anyway runs again in full, against the control on its modules.
            results = {fig: mutant_run(fig, True) for fig in figures}
            suspects = sorted(set().union(*(r[1] for r in results.values())))
            control = control_run(suspects) if suspects else set()
            again = [fig for fig in figures if not results[fig][1] - control]
            if again and control:
                control |= control_run(list(dict.fromkeys(t for fig in again for t in tests_of(fig))))
                results.update({fig: mutant_run(fig, False) for fig in again})
        else:
            control = control_run(every)
            results = {fig: mutant_run(fig, False) for fig in figures}
        for fig in figures:
            sites, failed, summary, took = results[fig]
            caught = sorted(failed - control)
            rows.append((fig, FIGURES[fig][1], sites, len(caught)))
            print(f"{fig}: {FIGURES[fig][1]} x {FACTOR} at {sites} site(s): {len(caught)} new failures "
                  f"({summary}) [{took:.0f} s]", flush=True)
            for t in caught[:args.show]:
                print(f"    {t}")
    print()
    print(f"{'figure':<14}{'metric':<24}{'sites':>6}{'failing tests':>15}")
    for fig, metric, sites, n in rows:
        print(f"{fig:<14}{metric:<24}{sites:>6}{n:>15}")
    missed = [fig for fig, _, _, n in rows if n == 0]
    print("every figure caught" if not missed else f"NOT caught: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
