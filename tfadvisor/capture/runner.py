"""Run a training command with the profiler armed (``tfadvisor capture run``).

The command runs as a child process with its output streamed as usual. Two entries go in
front of its ``PYTHONPATH``: ``tfadvisor/capture/_sitecustomize`` (a ``sitecustomize`` hook that
Python imports at start-up) and a temporary directory holding only a ``tfadvisor`` link
to this package (so the hook can import it without exposing anything else of this
environment). The capture is described to the hook in ``TFADVISOR_CAPTURE`` (JSON); the
hook reports back through a status file. ``TF_CPU_ALLOCATOR_USE_BFC=true`` is set for
``memory=True``, before TensorFlow starts; ``TFADVISOR_SYSTEM`` carries the system sampling
rate (``0``: off) to the profiling session in the script.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfadvisor.capture.options import MEMORY_ENV
from tfadvisor.capture.system_sampler import DEFAULT_HZ
from tfadvisor.capture.system_sampler import ENV as SYSTEM_ENV

HOOK_DIR = Path(__file__).resolve().parent / "_sitecustomize"
PACKAGE_DIR = Path(__file__).resolve().parent.parent
ENV_VAR = "TFADVISOR_CAPTURE"


@dataclass
class ScriptRun:
    returncode: int
    status: dict[str, Any] | None = None  # what the hook reported; None when it did not run
    signal: int | None = None  # SIGTERM this process got (and passed to the script) while it ran
    config: dict[str, Any] = field(default_factory=dict)


#: Step mode: the hook says, while the script runs, that nothing armed the window when neither ``fit`` nor a step
#: marker came this many seconds after start-up.
NO_STEPS_WARN_S = 30.0


def capture_config(logdir: str, *, start_step: int | None = None, steps: int | None = None,
                   start_after_s: float | None = None, duration_s: float | None = None,
                   options: dict | None = None, no_steps_warn_s: float = NO_STEPS_WARN_S) -> dict[str, Any]:
    """The hook's configuration: step mode (default: steps 10-19) or time mode. ``no_steps_warn_s``: step mode's
    warning when no ``fit`` and no step marker came that long after start-up (0: none)."""
    time_mode = start_after_s is not None or duration_s is not None
    if time_mode and (start_step is not None or steps is not None):
        raise ValueError("give either --start-step/--steps or --start-after-s/--duration-s, not both")
    cfg: dict[str, Any] = {"logdir": logdir, "options": {k: v for k, v in (options or {}).items() if v is not None}}
    if time_mode:
        s = 10.0 if start_after_s is None else float(start_after_s)
        d = 5.0 if duration_s is None else float(duration_s)
        if s < 0 or d <= 0:
            raise ValueError("--start-after-s must be >= 0 and --duration-s > 0")
        cfg.update(mode="time", start_after_s=s, duration_s=d)
    else:
        a = 10 if start_step is None else int(start_step)
        n = 10 if steps is None else int(steps)
        if a < 0 or n <= 0:
            raise ValueError("--start-step must be >= 0 and --steps > 0")
        cfg.update(mode="steps", start_step=a, steps=n, no_steps_warn_s=float(no_steps_warn_s))
    return cfg


def run_script(command: list[str], cfg: dict[str, Any], *, memory: bool = False,
               env: dict[str, str] | None = None, system_hz: float | None = DEFAULT_HZ) -> ScriptRun:
    """Run ``command`` armed with ``cfg``; its exit code and the hook's status.

    ``system_hz``: sample CPU/GPU/disk/network at this rate during the window (written as
    ``tfadvisor_system.<host>.npz`` beside the profile); None or 0 switches sampling off.
    """
    base = dict(os.environ if env is None else env)
    tmp = tempfile.mkdtemp(prefix="tfadvisor_capture_")
    try:
        link_dir = os.path.join(tmp, "path")
        os.makedirs(link_dir)
        try:
            os.symlink(PACKAGE_DIR, os.path.join(link_dir, "tfadvisor"), target_is_directory=True)
            extra = link_dir
        except OSError:  # no symlinks (Windows without privilege): the package's parent directory
            extra = str(PACKAGE_DIR.parent)
        status_path = os.path.join(tmp, "status.json")
        original = base.get("PYTHONPATH")
        full = dict(cfg, status=status_path, pythonpath=original)
        base["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR), extra] + ([original] if original else []))
        base[ENV_VAR] = json.dumps(full)
        if memory:
            base[MEMORY_ENV] = "true"
        base[SYSTEM_ENV] = f"{float(system_hz):g}" if system_hz else "0"
        proc = subprocess.Popen(command, env=base)
        got: list[int] = []
        prev = _forward_sigterm(proc, got)
        try:
            try:
                rc = proc.wait()
            except KeyboardInterrupt:  # the child got the signal too: let it finish (and save)
                try:
                    rc = proc.wait()
                except KeyboardInterrupt:
                    proc.kill()
                    rc = proc.wait()
        finally:
            if prev is not None:
                signal.signal(signal.SIGTERM, prev)
        status = None
        if os.path.isfile(status_path):
            try:
                with open(status_path, encoding="utf-8") as fh:
                    status = json.load(fh)
            except (OSError, ValueError):
                status = None
        return ScriptRun(returncode=rc, status=status, config=full, signal=got[0] if got else None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _forward_sigterm(proc: subprocess.Popen, got: list[int]) -> Any:
    """Pass a SIGTERM this process gets on to the script (which saves its profile), and note it.

    The caller waits for the script to end, removes its temporary files and then ends the
    way SIGTERM would have ended it. The previous handler, or None when none was installed
    (not the main thread).
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def forward(signum: int, frame: Any) -> None:
        got.append(signum)
        try:
            proc.send_signal(signum)
        except (ProcessLookupError, OSError):
            pass

    try:
        prev = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, forward)
    except (ValueError, OSError):
        return None
    return prev if prev is not None else signal.SIG_DFL


