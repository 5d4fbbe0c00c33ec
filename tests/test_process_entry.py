"""The ``tfadvisor`` process (tfadvisor/cli/process.py): the console script's quick exit loses nothing.

A reading command ends with ``os._exit`` after its ``atexit`` handlers and a flush; its output, its exit status and
its handlers' work are those of the same command run by ``tfadvisor.cli.app.main`` in a process that ends as Python
does. The interpreter's teardown is skipped (what the exit saves), which the probe sees: an object's ``__del__``
at teardown runs after ``main`` but not after the quick exit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "input_bound_defaults_off"

PROBE = r"""
import atexit, sys
entry, marker = sys.argv[1], sys.argv[2]
def handler():
    with open(marker, "a") as fh:
        fh.write("atexit\n")
atexit.register(handler)
class Teardown:
    def __del__(self, open=open, marker=marker):  # bound now: the module's names are gone at teardown
        with open(marker, "a") as fh:
            fh.write("teardown\n")
KEEP = Teardown()
sys.argv = ["tfadvisor"] + sys.argv[3:]
if entry == "process":
    from tfadvisor.cli.process import main
else:
    from tfadvisor.cli.app import main
main()
"""


def _run(entry: str, args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    marker = tmp_path / f"{entry}.txt"
    marker.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-c", PROBE, entry, str(marker), *args], capture_output=True, timeout=120)
    return proc, marker.read_text().split() if marker.exists() else []


@pytest.mark.parametrize("args", [["analyze", str(SAMPLE), "--format", "json"], ["analyze", str(SAMPLE), "--full"],
                                  ["runs", str(SAMPLE)], ["analyze", str(SAMPLE / "missing")]])
def test_quick_exit_keeps_output_status_and_atexit(args, tmp_path):
    quick, quick_marks = _run("process", args, tmp_path)
    plain, plain_marks = _run("app", args, tmp_path)
    assert quick.returncode == plain.returncode, (quick.stderr[-2000:], plain.stderr[-2000:])
    assert quick.stdout == plain.stdout and quick.stderr == plain.stderr
    assert len(quick.stdout) > 40 or quick.returncode == 2  # a report, the runs' list, or the bad path's line
    assert plain_marks == ["atexit", "teardown"]  # the probe sees both in a process that ends as Python does
    assert quick_marks == ["atexit"]  # handlers run; the teardown is what the quick exit skips


def test_other_commands_end_as_python_does(tmp_path):
    """A command outside QUICK_EXIT (``export``, here failing on a missing path) ends through Python's teardown."""
    proc, marks = _run("process", ["export", str(SAMPLE / "missing"), str(tmp_path / "out.json")], tmp_path)
    assert proc.returncode == 2 and b"missing" in proc.stderr
    assert marks == ["atexit", "teardown"]


@pytest.mark.parametrize("entry", ["process", "app"])
def test_closed_stdout_ends_as_python_does(entry, tmp_path):
    """Started with its stdout closed (cron, a daemon: ``sys.stdout`` is None), the quick exit flushes what is there
    and ends with the command's status, as ``app.main`` in a plain process does (it raised AttributeError at first)."""
    marker = tmp_path / f"{entry}.txt"
    cmd = " ".join([sys.executable, "-c", _quote(PROBE), entry, str(marker), "runs", str(SAMPLE)])
    proc = subprocess.run(["sh", "-c", cmd + " >&-"], capture_output=True, timeout=120)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert marker.read_text().split()[0] == "atexit"


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)
