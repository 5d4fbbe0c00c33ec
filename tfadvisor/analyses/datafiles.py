"""Check the training data files: how many, how big, and whether their sizes suit tf.data.

``check_data_files(path_or_glob) -> AnalysisResult`` (name ``datafiles``) lists a local
directory, file or glob, or a remote one (``gs://bucket/dir``, ``gs://bucket/train-*``;
any fsspec protocol, gcsfs for GCS), and summarises the file sizes. It only lists and
stats: no file is ever opened, so a check of 2,000,000 files costs one directory walk (one
paged listing on GCS), not 2,000,000 reads. Sizes go straight into a compact int64 array
(8 bytes a file); only the ten largest paths are kept.

Thresholds (binary units, as ``ls -h`` and the reports show sizes):

* **small**: under 1 MiB (:data:`SMALL_FILE_BYTES`). Each file costs an open and a request
  (tens of ms on GCS); millions of tiny files make input slow however fast the reader is.
  Pack them into TFRecord shards of 1-128 MiB (:data:`SHARD_RANGE_BYTES`).
* **huge**: 1 GiB or more (:data:`HUGE_FILE_BYTES`). A handful of huge files limits how many
  can be read in parallel (``interleave`` reads whole files) and how well they shuffle.

Metrics (units in brackets): ``data_files_count`` (files), ``data_total_bytes``,
``data_file_min_bytes``, ``data_file_median_bytes``, ``data_file_p90_bytes``,
``data_largest_file_bytes``, ``data_file_mean_bytes``, ``data_small_files_count``,
``data_small_files_pct`` (% of files under 1 MiB), ``data_huge_files_count`` (files of 1 GiB
or more), ``data_huge_files_pct``, ``data_shard_range_pct`` (% of files within 1-128 MiB),
``data_path`` (what was checked). Tables: ``data_files_sizes`` (one row per size bucket:
bucket, lo_bytes, hi_bytes, files, files_pct, bytes, bytes_pct, class) and
``data_largest_files`` (path, bytes).
"""

from __future__ import annotations

import glob as _glob
import heapq
import os
import stat as _stat
from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np

from tfadvisor.analyses.base import AnalysisResult, declare
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import filesystem as remote_filesystem
from tfadvisor.model.table import Table
from tfadvisor.units import human_bytes

KiB, MiB, GiB = 1024, 1024**2, 1024**3
SMALL_FILE_BYTES = 1 * MiB
HUGE_FILE_BYTES = 1 * GiB
SHARD_RANGE_BYTES = (1 * MiB, 128 * MiB)
TOP_N = 10

#: Size buckets of the ``data_files_sizes`` table: [lo, hi) and their class.
BUCKETS = (
    ("< 10 KiB", 0, 10 * KiB, "small"),
    ("10-100 KiB", 10 * KiB, 100 * KiB, "small"),
    ("100 KiB-1 MiB", 100 * KiB, 1 * MiB, "small"),
    ("1-16 MiB", 1 * MiB, 16 * MiB, "ok"),
    ("16-128 MiB", 16 * MiB, 128 * MiB, "ok"),
    ("128 MiB-1 GiB", 128 * MiB, 1 * GiB, "large"),
    (">= 1 GiB", 1 * GiB, None, "huge"),
)

_GLOB_CHARS = set("*?[")


def check_data_files(path_or_glob: str, *, storage_options: dict | None = None, filesystem: Any = None,
                     small_bytes: int = SMALL_FILE_BYTES, huge_bytes: int = HUGE_FILE_BYTES) -> AnalysisResult:
    """List the files at ``path_or_glob`` (never reading them) and summarise their sizes.

    ``storage_options`` go to ``fsspec.filesystem`` for remote paths; ``filesystem`` is an
    fsspec filesystem to use instead. With ``STORAGE_EMULATOR_HOST`` set (a local GCS
    emulator), ``gs://`` paths use gcsfs's plain ``GCSFileSystem`` with anonymous access.
    Raises :class:`TraceError` when nothing is there to check.
    """
    path = str(path_or_glob)
    sizes = array("q")
    top: list[tuple[int, str]] = []  # min-heap of the TOP_N largest (size, path)
    for size, name in _listing(path, storage_options, filesystem):
        sizes.append(size)
        if len(top) < TOP_N:
            heapq.heappush(top, (size, name()))
        elif size > top[0][0]:
            heapq.heapreplace(top, (size, name()))
    if not sizes:
        raise TraceError(path, "no files found to check (--data wants a directory, a file or a glob)")
    return summarise(np.frombuffer(sizes, dtype=np.int64), path, top, small_bytes=small_bytes,
                     huge_bytes=huge_bytes)


