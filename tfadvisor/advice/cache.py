"""A rule file's checked rules, kept by content: a run reads them back instead of parsing the file's TOML and
checking its expressions again (the 12 built-in files: ~35 ms of every run).

One JSON file per rule file in the user's cache directory: ``TFADVISOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfadvisor``,
else ``~/.cache/tfadvisor`` (absolute ones only); ``TFADVISOR_CACHE_DIR=`` (empty) turns it off. Never beside the
rules, never in a logdir. An entry holds its key, a SHA-256 of all that checking the file reads
(:func:`tfadvisor.advice.rules.load_file`: its bytes and path, the metric names a rule may use, the vocabularies it is
checked against, the source of the modules that parse and check it, Python's version). An entry under another key is
not used: the file is parsed and checked, and the entry replaced. A file with an error is never kept (its error is
raised every time). Written to a temporary file, then renamed: concurrent writers leave one whole entry, a reader
never sees half of one; a directory that cannot be written (a read-only home) means no cache, and an entry that
cannot be read is one to rewrite. Expressions read back are parsed when a rule first evaluates them
(:meth:`~tfadvisor.advice.expr.Expr.unchecked`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def cache_dir() -> Path | None:
    """Where entries are kept; None when ``TFADVISOR_CACHE_DIR`` is set empty, or no absolute cache directory or home
    is known (a relative one would be the working directory's: perhaps the logdir)."""
    env = os.environ.get("TFADVISOR_CACHE_DIR")
    if env is not None:
        return Path(env) if env else None
    xdg, home = os.environ.get("XDG_CACHE_HOME", ""), os.path.expanduser("~")
    if os.path.isabs(xdg):
        return Path(xdg) / "tfadvisor"
    return Path(home) / ".cache" / "tfadvisor" if os.path.isabs(home) else None


def _entry(path: Path) -> Path | None:
    d = cache_dir()
    if d is None:
        return None
    return d / f"rules-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]}.json"


def read(path: Path, key: str) -> Any:
    """What :func:`write` kept for ``path`` under ``key``; None when nothing is, or under another key."""
    entry = _entry(path)
    if entry is None:
        return None
    try:
        doc = json.loads(entry.read_bytes())
        return doc["value"] if isinstance(doc, dict) and doc.get("key") == key else None
    except (OSError, ValueError, KeyError):  # none, or not one this wrote
        return None


def write(path: Path, key: str, value: Any) -> None:
    """Keep ``value`` (JSON) for ``path`` under ``key``, replacing what was kept; nothing when it cannot be written."""
    entry = _entry(path)
    if entry is None:
        return
    import tempfile  # only when an entry is written

    text = json.dumps({"key": key, "value": value})
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=entry.name, suffix=".tmp", dir=entry.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, entry)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:  # read-only, full or missing: this run keeps no entry
        pass
