"""Training data file checks: sizes from listings only, locally and on gs:// (a real local GCS emulator)."""

from __future__ import annotations

import builtins
import http.client
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from tfadvisor.analyses.datafiles import GiB, MiB, check_data_files
from tfadvisor.errors import TraceError

SMALL = 5_000  # bytes, like the seed's 2,000,000 x 5 KB example
N_SMALL = 3000


def _values(res) -> dict:
    return {k: m.value for k, m in res.metrics.items()}


def _make_local(root: Path, n_small: int = N_SMALL) -> Path:
    """Many 5 KB files in two subdirectories, three 20 MiB and two 2 GiB sparse files."""
    d = root / "data"
    for sub in ("a", "b"):
        (d / sub).mkdir(parents=True)
    payload = b"x" * SMALL
    for i in range(n_small):
        with open(d / ("a" if i % 2 else "b") / f"part-{i:06d}.tfrecord", "wb") as fh:
            fh.write(payload)
    for i in range(3):
        with open(d / f"shard-{i}.tfrecord", "wb") as fh:
            fh.truncate(20 * MiB)
    for i in range(2):
        with open(d / f"huge-{i}.tfrecord", "wb") as fh:
            fh.truncate(2 * GiB)  # sparse: no disk used
    return d


@pytest.fixture(scope="module")
def local_data(tmp_path_factory) -> Path:
    return _make_local(tmp_path_factory.mktemp("datafiles"))


def _check_mix(v: dict, n_small: int) -> None:
    n = n_small + 5
    assert v["data_files_count"] == n
    assert v["data_total_bytes"] == n_small * SMALL + 3 * 20 * MiB + 2 * 2 * GiB
    assert v["data_file_min_bytes"] == SMALL
    assert v["data_file_median_bytes"] == SMALL
    assert v["data_largest_file_bytes"] == 2 * GiB
    assert v["data_small_files_count"] == n_small
    assert v["data_small_files_pct"] == pytest.approx(n_small / n * 100)
    assert v["data_huge_files_count"] == 2
    assert v["data_shard_range_pct"] == pytest.approx(3 / n * 100)


def test_local_directory(local_data):
    res = check_data_files(str(local_data))
    assert res.name == "datafiles"
    v = _values(res)
    _check_mix(v, N_SMALL)
    assert res.metrics["data_total_bytes"].unit == "bytes" and res.metrics["data_small_files_pct"].unit == "%"
    sizes = res.tables["data_files_sizes"].set_index("bucket")
    assert sizes.loc["< 10 KiB", "files"] == N_SMALL
    assert sizes.loc["16-128 MiB", "files"] == 3
    assert sizes.loc[">= 1 GiB", "files"] == 2 and sizes.loc[">= 1 GiB", "class"] == "huge"
    assert sizes["files"].sum() == N_SMALL + 5
    assert sizes["files_pct"].sum() == pytest.approx(100)
    largest = res.tables["data_largest_files"]
    assert len(largest) == 10
    assert list(largest["bytes"][:5]) == [2 * GiB, 2 * GiB, 20 * MiB, 20 * MiB, 20 * MiB]
    assert Path(largest["path"][0]).name.startswith("huge-")
    assert res.notes and "3,005 files" in res.notes[0]


def test_local_globs_and_single_file(local_data):
    v = _values(check_data_files(str(local_data / "*.tfrecord")))
    assert v["data_files_count"] == 5 and v["data_huge_files_count"] == 2
    v = _values(check_data_files(str(local_data / "**" / "part-*.tfrecord")))
    assert v["data_files_count"] == N_SMALL and v["data_small_files_pct"] == 100
    v = _values(check_data_files(str(local_data / "*")))  # dirs matched by the glob are walked
    assert v["data_files_count"] == N_SMALL + 5
    v = _values(check_data_files(str(local_data / "huge-0.tfrecord")))
    assert v["data_files_count"] == 1 and v["data_largest_file_bytes"] == 2 * GiB
    v = _values(check_data_files("file://" + str(local_data / "a")))
    assert v["data_files_count"] == N_SMALL // 2


def test_bad_paths(tmp_path):
    with pytest.raises(TraceError, match="no such file"):
        check_data_files(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match="no files found"):
        check_data_files(str(tmp_path / "empty"))
    with pytest.raises(TraceError, match="no files match"):
        check_data_files(str(tmp_path / "*.tfrecord"))


def test_never_reads_file_contents(local_data, monkeypatch):
    def refuse(*a, **k):
        raise AssertionError(f"opened {a[:1]}")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(os, "open", refuse)
    v = _values(check_data_files(str(local_data)))
    assert v["data_files_count"] == N_SMALL + 5


def test_many_files_memory_stays_flat(tmp_path):
    """100,000 files: memory is a compact array of sizes, not an object per file."""
    d = tmp_path / "many"
    d.mkdir()
    n = 100_000
    for i in range(n):
        os.close(os.open(d / f"f{i:06d}", os.O_CREAT | os.O_WRONLY, 0o644))
    tracemalloc.start()
    t0 = time.perf_counter()
    res = check_data_files(str(d))
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    v = _values(res)
    assert v["data_files_count"] == n and v["data_small_files_pct"] == 100 and v["data_total_bytes"] == 0
    # 100k path strings alone would be > 8 MB; the sizes array is 800 KB
    assert peak < 4 * MiB, f"peak {peak / MiB:.1f} MiB"
    assert elapsed < 60


