"""Capture under faults (issue 30): each case breaks something around a real capture (real
TensorFlow, real processes) and checks what capture promises: training is never broken, the
profile is never lost, and what is said names the real cause.

``tests/test_capture_faults.py`` runs every case; ``python tests/capture_faults.py`` runs them
all (or those named) and prints a table case -> outcome.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

XPLANE = ".xplane.pb"

# A small Keras model trained on random data; the result of the script goes to the file argv[2]
# (its stdout may be unusable), the capture's logdir is argv[1].
PRELUDE = '''
import json, os, signal, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np
logdir, result_path = sys.argv[1], sys.argv[2]

def write_result(**kw):
    with open(result_path, "w") as fh:
        json.dump(kw, fh)

def data(n=256):
    rng = np.random.default_rng(0)
    return rng.random((n, 8), dtype=np.float32), rng.random((n, 1), dtype=np.float32)

def at_batch(n, action):
    """A Keras callback that calls action() when the n-th batch of the fit ends."""
    import keras

    class AtBatch(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.seen = 0
        def on_train_batch_end(self, batch, logs=None):
            self.seen += 1
            if self.seen == n:
                action()
    return AtBatch()

def model():
    import keras
    m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
    m.compile("sgd", "mse")
    return m
'''


@dataclass
class Outcome:
    ok: bool
    what: str  # what happened, in one line


@dataclass
class Case:
    name: str
    expect: str  # what capture promises here
    run: Callable[[Path], Outcome]


def env(**extra: str) -> dict[str, str]:
    """A child's environment: this checkout importable, TensorFlow quiet, no capture armed."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e["TF_CPP_MIN_LOG_LEVEL"] = "2"
    for k in ("TFADVISOR_CAPTURE", "TFADVISOR_SYSTEM"):
        e.pop(k, None)
    e.update(extra)
    return e


def write_script(work: Path, body: str) -> Path:
    path = work / "script.py"
    path.write_text(PRELUDE + textwrap.dedent(body))
    return path


def host_files(logdir: Path) -> list[Path]:
    return sorted(logdir.glob(f"plugins/profile/*/*{XPLANE}"))


def read_result(work: Path) -> dict:
    p = work / "result.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def analyse(run_dir: Path | str) -> tuple[int, dict, str]:
    """``tfadvisor analyze --format json`` on a run: (exit code, JSON or {}, stderr)."""
    p = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(run_dir), "--format", "json"],
                       capture_output=True, text=True, env=env(), timeout=300)
    try:
        doc = json.loads(p.stdout) if p.returncode == 0 else {}
    except ValueError:
        doc = {}
    return p.returncode, doc, p.stderr


def profile_ok(logdir: Path) -> tuple[bool, str]:
    """One host file under ``logdir`` that ``tfadvisor analyze`` reads, with steps; (ok, summary)."""
    files = host_files(logdir)
    if len(files) != 1:
        return False, f"{len(files)} profile file(s) under {logdir.name}"
    rc, doc, err = analyse(files[0].parent)
    if rc != 0:
        return False, f"analyze exit {rc}: {err.strip()[-200:]}"
    steps = (doc.get("metrics") or {}).get("steps_count")
    return True, f"profile written and analysable ({steps} steps)"


def run_fit_with_streams(work: Path, stdout, stderr, *, body: str) -> subprocess.CompletedProcess:
    script = write_script(work, body)
    return subprocess.run([sys.executable, str(script), str(work / "logs"), str(work / "result.json")],
                          stdout=stdout, stderr=stderr, env=env(), timeout=300)


CALLBACK_FIT = '''
import keras
from tfadvisor.keras import AdvisorCallback
x, y = data()
cb = AdvisorCallback(logdir, steps=(2, 6))
model().fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[cb])
write_result(state=cb.state, run_dir=cb.run_dir, error=cb.error)
'''


def _fit_outcome(work: Path, proc: subprocess.CompletedProcess) -> Outcome:
    res = read_result(work)
    if proc.returncode != 0 or not res:
        return Outcome(False, f"training broke: exit {proc.returncode}, result {res or 'not written'}")
    ok, what = profile_ok(work / "logs")
    return Outcome(ok and res.get("state") == "done", f"fit finished (exit 0); {what}")


def case_fit_dev_full(work: Path) -> Outcome:
    with open("/dev/full", "w") as full:
        proc = run_fit_with_streams(work, full, full, body=CALLBACK_FIT)
    return _fit_outcome(work, proc)