DECLARED = declare(
    "datafiles",
    ("data_path", "", "the training data checked (directory, file or glob)"),
    ("data_files_count", "files", "number of training data files"),
    ("data_total_bytes", "bytes", "total size of the training data files"),
    ("data_file_min_bytes", "bytes", "smallest file"),
    ("data_file_median_bytes", "bytes", "median file size"),
    ("data_file_p90_bytes", "bytes", "90th percentile of file size"),
    ("data_largest_file_bytes", "bytes", "largest file"),
    ("data_file_mean_bytes", "bytes", "mean file size"),
    ("data_small_files_count", "files", "files under 1 MiB"),
    ("data_small_files_pct", "%", "share of files under 1 MiB"),
    ("data_huge_files_count", "files", "files of 1 GiB or more"),
    ("data_huge_files_pct", "%", "share of files of 1 GiB or more"),
    ("data_shard_range_pct", "%", "share of files in the recommended shard size range 1 MiB-128 MiB"),
    doc="Not in `ORDER`: runs on `--data DIR_OR_GLOB`, `tfadvisor/analyses/datafiles.py`; lists/stats only.",
    tables="`data_files_sizes` (bucket, lo_bytes, hi_bytes, files, files_pct, bytes, bytes_pct, class: "
           "small/ok/large/huge), `data_largest_files` (path, bytes)",
)


def summarise(sizes: np.ndarray, path: str = "", top: list[tuple[int, str]] | None = None, *,
              small_bytes: int = SMALL_FILE_BYTES, huge_bytes: int = HUGE_FILE_BYTES) -> AnalysisResult:
    """Metrics and tables from an array of file sizes (bytes)."""
    res = AnalysisResult("datafiles")
    n = int(sizes.size)
    total = int(sizes.sum())
    small = int((sizes < small_bytes).sum())
    huge = int((sizes >= huge_bytes).sum())
    in_range = int(((sizes >= SHARD_RANGE_BYTES[0]) & (sizes <= SHARD_RANGE_BYTES[1])).sum())
    res.add("data_path", path)
    res.add("data_files_count", n)
    res.add("data_total_bytes", total)
    res.add("data_file_min_bytes", int(sizes.min()))
    res.add("data_file_median_bytes", float(np.median(sizes)))
    res.add("data_file_p90_bytes", float(np.percentile(sizes, 90)))
    res.add("data_largest_file_bytes", int(sizes.max()))
    res.add("data_file_mean_bytes", total / n)
    res.add("data_small_files_count", small, doc=f"files under {_h(small_bytes)}")
    res.add("data_small_files_pct", small / n * 100, doc=f"share of files under {_h(small_bytes)}")
    res.add("data_huge_files_count", huge, doc=f"files of {_h(huge_bytes)} or more")
    res.add("data_huge_files_pct", huge / n * 100, doc=f"share of files of {_h(huge_bytes)} or more")
    res.add("data_shard_range_pct", in_range / n * 100,
            doc=f"share of files in the recommended shard size range {_h(SHARD_RANGE_BYTES[0])}-"
            f"{_h(SHARD_RANGE_BYTES[1])}")
    rows = []
    for label, lo, hi, cls in BUCKETS:
        mask = (sizes >= lo) if hi is None else ((sizes >= lo) & (sizes < hi))
        cnt = int(mask.sum())
        b = int(sizes[mask].sum()) if cnt else 0
        rows.append(dict(bucket=label, lo_bytes=lo, hi_bytes=hi, files=cnt, files_pct=cnt / n * 100, bytes=b,
                         bytes_pct=(b / total * 100) if total else 0.0, **{"class": cls}))
    res.tables["data_files_sizes"] = Table({k: [r[k] for r in rows] for k in rows[0]}, n=len(rows))
    largest = sorted(top or [], reverse=True)
    res.tables["data_largest_files"] = Table(
        {"path": [p for _, p in largest], "bytes": np.array([s for s, _ in largest], dtype=np.int64)},
        n=len(largest))
    res.notes.append(f"{n:,} files, {_h(total)} in all, median {_h(float(np.median(sizes)))}; "
                     f"{small / n * 100:.1f} % under {_h(small_bytes)}, {huge} of {_h(huge_bytes)} or more")
    return res


