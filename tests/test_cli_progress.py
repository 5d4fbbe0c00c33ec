"""The loading progress bar: shown on a terminal for traces over 50 MB, silent otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfadvisor_dev.synthetic import write_large_trace


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory) -> Path:
    """A SYNTHETIC trace just over the 50 MB threshold."""
    path = tmp_path_factory.mktemp("big") / "host.xplane.pb"
    write_large_trace(str(path), target_mb=56)
    assert path.stat().st_size > 50 * 1024 * 1024
    return path


def _run_on_tty(args: list[str]) -> str:
    """Run the CLI with stderr on a pseudo-terminal; return what the terminal saw."""
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "tfadvisor", *args], stdout=subprocess.DEVNULL, stderr=slave,
                            stdin=subprocess.DEVNULL, env=dict(os.environ, COLUMNS="100", TERM="xterm"))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO once the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=600) == 0
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_terminal(big_trace):
    seen = _run_on_tty(["analyze", str(big_trace), "--format", "json"])
    assert "loading trace" in seen


def test_quiet_and_pipes_are_silent(big_trace):
    assert "loading trace" not in _run_on_tty(["analyze", str(big_trace), "--format", "json", "--quiet"])
    proc = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(big_trace), "--format", "json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0
    assert "loading trace" not in proc.stderr