def _closed_pipe() -> tuple[int, int]:
    r, w = os.pipe()
    os.close(r)  # nobody reads: every write gets EPIPE
    return r, w


def case_fit_closed_pipe(work: Path) -> Outcome:
    _, w = _closed_pipe()
    try:
        proc = run_fit_with_streams(work, w, w, body=CALLBACK_FIT)
    finally:
        os.close(w)
    return _fit_outcome(work, proc)


PROFILE_CTX = '''
import tensorflow as tf
import tfadvisor
x, y = data()
m = model()
with tfadvisor.profile(logdir) as p:
    for i in range(6):
        with tfadvisor.step(i):
            m.train_on_batch(x[:16], y[:16])
write_result(run_dir=p.run_dir, error=p.error)
'''


def case_profile_dev_full(work: Path) -> Outcome:
    with open("/dev/full", "w") as full:
        proc = run_fit_with_streams(work, full, full, body=PROFILE_CTX)
    res = read_result(work)
    if proc.returncode != 0 or not res:
        return Outcome(False, f"the with-block broke: exit {proc.returncode}, result {res or 'not written'}")
    ok, what = profile_ok(work / "logs")
    return Outcome(ok, f"block finished (exit 0); {what}")


def capture_run(work: Path, script: Path, *args: str, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "tfadvisor", "capture", "run", "--logdir", str(work / "logs"), "--no-analyze",
           *args, "--", sys.executable, str(script), str(work / "logs"), str(work / "result.json")]
    return subprocess.run(cmd, stdout=stdout, stderr=stderr, text=True, env=env(), timeout=timeout)


FIT_PLAIN = '''
x, y = data()
m = model()
m.fit(x, y, batch_size=16, epochs=2, verbose=0)
write_result(done=True)
'''


def case_capture_run_stderr_full(work: Path) -> Outcome:
    script = write_script(work, FIT_PLAIN)
    with open("/dev/full", "w") as full:
        proc = capture_run(work, script, "--start-step", "2", "--steps", "4", stdout=full, stderr=full)
    res = read_result(work)
    if proc.returncode != 0 or not res.get("done"):
        return Outcome(False, f"script broke: exit {proc.returncode}, result {res or 'not written'}")
    ok, what = profile_ok(work / "logs")
    return Outcome(ok, f"script finished (exit 0); {what}")


SIGTERM_IN_PROFILE = '''
import tensorflow as tf
import tfadvisor
x, y = data()
m = model()
with tfadvisor.profile(logdir):
    for i in range(100):
        with tfadvisor.step(i):
            m.train_on_batch(x[:16], y[:16])
        if i == 5:
            os.kill(os.getpid(), signal.SIGTERM)
write_result(not_terminated=True)
'''


def case_sigterm_in_profile(work: Path) -> Outcome:
    proc = run_fit_with_streams(work, subprocess.PIPE, subprocess.PIPE, body=SIGTERM_IN_PROFILE)
    if proc.returncode != -signal.SIGTERM:
        return Outcome(False, f"exit {proc.returncode}, not ended by SIGTERM as before")
    ok, what = profile_ok(work / "logs")
    return Outcome(ok, f"ended by SIGTERM as before; {what}")


FORK_POOL = '''
import multiprocessing as mp
import keras  # imported (and Model.fit wrapped by the hook) before the fork

def child(i):
    x, y = data(64)
    model().fit(x, y, batch_size=4, epochs=1, verbose=0)
    return os.getpid()

if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        try:  # the children train TensorFlow forked from a parent that imported it: bounded, said if they hang
            pids = pool.map_async(child, [0, 1]).get(timeout=120)
        except mp.TimeoutError:
            write_result(children_hung=True)
            pool.terminate()
            os._exit(3)
    x, y = data()
    model().fit(x, y, batch_size=16, epochs=2, verbose=0)
    write_result(children=pids, parent=os.getpid())
'''


