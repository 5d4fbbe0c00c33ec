"""Run fuzz inputs (:mod:`fuzzlib`) through tfadvisor's real CLI in child processes; classify the outcomes.

Each of ``jobs`` long-lived worker processes (this file, ``--worker``) runs ``tfadvisor.cli.main()`` with
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
#: Percentages that may legitimately exceed 100 (documented so): the process's CPU as % of one core.
PCT_OVER_100_OK = {"system_proc_cpu_pct"}
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
    """``tfadvisor.cli.main()`` as a function of argv, reusable in one process."""

    def __init__(self) -> None:
        from tfadvisor import cli

        self.cli = cli
        self.groups = len(cli.app.registered_groups)
        self.commands = len(cli.app.registered_commands)

    def __call__(self, args: list[str]) -> int:
        app = self.cli.app
        del app.registered_groups[self.groups:]  # main() registers its optional commands each call
        del app.registered_commands[self.commands:]
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

    def run(args: list[str], out: str, err: str, timeout: float) -> tuple[int, float]:
        fo = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        fe = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        os.close(fo)
        os.close(fe)
        faulthandler.dump_traceback_later(max(1.0, timeout * 0.85), exit=False)
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
        rc, wall = run(args, task["out"], task["err"], task["timeout"])
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

    def run(self, logdir: Path, timeout: float) -> tuple[dict | None, str, bytes, bytes]:
        """(result or None, "ok"|"hang"|"died:<rc>", stdout, stderr) for one logdir."""
        if self.proc is None:
            self.start()
            self.restarts += 1
        out, err = self.scratch / "out", self.scratch / "err"
        task = {"logdir": str(logdir), "out": str(out), "err": str(err), "timeout": timeout}
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
            return "free"
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


def classify(index: int, logdir: Path, res: dict | None, state: str, out: bytes, err: bytes,
             changed: list[str], rss_limit_mb: float) -> Outcome:
    """Turn one run into an :class:`Outcome`."""
    errtext = err.decode(errors="replace")
    lines = [ln for ln in errtext.splitlines() if ln.strip()]
    o = Outcome(index=index, kind="failure", stderr=errtext[-4000:])
    if res is None:
        if state == "hang":
            o.klass = f"hang@{frame_of(errtext)}"
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
             mem_limit: int = 3 << 30, rss_limit_mb: float = 1500.0, repeat_every: int = 10,
             out_dir: Path | None = None, scratch: Path | None = None,
             progress: Callable[[Outcome], None] | None = None, seeds=None) -> Report:
    """Generate and run the inputs ``indices`` of fuzz run ``seed`` on ``jobs`` workers.

    Every ``repeat_every``-th input that passed is then generated and analysed again (same path) by
    fresh worker processes with other hash seeds, and must give byte-identical output."""
    import fuzzlib

    seeds = seeds if seeds is not None else fuzzlib.load_seeds()
    own_scratch = scratch is None
    scratch = Path(scratch or tempfile.mkdtemp(prefix="tfadvisor_fuzz_"))
    order = list(indices)
    first: dict[int, Outcome] = {}
    again: dict[int, Outcome] = {}
    outputs: dict[int, bytes] = {}
    restarts = 0
    lock = threading.Lock()
    t0 = time.monotonic()

    def one(worker: Worker, index: int, repeat: bool) -> None:
        inp = fuzzlib.make_input(seeds, seed, index)
        logdir = scratch / "in" / f"input_{index}"
        if logdir.exists():
            shutil.rmtree(logdir)
        inp.write(logdir)
        before = fuzzlib.snapshot(logdir)
        res, state, out, err = worker.run(logdir, timeout)
        changed = sorted(set(before.items()) ^ set(fuzzlib.snapshot(logdir).items()))
        o = classify(index, logdir, res, state, out, err, [str(c[0]) for c in changed], rss_limit_mb)
        o.describe = inp.describe() + ("\n  (analysed again in a fresh process)" if repeat else "")
        text = out if o.rc == 0 else err
        with lock:
            if repeat:
                if o.kind != "failure" and text != outputs.get(index):
                    try:
                        where = _diff_path(json.loads(outputs[index]), json.loads(text))
                    except ValueError:
                        where = "(stderr)"
                    o.kind, o.klass = "failure", f"nondeterministic:{_norm_path(where)}"
                    o.problems = [o.klass]
                again[index] = o
            else:
                outputs[index] = text
                first[index] = o
            if o.kind == "failure" and out_dir is not None:
                o.saved = save_failure(out_dir, o, logdir)
        shutil.rmtree(logdir, ignore_errors=True)
        if progress is not None:
            progress(o)

    def drain(items: list[int], repeat: bool, generation: int) -> None:
        queue = list(reversed(items))

        def loop(k: int) -> None:
            nonlocal restarts
            w = Worker(scratch / f"w{k}", mem_limit, hash_seed=1 + k + 1000 * generation)
            w.start()
            try:
                while True:
                    with lock:
                        if not queue:
                            return
                        index = queue.pop()
                    one(w, index, repeat)
            finally:
                with lock:
                    restarts += w.restarts
                w.stop()

        threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(max(1, jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    try:
        drain(order, False, 0)
        redo = [i for n, i in enumerate(order) if repeat_every and n % repeat_every == 0 and first[i].kind != "failure"]
        if redo:
            drain(redo, True, 1)
    finally:
        if own_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    bad_repeats = [o for o in again.values() if o.kind == "failure"]
    return Report(seed=seed, outcomes=[first[i] for i in order if i in first] + bad_repeats, repeats=len(again),
                  repeats_identical=len(again) - len(bad_repeats), wall_s=time.monotonic() - t0,
                  worker_restarts=restarts)


if __name__ == "__main__" and len(sys.argv) >= 4 and sys.argv[1] == "--worker":
    sys.path.insert(0, str(HERE))
    worker_main(int(sys.argv[2]), int(sys.argv[3]))