# --------------------------------------------------------------------------- gs:// through a local emulator


def _upload(conn: http.client.HTTPConnection, name: str, body, length: int) -> None:
    conn.request("POST", f"/upload/storage/v1/b/bkt/o?uploadType=media&name={name}", body=body,
                 headers={"Content-Length": str(length), "Content-Type": "application/octet-stream"})
    r = conn.getresponse()
    r.read()
    assert r.status == 200, (name, r.status)


@pytest.fixture(scope="module")
def gcs_data(gcs_emulator, tmp_path_factory):
    """gs://bkt/data: 600 x 5 KB, three 20 MiB and one real 1 GiB + 1 MiB object (streamed from a sparse file)."""
    host = gcs_emulator.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=120)
    payload = b"x" * SMALL
    for i in range(600):
        _upload(conn, f"data/{'a' if i % 2 else 'b'}/part-{i:06d}.tfrecord", payload, SMALL)
    for i in range(3):
        _upload(conn, f"data/shard-{i}.tfrecord", bytes(20 * MiB), 20 * MiB)
    sparse = tmp_path_factory.mktemp("sparse") / "huge.bin"
    with open(sparse, "wb") as fh:
        fh.truncate(GiB + MiB)
    with open(sparse, "rb") as fh:
        _upload(conn, "data/huge-0.tfrecord", fh, GiB + MiB)
    sparse.unlink()
    conn.close()
    return "gs://bkt/data"


def test_gcs_directory_and_glob(gcs_data, gcs_emulator, monkeypatch):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    res = check_data_files(gcs_data)
    v = _values(res)
    n = 604
    assert v["data_files_count"] == n
    assert v["data_total_bytes"] == 600 * SMALL + 3 * 20 * MiB + GiB + MiB
    assert v["data_file_median_bytes"] == SMALL
    assert v["data_small_files_pct"] == pytest.approx(600 / n * 100)
    assert v["data_huge_files_count"] == 1
    assert v["data_largest_file_bytes"] == GiB + MiB
    assert res.tables["data_largest_files"]["path"][0] == "gs://bkt/data/huge-0.tfrecord"
    v = _values(check_data_files(gcs_data + "/*.tfrecord"))
    assert v["data_files_count"] == 4 and v["data_huge_files_count"] == 1
    v = _values(check_data_files(gcs_data + "/a/part-*"))
    assert v["data_files_count"] == 300 and v["data_small_files_pct"] == 100
    v = _values(check_data_files(gcs_data + "/huge-0.tfrecord"))
    assert v["data_files_count"] == 1
    with pytest.raises(TraceError):
        check_data_files("gs://bkt/nothing-here")
    with pytest.raises(TraceError, match="no files match"):
        check_data_files("gs://bkt/data/*.csv")


def test_gcs_never_reads_objects(gcs_data, gcs_emulator, monkeypatch):
    """Only listing calls: no object is opened or downloaded."""
    from gcsfs.core import GCSFileSystem

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    for meth in ("open", "cat", "cat_file", "_cat_file", "_open"):
        monkeypatch.setattr(GCSFileSystem, meth, lambda *a, **k: (_ for _ in ()).throw(AssertionError("read")))
    assert _values(check_data_files(gcs_data))["data_files_count"] == 604


# --------------------------------------------------------------------------- with the rules, end to end

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "tfdata_repeat_map_tuned"


def test_analyze_with_data_fires_the_rules(local_data, tmp_path):
    import tfadvisor

    res = tfadvisor.analyze(SAMPLE, data=str(local_data))
    assert res.metrics["data_files_count"] == N_SMALL + 5
    assert res.metrics.source["data_small_files_pct"] == "datafiles"
    assert "data_files_sizes" in res.tables
    rules = {f.rule for f in res.findings}
    assert "data_small_files" in rules
    big = tmp_path / "big"
    big.mkdir()
    for i in range(3):
        with open(big / f"train-{i}.tfrecord", "wb") as fh:
            fh.truncate(5 * GiB)
    res = tfadvisor.analyze(SAMPLE, data=str(big))
    rules = {f.rule for f in res.findings}
    assert "data_huge_files" in rules and "data_small_files" not in rules
    # and the reports show it
    from tfadvisor.report.html import render_html
    from tfadvisor.report.markdown import render_markdown

    assert '<svg id="plot-datafiles"' in render_html(res)
    assert "| files | 3 files |" in render_markdown(res)


def test_cli_data_on_gcs(gcs_data, gcs_emulator):
    """`tfadvisor analyze RUN --data gs://...` against the emulator, as a user would run it."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent), STORAGE_EMULATOR_HOST=gcs_emulator)
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(SAMPLE), "--data", gcs_data, "--format",
                        "json", "-q"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    d = json.loads(r.stdout)
    text = json.dumps(d)
    assert "data_small_files" in text and "data_huge_files" in text
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(SAMPLE), "--data", "gs://bkt/nope/*.rec",
                        "-q"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "no files match" in r.stderr
