"""Run fuzz inputs (:mod:`fuzzlib`) through tfadvisor's real CLI in child processes; classify the outcomes.

Each of ``jobs`` long-lived worker processes (this file, ``--worker``) runs ``tfadvisor.cli.app.main()`` with
``analyze LOGDIR --format json`` per input, under ``RLIMIT_AS`` and with file descriptors 1 and 2 sent to
files, so a segfault, abort, hang or memory blow-up ends the worker (restarted) and is reported, never
the runner. Outcomes:

* ``ok``: exit 0, nothing on stderr, one JSON document with no NaN/inf, every ``%`` in 0..100,
  no negative time/size/count, no ``nan``/``inf`` in a finding's text;
* ``trace_error``: exit 2, nothing on stdout, exactly one stderr line ``tfadvisor: <path under the
  logdir>: ...``;
* ``failure``: anything else (crash, hang, other exit code, extra stderr lines such as numpy warnings,
  bad JSON values, a write into the logdir, peak RSS over the limit, or a different JSON when the
  same input is analysed again in a fresh process with another hash seed).
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WARMUP = ROOT / "sample_traces" / "keras_fit_callback"
#: "Percentages" that are ratios, not shares, and may legitimately exceed 100 (still >= 0):
#: ``load_imbalance_pct`` = (max - min) / median of the hosts' compute time per step; the tf.data work
#: shares sum the work of several threads (and pipelines) per step, so on 2+ cores they exceed the step time.
PCT_OVER_100_OK = {"load_imbalance_pct", "device_imbalance_pct", "tfdata_work_pct", "tfdata_map_pct",
                   "tfdata_recompute_pct",
                   "tfdata_vectorizable_map_pct", "tfdata_read_pct", "tfdata_pyfunc_pct",
                   "tfdata_sequential_map_pct", "tfdata_generator_pct",
                   "work_cv_pct"}  # a coefficient of variation: a spread, not a share
PCT_TOLERANCE = 1e-6
NONNEG_SUFFIXES = ("_ms", "_us", "_s", "_bytes", "_count", "_mbps", "_mb")
NONNEG_UNITS = {"ms", "us", "s", "bytes", "count", "MB", "MB/s", "Hz", "W"}


# --------------------------------------------------------------------------- worker (child process)


def _peak_reset() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak_mb() -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


class _Cli:
    """``tfadvisor.cli.app.main()`` as a function of argv, reusable in one process."""

    def __init__(self) -> None:
        from tfadvisor.cli import app as cli

        self.cli = cli

    def __call__(self, args: list[str]) -> int:
        sys.argv = ["tfadvisor", *args]
        try:
            self.cli.main()
        except SystemExit as exc:
            code = exc.code
            if code is None or isinstance(code, int):
                return code or 0
            print(code, file=sys.stderr)
            return 1
        return 0


def _traceback_of(cli: _Cli, args: list[str]) -> str:
    """Run again with TFADVISOR_DEBUG=1 (the CLI re-raises) and return the traceback, output discarded."""
    import traceback

    os.environ["TFADVISOR_DEBUG"] = "1"
    null = os.open(os.devnull, os.O_WRONLY)
    saved = os.dup(1), os.dup(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(null, 1)
    os.dup2(null, 2)
    text = ""
    try:
        cli(args)
    except BaseException:  # noqa: BLE001 - the exception is what we want
        text = traceback.format_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)
        del os.environ["TFADVISOR_DEBUG"]
    return text[-6000:]


def worker_main(result_fd: int, mem_limit: int) -> None:
    """Read tasks (JSON lines) on stdin; write one result line per task to ``result_fd``."""
    import faulthandler
    import resource
    import traceback
    import warnings

    if mem_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
    faulthandler.enable(file=sys.stderr, all_threads=True)
    cli = _Cli()
    saved = os.dup(1), os.dup(2)

    def run(args: list[str], out: str, err: str, dump_after: float) -> tuple[int, float]:
        fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        os.close(fo)
        os.close(fe)
        faulthandler.dump_traceback_later(max(0.5, dump_after), exit=False)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():  # on exit the "shown once" registries reset: each input starts fresh
                rc = cli(args)
        except BaseException:  # noqa: BLE001 - what escaped main() would be a traceback and exit 1
            traceback.print_exc()
            rc = 1
        wall = time.perf_counter() - t0
        faulthandler.cancel_dump_traceback_later()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        return rc, wall

    scratch = tempfile.mkdtemp(prefix="fuzzworker_")
    run(["analyze", str(WARMUP), "--format", "json"], f"{scratch}/o", f"{scratch}/e", 600)  # JIT/cache warm-up
    shutil.rmtree(scratch, ignore_errors=True)
    os.write(result_fd, b'{"ready": true}\n')
    for line in sys.stdin:
        task = json.loads(line)
        args = ["analyze", task["logdir"], "--format", "json"]
        _peak_reset()
        rc, wall = run(args, task["out"], task["err"], task["dump_after"])
        res = {"rc": rc, "wall_s": round(wall, 3), "rss_mb": _peak_mb()}
        os.write(result_fd, (json.dumps(res) + "\n").encode())
        if rc not in (0, 2):
            tb = _traceback_of(cli, args)
            os.write(result_fd, (json.dumps({"traceback": tb}) + "\n").encode())


# --------------------------------------------------------------------------- worker handle (parent)


class Worker:
    """One worker process: start, send a logdir, wait for its result with a timeout, restart after a death."""

    def __init__(self, scratch: Path, mem_limit: int, hash_seed: int, env: dict[str, str] | None = None) -> None:
        self.scratch = scratch
        self.mem_limit = mem_limit
        self.hash_seed = hash_seed
        self.env = env or {}
        self.proc: subprocess.Popen | None = None
        self.rfd = -1
        self.buf = b""
        self.restarts = 0
        scratch.mkdir(parents=True, exist_ok=True)

    def start(self, timeout: float = 900) -> None:
        r, w = os.pipe()
        env = {**os.environ, "PYTHONHASHSEED": str(self.hash_seed), **self.env}
        env.pop("TFADVISOR_DEBUG", None)
        log = open(self.scratch / "worker.log", "ab")
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__)), "--worker", str(w), str(self.mem_limit)],
                                     stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(w,), env=env,
                                     cwd=str(ROOT), start_new_session=True)
        log.close()
        os.close(w)
        self.rfd, self.buf = r, b""
        msg = self._read(timeout)
        if msg is None or not msg.get("ready"):
            tail = (self.scratch / "worker.log").read_bytes()[-3000:].decode(errors="replace")
            self.stop()
            raise RuntimeError(f"fuzz worker did not start: {tail}")

    def _read(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.rfd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.rfd, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def stop(self) -> int | None:
        """Kill the worker's process group; return its exit status (negative: the signal)."""
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            rc = self.proc.wait()
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc = None
        if self.rfd >= 0:
            os.close(self.rfd)
            self.rfd = -1
        return rc

    def run(self, logdir: Path, timeout: float,
            dump_after: float | None = None) -> tuple[dict | None, str, bytes, bytes]:
        """(result or None, "ok"|"hang"|"died:<rc>", stdout, stderr) for one logdir; the worker writes a
        stack dump into stderr when the input runs longer than ``dump_after`` (default 0.85 x timeout)."""
        if self.proc is None:
            self.start()
            self.restarts += 1
        out, err = self.scratch / "out", self.scratch / "err"
        dump = min(dump_after or timeout, timeout) * (0.85 if dump_after is None else 1.0)
        task = {"logdir": str(logdir), "out": str(out), "err": str(err), "dump_after": dump}
        try:
            self.proc.stdin.write((json.dumps(task) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        res = self._read(timeout)
        state = "ok"
        if res is None:
            alive = self.proc.poll() is None
            rc = self.stop()
            state = "hang" if alive else f"died:{rc}"
        elif res["rc"] not in (0, 2):
            tb = self._read(max(timeout, 30))
            if tb is None:
                self.stop()
            else:
                res["traceback"] = tb.get("traceback", "")
        return res, state, _read_file(out), _read_file(err)


def _read_file(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


# --------------------------------------------------------------------------- classification


@dataclass
class Outcome:
    """What one input did."""

    index: int
    kind: str  # ok | trace_error | failure
    klass: str = ""  # failure class (a short signature), "" otherwise
    problems: list[str] = field(default_factory=list)
    rc: int | None = None
    wall_s: float | None = None
    rss_mb: float | None = None
    stderr: str = ""
    traceback: str = ""
    describe: str = ""
    saved: str = ""  # where the failing input was saved
    family: str = ""
    text: bytes = field(default=b"", repr=False)  # stdout (exit 0) or stderr: what must be identical on a second run


_FRAME_TB = re.compile(r'File "([^"]*tfadvisor/[^"]+)", line (\d+), in (\S+)')
_FRAME_FH = re.compile(r'File "([^"]*tfadvisor/[^"]+)", line (\d+) in (\S+)')
_WARNING = re.compile(r"^(\S+?):(\d+): (\w+(?:Warning|Error)): (.*)$")


def _short(path: str) -> str:
    i = path.rfind("tfadvisor/")
    return path[i:] if i >= 0 else os.path.basename(path)


def frame_of(text: str) -> str:
    """The innermost tfadvisor frame of a Python traceback, or the first of a faulthandler dump."""
    tb = _FRAME_TB.findall(text)
    if tb:
        f, n, fn = tb[-1]
        return f"{_short(f)}:{n} {fn}"
    fh = _FRAME_FH.findall(text)
    if fh:
        f, n, fn = fh[0]
        return f"{_short(f)}:{n} {fn}"
    return "?"


def _stderr_sig(line: str) -> str:
    m = _WARNING.match(line.strip())
    if m:
        return f"{m.group(3)}: {m.group(4)[:60]} @{_short(m.group(1))}:{m.group(2)}"
    return re.sub(r"\d+", "N", line.strip())[:80]


def _norm_path(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


def json_problems(doc: object) -> list[str]:
    """NaN/inf, % outside 0..100, negative times/sizes/counts, nan/inf in finding text.

    A key's rule comes from its name (``*_pct`` -> 0..100; ``*_ms``, ``*_s``, ``*_bytes``, ``*_count``, ...
    -> >= 0) or from the JSON's own ``units`` table; values inside a dict or list inherit the rule of the
    nearest key that has one (``breakdown_pct: {input: ..}``, ``step_time_ms: {mean: ..}``)."""
    probs: list[str] = []
    units = doc.get("units", {}) if isinstance(doc, dict) else {}
    units = units if isinstance(units, dict) else {}

    def rule_for(key: str) -> str | None:
        if key in PCT_OVER_100_OK:
            return "nonneg"
        if key.endswith("_pct") or units.get(key) == "%":
            return "pct"
        if key.endswith(NONNEG_SUFFIXES) or units.get(key) in NONNEG_UNITS:
            return "nonneg"
        return None

    def walk(o: object, path: str, rule: str | None) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                walk(v, f"{path}.{k}", rule_for(str(k)) or rule)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                walk(v, f"{path}[{i}]", rule)
        elif isinstance(o, float) and not math.isfinite(o):
            probs.append(f"json:nonfinite:{_norm_path(path)} = {o}")
        elif isinstance(o, (int, float)) and not isinstance(o, bool):
            if rule == "pct" and not (-PCT_TOLERANCE <= o <= 100 + PCT_TOLERANCE):
                probs.append(f"json:pct:{_norm_path(path)} = {o}")
            elif rule == "nonneg" and o < 0:
                probs.append(f"json:negative:{_norm_path(path)} = {o}")

    walk(doc, "", None)
    for f in doc.get("findings", []) if isinstance(doc, dict) else []:
        for part in ("title", "message"):
            text = str(f.get(part, "")) if isinstance(f, dict) else ""
            if re.search(r"(?<![\w.])-?(nan|inf)(?!\w)", text, re.IGNORECASE):
                probs.append(f"json:nan-text:findings[].{part} ({f.get('rule')}): {text[:100]}")
    return probs


def _nonfinite(token: str) -> float:
    return float(token)  # keeps NaN/Infinity so the walk reports them


def _split_timeout_dump(text: str) -> tuple[str, str]:
    """(stderr without faulthandler's "Timeout (...)!" stack dump, the dump) - the dump marks a slow input."""
    lines = text.splitlines(keepends=True)
    keep, dump, inside = [], [], False
    for ln in lines:
        if ln.startswith("Timeout (") and ln.rstrip().endswith(")!"):
            inside = True
            dump.append(ln)
            continue
        if inside and (ln.startswith(("Thread 0x", "Current thread", "  File ", "  <")) or not ln.strip()):
            dump.append(ln)
            continue
        inside = False
        keep.append(ln)
    return "".join(keep), "".join(dump)


def classify(index: int, logdir: Path, res: dict | None, state: str, out: bytes, err: bytes,
             changed: list[str], rss_limit_mb: float, slow_s: float = math.inf) -> Outcome:
    """Turn one run into an :class:`Outcome`."""
    errtext, dump = _split_timeout_dump(err.decode(errors="replace"))
    lines = [ln for ln in errtext.splitlines() if ln.strip()]
    o = Outcome(index=index, kind="failure", stderr=(errtext + dump)[-4000:])
    if res is None:
        if state == "hang":
            o.klass = f"hang@{frame_of(dump)}"
        else:
            rc = int(state.split(":", 1)[1]) if state.split(":", 1)[1].lstrip("-").isdigit() else None
            sig = signal.Signals(-rc).name if rc is not None and rc < 0 else f"exit {rc}"
            o.klass = f"crash:{sig}@{frame_of(errtext)}"
            o.rc = rc
        o.problems.append(o.klass)
        return o
    o.rc, o.wall_s, o.rss_mb = res["rc"], res.get("wall_s"), res.get("rss_mb")
    o.traceback = res.get("traceback", "")
    probs: list[str] = []
    if o.rc == 0:
        try:
            doc = json.loads(out, parse_constant=_nonfinite)
        except ValueError as exc:
            probs.append(f"json:invalid ({exc})")
        else:
            probs += json_problems(doc)
        if lines:
            probs.append(f"stderr:{_stderr_sig(lines[0])}")
    elif o.rc == 2:
        if len(lines) != 1:
            extra = [ln for ln in lines if not ln.startswith("tfadvisor: ")] or lines[1:]
            probs.append(f"trace_error:{len(lines)} stderr lines:{_stderr_sig(extra[0]) if extra else ''}")
        elif not lines[0].startswith("tfadvisor: ") or str(logdir) not in lines[0]:
            probs.append(f"trace_error:names no file:{_stderr_sig(lines[0])[:60]}")
        if out.strip():
            probs.append("trace_error:stdout not empty")
    else:
        m = re.search(r"internal error: (\w+)", errtext)
        what = m.group(1) if m else f"exit {o.rc}"
        probs.append(f"exception:{what}@{frame_of(o.traceback or errtext)}")
    if changed:
        probs.append(f"logdir-write:{changed[0]}")
    if o.rss_mb is not None and o.rss_mb > rss_limit_mb:
        probs.append(f"rss>{rss_limit_mb:.0f}MB")
    if dump or (o.wall_s is not None and o.wall_s > slow_s):
        probs.insert(0, f"slow>{slow_s:.0f}s@{frame_of(dump)}" if dump else f"slow>{slow_s:.0f}s")
    if not probs:
        o.kind = "ok" if o.rc == 0 else "trace_error"
        return o
    o.problems = probs
    o.klass = re.sub(r" = .*$", "", probs[0])
    return o


def _diff_path(a: object, b: object, path: str = "") -> str:
    """The first key path where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return f"{path}.{k}"
            if a[k] != b[k]:
                return _diff_path(a[k], b[k], f"{path}.{k}")
        return path + "(order)"
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}[len {len(a)} vs {len(b)}]"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return _diff_path(x, y, f"{path}[{i}]")
    return path or "(top)"


# --------------------------------------------------------------------------- the runner


@dataclass
class Report:
    """All outcomes of a fuzz run, with a summary."""

    seed: int
    outcomes: list[Outcome]
    repeats: int = 0
    repeats_identical: int = 0
    wall_s: float = 0.0
    worker_restarts: int = 0

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind == "failure"]

    def summary(self, examples: int = 1) -> str:
        kinds = Counter(o.kind for o in self.outcomes)
        walls = sorted(o.wall_s for o in self.outcomes if o.wall_s is not None)
        rss = [o.rss_mb for o in self.outcomes if o.rss_mb is not None]
        lines = [f"fuzz seed={self.seed}: {len(self.outcomes)} runs in {self.wall_s:.0f} s: "
                 + ", ".join(f"{k} {kinds[k]}" for k in ("ok", "trace_error", "failure")),
                 f"  determinism: {self.repeats_identical}/{self.repeats} repeated inputs gave identical output",
                 f"  per input: median {walls[len(walls) // 2] if walls else 0:.2f} s, max {max(walls, default=0):.2f}"
                 f" s; peak RSS max {max(rss, default=0):.0f} MB; worker restarts {self.worker_restarts}"]
        fams = sorted({o.family for o in self.outcomes if o.family})
        lines.append("  by family: " + ", ".join(
            f"{f} {sum(o.family == f for o in self.outcomes)} "
            f"(fail {sum(o.family == f and o.kind == 'failure' for o in self.outcomes)}, "
            f"{sum(o.wall_s or 0 for o in self.outcomes if o.family == f):.0f} s)" for f in fams))
        classes = Counter(o.klass for o in self.failures)
        for klass, n in classes.most_common():
            lines.append(f"  FAIL x{n}: {klass}")
            for o in [o for o in self.failures if o.klass == klass][:examples]:
                lines.append("    " + o.describe.replace("\n", "\n    "))
                if o.saved:
                    lines.append(f"    saved: {o.saved}")
                for p in o.problems[:3]:
                    lines.append(f"    problem: {p[:200]}")
                first = [ln for ln in (o.traceback or o.stderr).splitlines() if ln.strip()]
                for ln in (first[-4:] if o.traceback else first[:4]):
                    lines.append(f"    | {ln[:200]}")
        return "\n".join(lines)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:80].strip("_") or "failure"


def save_failure(out_dir: Path, o: Outcome, logdir: Path) -> str:
    """Copy the failing input to ``out_dir/<class>/<index>/`` with a README saying what happened."""
    dest = out_dir / _slug(o.klass) / f"input_{o.index}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(logdir, dest / "logdir")
    readme = [f"class: {o.klass}", "", o.describe, "", "problems:", *[f"  {p}" for p in o.problems],
              f"exit code: {o.rc}   wall: {o.wall_s} s   peak RSS: {o.rss_mb} MB", "",
              f"command: tfadvisor analyze {dest / 'logdir'} --format json", "", "stderr (head):",
              *o.stderr.splitlines()[:30]]
    if o.traceback:
        readme += ["", "traceback (TFADVISOR_DEBUG=1):", *o.traceback.splitlines()[-30:]]
    (dest / "README").write_text("\n".join(readme) + "\n")
    return str(dest)


def run_fuzz(seed: int, indices: Iterable[int], *, jobs: int = 2, timeout: float = 20.0,
             mem_limit: int = 3 << 30, rss_limit_mb: float = 1500.0, slow_s: float = 10.0, repeat_every: int = 10,
             out_dir: Path | None = None, scratch: Path | None = None,
             progress: Callable[[Outcome], None] | None = None, seeds=None) -> Report:
    """Generate and run the inputs ``indices`` of fuzz run ``seed`` on ``jobs`` workers.

    Every ``repeat_every``-th input that passed is analysed again, right away, by one more worker
    process (started with the others, another hash seed) and must give byte-identical output. (Right
    away and not in a second pass: in a tree being edited, a later pass would compare two versions.)"""
    import fuzzlib

    seeds = seeds if seeds is not None else fuzzlib.load_seeds()
    own_scratch = scratch is None
    scratch = Path(scratch or tempfile.mkdtemp(prefix="tfadvisor_fuzz_"))
    order = list(indices)
    repeat_set = {i for n, i in enumerate(order) if repeat_every and n % repeat_every == 0}
    first: dict[int, Outcome] = {}
    again: dict[int, Outcome] = {}
    lock, repeat_lock = threading.Lock(), threading.Lock()
    workers = [Worker(scratch / f"w{k}", mem_limit, hash_seed=1 + k) for k in range(max(1, jobs))]
    repeater = Worker(scratch / "repeat", mem_limit, hash_seed=1000) if repeat_set else None
    t0 = time.monotonic()

    def check(worker: Worker, index: int, logdir: Path, describe: str, family: str) -> Outcome:
        before = fuzzlib.snapshot(logdir)
        res, state, out, err = worker.run(logdir, timeout, dump_after=min(slow_s, 0.85 * timeout))
        changed = sorted(set(before.items()) ^ set(fuzzlib.snapshot(logdir).items()))
        o = classify(index, logdir, res, state, out, err, [str(c[0]) for c in changed], rss_limit_mb, slow_s)
        o.describe, o.family = describe, family
        o.text = out if o.rc == 0 else err
        return o

    def one(worker: Worker, index: int) -> None:
        logdir = scratch / "in" / f"input_{index}"
        if logdir.exists():
            shutil.rmtree(logdir)
        try:
            inp = fuzzlib.make_input(seeds, seed, index)
            inp.write(logdir)
        except Exception as exc:  # noqa: BLE001 - a bug of the generator: reported, the run goes on
            o = Outcome(index=index, kind="failure", klass=f"fuzzlib:{type(exc).__name__}: {exc}"[:120],
                        describe=f"seed={seed} index={index} (the generator failed)")
            o.problems = [o.klass]
            with lock:
                first[index] = o
            return
        o = check(worker, index, logdir, inp.describe(), inp.family)
        r = None
        if index in repeat_set and o.kind != "failure" and repeater is not None:
            with repeat_lock:
                r = check(repeater, index, logdir, inp.describe() + "\n  (analysed again in another process)",
                          inp.family)
            if r.kind != "failure" and r.text != o.text:
                try:
                    where = _diff_path(json.loads(o.text), json.loads(r.text))
                except ValueError:
                    where = "(stderr)"
                r.kind, r.klass = "failure", f"nondeterministic:{_norm_path(where)}"
                r.problems = [r.klass, f"first run: {o.text[:300]!r}", f"second run: {r.text[:300]!r}"]
        with lock:
            first[index] = o
            if r is not None:
                again[index] = r
            for x in (o, r):
                if x is not None and x.kind == "failure" and out_dir is not None:
                    x.saved = save_failure(out_dir, x, logdir)
        shutil.rmtree(logdir, ignore_errors=True)
        if progress is not None:
            progress(o)
            if r is not None and r.kind == "failure":
                progress(r)

    queue = list(reversed(order))

    def loop(w: Worker) -> None:
        while True:
            with lock:
                if not queue:
                    return
                index = queue.pop()
            one(w, index)

    try:
        for w in workers + ([repeater] if repeater else []):
            w.start()
        threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for w in workers + ([repeater] if repeater else []):
            w.stop()
        if own_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    bad_repeats = [o for o in again.values() if o.kind == "failure"]
    return Report(seed=seed, outcomes=[first[i] for i in order if i in first] + bad_repeats, repeats=len(again),
                  repeats_identical=len(again) - len(bad_repeats), wall_s=time.monotonic() - t0,
                  worker_restarts=sum(w.restarts for w in workers + ([repeater] if repeater else [])))


def check_logdirs(logdirs: Iterable[Path], *, timeout: float = 30.0, mem_limit: int = 3 << 30,
                  rss_limit_mb: float = 1500.0, slow_s: float = 10.0, scratch: Path | None = None) -> list[Outcome]:
    """Classify existing logdirs (e.g. saved reproducers) with the same worker and rules, one worker."""
    import fuzzlib

    scratch = Path(scratch or tempfile.mkdtemp(prefix="tfadvisor_fuzzcheck_"))
    w = Worker(scratch / "w0", mem_limit, hash_seed=1)
    w.start()
    out = []
    try:
        for n, logdir in enumerate(logdirs):
            before = fuzzlib.snapshot(Path(logdir))
            res, state, so, se = w.run(Path(logdir), timeout, dump_after=min(slow_s, 0.85 * timeout))
            changed = sorted(set(before.items()) ^ set(fuzzlib.snapshot(Path(logdir)).items()))
            o = classify(n, Path(logdir), res, state, so, se, [str(c[0]) for c in changed], rss_limit_mb, slow_s)
            o.describe = str(logdir)
            out.append(o)
    finally:
        w.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return out


if __name__ == "__main__" and len(sys.argv) >= 4 and sys.argv[1] == "--worker":
    sys.path.insert(0, str(HERE))
    worker_main(int(sys.argv[2]), int(sys.argv[3]))
