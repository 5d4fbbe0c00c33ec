"""The reader against TensorFlow's own protobuf module, on every real sample."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLES, sample_dirs

import tfadvisor
from tfadvisor.io import reader, wire
from tfadvisor.io.discovery import find_runs, resolve
from tfadvisor.model import kinds
from tfadvisor.proto import xplane_pb2

REAL = [p for p in sample_dirs() if not p.name.startswith("synthetic_")]


def _reference_planes(path: str):
    """Decode with the protobuf module (slow, obviously right) into plain lists."""
    space = xplane_pb2.XSpace.FromString(Path(path).read_bytes())
    out = []
    for p in space.planes:
        starts, durs, names, stats = [], [], [], []
        for line in p.lines:
            for e in line.events:
                starts.append(line.timestamp_ns * 1000 + e.offset_ps)
                durs.append(e.duration_ps)
                names.append(p.event_metadata[e.metadata_id].name if e.metadata_id in p.event_metadata else None)
                for s in e.stats:
                    which = s.WhichOneof("value")
                    value = getattr(s, which) if which else None
                    if which == "double_value" and not math.isfinite(value):
                        # ignored at load, with a note (README: stat values out of range): TF 2.21 writes
                        # MemoryAllocation ``fragmentation = nan`` (2 in comp_metric_auc, 11 in
                        # comp_mixed_precision_cpu_tuned)
                        continue
                    if which == "ref_value":
                        value = p.stat_metadata[s.ref_value].name
                    stats.append((len(starts) - 1, p.stat_metadata[s.metadata_id].name, which, value))
        out.append((p.name, starts, durs, names, stats, len(p.lines)))
    return out


def _declared_clips(sample: Path) -> int:
    """Events a real capture's expected.toml says the reader cuts at the capture window's end (``load_notes``:
    JAX's profiler records a Python frame open when the capture stopped)."""
    from conftest import expected

    notes = expected(sample).get("load_notes", [])
    return sum(int(n.split(" ", 1)[0]) for n in notes if "ending after the capture window" in n)


@pytest.mark.parametrize("sample", REAL, ids=[p.name for p in REAL])
def test_columns_match_protobuf(sample: Path):
    _assert_matches_protobuf(tfadvisor.load(sample), _declared_clips(sample))


def _assert_matches_protobuf(trace, clipped: int = 0) -> None:
    """Every plane's event and stat columns equal a protobuf decode of the same files."""
    assert trace.n_events > 0
    for f in trace.files:
        planes = [p for p in trace.planes if p.host == tfadvisor.io.discovery.host_name(f)]
        ref = _reference_planes(f)
        assert [r[0] for r in ref] == [p.name for p in planes]
        for (name, starts, durs, names, stats, n_lines), plane in zip(ref, planes):
            assert len(plane.lines) == n_lines
            assert np.array_equal(np.asarray(starts, dtype=np.int64), plane.ev_start_ps), name
            want = np.asarray(durs, dtype=np.int64)
            differ = np.flatnonzero(want != plane.ev_dur_ps)
            # only the declared events differ, cut shorter (at the window's end), never longer
            assert differ.shape[0] <= clipped and np.all(plane.ev_dur_ps[differ] < want[differ]), name
            assert list(plane.names_of(np.arange(plane.n_events))) == [n or "<unknown>" for n in names]
            assert plane.n_stats == len(stats)
            got = plane._stat_strings(plane.st_kind, plane.st_value)
            for i, (row, sname, which, value) in enumerate(stats):
                assert plane.st_event[i] == row
                assert plane.stat_names[plane.st_stat[i]] == sname
                if which in ("str_value", "ref_value"):
                    assert got[i] == value
                elif which in ("int64_value", "uint64_value"):
                    assert int(got[i]) == value
                elif which == "double_value":
                    assert float(got[i]) == value


def test_discovery_finds_nested_runs_and_newest(tmp_path: Path):
    src = REAL[0]
    xfile = next(src.rglob("*.xplane.pb"))
    for run in ("2026_01_01_00_00_00", "2026_02_01_00_00_00"):
        d = tmp_path / "logs" / "train" / "plugins" / "profile" / run
        d.mkdir(parents=True)
        (d / "hostA.xplane.pb").write_bytes(xfile.read_bytes())
    runs = find_runs(str(tmp_path / "logs"))
    assert [r.name for r in runs] == ["2026_01_01_00_00_00", "2026_02_01_00_00_00"]
    assert resolve(str(tmp_path / "logs")).name == "2026_02_01_00_00_00"
    assert resolve(str(tmp_path / "logs"), run="2026_01_01_00_00_00").name == "2026_01_01_00_00_00"
    one = resolve([str(runs[0].files[0])])
    assert one.files == runs[0].files
    trace = tfadvisor.load(str(tmp_path / "logs"))
    assert trace.hosts == ["hostA"]


def _plane_with_stats(stats) -> bytes:
    space = xplane_pb2.XSpace(hostnames=["h"])
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].id = 1
    p.event_metadata[1].name = "ev"
    p.event_metadata[1].display_name = "Event One"
    p.stat_metadata[7].id = 7
    p.stat_metadata[7].name = "payload"
    p.stat_metadata[8].id = 8
    p.stat_metadata[8].name = "kind"
    ms = p.event_metadata[1].stats.add(metadata_id=8)
    ms.str_value = "from-metadata"
    line = p.lines.add(id=3, name="python", display_name="Python", timestamp_ns=1000)
    e = line.events.add(metadata_id=1, offset_ps=5, duration_ps=10)
    for s in stats:
        e.stats.add().CopyFrom(s)
    return space.SerializeToString()


