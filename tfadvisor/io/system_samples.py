"""The system samples file ``tfadvisor_system.<host>.npz``: its format, writer and strict reader.

The capture helpers (:mod:`tfadvisor.capture.system_sampler`) sample the machine while the profiler
runs and write one file per host beside the profile, in the run directory::

    <logdir>/plugins/profile/<run>/<host>.xplane.pb
    <logdir>/plugins/profile/<run>/tfadvisor_system.<host>.npz

The file is a numpy ``.npz`` (zip of ``.npy`` arrays, compressed, no pickled objects), one
array per column, one row per sample (10 Hz by default: ~1 KB per second of capture):

=====================  ==========  =========================================================
array                  shape       meaning
=====================  ==========  =========================================================
``meta``               ()          JSON text (below)
``t_unix_s``           (n,)        sample time, seconds since the epoch (float64, ascending)
``cpu_pct``            (n,)        CPU busy, % of all cores, since the previous sample
``cpu_core_pct``       (n, cores)  CPU busy per core, %
``proc_cpu_pct``       (n,)        the training process, % of one core (can exceed 100)
``proc_rss_bytes``     (n,)        the training process's resident memory
``mem_available_bytes`` (n,)       host memory available (free + reclaimable)
``swap_used_bytes``    (n,)        swap in use
``swap_in_bytes``      (n,)        cumulative bytes swapped in (out: ``swap_out_bytes``)
``disk_read_bytes``    (n,)        cumulative bytes read from all disks (``disk_write_bytes``)
``disk_busy_ms``       (n, disks)  cumulative time each disk was busy (iostat's %util source)
``proc_read_chars``    (n,)        cumulative bytes the process read through syscalls
                                   (page cache included)
``net_recv_bytes``     (n,)        cumulative bytes received, all interfaces but loopback
                                   (``net_sent_bytes``)
``gpu_util_pct``       (n, gpus)   GPU busy % (NVML / amdsmi); only with a GPU sampler
``gpu_mem_used_bytes`` (n, gpus)   GPU memory in use
``gpu_power_w``        (n, gpus)   GPU power draw, W
=====================  ==========  =========================================================

Every column but ``t_unix_s`` is float (NaN = not available on this platform). Cumulative
columns are turned into rates by the reader's user (:mod:`tfadvisor.analyses.system`).

``meta`` keys: ``format`` (``"tfadvisor_system"``), ``version`` (1), ``host``, ``pid``,
``hz``, ``cpu_count``, ``mem_total_bytes``, ``mem_limit_bytes`` (cgroup limit, else total),
``swap_total_bytes``, ``disks`` (names), ``gpu_sampler`` (``"nvml"``, ``"amdsmi"`` or null),
``gpu_note`` (why there is none, e.g. ``"no GPU sampler: ..."``), ``gpus`` ([{name,
memory_total_bytes, power_limit_w}]), ``started_unix_s``, ``stopped_unix_s``,
``profile_start_unix_s`` (when the profiler started: aligns samples with the trace),
``sampler_cpu_s`` (CPU time the sampler itself used), ``samples_dropped``, and ``origin``
(``"captured"`` by the sampler, or ``"recorded"`` when built from recorded readings).

Reading is strict: :func:`load_samples` raises :class:`SamplesError` (one line naming the
file and the problem) for anything that is not such a file; the analysis turns that into a
note, never a crash.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfadvisor.io.discovery import filesystem, host_name, is_remote

PREFIX = "tfadvisor_system."
SUFFIX = ".npz"
FORMAT = "tfadvisor_system"
VERSION = 1
MAX_BYTES = 256 * 2**20  # a day at 10 Hz is ~100 MB; anything larger is not ours

#: 1-D columns, all required.
SERIES = ("cpu_pct", "proc_cpu_pct", "proc_rss_bytes", "mem_available_bytes", "swap_used_bytes", "swap_in_bytes",
          "swap_out_bytes", "disk_read_bytes", "disk_write_bytes", "proc_read_chars", "net_recv_bytes",
          "net_sent_bytes")
#: 2-D columns (n, k); the GPU ones only with a GPU sampler.
MATRICES = ("cpu_core_pct", "disk_busy_ms")
GPU_MATRICES = ("gpu_util_pct", "gpu_mem_used_bytes", "gpu_power_w")
CUMULATIVE = ("swap_in_bytes", "swap_out_bytes", "disk_read_bytes", "disk_write_bytes", "proc_read_chars",
              "net_recv_bytes", "net_sent_bytes", "disk_busy_ms")
PERCENT = ("cpu_pct", "cpu_core_pct", "gpu_util_pct")


class SamplesError(ValueError):
    """A samples file that cannot be used: ``str(err)`` is ``path: problem``."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass
