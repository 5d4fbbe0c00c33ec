"""The run directory a capture wrote (``<logdir>/plugins/profile/<run>/``). Locally the profiler writes
into a staging directory of its own process, which :func:`publish` moves into the logdir without ever
replacing another process's file; remote logdirs (``gs://``, through fsspec/gcsfs, ``tfadvisor[gcs]``)
are written directly and the run found by what changed under the logdir."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from typing import Any

from tfadvisor.io.discovery import XPLANE_SUFFIX, filesystem, is_remote

#: ``{host file: (size, version)}``: what a logdir held at one moment
Snapshot = dict[str, tuple[int, int]]


#: Under a local logdir: one directory per profiling process, ``<pid>-<ns>``, while its profile is written.
STAGING_DIR = ".tfadvisor_staging"


def staging_dir(logdir: str) -> str:
    """A directory of this process's own, under ``logdir``, for the profiler to write into."""
    return os.path.join(logdir, STAGING_DIR, f"{os.getpid()}-{time.time_ns()}")


def publish(stage: str, logdir: str) -> list[str]:
    """Move the run(s) the profiler wrote under ``stage`` into ``<logdir>/plugins/profile/``; the host files moved.

    Two processes that profile into one logdir and stop within the same second get the same run directory
    (TensorFlow names it by the second) and, on one machine, the same ``<host>.xplane.pb``: a file name
    already taken gets this process's id (``<host>_<pid>.xplane.pb``, a host of its own), never written over.
    The staging directory is removed; what cannot be moved stays there (and is still found as a run).
    """
    src_root = profile_root(stage)
    moved: list[str] = []
    runs = sorted(os.listdir(src_root)) if os.path.isdir(src_root) else []
    for run in runs:
        src_dir = os.path.join(src_root, run)
        dst_dir = os.path.join(profile_root(logdir), run)
        os.makedirs(dst_dir, exist_ok=True)
        for name in sorted(os.listdir(src_dir)):
            dst = _place(os.path.join(src_dir, name), dst_dir, name)
            if dst.endswith(XPLANE_SUFFIX):
                moved.append(dst)
    drop_stage(stage)
    return moved


def drop_stage(stage: str) -> None:
    """Remove a staging directory, and the staging root once no process uses it."""
    shutil.rmtree(stage, ignore_errors=True)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(stage))


def _place(src: str, dst_dir: str, name: str) -> str:
    """Move ``src`` to ``dst_dir`` under ``name``, or under a name with the process id when it is taken."""
    pid = os.getpid()
    base = name[: -len(XPLANE_SUFFIX)] if name.endswith(XPLANE_SUFFIX) else None
    candidates = [name] + ([f"{base}_{pid}{XPLANE_SUFFIX}", f"{base}_{pid}_{time.time_ns()}{XPLANE_SUFFIX}"]
                           if base is not None else [f"{pid}_{name}", f"{pid}_{time.time_ns()}_{name}"])
    for cand in candidates:
        dst = os.path.join(dst_dir, cand)
        try:
            os.link(src, dst)  # fails when dst exists: another process's file is never replaced
        except FileExistsError:
            continue
        except OSError:  # no hard links on this file system
            if os.path.exists(dst):
                continue
            os.replace(src, dst)
            return dst
        os.remove(src)
        return dst
    raise FileExistsError(f"{dst_dir}: every name for {name} is taken")


def profile_root(logdir: str) -> str:
    return f"{str(logdir).rstrip('/')}/plugins/profile"


def _version(info: dict[str, Any]) -> int:
    stamp = info.get("generation") or info.get("updated") or info.get("mtime") or info.get("LastModified")
    try:
        return int(stamp)
    except (TypeError, ValueError):
        return hash(str(stamp))


def snapshot_runs(logdir: str) -> Snapshot:
    """The host files under ``<logdir>/plugins/profile`` with their size and version.

    A remote logdir that cannot be listed (no fsspec/gcsfs, no access) raises.
    """
    root = profile_root(logdir)
    out: Snapshot = {}
    if is_remote(str(logdir)):
        fs = filesystem(root)
        protocol = root.split("://", 1)[0]
        for f in fs.glob(f"{root}/*/*{XPLANE_SUFFIX}"):
            info = fs.info(f)
            out[f if "://" in f else f"{protocol}://{f}"] = (int(info.get("size") or 0), _version(info))
        return out
    if not os.path.isdir(root):
        return out
    for run in os.listdir(root):
        d = os.path.join(root, run)
        if not os.path.isdir(d):
            continue
        for f in os.listdir(d):
            if f.endswith(XPLANE_SUFFIX):
                p = os.path.join(d, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def changed_files(logdir: str, before: Snapshot) -> list[str]:
    """Host files written under ``logdir`` since ``before``."""
    return [f for f, sig in snapshot_runs(logdir).items() if before.get(f) != sig]


def new_run_dirs(logdir: str, before: Snapshot) -> list[str]:
    """Run directories holding files written since ``before``, oldest first."""
    return sorted({f.rsplit("/", 1)[0] if "://" in f else os.path.dirname(f) for f in changed_files(logdir, before)})


def new_run_dir(logdir: str, before: Snapshot) -> str | None:
    """The newest run directory holding files written since ``before``."""
    dirs = new_run_dirs(logdir, before)
    return dirs[-1] if dirs else None


def list_names(d: str) -> list[str]:
    """The names in directory ``d`` (local or remote); [] when it cannot be listed."""
    if is_remote(d):
        try:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in filesystem(d).ls(d, detail=False)]
        except Exception:  # noqa: BLE001 - no listing: no names
            return []
    try:
        return os.listdir(d)
    except OSError:
        return []
