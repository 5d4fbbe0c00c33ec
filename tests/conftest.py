"""Shared fixtures: the sample traces and their planted truth (expected.toml)."""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tfadvisor_dev (the synthetic generator) lives beside the package, not in it
    sys.path.append(str(ROOT))
SAMPLES = ROOT / "sample_traces"


# --------------------------------------------------------------------------- serial tests under xdist
# The suite runs on two pytest-xdist workers (pyproject's addopts). A test marked ``serial`` (a TensorFlow capture
# whose figures are timed against a clock, CPU use or a competing load) runs alone: it takes the run's lock
# exclusively, every other test takes it shared (captures that test survival, not time, run side by side). A
# second, "gate" lock held while waiting for the exclusive one keeps a serial test from waiting forever behind a
# stream of shared ones.


_LOCKS_ENV = "TFADVISOR_TEST_LOCKS"


def pytest_configure(config):
    """The controller (or a run without xdist) makes the lock directory; its workers inherit it by environment. A
    pytest run started by a test (benchmarks/mutation_check.py) makes its own: sharing its parent's would let it
    wait on a serial test that waits on the parent."""
    if not hasattr(config, "workerinput"):
        os.environ[_LOCKS_ENV] = config._tfadvisor_locks = tempfile.mkdtemp(prefix="tfadvisor-tests-")


def pytest_unconfigure(config):
    made = getattr(config, "_tfadvisor_locks", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)


@contextlib.contextmanager
def _held(path: Path, mode: int):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield fd
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


