"""Find profile runs and host files under a TensorBoard logdir (local or ``gs://``).

Layout written by the TF profiler: ``<logdir>/plugins/profile/<run>/<host>.xplane.pb``;
the Keras TensorBoard callback adds ``train/`` in front. A run is one directory of host
files; run names are timestamps (``YYYY_MM_DD_HH_MM_SS``) so they sort by time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from tfadvisor.errors import TraceError
from tfadvisor.model.names import XPLANE_SUFFIX, host_name

LEGACY_SUFFIXES = (".trace.json.gz", ".trace.json")
RUN_METADATA_FILE = "tfadvisor_run.json"


@dataclass(frozen=True)
class Run:
    """One profiling session: a directory and its host files."""

    name: str
    directory: str
    files: tuple[str, ...]
    logdir: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    #: labels of the other runs found beside this one (when it was chosen from several)
    others: tuple[str, ...] = field(default=(), compare=False)
    #: how it was chosen from several: ``newest`` (the default) or ``--run``; "" when it was the only one
    picked_by: str = field(default="", compare=False)

    @property
    def hosts(self) -> list[str]:
        return [host_name(f) for f in self.files]

    def label(self) -> str:
        """The run's path relative to the logdir it was found in."""
        if self.logdir and self.directory.startswith(self.logdir):
            rel = self.directory[len(self.logdir) :].strip("/")
            return rel or self.name
        return self.directory

    def selection(self) -> str | None:
        """One line saying which run was taken when the logdir holds several (None otherwise)."""
        if not self.others:
            return None
        n = len(self.others) + 1
        shown = ", ".join(self.others[:5]) + (f" (+{len(self.others) - 5} more)" if len(self.others) > 5 else "")
        how = "the newest" if self.picked_by == "newest" else "chosen with --run"
        return f"{self.label()}, {how} of {n} runs (others: {shown}; pick one with --run NAME)"


def host_runs(run: Run) -> dict[str, Run]:
    """Per host, ``run`` with that host's files only: what its per-host task loads and is sent (a run of
    many hosts is not sent, nor searched, whole for each of them)."""
    files: dict[str, list[str]] = {}
    for f in run.files:
        files.setdefault(host_name(f), []).append(f)
    return {h: replace(run, files=tuple(fs)) for h, fs in files.items()}


def is_remote(path: str) -> bool:
    return "://" in str(path) and not str(path).startswith("file://")


def filesystem(path: str, **storage_options):
    """An fsspec filesystem for a remote path, with a clear error when the extra is missing.

    With ``STORAGE_EMULATOR_HOST`` set (a local GCS emulator), ``gs://`` uses gcsfs's plain
    ``GCSFileSystem`` with anonymous access: gcsfs >= 2025 otherwise first asks the
    storage-control gRPC API for the bucket type, which emulators do not serve.
    """
    try:
        import fsspec
    except ImportError:
        raise TraceError(path, "remote paths need fsspec/gcsfs: pip install 'tfadvisor[gcs]'") from None
    protocol = str(path).split("://", 1)[0]
    try:
        if protocol in ("gs", "gcs") and os.environ.get("STORAGE_EMULATOR_HOST"):
            from gcsfs.core import GCSFileSystem

            host = os.environ["STORAGE_EMULATOR_HOST"]
            host = host if host.startswith(("http://", "https://")) else f"http://{host}"
            return GCSFileSystem(**{"token": "anon", "endpoint_url": host, **storage_options})
        return fsspec.filesystem(protocol, **storage_options)
    except (ImportError, ValueError) as err:
        raise TraceError(path, f"cannot open {protocol}:// paths ({err}); pip install 'tfadvisor[gcs]'") from None


def _listing(root: str) -> list[str]:
    """Every file path under ``root`` (recursive)."""
    if is_remote(root):
        fs = filesystem(root)
        protocol = root.split("://", 1)[0]
        try:
            found = fs.find(root)
        except FileNotFoundError:
            raise TraceError(root, "no such file or directory") from None
        except Exception as err:  # noqa: BLE001 - remote stores raise many kinds
            raise TraceError(root, f"cannot list ({type(err).__name__}: {err})") from None
        return [f if "://" in f else f"{protocol}://{f}" for f in found]
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out.extend(os.path.join(dirpath, f) for f in files)
    return out


