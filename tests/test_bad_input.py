"""Bad input: one clear line naming the file, exit code 2, no traceback; logdir untouched."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, sample_dirs

from tfadvisor.proto import xplane_pb2

REAL = [p for p in sample_dirs() if not p.name.startswith("synthetic_")]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tfadvisor", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def assert_one_line_error(proc: subprocess.CompletedProcess, must_name: str, problem: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert must_name in lines[0]
    assert problem in lines[0].lower(), lines[0]


def _real_file() -> Path:
    assert REAL, "no sample traces"
    return next(REAL[0].rglob("*.xplane.pb"))


def _bomb(stat: str = "tf_op") -> bytes:
    """A gzip stat that inflates to 80 MiB, named ``stat`` (``tf_op``: one the analyses read, so inflated)."""
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "ev"
    p.stat_metadata[2].name = stat
    e = p.lines.add(id=1, name="python").events.add(metadata_id=1, offset_ps=0, duration_ps=1)
    e.stats.add(metadata_id=2, compressed_str_value=gzip.compress(b"\0" * (80 * 1024 * 1024), compresslevel=9))
    return space.SerializeToString()


CASES = {
    "empty": (lambda: b"", "empty file"),
    "random": (lambda: os.urandom(4096) if False else bytes((i * 7919 + 13) % 256 for i in range(4096)),
               "not"),
    "text": (lambda: b"this is a README, not a profile\n" * 20, "not"),
    "json": (lambda: b'{"traceEvents": []}', "json"),
    "bomb": (_bomb, "expands beyond"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_files(tmp_path: Path, case: str):
    make, problem = CASES[case]
    f = tmp_path / f"{case}.xplane.pb"
    f.write_bytes(make())
    assert_one_line_error(run_cli("analyze", str(f)), str(f), problem)


def test_bomb_in_a_stat_no_analysis_reads(tmp_path: Path):
    """The reader keeps only the stats the analyses declare: a gzip bomb in any other stat is never inflated, so
    the analysis runs (at no cost for it); loading every stat (``tfadvisor.load``) still refuses it."""
    import tfadvisor
    from tfadvisor.errors import TraceError

    f = tmp_path / "bomb_unread.xplane.pb"
    f.write_bytes(_bomb("big"))
    proc = run_cli("analyze", str(f), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(TraceError, match="expands beyond"):
        tfadvisor.load(f)


def test_truncated(tmp_path: Path):
    data = _real_file().read_bytes()
    f = tmp_path / "cut.xplane.pb"
    f.write_bytes(data[: len(data) // 2])
    assert_one_line_error(run_cli("analyze", str(f)), str(f), "truncated")


def test_truncated_inside_plane_header(tmp_path: Path):
    data = _real_file().read_bytes()
    f = tmp_path / "cut.xplane.pb"
    f.write_bytes(data[:3])
    assert_one_line_error(run_cli("analyze", str(f)), str(f), "truncated")


def test_dir_without_profile(tmp_path: Path):
    (tmp_path / "logs" / "train").mkdir(parents=True)
    (tmp_path / "logs" / "train" / "events.out.tfevents.1").write_bytes(b"x")
    assert_one_line_error(run_cli("analyze", str(tmp_path / "logs")), str(tmp_path / "logs"), "no profile")


def test_legacy_trace_json(tmp_path: Path):
    d = tmp_path / "logs" / "plugins" / "profile" / "2020_01_01_00_00_00"
    d.mkdir(parents=True)
    (d / "host.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": []}'))
    assert_one_line_error(run_cli("analyze", str(tmp_path / "logs")), "host.trace.json.gz", "legacy")
    assert_one_line_error(run_cli("analyze", str(d / "host.trace.json.gz")), "host.trace.json.gz", "legacy")


def test_missing_path(tmp_path: Path):
    assert_one_line_error(run_cli("analyze", str(tmp_path / "nope")), str(tmp_path / "nope"), "no such")


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(root))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return out


def test_logdir_untouched(tmp_path: Path):
    assert REAL, "no sample traces"
    logdir = tmp_path / "logdir"
    shutil.copytree(REAL[0], logdir)
    before = _snapshot(logdir)
    proc = run_cli("analyze", str(logdir), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("runs", str(logdir))
    assert proc.returncode == 0, proc.stderr
    assert _snapshot(logdir) == before


def test_absurd_record_length_is_corrupt_not_truncated(tmp_path: Path):
    """A plane record claiming terabytes in a small file: the wire format is corrupt (as in the
    upstream-mangled TPU file, whose bytes went through a UTF-8 decode)."""
    data = _real_file().read_bytes()
    f = tmp_path / "mangled.xplane.pb"
    f.write_bytes(b"\x0a\xef\xbf\xbd\xef\xbf\xbd\x06" + data[8:4096])  # U+FFFD bytes inside the length varint
    proc = run_cli("analyze", str(f))
    assert_one_line_error(proc, str(f), "corrupt")
    assert "truncated" not in proc.stderr


def test_corrupt_inside_a_complete_plane(tmp_path: Path):
    """A field running past the end of its message inside a plane the file holds in full."""
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.lines.add(id=1, name="python").events.add(metadata_id=1, offset_ps=0, duration_ps=1)
    good = bytearray(space.SerializeToString())
    i = good.index(b"python") - 1  # the line name's length byte
    good[i] = 0x7F
    f = tmp_path / "bad.xplane.pb"
    f.write_bytes(bytes(good))
    proc = run_cli("analyze", str(f))
    assert_one_line_error(proc, str(f), "corrupt")


def test_unwritable_html_path_is_one_line_exit_2(tmp_path: Path):
    """An output path that cannot be written (under a regular file) is bad input, not an internal error."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    out = blocker / "report.html"
    assert_one_line_error(run_cli("analyze", str(_real_file().parent), "--html", str(out)), str(out),
                          "cannot write the html report")