def test_gzip_stat_and_metadata_stats_and_display_names(tmp_path: Path):
    s = xplane_pb2.XStat(metadata_id=7, compressed_str_value=gzip.compress(b"hello " * 100))
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(_plane_with_stats([s]))
    trace = tfadvisor.load(str(f))
    plane = trace.planes[0]
    assert plane.ev_start_ps.tolist() == [1000 * 1000 + 5]
    assert plane.stat("payload").strings().tolist() == ["hello " * 100]
    assert plane.stat("kind").strings().tolist() == ["from-metadata"]  # metadata-level stat
    assert plane.event_display_names.tolist() == ["Event One"]
    assert plane.line_names.tolist() == ["Python"]
    assert trace.hostnames == ["h"]
    assert plane.stat("payload").kind.tolist() == [kinds.KIND_STR]


def test_sample_tree_listed(samples):
    """Every committed sample with an expected.toml holds at least one non-empty xplane.pb."""
    assert len(samples) >= 15, f"only {len(samples)} samples under {SAMPLES}"
    for name, path in samples.items():
        files = list(path.rglob("*.xplane.pb"))
        assert files and all(f.stat().st_size > 0 for f in files), f"{name}: no xplane.pb"


def test_load_and_analyze_from_gcs(gcs_emulator, monkeypatch, tmp_path):
    """A gs:// logdir through fsspec/gcsfs, against a real GCS emulator on loopback."""
    import http.client

    sample = SAMPLES / "multiworker_allreduce"
    host = gcs_emulator.split("//", 1)[1]
    conn = http.client.HTTPConnection(host, timeout=60)
    for f in sorted(sample.rglob("*.xplane.pb")):
        name = "logs/" + str(f.relative_to(sample))
        body = f.read_bytes()
        conn.request("POST", f"/upload/storage/v1/b/bkt/o?uploadType=media&name={name}", body=body,
                     headers={"Content-Length": str(len(body)), "Content-Type": "application/octet-stream"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200
    conn.close()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_emulator)
    remote = tfadvisor.load("gs://bkt/logs")
    local = tfadvisor.load(sample)
    assert sorted(remote.hosts) == sorted(local.hosts) == ["worker0", "worker1"]
    assert remote.n_events == local.n_events
    assert [r.name for r in find_runs("gs://bkt/logs")] == [r.name for r in find_runs(str(sample))]
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", "gs://bkt/logs", "--format", "json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert '"steps": 8' in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", "gs://bkt/nothing-here"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "gs://bkt/nothing-here" in proc.stderr


def test_notebook_views_of_a_plane():
    """``Plane.events()`` and ``StatColumn.per_event()``: the DataFrame/column views for notebooks."""
    plane = tfadvisor.load(SAMPLES / "input_bound_defaults_off").host_planes[0]
    df = plane.events()
    assert len(df) == plane.n_events
    assert df["start_ps"].tolist() == plane.ev_start_ps.tolist()
    rows = plane.events_named("train")
    sub = plane.events(rows)
    assert set(sub["name"]) == {"train"} and sub.index.tolist() == rows.tolist()
    step = plane.stat("step_num")
    full = step.per_event()
    assert full.shape == (plane.n_events,)
    assert np.isnan(full).sum() == plane.n_events - len(step)
    assert sorted(full[rows].astype(int).tolist()) == list(range(10))


# --------------------------------------------------------------------------- bounded cost, absurd values
def _write(tmp_path: Path, space: xplane_pb2.XSpace, name: str = "h") -> Path:
    f = tmp_path / f"{name}.xplane.pb"
    f.write_bytes(space.SerializeToString())
    return f


def test_lookup_tables_sized_by_the_ids_in_use(tmp_path: Path):
    from tfadvisor.io.reader import _lookup

    assert len(_lookup(np.array([4194303], np.int64))) == 0  # one huge id: binary search, no 16 MiB table
    assert len(_lookup(np.arange(1000, dtype=np.int64))) == 1000
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    for mid, name in ((4194303, "big"), (7, "small"), (2**40, "huge")):
        p.event_metadata[mid].name = name
    line = p.lines.add(id=1, name="python", timestamp_ns=1)
    for mid in (2**40, 7, 4194303, 99):
        line.events.add(metadata_id=mid, offset_ps=1, duration_ps=1)
    plane = tfadvisor.load(str(_write(tmp_path, space))).planes[0]
    assert plane.names_of(np.arange(4)).tolist() == ["huge", "small", "big", "<unknown>"]


@pytest.mark.parametrize("passes", ["one", "two"])
@pytest.mark.parametrize("n_lines, n_meta, line_type, meta_type", [
    (3, 5, np.int8, np.int8), (127, 127, np.int8, np.int8), (128, 300, np.int16, np.int16),
    (2, 40000, np.int8, np.int32)], ids=lambda v: str(v.__name__ if isinstance(v, type) else v))
def test_index_columns_in_the_fewest_bytes(tmp_path: Path, n_lines, n_meta, line_type, meta_type, passes,
                                           monkeypatch):
    """ev_line and ev_meta take the narrowest signed type that holds every line and metadata index and -1 (127 lines
    fit int8, 128 do not), with the same values (an unknown metadata id is -1 in any width); decoded in one pass (a
    small plane) or in two, which writes them in that type from the start."""
    if passes == "two":
        monkeypatch.setattr(reader, "SERIAL_BELOW_BYTES", 0)
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    for m in range(n_meta):
        p.event_metadata[m + 1].name = f"op{m}"
    want_line, want_meta = [], []
    for li in range(n_lines):
        line = p.lines.add(id=li + 1, name=f"t{li}", timestamp_ns=1)
        for k in range(2):
            mid = (li * 7 + k * 31) % (n_meta + 1)  # 0 is no metadata's id: unknown, -1
            line.events.add(metadata_id=mid, offset_ps=k + 1, duration_ps=1)
            want_line.append(li)
            want_meta.append(mid - 1)
    got = tfadvisor.load(str(_write(tmp_path, space))).planes[0]
    assert got.ev_line.dtype == line_type and got.ev_meta.dtype == meta_type
    assert got.ev_line.tolist() == want_line and got.ev_meta.tolist() == want_meta


@pytest.mark.parametrize("extra,value_type", [(None, np.int32), (2**31, np.int64), (-(2**31) - 1, np.int64),
                                               (0.5, np.int64)], ids=["ints", "above_int32", "below_int32", "double"])
def test_stat_values_in_int32_where_they_fit(tmp_path: Path, extra, value_type):
    """st_value is int32 when every payload lies in int32's range (a big device's millions of references), else
    int64; the stat columns give every value back as int64, the same (an int, a double's bits, a reference)."""
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.stat_metadata[1].name = "n"
    p.stat_metadata[2].name = "x"
    p.event_metadata[1].name = "ev"
    line = p.lines.add(id=1, name="t", timestamp_ns=1)
    for k, v in enumerate([0, -5, 2**31 - 1, -(2**31), 77]):
        line.events.add(metadata_id=1, offset_ps=k, duration_ps=1).stats.add(metadata_id=1, int64_value=v)
    if extra is not None:
        st = line.events.add(metadata_id=1, offset_ps=9, duration_ps=1).stats.add(metadata_id=2)
        if isinstance(extra, float):
            st.double_value = extra
        else:
            st.int64_value = extra
    got = tfadvisor.load(str(_write(tmp_path, space))).planes[0]
    assert got.st_value.dtype == value_type
    col = got.stat_columns(["n", "x"])
    assert col["n"].raw.dtype == np.int64 and col["n"].integers().tolist() == [0, -5, 2**31 - 1, -(2**31), 77]
    if extra is not None:
        assert col["x"].numeric().tolist() == [float(extra)]


def test_byte_identical_planes_are_read_once(tmp_path: Path):
    """A plane repeated byte for byte is dropped with a note; planes of the same size that differ are all kept."""
    space = xplane_pb2.XSpace()
    for dur in (5, 5, 7, 5):  # planes 0, 1 and 3 identical; plane 2 the same size, other bytes
        p = space.planes.add(id=1, name="/device:GPU:0")
        p.event_metadata[1].name = "kernel"
        p.lines.add(id=1, name="Stream #1", timestamp_ns=10).events.add(metadata_id=1, offset_ps=0, duration_ps=dur)
    sizes = {len(p.SerializeToString()) for p in space.planes}
    assert len(sizes) == 1  # the planes to tell apart are all of one size
    trace = tfadvisor.load(str(_write(tmp_path, space)))
    assert [int(p.ev_dur_ps[0]) for p in trace.planes] == [5, 7]
    assert any("2 plane(s) byte-identical to an earlier plane" in n for n in trace.load_notes["h"])


def test_plane_ref_value_beyond_int64(tmp_path: Path):
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.stat_metadata[1].name = "what"
    p.stats.add(metadata_id=1, ref_value=2**64 - 1)
    p.event_metadata[1].name = "ev"
    p.event_metadata[1].stats.add(metadata_id=1, ref_value=2**64 - 1)
    p.lines.add(id=1, name="python").events.add(metadata_id=1, offset_ps=0, duration_ps=1)
    plane = tfadvisor.load(str(_write(tmp_path, space))).planes[0]
    assert plane.stats == {"what": ""}
    assert plane.stat("what").strings().tolist() == [""]  # a reference to no stat name


def _gzip_plane(n_stats: int, each: int) -> xplane_pb2.XSpace:
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "op"
    p.stat_metadata[1].name = "payload"
    line = p.lines.add(id=1, name="python")
    blob = gzip.compress(b"a" * each, mtime=0)
    for i in range(n_stats):
        line.events.add(metadata_id=1, offset_ps=i, duration_ps=1).stats.add(metadata_id=1, compressed_str_value=blob)
    return space


def test_inflated_bytes_capped_per_file(tmp_path: Path, monkeypatch):
    from tfadvisor.io import reader

    monkeypatch.setattr(reader, "MAX_DECOMPRESSED_TOTAL_BYTES", 1 << 20)
    ok = tfadvisor.load(str(_write(tmp_path, _gzip_plane(2, 400_000), "ok")))
    assert ok.planes[0].stat("payload").strings().tolist() == ["a" * 400_000] * 2
    with pytest.raises(tfadvisor.TraceError, match="in total"):
        tfadvisor.load(str(_write(tmp_path, _gzip_plane(3, 400_000), "big")))


def test_plane_beyond_the_index_columns_is_a_trace_error(tmp_path: Path, monkeypatch):
    """A plane with more events than the int32 index columns hold (2^31 - 1) is refused before its columns are
    made, as one line naming the file; the bound lowered to 5 here stands in for 2^31 events."""
    from tfadvisor.io import reader

    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "op"
    line = p.lines.add(id=1, name="tf_Compute")
    for i in range(6):
        line.events.add(metadata_id=1, offset_ps=10 * i, duration_ps=5)
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(space.SerializeToString())
    assert [p.name for p in tfadvisor.load(str(f)).planes] == ["/host:CPU"]  # 6 events: within the bound
    monkeypatch.setattr(reader, "INDEX_MAX", 5)
    with pytest.raises(tfadvisor.TraceError, match="one plane holds 6 events") as info:
        tfadvisor.load(str(f))
    assert str(f) in str(info.value)


def test_byte_identical_planes_read_once(tmp_path: Path):
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/device:GPU:0")
    p.event_metadata[1].name = "k"
    p.lines.add(id=1, name="Stream #1(Compute)").events.add(metadata_id=1, offset_ps=5, duration_ps=10)
    data = space.SerializeToString()
    other = xplane_pb2.XSpace()
    other.planes.add(id=2, name="/device:GPU:1")
    f = tmp_path / "h.xplane.pb"
    f.write_bytes(data * 3 + other.SerializeToString())
    trace = tfadvisor.load(str(f))
    assert [p.name for p in trace.planes] == ["/device:GPU:0", "/device:GPU:1"]
    assert trace.n_events == 1
    assert any("2 plane(s) byte-identical" in n for n in trace.load_notes["h"])


@pytest.mark.parametrize("name", ["synthetic_kernel_launch", "multiworker_allreduce"])
def test_small_chunks_decode_like_protobuf(monkeypatch, name):
    """2 KiB chunks on the parallel path: long lines split into hundreds of chunks filled in parallel
    decode to the same columns as protobuf and as the unchunked serial decode."""
    from tfadvisor.io import reader

    sample = SAMPLES / name
    whole = tfadvisor.load(sample)
    seen: list[int] = []
    counting = wire.count_lines

    def count_and_record(*args):
        counting(*args)
        seen.append(int(args[10].max()))  # out_chunks: chunks per line

    monkeypatch.setattr(reader, "CHUNK_BYTES", 2048)
    monkeypatch.setattr(reader, "SERIAL_BELOW_BYTES", 0)
    monkeypatch.setattr(wire, "count_lines", count_and_record)
    chunked = tfadvisor.load(sample)
    assert seen and max(seen) >= 20, f"the longest line split into only {max(seen, default=0)} chunks"
    _assert_matches_protobuf(chunked)
    for a, b in zip(chunked.planes, whole.planes, strict=True):
        for col in ("ev_line", "ev_meta", "ev_start_ps", "ev_dur_ps", "st_event", "st_stat", "st_kind", "st_value"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), (a.name, col)


@pytest.mark.parametrize("sample", [d for d in sample_dirs() if d.name in (
    "synthetic_kernel_launch", "multiworker_allreduce", "input_bound_defaults_off", "keras_fit_spe4", "memory_heavy")],
    ids=lambda d: d.name)
def test_mapped_file_decodes_as_read_file(monkeypatch, sample: Path):
    """A file is mapped and decoded where it lies, its pages given back behind the decode (8 KiB chunks here: the
    pages of a line are given back while the other thread decodes its neighbours); the columns, strings and lines are
    those of the same file read into a buffer (a remote file's way)."""
    from tfadvisor.io import reader

    monkeypatch.setattr(reader, "CHUNK_BYTES", 8192)
    monkeypatch.setattr(reader, "SERIAL_BELOW_BYTES", 0)
    released: list[bool] = []
    decode = reader.decode_plane

    def spy(*args, release=False, **kw):
        released.append(release)
        return decode(*args, release=release, **kw)

    monkeypatch.setattr(reader, "decode_plane", spy)
    mapped = tfadvisor.load(sample)
    assert released and all(released), "the file was not decoded from its mapping"
    monkeypatch.setattr(reader, "_map", lambda fh, size: None)
    released.clear()
    read = tfadvisor.load(sample)
    assert released and not any(released)
    _assert_matches_protobuf(mapped)
    for a, b in zip(mapped.planes, read.planes, strict=True):
        for col in ("ev_line", "ev_meta", "ev_start_ps", "ev_dur_ps", "st_event", "st_stat", "st_kind", "st_value",
                    "str_pool", "str_off", "str_len"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), (a.name, col)
        for col in a.lines.columns:
            assert a.lines[col].tolist() == b.lines[col].tolist(), (a.name, col)


def test_serial_and_parallel_decode_agree(monkeypatch):
    from tfadvisor.io import reader

    sample = SAMPLES / "input_bound_defaults_off"
    monkeypatch.setattr(reader, "SERIAL_BELOW_BYTES", 0)
    par = tfadvisor.load(sample)
    monkeypatch.setattr(reader, "SERIAL_BELOW_BYTES", 1 << 40)
    ser = tfadvisor.load(sample)
    for a, b in zip(par.planes, ser.planes):
        for col in ("ev_line", "ev_meta", "ev_start_ps", "ev_dur_ps", "st_event", "st_stat", "st_kind", "st_value"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), col


MS = 10**9  # ps


def _window_space(with_task_env: bool = True) -> xplane_pb2.XSpace:
    """A 100 ms capture: sane events, and one of each absurd kind (marked by its stat)."""
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "ev"
    p.stat_metadata[1].name = "tag"
    line = p.lines.add(id=1, name="python", timestamp_ns=1000)  # 1 us into the capture
    events = [  # (tag, offset_ps, duration_ps)
        (0, 0, 10 * MS),
        (1, 20 * MS, -5),  # negative duration -> 0
        (2, -(2**63 - 1), 1),  # ~106 days before the line: dropped
        (3, 30 * MS, 3790794017630198651),  # longer than the capture: dropped
        (4, 60 * MS, 80 * MS),  # ends 40 ms after the capture: clipped
        (5, 2**63 - 1, 1),  # the start overflows int64 ps: dropped
        (6, 90 * MS, 5 * MS),  # ends inside the tolerance: kept as it is
    ]
    for tag, off, dur in events:
        e = line.events.add(metadata_id=1, offset_ps=off, duration_ps=dur)
        e.stats.add(metadata_id=1, int64_value=tag)
    if with_task_env:
        te = space.planes.add(id=2, name="Task Environment")
        te.stat_metadata[1].name = "profile_start_time"
        te.stat_metadata[2].name = "profile_stop_time"
        te.stats.add(metadata_id=1, uint64_value=1_700_000_000_000_000_000)
        te.stats.add(metadata_id=2, uint64_value=1_700_000_000_000_000_000 + 100_000_000)
    return space


def test_absurd_event_times_fixed_at_load_with_notes(tmp_path: Path):
    trace = tfadvisor.load(str(_write(tmp_path, _window_space())))
    plane = trace.planes[0]
    tags = plane.stat("tag").values_at(np.arange(plane.n_events)).astype(int).tolist()
    assert tags == [0, 1, 4, 6]  # the stats moved with their events
    start = 1000 * 1000
    assert plane.ev_start_ps.tolist() == [start, start + 20 * MS, start + 60 * MS, start + 90 * MS]
    limit = 100 * MS + 10 * MS  # window end + tolerance (10 ms, a tenth of the window)
    assert plane.ev_dur_ps.tolist() == [10 * MS, 0, limit - start - 60 * MS, 5 * MS]
    assert plane.max_end() <= limit
    assert plane.lines["n_events"].tolist() == [4] and plane.lines["first_event"].tolist() == [0]
    notes = " | ".join(trace.load_notes["h"])
    for text in ("1 event(s) with a negative duration", "1 event(s) whose start", "1 event(s) starting far outside",
                 "1 event(s) lasting longer", "1 event(s) ending after", "from the Task Environment plane"):
        assert text in notes, notes
    result = tfadvisor.analyze(str(tmp_path / "h.xplane.pb"))
    assert sum(n.startswith("load: ") for n in result.notes) == 5


def test_window_estimated_without_task_environment(tmp_path: Path):
    trace = tfadvisor.load(str(_write(tmp_path, _window_space(with_task_env=False))))
    tags = trace.planes[0].stat("tag").values_at(np.arange(trace.planes[0].n_events)).astype(int).tolist()
    assert tags == [0, 1, 4, 6]  # far-off and overlong events still caught; the rest within a rough window
    assert "estimated from the event starts" in " ".join(trace.load_notes["h"])


def test_sane_samples_untouched():
    from conftest import expected

    for sample in REAL:
        trace = tfadvisor.load(sample)
        declared = expected(sample).get("load_notes", [])
        got = [n for notes in trace.load_notes.values() for n in notes]
        assert len(got) == len(declared) and all(any(d in g for g in got) for d in declared), \
            (sample.name, trace.load_notes)


def test_repeated_plane_metadata_decoded_once_and_copied(tmp_path: Path, monkeypatch):
    """Planes whose metadata records are byte-identical (a pod's hosts repeat their GPUs' metadata) share one
    decode: each plane still gets its own arrays, and the metadata's strings land after that plane's own
    strings. A metadata stat that must be inflated is decoded every time, drawing on each file's budget."""
    from tfadvisor.io import reader

    def space(n_events: int, *, gz: bool = False) -> xplane_pb2.XSpace:
        sp = xplane_pb2.XSpace()
        p = sp.planes.add(id=3, name="/device:GPU:0")
        p.event_metadata[1].name = "kernel"
        p.stat_metadata[1].name = "label"
        p.stat_metadata[2].name = "own"
        if gz:
            p.event_metadata[1].stats.add(metadata_id=1, compressed_str_value=gzip.compress(b"m" * 600_000, mtime=0))
        else:
            p.event_metadata[1].stats.add(metadata_id=1, str_value="from metadata")
        line = p.lines.add(id=1, name="Stream #1(Compute)")
        for i in range(n_events):
            line.events.add(metadata_id=1, offset_ps=10 * i, duration_ps=5).stats.add(metadata_id=2, str_value=f"e{i}")
        return sp

    reader._META_CACHE.clear()
    a = tfadvisor.load(str(_write(tmp_path, space(1), "a"))).planes[0]
    b = tfadvisor.load(str(_write(tmp_path, space(3), "b"))).planes[0]
    assert len(reader._META_CACHE) == 1  # the second file's plane found the first's decode
    for plane, n in ((a, 1), (b, 3)):
        assert plane.stat("label").strings().tolist() == ["from metadata"] * n
        assert plane.stat("own").strings().tolist() == [f"e{i}" for i in range(n)]
    assert a.event_names is not b.event_names and a.meta_stats["raw"] is not b.meta_stats["raw"]
    a.event_names[0] = "changed"
    assert b.event_names.tolist() == ["kernel"]

    reader._META_CACHE.clear()
    monkeypatch.setattr(reader, "MAX_DECOMPRESSED_TOTAL_BYTES", 1 << 20)
    gz = space(1, gz=True)
    gz.planes.append(space(2, gz=True).planes[0])  # the same metadata again, in the same file: 2 x 600 KB
    ok = tfadvisor.load(str(_write(tmp_path, space(1, gz=True), "gz_ok"))).planes[0]
    assert ok.stat("label").strings().tolist() == ["m" * 600_000]
    assert not reader._META_CACHE  # inflated: never taken from the cache
    with pytest.raises(tfadvisor.TraceError, match="in total"):
        tfadvisor.load(str(_write(tmp_path, gz, "gz_big")))


@pytest.mark.parametrize("absurd", [200, 700], ids=["a_third_absurd", "most_absurd"])
def test_window_estimated_when_a_thread_is_absurd(tmp_path: Path, absurd: int):
    """A whole thread's starts ~58 days off (a third of the events, or most of them) and no Task Environment
    window: the window is estimated near the line starts, so every event of the 40-minute capture stays and
    only the absurd thread's events are dropped (the estimate over all starts spanned both: nothing was
    dropped, and a window length overflowed int64 later)."""
    space = xplane_pb2.XSpace()
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].name = "op"
    good = p.lines.add(id=1, name="tf_Compute", timestamp_ns=0)
    for i in range(400):
        good.events.add(metadata_id=1, offset_ps=i * 6 * 10**12, duration_ps=10**6)  # every 6 s over 40 min
    bad = p.lines.add(id=2, name="tf_Compute_2", timestamp_ns=0)
    for i in range(absurd):
        bad.events.add(metadata_id=1, offset_ps=5 * 10**18 + i, duration_ps=1)
    trace = tfadvisor.load(str(_write(tmp_path, space)))
    assert trace.planes[0].n_events == 400
    notes = " ".join(trace.load_notes["h"])
    assert f"{absurd} event(s) starting far outside the capture window" in notes, notes