#: The run lock of the test this process is running: its descriptor and mode (for :func:`alone`).
_RUN: dict[str, int] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown of a ``serial`` test with no other test running; others side by side."""
    base = Path(os.environ[_LOCKS_ENV])
    serial = item.get_closest_marker("serial") is not None
    mode = fcntl.LOCK_EX if serial else fcntl.LOCK_SH
    with contextlib.ExitStack() as stack:
        with _held(base / "gate", fcntl.LOCK_EX):
            _RUN.update(fd=stack.enter_context(_held(base / "run", mode)), mode=mode)
        try:
            return (yield)
        finally:
            _RUN.clear()


@contextlib.contextmanager
def alone():
    """No other test beside this block of a test not marked ``serial``: the run lock taken exclusively through the
    gate, as a serial test takes it, then shared again. For the timed part of a capture whose start-up (a child's
    TensorFlow import: ~2.5 s of CPU) runs beside other tests (:func:`run_timed_child`). The run lock is let go
    before the gate is waited for, never held while waiting for it (so no two tests can wait on each other). In a
    serial test (alone already), nothing to do."""
    fd, mode = _RUN["fd"], _RUN["mode"]
    if mode == fcntl.LOCK_EX:
        yield
        return
    base = Path(os.environ[_LOCKS_ENV])
    fcntl.flock(fd, fcntl.LOCK_UN)
    try:
        with _held(base / "gate", fcntl.LOCK_EX):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        with _held(base / "gate", fcntl.LOCK_EX):
            fcntl.flock(fd, fcntl.LOCK_SH)


#: The line a child of :func:`run_timed_child` prints when its start-up is done; it then waits for a line on stdin.
READY = "READY"


def run_timed_child(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 300,
                    during=contextlib.nullcontext) -> subprocess.CompletedProcess:
    """Run ``cmd``, a child that prints :data:`READY` once its start-up (imports, data) is done, then waits for a line
    on stdin before what it times: the start-up runs beside other tests, the rest :func:`alone`, with ``during()``
    entered around it (a competing load). The CompletedProcess's stdout is what came after READY."""
    import select

    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            if not select.select([child.stdout], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(cmd, timeout)
            first = child.stdout.readline()
            if first.strip() == READY:
                with alone(), during():
                    out, _ = child.communicate("go\n", timeout=timeout)
            else:  # ended (or failed) before it was ready: what it wrote is the answer
                out = first + child.communicate(timeout=timeout)[0]
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        err.seek(0)
        return subprocess.CompletedProcess(cmd, child.returncode, out, err.read())


# --------------------------------------------------------------------------- how the tests are shared out
# ``--dist loadgroup`` (pyproject's addopts): the tests of a module stay together on one worker (as ``--dist
# loadfile`` keeps them, so a module fixture such as a capture is built once), except in the modules below, whose
# tests are independent of each other and go one by one to whichever worker is free. Kept together, each of these
# ran for minutes on one worker at the end of the run while the other sat idle.

#: Modules with no costly module fixture, their tests shared out one by one.
SPLIT_MODULES = frozenset({
    "test_report_html.py",  # a CLI run and a Chromium run per sample
    "test_capture_faults.py",  # a capture per fault case
    "test_declared_stats.py",  # two analyses per sample and real trace
    "test_real_traces.py",  # five CLI runs per real trace
    "test_fuzz_cases.py",  # a CLI run per reproducer
    "test_samples_findings.py",
})
#: Modules started first: each is one long test (up to a minute) that, started last, would run alone at the end.
FIRST_MODULES = ("test_mutation_check.py", "test_bounds_checked.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group every test by its module (but those of :data:`SPLIT_MODULES`), before xdist reads the groups; then the
    order xdist hands the groups out in (pyproject's ``--no-loadscope-reorder`` keeps it): the long single tests of
    :data:`FIRST_MODULES` first, then the modules, most tests first (xdist's own reorder, which put the first
    modules among the short ones, after 85 others), then the split modules' tests one by one, which end the run in
    small pieces (xdist's reorder had put two one-test modules of 5-8 s, a wheel build and a capture, last)."""
    for item in items:
        name = item.path.name
        if name not in SPLIT_MODULES and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name))
    sizes: dict[str, int] = {}
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None:
            sizes[mark.args[0]] = sizes.get(mark.args[0], 0) + 1

    def order(item) -> tuple:
        mark = item.get_closest_marker("xdist_group")
        return item.path.name not in FIRST_MODULES, mark is None, -sizes[mark.args[0]] if mark else 0

    items.sort(key=order)  # stable: each module's own order kept


def sample_dirs() -> list[Path]:
    """Every sample directory that has an expected.toml."""
    return sorted(p.parent for p in SAMPLES.glob("*/expected.toml"))


def real_trace_dirs() -> list[Path]:
    """Every real trace in ../shared/real_traces (none where the directory is not beside the checkout)."""
    shared = ROOT.parent / "shared" / "real_traces"
    return sorted(p for p in shared.glob("*") if p.is_dir() and p.name != "bad_input") if shared.exists() else []


def trace_dirs() -> list[Path]:
    """Every sample (:func:`sample_dirs`), then every real trace (:func:`real_trace_dirs`)."""
    return sample_dirs() + real_trace_dirs()


def expected(sample: Path) -> dict:
    with open(sample / "expected.toml", "rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="session")
def samples() -> dict[str, Path]:
    return {p.name: p for p in sample_dirs()}


_LOADED: dict[str, object] = {}


def load_sample(name: str):
    """Load a sample once per test session."""
    import tfadvisor

    if name not in _LOADED:
        _LOADED[name] = tfadvisor.load(SAMPLES / name)
    return _LOADED[name]


_ANALYSED: dict[str, object] = {}


def analysed(path):
    """``tfadvisor.analyze(path)`` with its default options, once per test process (each xdist worker) for every
    module that asks: nine modules read the samples and real traces (107 traces: ~15 s of analysis each time). A
    shared result: read it, never change it; not for a test that patches the analyses first."""
    from tfadvisor.api import analyze

    return _shared(path, analyze)


def _shared(path, analyze):
    key = os.path.abspath(path)
    if key not in _ANALYSED:
        _ANALYSED[key] = analyze(path)
    return _ANALYSED[key]


#: The keyword arguments of ``tfadvisor.api.analyze`` besides ``options`` with their defaults.
_PLAIN_CALL = {"run": None, "rules_dirs": (), "progress": None, "jobs": None, "dask": None, "data": None, "trace": None}


@contextlib.contextmanager
def cli_uses_shared_analysis():
    """While active, a call of ``tfadvisor.api.analyze`` with a path and nothing else (``options`` the defaults, no
    run, rules, progress, jobs, dask, data or trace: the command line's call for ``analyze PATH`` and its report
    flags) is answered by :func:`analysed` of that path, the same call made once per process; any other call runs
    as it is. For tests of what the command line writes from an analysis, never while the analyses are patched."""
    import tfadvisor.api as api
    from tfadvisor.analyses import Options

    real = api.analyze

    def analyze(*args, **kwargs):
        plain = (len(args) == 1 and isinstance(args[0], (str, os.PathLike))
                 and kwargs.get("options") in (None, Options())
                 and all(k == "options" or (k in _PLAIN_CALL and (v is None or v == _PLAIN_CALL[k] or
                                                                  (k == "rules_dirs" and not v)))
                         for k, v in kwargs.items()))
        return _shared(args[0], real) if plain else real(*args, **kwargs)

    api.analyze = analyze
    try:
        yield
    finally:
        api.analyze = real


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory):
    """A real gcp-storage-emulator on a free loopback port, storing on disk under tmp."""
    try:
        import gcp_storage_emulator  # noqa: F401
    except ImportError:
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "gcp-storage-emulator"],
                           capture_output=True, text=True)
        try:
            import gcp_storage_emulator  # noqa: F401
        except ImportError:
            pytest.skip(f"gcp-storage-emulator cannot be installed: {(r.stderr or r.stdout).strip()[-300:]}")
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pytest.skip("gcsfs is not installed (pip install 'tfadvisor[gcs]')")
    base = tmp_path_factory.mktemp("gcs")
    port = free_port()
    env = dict(os.environ, STORAGE_BASE=str(base))
    proc = subprocess.Popen([sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1",
                             "--port", str(port), "--default-bucket", "bkt", "-q"], cwd=base, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.skip(f"the GCS emulator did not start: {proc.stderr.read().decode()[-300:]}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def capture_env(**extra: str) -> dict[str, str]:
    """Environment for a child that captures with TensorFlow: this checkout importable, TF quiet."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("TFADVISOR_CAPTURE", None)
    env.pop("TFADVISOR_SYSTEM", None)
    env.update(extra)
    return env


#: Marks of a test module that captures with real TensorFlow in child processes.
CAPTURE_MARKS = [
    pytest.mark.slow,
    pytest.mark.serial,  # what these captures measure is timed: no other test beside them
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                       reason="capture tests need TensorFlow (pip install 'tfadvisor[tf-cpu]')"),
]


def run_capture_script(code: str, *args: str, timeout: float = 300) -> str:
    """Run a capture script (``python -c code args...``) with this checkout importable and TensorFlow quiet; the
    run directory it prints on a ``RUN <dir>`` line."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env, timeout=timeout, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return next(ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("RUN "))


def train_markers(run_dir: str) -> list[int]:
    """step_num of the `train` step markers (events with stat _r) in a run's host planes."""
    import tfadvisor

    trace = tfadvisor.load(run_dir)
    out: list[int] = []
    for plane in trace.host_planes:
        roots = plane.stat("_r")
        rows = roots.rows[plane.names_of(roots.rows) == "train"]
        step_col = plane.stat("step_num")
        by_row = dict(zip(step_col.rows.tolist(), step_col.integers().tolist()))
        out.extend(by_row[r] for r in rows.tolist() if r in by_row)
    return sorted(out)


def run_metadata(run_dir: str) -> dict:
    """The run's tfadvisor_run.json, as the capture wrote it."""
    from tfadvisor.io.discovery import RUN_METADATA_FILE

    with open(os.path.join(run_dir, RUN_METADATA_FILE), encoding="utf-8") as fh:
        return json.load(fh)