class Samples:
    """One host's samples: ``meta`` and the columns (see the module docs)."""

    path: str
    meta: dict[str, Any]
    columns: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return int(self.columns["t_unix_s"].shape[0])

    @property
    def t(self) -> np.ndarray:
        return self.columns["t_unix_s"]

    @property
    def gpu_count(self) -> int:
        g = self.columns.get("gpu_util_pct")
        return int(g.shape[1]) if g is not None else 0

    @property
    def gpu_sampler(self) -> str | None:
        return self.meta.get("gpu_sampler") if self.gpu_count else None


def file_name(host: str) -> str:
    """``tfadvisor_system.<host>.npz`` (characters that do not belong in a file name become ``_``)."""
    safe = "".join(c if c.isalnum() or c in "-_.:" else "_" for c in str(host)) or "host"
    return f"{PREFIX}{safe}{SUFFIX}"


# --------------------------------------------------------------------------- writing


def encode(columns: dict[str, Any], meta: dict[str, Any]) -> bytes:
    """The file's bytes for ``columns`` (checked like a read) and ``meta``."""
    arrays: dict[str, np.ndarray] = {}
    for name, value in columns.items():
        arr = np.asarray(value)
        arrays[name] = arr.astype(np.float64 if name == "t_unix_s" else (
            np.float32 if name in PERCENT or name in ("proc_cpu_pct", "gpu_power_w") else np.float64))
    full = {"format": FORMAT, "version": VERSION, **meta}
    arrays["meta"] = np.array(json.dumps(full, sort_keys=True, default=str))
    validate("(to write)", full, arrays)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def write_samples(path: str, columns: dict[str, Any], meta: dict[str, Any]) -> str:
    """Write a samples file (local, atomically; or remote through fsspec / ``tf.io.gfile``); the path."""
    data = encode(columns, meta)
    if is_remote(path):
        try:
            fs = filesystem(path)
            with fs.open(path, "wb") as fh:
                fh.write(data)
        except Exception:  # noqa: BLE001 - no fsspec for this scheme: TensorFlow's file system
            import tensorflow as tf

            with tf.io.gfile.GFile(path, "wb") as fh:
                fh.write(data)
        return path
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return path


# --------------------------------------------------------------------------- reading


