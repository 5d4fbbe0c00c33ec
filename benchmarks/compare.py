"""tfadvisor vs xprof's overview page vs xprof-rs: same files, same run, measured the same way.

Usage::

    python benchmarks/compare.py                      # small sample + the 263 MB synthetic trace
    python benchmarks/compare.py --small-only         # only the small sample (a busy machine)
    python benchmarks/compare.py --install            # first pip-install tfadvisor (this checkout) and
                                                      # xprof-rs into fresh venvs under --workdir
    python benchmarks/compare.py --sizes 33,66,131,263 --no-xprof   # tfadvisor's cost against events
    python benchmarks/compare.py --no-xprof --large-runs 1 --sizes 1051,4000,10000   # big traces (issue 28)

Every measurement is one whole process, from its start to its exit: ``fork``/``exec`` of the tool's
command line, reading the file, the analysis, the output written to a file, interpreter shutdown. Wall
time is taken around the process; peak RSS is the process's own ``ru_maxrss`` from ``os.wait4`` (absolute,
not above a baseline), in MB of 1e6 bytes as the files' sizes (before 2026-11-29 the tables gave MiB as MB, 4.6 %
less). The commands:

* tfadvisor: ``tfadvisor analyze <run> --format json`` (the installed console script with ``--install``
  or ``--tfadvisor``, else ``python -m tfadvisor`` from this checkout);
* xprof: ``xprof.convert.raw_to_tool_data.xspace_to_tool_data([file], "overview_page",
  {"use_saved_result": False})`` in a Python process, on a copy of the file (xprof writes a cache next
  to what it reads; the copy is made before the clock starts and its cache removed after each run);
* xprof-rs: ``xprof-rs get_overview <run dir>`` (its command line; it writes nothing next to the file).

On the small trace a fourth row, the floor: ``python -c 'import numpy'`` with the same interpreter, cold and warm
alike. tfadvisor's columnar ``Trace`` and every analysis are numpy, so no tfadvisor run is faster than this; its ratio
to xprof is the best tfadvisor's could be (2026-12-02: 0.07-0.10 s warm against xprof's 0.10-0.11 s).

First run after pip install (with ``--install``, tfadvisor only) = the very first run of a fresh venv,
with the bytecode pip compiled at install time; the best of ``--installs`` fresh installs (3), as warm is
the best of ``--runs``. Cold = the Python tools get a fresh, empty
``PYTHONPYCACHEPREFIX`` (every module, numpy and pandas included, is compiled from source: an install
without any bytecode; harsher than a real first run) and tfadvisor an empty rules cache (``TFADVISOR_CACHE_DIR``
beside that bytecode: its rule files parsed and checked, as on a first run; so too the first run after an
install); tfadvisor compiles nothing else at run time (its
kernels are compiled by ``pip install``). Warm = the best of ``--runs`` later runs with that prefix filled.
The trace files are in the page cache for every tool (they are read once before measuring); nothing drops the OS caches.

Traces are generated (``tfadvisor_dev.synthetic.write_large_trace``, SYNTHETIC) into ``--workdir``
(default ``/tmp/tfadvisor-compare``), never into the repository, and reused when present; those of
``--sizes`` are removed after they are measured (``--keep`` keeps them).

``--sizes`` measures tfadvisor's cost against the file's size: seconds per million events, peak RSS and RSS
per MB of file, the best of ``--size-runs`` warm runs at every size alike; xprof-rs beside it where its RSS per
MB measured on the large trace says it fits in the memory available. The large trace (``--mb``) is measured in
that table too, the same way, and every size's time per million events is given as a ratio to its: a best of
three against one run would compare the machine's fast spells with its slow ones (2026-11-29: the same 263 MB
run took 2.03 to 2.72 s in one hour, the slow runs with 2 to 3x the system time, first touches of huge pages).

Each process runs under an address-space limit (the memory available when the script starts, less 1 GB), so
a size that does not fit fails alone, reported as such, instead of pushing the machine into its OOM killer.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "sample_traces" / "input_bound_defaults_off"
RUN_NAME = "2026_01_01_00_00_00"
FLOOR = "python -c 'import numpy'"  # the floor row of the small trace: the interpreter importing numpy
README_START, README_END = "<!-- compare.py: start -->", "<!-- compare.py: end -->"

XPROF = r"""
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data(sys.argv[2:], "overview_page", {"use_saved_result": False})
if data is None:
    sys.exit("xprof: no overview page")
