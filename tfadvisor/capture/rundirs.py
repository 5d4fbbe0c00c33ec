"""The run directory a capture wrote (``<logdir>/plugins/profile/<run>/``), found by what changed under
the logdir. Local paths, or remote ones (``gs://``): fsspec/gcsfs when installed, else ``tf.io.gfile``."""

from __future__ import annotations

import os
from typing import Any

from tfadvisor.capture.base import import_tf
from tfadvisor.discovery import XPLANE_SUFFIX, is_remote

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


class Remote:
    """Listing, reading and writing ``gs://`` (and other remote) paths: fsspec/gcsfs when installed
    (``tfadvisor[gcs]``/``[vertex]``; no TensorFlow needed), else TensorFlow's ``tf.io.gfile``."""

    def __init__(self, path: str) -> None:
        self.protocol = path.split("://", 1)[0]
        self.fs = None
        try:
            from tfadvisor.discovery import filesystem

            self.fs = filesystem(path)
        except Exception:  # noqa: BLE001 - no fsspec: TensorFlow's file system, if any
            self.gfile = import_tf().io.gfile

    def _full(self, p: str) -> str:
        return p if "://" in p else f"{self.protocol}://{p}"

    def glob(self, pattern: str) -> list[str]:
        if self.fs is None:
            return list(self.gfile.glob(pattern))
        return [self._full(p) for p in self.fs.glob(pattern)]

    def signature(self, path: str) -> tuple[int, int]:
        if self.fs is None:
            st = self.gfile.stat(path)
            return int(st.length), int(getattr(st, "mtime_nsec", 0))
        info = self.fs.info(path)
        return int(info.get("size") or 0), _version(info)

    def listdir(self, d: str) -> list[str]:
        if self.fs is None:
            return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.gfile.listdir(d)]
        return [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(d, detail=False)]

    def exists(self, path: str) -> bool:
        return bool(self.gfile.exists(path) if self.fs is None else self.fs.exists(path))

    def read(self, path: str) -> str:
        if self.fs is None:
            with self.gfile.GFile(path, "r") as fh:
                return fh.read()
        with self.fs.open(path, "r") as fh:
            return fh.read()

    def write(self, path: str, text: str) -> None:
        if self.fs is None:
            with self.gfile.GFile(path, "w") as fh:
                fh.write(text)
            return
        with self.fs.open(path, "w") as fh:
            fh.write(text)


def snapshot_runs(logdir: str) -> Snapshot:
    """The host files under ``<logdir>/plugins/profile`` with their size and version."""
    root = profile_root(logdir)
    out: Snapshot = {}
    if is_remote(str(logdir)):
        try:
            remote = Remote(root)
            for f in remote.glob(f"{root}/*/*{XPLANE_SUFFIX}"):
                out[f] = remote.signature(f)
        except Exception:  # noqa: BLE001 - remote listing problems: treat as empty
            pass
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
            return Remote(d).listdir(d)
        except Exception:  # noqa: BLE001 - no listing: no names
            return []
    try:
        return os.listdir(d)
    except OSError:
        return []