def test_event_ends_without_a_column(monkeypatch):
    """Ends are computed where asked (no column of every end is kept): ``Plane.ends`` equals start + duration
    for rows, masks and slices, and ``Plane.max_end`` read in slices (of 5 events here) equals the largest."""
    import tfadvisor.model.trace as trace_model

    monkeypatch.setattr(trace_model, "END_SLICE", 5)
    trace = tfadvisor.load(SAMPLES / "custom_loop_python")
    for plane in trace.planes:
        if not plane.n_events:
            continue
        every = plane.ev_start_ps + plane.ev_dur_ps
        assert plane.max_end() == int(every.max())
        rows = np.arange(0, plane.n_events, 3)
        assert np.array_equal(plane.ends(rows), every[rows])
        assert np.array_equal(plane.ends(plane.ev_dur_ps > 0), every[plane.ev_dur_ps > 0])
        assert np.array_equal(plane.ends(slice(1, 4)), every[1:4])


# --- small planes in one pass ---------------------------------------------------------------------------------------

COLUMNS = ("ev_line", "ev_meta", "ev_start_ps", "ev_dur_ps", "st_event", "st_stat", "st_kind", "st_value", "str_off",
           "str_len", "str_pool")


def _planes_or_error(path: str):
    from tfadvisor.errors import TraceError

    try:
        trace = tfadvisor.load(path)
    except TraceError as err:
        return str(err)
    return [(p.name, p.stats_skipped, [getattr(p, c).tobytes() for c in COLUMNS],
             [list(p.lines[c]) for c in ("id", "name", "display_name", "timestamp_ns", "duration_ps", "first_event",
                                          "n_events")]) for p in trace.planes]