with open(sys.argv[1], "w" if isinstance(data, str) else "wb") as fh:
    fh.write(data)
"""


def available_bytes() -> int:
    """The memory available now (``MemAvailable``), bytes."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no MemAvailable in /proc/meminfo")


#: The address space each measured process may take (set in main: the memory available less 1 GB).
AS_LIMIT: list[int] = []


def _limit_memory() -> None:
    if AS_LIMIT:
        resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT[0], AS_LIMIT[0]))


def measure(cmd: list[str], env: dict[str, str], out: Path, cwd: Path | None = None) -> dict:
    """One whole process: wall seconds and its peak RSS (MB), stdout to ``out``."""
    with open(out, "wb") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.PIPE, env=env, cwd=cwd, preexec_fn=_limit_memory)
        err_chunks = []
        # read stderr while waiting (a tool that writes much to it must not block)
        assert proc.stderr is not None
        for chunk in iter(lambda: proc.stderr.read(65536), b""):
            err_chunks.append(chunk)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = b"".join(err_chunks)[-2000:].decode(errors="replace")
        raise Failed(f"failed ({proc.returncode}): {' '.join(cmd)}\n{tail}", wall, _mb(usage.ru_maxrss))
    return {"s": wall, "rss_mb": _mb(usage.ru_maxrss)}


def _mb(maxrss_kib: int) -> float:
    """``ru_maxrss`` (KiB on Linux) in MB of 1e6 bytes, the unit of the files' sizes (their ratio is a target)."""
    return maxrss_kib * 1024 / 1e6


class Failed(SystemExit):
    """A measured process that exited non-zero (after ``s`` seconds, at ``rss_mb`` peak)."""

    def __init__(self, text: str, s: float, rss_mb: float):
        super().__init__(text)
        self.s, self.rss_mb = s, rss_mb


def trace_for(workdir: Path, mb: float) -> Path:
    """A run directory holding a SYNTHETIC trace of about ``mb`` MB (written once, then reused)."""
    run = workdir / f"trace_{mb:g}mb" / "plugins" / "profile" / RUN_NAME
    f = run / "host0.xplane.pb"
    if not f.exists():
        run.mkdir(parents=True, exist_ok=True)
        sys.path.insert(0, str(ROOT))
        from tfadvisor_dev.synthetic import write_large_trace

        t0 = time.perf_counter()
        tmp = f.with_suffix(".tmp")
        write_large_trace(str(tmp), target_mb=mb)
        tmp.rename(f)
        print(f"wrote {f} ({f.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.0f} s", flush=True)
    return run


def xplanes(run: Path) -> list[Path]:
    return sorted(run.rglob("*.xplane.pb"))


def install(workdir: Path) -> tuple[Path, Path]:
    """Fresh venvs: tfadvisor installed from this checkout (``pip install``), and xprof-rs."""
    venv = workdir / "venv-tfadvisor"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    t0 = time.perf_counter()
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], check=True)
    print(f"pip install {ROOT} -> {venv}: {time.perf_counter() - t0:.0f} s", flush=True)
    xrs = workdir / "venv-xprof-rs"
    if not (xrs / "bin" / "xprof-rs").exists():
        subprocess.run([sys.executable, "-m", "venv", str(xrs)], check=True)
        subprocess.run([str(xrs / "bin" / "pip"), "install", "-q", "xprof-rs"], check=True)
    return venv / "bin" / "tfadvisor", xrs / "bin" / "xprof-rs"