def case_fork_pool(work: Path) -> Outcome:
    """Once more when the forked children hung: their TensorFlow, forked from a parent that had imported it, is
    unarmed (nothing of ours runs in them but the wrapped fit's pid check); one CI run of seven hung there
    (2026-12-02, 300 s, a test beside it), 0 of 8 runs here. The parent hanging is not taken again."""
    hung = 0
    for attempt in range(2):
        run = work / f"try{attempt}"
        run.mkdir()
        script = write_script(run, FORK_POOL)
        proc = capture_run(run, script, "--start-step", "2", "--steps", "4")
        res = read_result(run)
        if not res.get("children_hung"):
            break
        hung += 1
    work = run
    if proc.returncode != 0 or not res:
        return Outcome(False, f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    files = host_files(work / "logs")
    armed = proc.stderr.count("profiling from step")
    if len(files) != 1 or armed != 1:
        return Outcome(False, f"{armed} process(es) armed, {len(files)} profile file(s)")
    ok, what = profile_ok(work / "logs")
    again = f" (taken again: the forked children hung {hung} time)" if hung else ""
    return Outcome(ok, f"only the parent armed (1 window, children trained unprofiled){again}; {what}")


def _service(args: list[str], timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "tfadvisor", "capture", "service", *args], capture_output=True,
                       text=True, env=env(), timeout=timeout)
    return p, time.monotonic() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line_error(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _service_outcome(p: subprocess.CompletedProcess, took: float, limit: float, words: tuple[str, ...]) -> Outcome:
    line = _one_line_error(p)
    ok = p.returncode == 2 and any(w in line for w in words) and took <= limit and "Traceback" not in p.stderr
    return Outcome(ok, f"exit {p.returncode} in {took:.1f} s (limit {limit:g} s): {line[:160]}")


DURATION_MS = 1000
MARGIN_S = 10.0


def case_service_closed_port(work: Path) -> Outcome:
    port = _free_port()
    p, took = _service([f"localhost:{port}", "--logdir", str(work / "logs"), "--duration-ms", str(DURATION_MS)])
    return _service_outcome(p, took, DURATION_MS / 1000 + MARGIN_S, ("refused",))


class _Silent(threading.Thread):
    """A TCP server that accepts connections and never says anything."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.conns: list[socket.socket] = []

    def run(self) -> None:
        try:
            while True:
                c, _ = self.sock.accept()
                self.conns.append(c)
        except OSError:
            pass

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


def case_service_silent_tcp(work: Path) -> Outcome:
    srv = _Silent()
    srv.start()
    try:
        p, took = _service([f"localhost:{srv.port}", "--logdir", str(work / "logs"), "--duration-ms",
                            str(DURATION_MS)])
    finally:
        srv.close()
    return _service_outcome(p, took, DURATION_MS / 1000 + MARGIN_S, ("not a profiler server",))


def case_service_http(work: Path) -> Outcome:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        p, took = _service([f"localhost:{srv.server_address[1]}", "--logdir", str(work / "logs"), "--duration-ms",
                            str(DURATION_MS)])
    finally:
        srv.shutdown()
        srv.server_close()
    return _service_outcome(p, took, DURATION_MS / 1000 + MARGIN_S, ("not a profiler server",))


# trains until it is killed; "ready" in the result file once it trains
TRAIN_FOREVER = '''
import tensorflow as tf
if os.environ.get("PORT"):
    tf.profiler.experimental.server.start(int(os.environ["PORT"]))
x, y = data()
m = model()
open(result_path, "w").write("ready")
while True:
    m.train_on_batch(x[:16], y[:16])
'''


def case_service_killed(work: Path) -> Outcome:
    port = _free_port()
    script = write_script(work, TRAIN_FOREVER)
    server = subprocess.Popen([sys.executable, str(script), str(work / "logs"), str(work / "result.json")],
                              env=env(PORT=str(port)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not (work / "result.json").exists():
            if server.poll() is not None or time.time() > deadline:
                return Outcome(False, "the profiler server did not start")
            time.sleep(0.2)
        time.sleep(1.0)
        duration = 4000
        killer = threading.Timer(1.5, server.kill)
        killer.start()
        p, took = _service([f"localhost:{port}", "--logdir", str(work / "logs"), "--duration-ms", str(duration)])
        killer.cancel()
    finally:
        server.kill()
        server.wait()
    return _service_outcome(p, took, duration / 1000 + MARGIN_S, ("went away", "refused"))


NOTEBOOK = '''
import keras
from tfadvisor.keras import AdvisorCallback
x, y = data()
m = model()
# A notebook kernel turns SIGINT into KeyboardInterrupt whatever it inherited (a suite started in the
# background of a non-interactive shell inherits SIGINT ignored, and so would this script)
signal.signal(signal.SIGINT, signal.default_int_handler)

# Ctrl-C / "interrupt the kernel" in a notebook, at the 5th batch
ctrl_c = at_batch(5, lambda: os.kill(os.getpid(), signal.SIGINT))

first = AdvisorCallback(os.path.join(logdir, "first"), steps=(2, 30), analyze=False)
try:
    m.fit(x, y, batch_size=16, epochs=5, verbose=0, callbacks=[first, ctrl_c])
    interrupted = False
except KeyboardInterrupt:  # the notebook catches it; the kernel lives on
    interrupted = True
prof = os.path.join(logdir, "first", "plugins", "profile")
first_files = sorted(os.listdir(prof)) if os.path.isdir(prof) else []
second = AdvisorCallback(os.path.join(logdir, "second"), steps=(2, 6), analyze=False)
m.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[second])
write_result(interrupted=interrupted, first_state=first.state, first_run=first.run_dir,
             first_written_before=first_files, second_state=second.state, second_run=second.run_dir,
             second_error=second.error)
'''


def case_notebook_interrupt_refit(work: Path) -> Outcome:
    proc = run_fit_with_streams(work, subprocess.PIPE, subprocess.PIPE, body=NOTEBOOK)
    res = read_result(work)
    out = (proc.stdout or b"").decode() + (proc.stderr or b"").decode()
    if proc.returncode != 0 or not res:
        return Outcome(False, f"exit {proc.returncode}: {out.strip()[-300:]}")
    if not res["interrupted"]:
        return Outcome(False, "the interrupt did not reach the notebook")
    if "TensorBoard" in out:
        return Outcome(False, "blamed TensorBoard: " + next(ln for ln in out.splitlines() if "TensorBoard" in ln))
    if res["second_state"] != "done" or not res["second_run"]:
        return Outcome(False, f"second fit not profiled: {res['second_state']}, {res['second_error']}")
    first_ok, first_what = profile_ok(work / "logs" / "first")
    second_ok, second_what = profile_ok(work / "logs" / "second")
    written_before = bool(res["first_written_before"])
    return Outcome(first_ok and second_ok and written_before,
                   f"interrupted window saved before the next fit ({first_what}); second fit profiled "
                   f"({second_what})")


OS_EXIT = '''
x, y = data()
model().fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=[at_batch(5, lambda: os._exit(3))])
'''


def case_os_exit_in_window(work: Path) -> Outcome:
    script = write_script(work, OS_EXIT)
    proc = capture_run(work, script, "--start-step", "2", "--steps", "10")
    line = _one_line_error(proc)
    ok = proc.returncode == 3 and "lost" in line and "window" in line
    return Outcome(ok, f"exit {proc.returncode}: {line[:200]}")


def case_truncated_run_json(work: Path) -> Outcome:
    import shutil

    src = ROOT / "sample_traces" / "keras_fit_spe1"
    run = next(src.glob(f"**/*{XPLANE}")).parent
    dst = work / "run"
    shutil.copytree(run, dst)
    meta = dst / "tfadvisor_run.json"
    text = meta.read_text() if meta.exists() else json.dumps({"param_count": 1000, "batch_size": 32})
    meta.write_text(text[: len(text) // 2])  # cut as a full disk or a killed writer leaves it
    rc, doc, err = analyse(dst)
    notes = [n for n in doc.get("notes", []) if "tfadvisor_run.json" in n]
    ok = rc == 0 and bool(notes)
    return Outcome(ok, f"analyze exit {rc}; note: {notes[0][:150] if notes else err.strip()[-150:]}")


def case_file_being_written(work: Path) -> Outcome:
    src = ROOT / "sample_traces" / "keras_fit_spe1"
    f = next(src.glob(f"**/*{XPLANE}"))
    run = work / "logs" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    data = f.read_bytes()
    (run / f.name).write_bytes(data[: len(data) // 3])  # the profiler is still writing it
    rc, _, err = analyse(run)
    line = err.strip().splitlines()[-1] if err.strip() else ""
    ok = rc == 2 and "incomplete" in line and "Traceback" not in err
    return Outcome(ok, f"exit {rc}: {line[:200]}")


BAD_STEPS = '''
import keras
from tfadvisor.keras import AdvisorCallback
out = {}
for steps in ["abc", (2.9, 4.1), (5, 2), "3"]:
    try:
        AdvisorCallback(logdir, steps=steps)
        out[repr(steps)] = "accepted"
    except (ValueError, TypeError) as err:
        out[repr(steps)] = str(err)
write_result(**out)
'''


def case_bad_window_arguments(work: Path) -> Outcome:
    proc = run_fit_with_streams(work, subprocess.PIPE, subprocess.PIPE, body=BAD_STEPS)
    res = read_result(work)
    if proc.returncode != 0 or not res:
        return Outcome(False, f"exit {proc.returncode}")
    bad = {k: v for k, v in res.items() if v == "accepted" or "steps" not in v}
    return Outcome(not bad, "each rejected, naming steps" if not bad else f"not rejected by name: {bad}")


DUP_WARN = '''
import logging
import tensorflow as tf  # TensorFlow sets up absl logging, which made every warning print twice
import tfadvisor
open(result_path + ".file", "w").close()
x, y = data()
m = model()
# a report path under a regular file cannot be written: one warning
with tfadvisor.profile(logdir, report_html=os.path.join(result_path + ".file", "r.html"), verbose=False):
    for i in range(4):
        with tfadvisor.step(i):
            m.train_on_batch(x[:16], y[:16])
write_result(done=True)
'''


def case_warning_once(work: Path) -> Outcome:
    proc = run_fit_with_streams(work, subprocess.PIPE, subprocess.PIPE, body=DUP_WARN)
    err = (proc.stderr or b"").decode()
    lines = [ln for ln in err.splitlines() if "could not write the HTML report" in ln]
    ok = proc.returncode == 0 and len(lines) == 1 and "tfadvisor:" in lines[0]
    return Outcome(ok, f"{len(lines)} line(s): {lines[0][:160] if lines else err.strip()[-160:]}")


def case_time_mode_sigterm_label(work: Path) -> Outcome:
    script = write_script(work, TRAIN_FOREVER)
    cmd = [sys.executable, "-m", "tfadvisor", "capture", "run", "--logdir", str(work / "logs"), "--no-analyze",
           "--start-after-s", "0", "--duration-s", "120", "--", sys.executable, str(script), str(work / "logs"),
           str(work / "result.json")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for ln in proc.stdout:
            lines.append(ln)
            if "profiling for" in ln:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if started.wait(120):
            time.sleep(3.0)  # a few seconds of the 120 asked for
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        reader.join(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = "".join(lines)
    lines = [ln for ln in text.splitlines() if ln.startswith("tfadvisor: profile of")]
    m = re.search(r"\(([0-9.]+) s of 120 s asked, [^)]*cut short by SIGTERM\)", lines[0]) if lines else None
    ok = proc.returncode == -signal.SIGTERM and m is not None and float(m.group(1)) < 30
    return Outcome(ok, f"exit {proc.returncode}: " + (lines[0][:200] if lines else text.strip()[-200:]))


TWO_WRITERS = '''
import time
import tensorflow as tf
import tfadvisor
x, y = data()
m = model()
m.train_on_batch(x[:16], y[:16])  # traced before the window
open(sys.argv[2] + ".ready", "w").close()  # the parent names the stop moment once both are here
go = sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.05)
stop_at = float(open(go).read())
with tfadvisor.profile(logdir, analyze=False) as p:
    i = 0
    while time.time() < stop_at:  # both processes stop at the same moment: the same run directory (by the second)
        with tfadvisor.step(i):
            m.train_on_batch(x[:16], y[:16])
        i += 1
write_result(run_dir=p.run_dir, steps=p.steps, pid=os.getpid())
'''


def case_two_processes_one_logdir(work: Path) -> Outcome:
    script = write_script(work, TWO_WRITERS)
    go = work / "go"
    procs = [subprocess.Popen([sys.executable, str(script), str(work / "logs"), str(work / f"result{i}.json"),
                               str(go)], env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(2)]
    # the stop moment is named once both have imported TensorFlow and built the model (a fixed delay from the
    # start failed on a loaded machine: the moment passed before one of them was ready), early in a second
    ready = [work / f"result{i}.json.ready" for i in range(2)]
    deadline = time.time() + 240
    while not all(r.exists() for r in ready) and time.time() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.05)
    tmp = go.with_suffix(".tmp")
    tmp.write_text(f"{int(time.time()) + 2.3:.1f}")
    tmp.rename(go)  # whole, never half-written
    for p in procs:
        p.wait(timeout=300)
    results = []
    for i in range(2):
        try:
            results.append(json.loads((work / f"result{i}.json").read_text()))
        except (OSError, ValueError):
            return Outcome(False, f"process {i} failed: {procs[i].stderr.read().decode()[-300:]}")
    files = host_files(work / "logs")
    runs = {f.parent for f in files}
    if len(files) != 2:
        return Outcome(False, f"{len(files)} host file(s) for 2 processes: one was written over")
    for r in results:
        rc, _, err = analyse(r["run_dir"])
        if rc != 0:
            return Outcome(False, f"analyze {r['run_dir']}: exit {rc} {err.strip()[-200:]}")
    same = "the same run directory" if len(runs) == 1 else f"{len(runs)} run directories (stopped in different seconds)"
    return Outcome(True, f"2 host files ({', '.join(f.name for f in files)}) in {same}; each analysable")


CASES = [
    Case("fit_stdout_dev_full", "fit with stdout/stderr on /dev/full finishes; profile written", case_fit_dev_full),
    Case("fit_stdout_closed_pipe", "fit with stdout/stderr on a closed pipe finishes; profile written",
         case_fit_closed_pipe),
    Case("profile_block_dev_full", "tfadvisor.profile() with stdout/stderr on /dev/full: no OSError; profile "
         "written", case_profile_dev_full),
    Case("capture_run_output_full", "capture run with its output on /dev/full: the script finishes; profile "
         "written", case_capture_run_stderr_full),
    Case("sigterm_in_profile_block", "SIGTERM inside tfadvisor.profile(): profile written, then the signal ends "
         "the process", case_sigterm_in_profile),
    Case("fork_pool_capture_run", "a fork pool under capture run: only the parent armed", case_fork_pool),
    Case("service_closed_port", "capture service, closed port: 'connection refused' in time",
         case_service_closed_port),
    Case("service_silent_tcp", "capture service, silent TCP server: 'not a profiler server' in time",
         case_service_silent_tcp),
    Case("service_http", "capture service, HTTP server: 'not a profiler server' in time", case_service_http),
    Case("service_killed_mid_capture", "capture service, server killed mid-capture: 'went away' in time",
         case_service_killed),
    Case("notebook_interrupt_refit", "Ctrl-C in a window then a new fit: first window saved, second profiled, no "
         "TensorBoard blame", case_notebook_interrupt_refit),
    Case("os_exit_in_window", "os._exit in the window under capture run: reported as a lost window",
         case_os_exit_in_window),
    Case("truncated_run_json", "a truncated tfadvisor_run.json beside a good profile: a note, exit 0",
         case_truncated_run_json),
    Case("file_being_written", "a profile still being written: 'incomplete', exit 2", case_file_being_written),
    Case("bad_window_arguments", "steps='abc', (2.9, 4.1), (5, 2): rejected, naming steps",
         case_bad_window_arguments),
    Case("warning_printed_once", "a capture warning is printed once, with the tfadvisor: prefix", case_warning_once),
    Case("two_processes_one_logdir", "two processes profiling into one logdir, stopping together: two host files, "
         "none written over", case_two_processes_one_logdir),
    Case("time_mode_sigterm_label", "time mode cut by SIGTERM: the message states the seconds captured",
         case_time_mode_sigterm_label),
]
BY_NAME = {c.name: c for c in CASES}


def run_case(name: str, work: Path | None = None) -> Outcome:
    case = BY_NAME[name]
    if work is not None:
        return case.run(work)
    with tempfile.TemporaryDirectory(prefix=f"tfadvisor_fault_{name}_") as tmp:
        return case.run(Path(tmp))


def main(argv: list[str]) -> int:
    names = argv or [c.name for c in CASES]
    rows = []
    for name in names:
        t0 = time.monotonic()
        try:
            out = run_case(name)
        except Exception as err:  # noqa: BLE001 - a harness failure is a failed case in the table
            out = Outcome(False, f"harness error: {type(err).__name__}: {err}")
        rows.append((name, out, time.monotonic() - t0))
        print(f"{'ok ' if out.ok else 'FAIL'} {name} ({rows[-1][2]:.0f} s): {out.what}", file=sys.stderr, flush=True)
    print("| case | promise | outcome | |")
    print("|---|---|---|---|")
    for name, out, _ in rows:
        print(f"| {name} | {BY_NAME[name].expect} | {out.what.replace('|', '/')} | {'ok' if out.ok else 'FAIL'} |")
    failed = sum(not o.ok for _, o, _ in rows)
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
