"""An empty profile is bad input: analyze, its --fail-on gate and diff's gate exit 2 with one line.

One real capture (the TF profiler started and stopped with nothing run in between) and
hand-built synthetic XSpaces (named so) with planes and lines but no events."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

import tfadvisor

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
RUN = "2026_01_01_00_00_00"

_CAPTURE = """
import sys
import tensorflow as tf
tf.profiler.experimental.start(sys.argv[1])
tf.profiler.experimental.stop()
"""


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TFADVISOR_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "tfadvisor", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def _one_line(proc: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def real_empty(tmp_path_factory) -> Path:
    """A real capture with no work inside the profiler window."""
    logdir = tmp_path_factory.mktemp("real_empty")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-c", _CAPTURE, str(logdir)], check=True, env=env, timeout=300,
                   capture_output=True)
    files = list(logdir.rglob("*.xplane.pb"))
    assert len(files) == 1 and files[0].stat().st_size > 0  # a valid, non-empty file ...
    space = xplane_pb2.XSpace()
    space.ParseFromString(files[0].read_bytes())
    assert space.planes and not any(ln.events for p in space.planes for ln in p.lines)  # ... with no events
    return logdir


def _synthetic_empty(run_dir: Path, host: str = "synthetic") -> Path:
    """A synthetic (hand-built) XSpace: a host plane with named thread lines, a Task Environment, no events."""
    space = xplane_pb2.XSpace(hostnames=[host])
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "TraceContext"
    for i, name in enumerate(("python", "tf_Compute/1")):
        p.lines.add(id=i + 1, name=name, timestamp_ns=1000)
    space.planes.add(id=2, name="Task Environment")
    run_dir.mkdir(parents=True, exist_ok=True)
    f = run_dir / f"{host}.xplane.pb"
    f.write_bytes(space.SerializeToString())
    return f


def test_real_empty_capture_is_bad_input_for_analyze_and_its_gate(real_empty: Path):
    for extra in ((), ("--fail-on", "warning")):
        r = _cli("analyze", str(real_empty), *extra)
        assert r.returncode == 2, (extra, r.stdout[-2000:])
        line = _one_line(r)
        assert ".xplane.pb" in line and "empty profile: no events" in line, line


def test_real_empty_capture_fails_the_diff_gate(real_empty: Path):
    sample = SAMPLES / "input_bound_defaults_off"
    for pair in ((sample, real_empty), (real_empty, sample)):
        r = _cli("diff", *map(str, pair), "--fail-on-regression", "20")
        assert r.returncode == 2, r.stdout[-2000:]
        assert "empty profile" in _one_line(r)


def test_synthetic_empty_xspace(tmp_path: Path):
    f = _synthetic_empty(tmp_path / "one" / "plugins" / "profile" / RUN)
    with pytest.raises(tfadvisor.TraceError, match="empty profile: no events in any of its 2 plane") as err:
        tfadvisor.load(str(tmp_path / "one"))
    assert err.value.path == str(f)
    # every host file empty: the run directory is named
    run_dir = tmp_path / "two" / "plugins" / "profile" / RUN
    _synthetic_empty(run_dir, "synthetic_a")
    _synthetic_empty(run_dir, "synthetic_b")
    with pytest.raises(tfadvisor.TraceError, match=r"\(2 host files\): empty profile"):
        tfadvisor.load(str(tmp_path / "two"))


def test_diff_gate_without_step_time_exits_2(tmp_path: Path):
    """A synthetic profile with events but no steps: the gate cannot judge it, so it does not pass."""
    space = xplane_pb2.XSpace(hostnames=["synthetic"])
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "SomeHostWork"
    p.lines.add(id=1, name="python", timestamp_ns=1000).events.add(metadata_id=1, offset_ps=0, duration_ps=10**9)
    run_dir = tmp_path / "nosteps" / "plugins" / "profile" / RUN
    run_dir.mkdir(parents=True)
    (run_dir / "synthetic.xplane.pb").write_bytes(space.SerializeToString())
    r = _cli("diff", str(SAMPLES / "input_bound_defaults_off"), str(tmp_path / "nosteps"), "--fail-on-regression", "20")
    assert r.returncode == 2, r.stdout[-2000:]
    line = _one_line(r)
    assert "nosteps" in line and "no step time in the after profile" in line, line
    r = _cli("diff", str(SAMPLES / "input_bound_defaults_off"), str(tmp_path / "nosteps"))  # no gate: a report, exit 0
    assert r.returncode == 0 and "no verdict" in r.stdout, r.stderr[-2000:]