def lost_window(run: ScriptRun) -> str | None:
    """When the script died inside an open profiling window (``os._exit``, a crash, SIGKILL): what was lost."""
    st = run.status or {}
    window = st.get("window_open")
    if not isinstance(window, dict) or st.get("run_dir"):
        return None
    first = window.get("first_step")
    where = f"from step {first}" if isinstance(first, int) else f"{window.get('opened_after_s', '?')} s after start"
    return (f"the script ended while the profiling window was open (opened {where}, into {window.get('logdir')}) "
            "without stopping the profiler (os._exit, a crash or SIGKILL): that window's profile is lost, "
            "as TensorFlow writes it only when the profiler stops")


def explain_no_profile(run: ScriptRun) -> str:
    """Why a run left no profile, in one line."""
    st = run.status
    cfg = run.config
    lost = lost_window(run)
    if lost:
        return lost
    if st is None:
        return ("the capture hook did not run in the command: is it a Python program started with an interpreter "
                "that has tfadvisor's dependencies? (python -I, -E or -S ignore the hook)")
    if st.get("error") and ("TensorFlow is not installed" in str(st.get("error")) or "No module named" in str(
            st.get("error"))):
        return f"{st['error']}"
    if cfg.get("mode") == "time":
        if not st.get("tensorflow_imported"):
            return "the script never imported TensorFlow, so there was nothing to profile"
        note = st.get("note") or st.get("error")
        if note:
            return f"no profile was written ({note}); is --start-after-s {cfg.get('start_after_s'):g} longer " \
                   "than the script runs?"
        return f"no profile was written: the script ended before {cfg.get('start_after_s'):g} s"
    start = cfg.get("start_step", 10)
    end = start + cfg.get("steps", 10) - 1
    if not st.get("fit_calls") and not st.get("markers_seen"):
        return ("the script neither called keras Model.fit nor marked steps (tfadvisor.step(i), or "
                "tf.profiler.experimental.Trace('train', step_num=i, _r=1)), so the step window was not armed; use "
                "--start-after-s/--duration-s, or mark the steps of the training loop")
    if st.get("error"):
        return f"no profile was written: {st['error']}"
    if not st.get("fit_calls"):
        return (f"the profiling window (steps {start}-{end}) was not reached: the script's step markers went up to "
                f"step {st.get('last_marker')} ({st.get('markers_seen')} marker(s)); lower --start-step")
    return (f"the profiling window (steps {start}-{end}) was not reached: the script trained "
            f"{st.get('steps_seen', 0)} step(s); lower --start-step")