def find_samples(run_dir: str, files: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``{host: samples path}`` for the hosts of ``files`` (``.xplane.pb`` paths) in ``run_dir``.

    A host's file is ``tfadvisor_system.<host>.npz``. When the run has one host file and one
    samples file under another name (a host renamed by a remote capture), that one is used.
    """
    hosts = [host_name(f) for f in files]
    names = _listdir(run_dir)
    out = {h: _join(run_dir, file_name(h)) for h in hosts if file_name(h) in names}
    if not out and len(hosts) == 1:
        ours = [n for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX)]
        if len(ours) == 1:
            out[hosts[0]] = _join(run_dir, ours[0])
    return out


def _join(d: str, name: str) -> str:
    return f"{d.rstrip('/')}/{name}" if is_remote(d) else os.path.join(d, name)


def _listdir(d: str) -> set[str]:
    try:
        if is_remote(d):
            return {p.rstrip("/").rsplit("/", 1)[-1] for p in filesystem(d).ls(d, detail=False)}
        return set(os.listdir(d))
    except Exception:  # noqa: BLE001 - an unlistable directory has no samples
        return set()


def _read_bytes(path: str) -> bytes:
    if is_remote(path):
        fs = filesystem(path)
        size = fs.size(path)
        if size is not None and size > MAX_BYTES:
            raise SamplesError(path, f"too large for a samples file ({size:,} bytes)")
        with fs.open(path, "rb") as fh:
            return fh.read()
    size = os.path.getsize(path)
    if size > MAX_BYTES:
        raise SamplesError(path, f"too large for a samples file ({size:,} bytes)")
    with open(path, "rb") as fh:
        return fh.read()


def load_samples(path: str) -> Samples:
    """Read and check a samples file; :class:`SamplesError` for anything wrong with it."""
    try:
        data = _read_bytes(path)
    except SamplesError:
        raise
    except Exception as err:  # noqa: BLE001
        raise SamplesError(path, f"cannot read ({type(err).__name__}: {err})") from None
    if not data:
        raise SamplesError(path, "empty file")
    if not data.startswith(b"PK"):
        raise SamplesError(path, "not a numpy .npz archive")
    import zipfile  # np.load's own reader of .npz: imported where a samples file is read, not by every analysis

    arrays: dict[str, np.ndarray] = {}
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            for name in z.files:
                if len(arrays) > 64:
                    raise SamplesError(path, "too many arrays")
                arrays[name] = z[name]
    except SamplesError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, RuntimeError) as err:
        raise SamplesError(path, f"corrupt archive ({type(err).__name__}: {err})") from None
    if "meta" not in arrays:
        raise SamplesError(path, "no meta array")
    meta_arr = arrays["meta"]
    if meta_arr.shape != () or meta_arr.dtype.kind != "U":
        raise SamplesError(path, "meta is not a JSON string")
    try:
        meta = json.loads(str(meta_arr))
    except ValueError as err:
        raise SamplesError(path, f"meta is not valid JSON ({err})") from None
    validate(path, meta, arrays)
    cols = {k: v for k, v in arrays.items() if k != "meta"}
    return Samples(path=path, meta=meta, columns=cols)


def validate(path: str, meta: Any, arrays: dict[str, np.ndarray]) -> None:
    """Raise :class:`SamplesError` unless ``meta`` and ``arrays`` follow the format."""
    if not isinstance(meta, dict):
        raise SamplesError(path, "meta is not a JSON object")
    if meta.get("format") != FORMAT:
        raise SamplesError(path, f"not a tfadvisor system samples file (format {meta.get('format')!r})")
    if meta.get("version") != VERSION:
        raise SamplesError(path, f"unsupported samples version {meta.get('version')!r} "
                                 f"(this tfadvisor reads {VERSION})")
    t = arrays.get("t_unix_s")
    if t is None:
        raise SamplesError(path, "no t_unix_s column")
    if t.ndim != 1 or t.dtype.kind != "f":
        raise SamplesError(path, f"t_unix_s must be a 1-D float array, got shape {t.shape} {t.dtype}")
    n = t.shape[0]
    if n and (not np.all(np.isfinite(t)) or np.any(np.diff(t) < 0)):
        raise SamplesError(path, "t_unix_s is not finite and ascending")
    if n and (t[0] < 1e9 or t[-1] > 1e10):
        raise SamplesError(path, "t_unix_s is not in seconds since the epoch")
    for name in SERIES + MATRICES:
        if name not in arrays:
            raise SamplesError(path, f"missing column {name}")
    gpu = [g for g in GPU_MATRICES if g in arrays]
    if gpu and len(gpu) != len(GPU_MATRICES):
        raise SamplesError(path, f"GPU columns incomplete: has {', '.join(gpu)}")
    widths: dict[str, int] = {}
    for name, arr in arrays.items():
        if name in ("meta", "t_unix_s"):
            continue
        if name not in SERIES + MATRICES + GPU_MATRICES:
            raise SamplesError(path, f"unknown column {name}")
        if arr.dtype.kind != "f":
            raise SamplesError(path, f"column {name} is not a float array ({arr.dtype})")
        want = 1 if name in SERIES else 2
        if arr.ndim != want or arr.shape[0] != n:
            shape = "(n,)" if want == 1 else "(n, k)"
            raise SamplesError(path, f"column {name} has shape {arr.shape}, expected {shape} with n = {n}")
        if want == 2:
            widths[name] = arr.shape[1]
        vals = arr[np.isfinite(arr)]
        if vals.size and vals.min() < 0:
            raise SamplesError(path, f"column {name} has negative values")
        if name in PERCENT and vals.size and vals.max() > 100.5:
            raise SamplesError(path, f"column {name} has values above 100 %")
        if np.isinf(arr).any():
            raise SamplesError(path, f"column {name} has infinite values")
    if gpu and len({widths[g] for g in GPU_MATRICES}) != 1:
        raise SamplesError(path, "GPU columns disagree on the number of GPUs")
    cores = meta.get("cpu_count")
    if cores is not None and (not isinstance(cores, int) or cores != widths["cpu_core_pct"]):
        raise SamplesError(path, f"meta cpu_count {cores!r} does not match the "
                                 f"{widths['cpu_core_pct']} cores of cpu_core_pct")


__all__ = ["CUMULATIVE", "FORMAT", "GPU_MATRICES", "MATRICES", "PREFIX", "SERIES", "Samples", "SamplesError",
           "VERSION", "encode", "file_name", "find_samples", "load_samples", "validate", "write_samples"]