class Tools:
    def __init__(self, args: argparse.Namespace, workdir: Path):
        self.workdir = workdir
        self.scratch = Path(tempfile.mkdtemp(prefix="compare-", dir=workdir))
        self.tfadvisor = args.tfadvisor
        self.xprof_rs = args.xprof_rs
        # PYTHONDONTWRITEBYTECODE would make every run compile every module: no warm run at all
        drop = ("PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        self.first_runs: list[dict] = []  # the first run of each fresh install, on the small trace
        if args.install:
            for _ in range(args.installs):
                self.tfadvisor, xrs = install(workdir)
                self.xprof_rs = self.xprof_rs or xrs
                self.first_runs.append(self.first_run(args.small))
                print(f"  {args.small.name}: tfadvisor: first run after this install {self.first_runs[-1]['s']:.2f} s",
                      flush=True)
        if self.xprof_rs is None:
            found = shutil.which("xprof-rs") or workdir / "venv-xprof-rs" / "bin" / "xprof-rs"
            self.xprof_rs = Path(found) if Path(found).exists() else None
        self.use_xprof = not args.no_xprof

    def first_run(self, run: Path) -> dict:
        """The very first run of a fresh install (the bytecode pip compiled), the trace in the page cache."""
        for f in xplanes(run):
            f.read_bytes()
        cmd, env = self.tfadvisor_cmd(run)
        env["TFADVISOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="rules-cache-", dir=self.scratch)  # empty: a true first
        return measure(cmd, env, self.scratch / "first.out")

    def tfadvisor_cmd(self, run: Path) -> tuple[list[str], dict[str, str]]:
        env = dict(self.env)
        if self.tfadvisor:
            return [str(self.tfadvisor), "analyze", str(run), "--format", "json", "--quiet"], env
        env["PYTHONPATH"] = str(ROOT)
        return [sys.executable, "-m", "tfadvisor", "analyze", str(run), "--format", "json", "--quiet"], env

    def run_tool(self, tool: str, run: Path, prefix: Path | None) -> dict:
        out = self.scratch / f"{tool}.out"
        if tool == "tfadvisor":
            cmd, env = self.tfadvisor_cmd(run)
            if prefix is not None:
                env["PYTHONPYCACHEPREFIX"] = str(prefix)
                # the rules' cache beside the bytecode: empty for the cold run, as a fresh install's
                env["TFADVISOR_CACHE_DIR"] = str(prefix / "tfadvisor-cache")
            return measure(cmd, env, out)
        if tool == "xprof":
            copies = self.scratch / "xprof_copy"
            shutil.rmtree(copies, ignore_errors=True)
            copies.mkdir()
            files = []
            for f in xplanes(run):
                shutil.copyfile(f, copies / f.name)
                files.append(str(copies / f.name))
            env = dict(self.env, PYTHONPYCACHEPREFIX=str(prefix))
            try:
                return measure([sys.executable, "-c", XPROF, str(out), *files], env, out.with_suffix(".log"))
            finally:
                shutil.rmtree(copies, ignore_errors=True)
        if tool == "xprof-rs":
            return measure([str(self.xprof_rs), "get_overview", str(run)], self.env, out)
        if tool == FLOOR:  # this Python importing numpy and nothing else: what every tfadvisor run costs at least
            return measure([sys.executable, "-c", "import numpy"], dict(self.env, PYTHONPYCACHEPREFIX=str(prefix)),
                           out)
        raise ValueError(tool)

    def help_time(self, runs: int = 3) -> dict:
        """``tfadvisor --help``, whole process (warm: the bytecode of the runs before)."""
        cmd, env = self.tfadvisor_cmd(ROOT)
        cmd = cmd[: cmd.index("analyze")] + ["--help"]
        res = [measure(cmd, env, self.scratch / "help.out") for _ in range(runs + 1)][1:]
        return min(res, key=lambda r: r["s"])

    def size_row(self, tool: str, name: str, run: Path, runs: int = 1) -> dict:
        """The best of ``runs`` warm runs of ``tool`` on ``run`` (its bytecode compiled by a run on the small trace
        first); a run that fails (out of the address space allowed) is returned with ``failed`` set."""
        prefix = self.scratch / f"pycache-sizes-{tool}"
        if not prefix.exists():
            prefix.mkdir()
            if tool != "xprof-rs":
                self.run_tool(tool, SMALL, prefix)
        for f in xplanes(run):  # into the page cache
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        try:
            each = [self.run_tool(tool, run, prefix) for _ in range(max(runs, 1))]
        except Failed as err:
            print(f"  {name}: {tool}: FAILED after {err.s:.1f} s at {err.rss_mb:.0f} MB: {str(err)[-300:]}", flush=True)
            return {"tool": tool, "trace": name, "failed": True, "s": err.s, "rss_mb": err.rss_mb}
        events = None
        if tool == "tfadvisor":
            events = json.loads((self.scratch / "tfadvisor.out").read_text())["summary"]["loaded"]["events"]
        best = min(each, key=lambda r: r["s"])
        r = {"s": best["s"], "rss_mb": max(w["rss_mb"] for w in each), "all_s": [round(w["s"], 3) for w in each]}
        print(f"  {name}: {tool}: warm {r['s']:.2f} s ({', '.join(f'{s:.2f}' for s in r['all_s'])}), "
              f"peak RSS {r['rss_mb']:.0f} MB", flush=True)
        return {"tool": tool, "trace": name, "failed": False, "events": events, **r}

    def tools(self) -> list[str]:
        return ["tfadvisor"] + (["xprof"] if self.use_xprof else []) + (["xprof-rs"] if self.xprof_rs else [])

    def small_tools(self) -> list[str]:
        """On the small trace, also the floor: tfadvisor's columns and analyses are numpy, so no run of it is faster
        than this interpreter importing numpy (its ratio to xprof is the best tfadvisor's could be)."""
        return self.tools() + [FLOOR]

    def bench(self, name: str, run: Path, runs: int, tools: list[str] | None = None) -> list[dict]:
        for f in xplanes(run):  # into the page cache for every tool alike
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass
        rows = []
        for tool in tools or self.tools():
            first, firsts = None, []
            if tool == "tfadvisor" and self.first_runs:  # taken on the first trace benched (the small one)
                firsts, self.first_runs = self.first_runs, []
                first = min(firsts, key=lambda r: r["s"])  # best of the fresh installs' first runs
            prefix = Path(tempfile.mkdtemp(prefix=f"pycache-{tool}-", dir=self.scratch))
            cold = self.run_tool(tool, run, prefix)
            warm = [self.run_tool(tool, run, prefix) for _ in range(runs)]
            best = min(warm, key=lambda r: r["s"]) if warm else cold
            events = None
            if tool == "tfadvisor":  # the events it decoded, from its own JSON (for cost per event)
                summary = json.loads((self.scratch / "tfadvisor.out").read_text())["summary"]
                events = summary["loaded"]["events"]
            rows.append({"tool": tool, "trace": name, "events": events, "first_s": first and first["s"],
                         "cold_s": cold["s"], "warm_s": best["s"],
                         "warm_all_s": [round(w["s"], 3) for w in warm], "cold_rss_mb": cold["rss_mb"],
                         "rss_mb": max([cold["rss_mb"]] + [w["rss_mb"] for w in warm])})
            if firsts:
                rows[-1]["first_all_s"] = [round(r["s"], 3) for r in firsts]
            each = ", ".join(f"{w['s']:.2f}" for w in warm)
            said = f"first after install {first['s']:.2f} s, " if first else ""
            print(f"  {name}: {tool}: {said}cold {cold['s']:.2f} s, warm {best['s']:.2f} s ({each}), "
                  f"peak RSS {rows[-1]['rss_mb']:.0f} MB", flush=True)
        return rows


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def table(rows: list[dict]) -> str:
    out = ["| tool | trace | first run after pip install s | cold s | warm s | peak RSS MB | warm time / xprof "
           "| warm time / xprof-rs | RSS / xprof | RSS / xprof-rs |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ref = {x["tool"]: x for x in rows if x["trace"] == r["trace"]}
        xp, xr = ref.get("xprof"), ref.get("xprof-rs")
        first = f"{r['first_s']:.2f}" if r.get("first_s") else "-"
        out.append(f"| {r['tool']} | {r['trace']} | {first} | {r['cold_s']:.2f} | {r['warm_s']:.2f} | "
                   f"{r['rss_mb']:.0f} | "
                   f"{ratio(r['warm_s'], xp and xp['warm_s'])} | {ratio(r['warm_s'], xr and xr['warm_s'])} | "
                   f"{ratio(r['rss_mb'], xp and xp['rss_mb'])} | {ratio(r['rss_mb'], xr and xr['rss_mb'])} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "tfadvisor-compare",
                    help="generated traces, venvs and scratch files (never the repository)")
    ap.add_argument("--small", type=Path, default=SMALL, help="the small trace (a run directory or logdir)")
    ap.add_argument("--mb", type=float, default=263.0, help="size of the large SYNTHETIC trace")
    ap.add_argument("--small-only", action="store_true", help="skip the large trace")
    ap.add_argument("--runs", type=int, default=10, help="warm runs per tool on the small trace (best of them)")
    ap.add_argument("--large-runs", type=int, default=2, help="warm runs per tool on the large trace")
    ap.add_argument("--sizes", help="also tfadvisor alone at these sizes (MB, comma-separated): cost vs events "
                                    "(the large trace, --mb, among them)")
    ap.add_argument("--size-runs", type=int, default=1, help="warm runs per size in --sizes (best of them)")
    ap.add_argument("--install", action="store_true", help="pip-install tfadvisor and xprof-rs into fresh venvs")
    ap.add_argument("--installs", type=int, default=3,
                    help="with --install: fresh installs whose first runs are taken (the best of them is reported, "
                         "as warm is the best of --runs)")
    ap.add_argument("--tfadvisor", type=Path, help="a tfadvisor console script (default: python -m tfadvisor)")
    ap.add_argument("--xprof-rs", type=Path, help="the xprof-rs binary (default: on PATH or in --workdir)")
    ap.add_argument("--no-xprof", action="store_true", help="skip xprof (it needs ~9 GB on the large trace)")
    ap.add_argument("--keep", action="store_true", help="keep the traces generated for --sizes")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--readme", action="store_true",
                    help=f"write the tables into README.md between {README_START} and {README_END}")
    args = ap.parse_args()
    workdir = args.workdir.resolve()
    if workdir == ROOT or ROOT in workdir.parents:
        raise SystemExit("--workdir must be outside the repository")
    workdir.mkdir(parents=True, exist_ok=True)
    AS_LIMIT.append(available_bytes() - (1 << 30))
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs", flush=True)
    tools = Tools(args, workdir)
    rows = []
    try:
        rows += tools.bench(args.small.name, args.small, args.runs, tools.small_tools())
        h = tools.help_time()
        print(f"  tfadvisor --help: {h['s']:.3f} s, peak RSS {h['rss_mb']:.0f} MB", flush=True)
        if not args.small_only:
            run = trace_for(workdir, args.mb)
            size = sum(f.stat().st_size for f in xplanes(run)) / 1e6
            rows += tools.bench(f"synthetic {size:.0f} MB", run, args.large_runs)
        lin = []
        rs_per_mb = None  # xprof-rs' RSS per MB of file on the large trace: does a size fit?
        for r in rows:
            if r["tool"] == "xprof-rs" and r["trace"].startswith("synthetic"):
                rs_per_mb = r["rss_mb"] / float(r["trace"].split()[1])
        sizes = sorted({float(x) for x in args.sizes.split(",")} | {args.mb}) if args.sizes else []
        for mb in sizes:
            run = trace_for(workdir, mb)
            size = sum(f.stat().st_size for f in xplanes(run)) / 1e6
            name = f"synthetic {size:.0f} MB"
            lin.append((size, tools.size_row("tfadvisor", name, run, args.size_runs)))
            if mb == args.mb:
                ref = lin[-1][1]
            if tools.xprof_rs:
                if rs_per_mb is not None and rs_per_mb * size < AS_LIMIT[0] / 1e6:
                    lin.append((size, tools.size_row("xprof-rs", name, run, args.size_runs)))
                else:
                    need = f"~{rs_per_mb * size / 1e3:.0f} GB" if rs_per_mb else "unknown (no large-trace run)"
                    print(f"  {name}: xprof-rs: not run (needs {need}; {AS_LIMIT[0] / 1e9:.0f} GB allowed)")
                    lin.append((size, {"tool": "xprof-rs", "trace": name, "skipped": need}))
            if not args.keep and mb != args.mb:
                shutil.rmtree(run.parents[2], ignore_errors=True)  # the trace_<mb>mb directory
                print(f"  removed {run.parents[2]}", flush=True)
    finally:
        shutil.rmtree(tools.scratch, ignore_errors=True)
    after = os.getloadavg()
    shown = " ".join(a for i, a in enumerate(sys.argv[1:]) if a != "--json" and sys.argv[i:i + 1] != ["--json"])
    out = [f"Measured {time.strftime('%Y-%m-%d')} by `python benchmarks/compare.py {shown}` on "
           f"{os.cpu_count()} CPUs (load average {load[0]:.2f} before, {after[0]:.2f} after).", "", table(rows), "",
           f"`tfadvisor --help`: {h['s']:.3f} s (best of 3, warm), peak RSS {h['rss_mb']:.0f} MB."]
    if lin:
        runs = "one warm run each" if args.size_runs <= 1 else f"best of {args.size_runs} warm runs each"
        out += ["", f"Sizes ({runs}, every size alike; each process limited to {AS_LIMIT[0] / 1e9:.1f} GB of address "
                f"space; per M events against {ref['trace']}, measured the same way):",
                "", "| trace | tool | events | warm s | s per M events | / the large trace's | peak RSS MB "
                "| RSS per MB of file |",
                "|---|---|---|---|---|---|---|---|"]
        ref_per = ref["s"] / ref["events"] * 1e6 if not ref.get("failed") and ref.get("events") else None
        events = {r["trace"]: r.get("events") for _, r in lin if r.get("events")}
        for size, r in lin:
            ev = events.get(r["trace"])
            if r.get("skipped"):
                out.append(f"| {r['trace']} | {r['tool']} | - | not run: needs {r['skipped']} | - | - | - | - |")
                continue
            if r["failed"]:
                out.append(f"| {r['trace']} | {r['tool']} | - | failed after {r['s']:.1f} s (out of memory) | - | - | "
                           f"{r['rss_mb']:.0f} | - |")
                continue
            per = f"{r['s'] / ev * 1e6:.3f}" if ev else "-"
            rel = f"{r['s'] / ev * 1e6 / ref_per:.2f}x" if ev and ref_per and r["tool"] == ref["tool"] else "-"
            evs = f"{ev / 1e6:.2f} M" if ev else "-"
            out.append(f"| {r['trace']} | {r['tool']} | {evs} | {r['s']:.2f} | {per} | {rel} | {r['rss_mb']:.0f} | "
                       f"{r['rss_mb'] / size:.2f} |")
    text = "\n".join(out)
    print("\n" + text)
    if args.readme:
        readme = ROOT / "README.md"
        doc = readme.read_text()
        start, end = doc.index(README_START) + len(README_START), doc.index(README_END)
        readme.write_text(doc[:start] + "\n" + text + "\n" + doc[end:])
        print(f"\nwrote the figures into {readme}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "sizes": [r for _, r in lin]}, indent=2))


if __name__ == "__main__":
    main()