def test_one_pass_decode_gives_what_the_two_passes_give_or_their_error(tmp_path: Path, monkeypatch):
    """200 mutations of a sample's host file (bytes changed, some cut short): the one-pass decode of small
    planes, with its fall-back to the two passes on any error, gives the planes (or the one-line error, same byte)
    the two passes alone give. Some mutations must decode and some fail, or the test shows nothing."""
    import random

    from tfadvisor.io import reader

    src = next((SAMPLES / "input_bound_defaults_off").rglob("*.xplane.pb")).read_bytes()
    one_pass = reader._decode_serial
    rng = random.Random(11)
    outcomes = {"decoded": 0, "error": 0}
    for i in range(200):
        data = bytearray(src)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
        path = tmp_path / f"m{i}.xplane.pb"
        path.write_bytes(bytes(data))
        monkeypatch.setattr(reader, "_decode_serial", one_pass)
        got = _planes_or_error(str(path))
        monkeypatch.setattr(reader, "_decode_serial", lambda *a: None)
        assert got == _planes_or_error(str(path)), f"mutation {i}"
        outcomes["error" if isinstance(got, str) else "decoded"] += 1
    assert min(outcomes.values()) >= 10, outcomes


def test_one_pass_decode_refuses_columns_too_small():
    """Columns smaller than the plane: None (the caller then decodes in two passes), never a write past them; columns
    of exactly the plane's events: its events."""
    from tfadvisor.io import reader

    space = xplane_pb2.XSpace.FromString(next((SAMPLES / "input_bound_defaults_off").rglob("*.xplane.pb")).read_bytes())
    plane = max(space.planes, key=lambda p: sum(len(ln.events) for ln in p.lines))
    buf = np.frombuffer(plane.SerializeToString(), np.uint8)
    n = reader.decode_plane(buf, "h", "h.xplane.pb").n_events
    fld, wts, offs, lens, tag_at = (np.empty(1 << 16, np.int64) for _ in range(5))
    count, err, _ = wire.scan_fields(buf, 0, buf.shape[0], fld, wts, offs, lens, tag_at)
    assert err == wire.OK
    is_line = (fld[:count] == 3) & (wts[:count] == 2)
    line_off, line_len = offs[:count][is_line].copy(), lens[:count][is_line].copy()
    ids = np.array(sorted(plane.event_metadata), np.int64)
    st_ids = np.array(sorted(plane.stat_metadata), np.int64)
    for rows in (n, n - 1, 0):
        lines = np.zeros((len(line_off), wire.N_LINE_COLS), np.int64)
        i32, i64 = np.empty(rows, np.int32), np.empty(rows, np.int64)
        cap = int(line_len.sum())
        got = wire.decode_serial(buf, line_off, line_len, lines, np.empty(0, np.int32), ids, np.empty(0, np.int32),
                                 st_ids, i32, i32.copy(), i64, i64.copy(), np.empty(cap, np.int32),
                                 np.empty(cap, np.int32), np.empty(cap, np.uint8), np.empty(cap, np.int64),
                                 np.empty(cap, np.int64), np.empty(cap, np.int64))
        if rows == n:
            assert got is not None and got[0] == n
        else:
            assert got is None, rows