def _exists_dir(path: str) -> bool:
    if is_remote(path):
        fs = filesystem(path)
        try:
            return bool(fs.isdir(path))
        except Exception:  # noqa: BLE001
            return False
    return os.path.isdir(path)


def _exists_file(path: str) -> bool:
    if is_remote(path):
        fs = filesystem(path)
        try:
            return bool(fs.isfile(path))
        except Exception:  # noqa: BLE001
            return False
    return os.path.isfile(path)


def find_runs(logdir: str) -> list[Run]:
    """All runs under ``logdir``, oldest first."""
    root = str(logdir).rstrip("/") if is_remote(str(logdir)) else str(Path(logdir))
    if not _exists_dir(root):
        if _exists_file(root):
            raise TraceError(root, "is a file, not a directory")
        raise TraceError(root, "no such file or directory")
    files = _listing(root)
    by_dir: dict[str, list[str]] = {}
    legacy = []
    for f in files:
        if f.endswith(XPLANE_SUFFIX):
            by_dir.setdefault(f.rsplit("/", 1)[0] if is_remote(f) else os.path.dirname(f), []).append(f)
        elif f.endswith(LEGACY_SUFFIXES):
            legacy.append(f)
    if not by_dir:
        if legacy:
            raise TraceError(
                legacy[0],
                "legacy trace.json.gz profile (TF < 2.2); tfadvisor reads .xplane.pb files: "
                "re-capture with tf.profiler.experimental (TF >= 2.2)",
            )
        raise TraceError(root, "no profile found (no *.xplane.pb under this directory)")
    runs = [
        Run(name=d.rstrip("/").rsplit("/", 1)[-1], directory=d, files=tuple(sorted(fs)), logdir=root)
        for d, fs in by_dir.items()
    ]
    runs.sort(key=lambda r: (r.name, r.directory))
    return runs


def resolve(paths: str | os.PathLike | list | tuple, run: str | None = None) -> Run:
    """Turn what the user gave (logdir, run dir, or .xplane.pb files) into one Run."""
    items = [str(p) for p in paths] if isinstance(paths, (list, tuple)) else [str(paths)]
    if not items:
        raise TraceError("(no path)", "nothing to analyse")
    if all(p.endswith(XPLANE_SUFFIX) or _exists_file(p) for p in items) and not any(
        _exists_dir(p) for p in items
    ):
        for p in items:
            if not _exists_file(p):
                raise TraceError(p, "no such file")
            if p.endswith(LEGACY_SUFFIXES):
                raise TraceError(
                    p,
                    "legacy trace.json.gz profile (TF < 2.2); tfadvisor reads .xplane.pb files: "
                    "re-capture with tf.profiler.experimental (TF >= 2.2)",
                )
        directory = os.path.dirname(items[0]) if not is_remote(items[0]) else items[0].rsplit("/", 1)[0]
        return Run(name=directory.rstrip("/").rsplit("/", 1)[-1] or ".", directory=directory, files=tuple(items))
    if len(items) > 1:
        raise TraceError(items[1], "give one logdir or run directory, or several .xplane.pb files")
    runs = find_runs(items[0])
    chosen = runs[-1] if run is None else pick_run(runs, run, items[0])
    others = tuple(r.label() for r in runs if r is not chosen)
    return replace(chosen, others=others, picked_by=("newest" if run is None else "--run") if others else "")


def pick_run(runs: list[Run], name: str, where: str) -> Run:
    """The run ``--run NAME`` means: an exact label or directory, else an exact name, else a unique
    prefix of a name or label. Several candidates at the deciding level are bad input."""
    levels = (
        [r for r in runs if r.label() == name or r.directory == name],
        [r for r in runs if r.name == name],
        [r for r in runs if r.name.startswith(name) or r.label().startswith(name)] if name else [],
    )
    for found in levels:
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            names = ", ".join(r.label() for r in found)
            raise TraceError(where, f"--run {name!r} matches {len(found)} runs: {names}; give one of them in full")
    names = ", ".join(r.label() for r in runs)
    raise TraceError(where, f"no run named {name!r} (runs: {names})")
