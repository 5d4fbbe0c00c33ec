"""The run directory a capture wrote (``<logdir>/plugins/profile/<run>/``), found by what changed under
the logdir. Local paths, or remote ones (``gs://``) through fsspec/gcsfs (``tfadvisor[gcs]``)."""

from __future__ import annotations

import os
from typing import Any

from tfadvisor.io.discovery import XPLANE_SUFFIX, filesystem, is_remote

#: ``{host file: (size, version)}``: what a logdir held at one moment
Snapshot = dict[str, tuple[int, int]]


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