def _h(n: float) -> str:
    return human_bytes(n).replace(".0 ", " ")


# --------------------------------------------------------------------------- listing


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _listing(path: str, storage_options: dict | None, filesystem: Any = None) -> Iterator[tuple[int, Any]]:
    """(size, name thunk) for every file; the thunk makes the path string only when needed."""
    if _is_remote(path):
        yield from _remote(path, storage_options or {}, filesystem)
        return
    if path.startswith("file://"):
        path = path[len("file://"):]
    path = os.path.expanduser(path)
    if _GLOB_CHARS & set(path):
        matched = False
        for p in _glob.iglob(path, recursive=True):
            matched = True
            yield from _local_entry(p)
        if not matched:
            raise TraceError(path, "no files match this pattern")
        return
    if not os.path.exists(path):
        raise TraceError(path, "no such file or directory")
    yield from _local_entry(path)


def _local_entry(p: str) -> Iterator[tuple[int, Any]]:
    try:
        st = os.stat(p)
    except OSError:
        return
    if _stat.S_ISDIR(st.st_mode):
        yield from _walk(p)
    elif _stat.S_ISREG(st.st_mode):
        yield st.st_size, (lambda p=p: p)


def _walk(root: str) -> Iterator[tuple[int, Any]]:
    """os.scandir walk: d_type says file/dir without a syscall; stat only for the size."""
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir():
                        if not e.is_symlink():  # no loops through symlinked dirs
                            stack.append(e.path)
                    elif e.is_file():
                        yield e.stat().st_size, (lambda e=e: e.path)
                except OSError:  # vanished or broken link
                    continue


def _remote(path: str, storage_options: dict, filesystem: Any = None) -> Iterator[tuple[int, Any]]:
    protocol = path.split("://", 1)[0]
    fs = filesystem if filesystem is not None else remote_filesystem(path, **storage_options)
    try:
        if _GLOB_CHARS & set(path.split("://", 1)[1]):
            found = fs.glob(path, detail=True)
            if not found:
                raise TraceError(path, "no files match this pattern")
            dirs = [k for k, v in found.items() if v.get("type") == "directory"]
            yield from _remote_files(protocol, found)
            del found
            for d in dirs:
                yield from _remote_files(protocol, fs.find(d, detail=True))
        else:
            try:
                info = fs.info(path)
            except FileNotFoundError:
                raise TraceError(path, "no such file or directory") from None
            if info.get("type") == "file":
                yield int(info.get("size") or 0), (lambda: path)
            else:
                yield from _remote_files(protocol, fs.find(path, detail=True))
    except TraceError:
        raise
    except FileNotFoundError:
        raise TraceError(path, "no such file or directory") from None
    except Exception as err:  # noqa: BLE001 - remote stores raise many kinds
        raise TraceError(path, f"cannot list ({type(err).__name__}: {err})") from None
    finally:
        try:
            fs.invalidate_cache()  # do not keep a million-entry listing cached
        except Exception:  # noqa: BLE001
            pass


def _remote_files(protocol: str, found: dict) -> Iterator[tuple[int, Any]]:
    for name, info in found.items():
        if info.get("type", "file") != "file":
            continue
        size = info.get("size")
        if size is None:
            continue
        yield int(size), (lambda name=name: name if "://" in name else f"{protocol}://{name}")
