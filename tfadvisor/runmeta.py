"""Checks on a run's ``tfadvisor_run.json``: other tools (and people) write it, so any field may
hold a string, NaN, 1e400 or a list. A bad field is ignored with a note, never a crash."""

from __future__ import annotations

import math
from typing import Any

#: Where the reader puts why the whole file was not used (broken JSON, not an object): a note, never a
#: reason to reject a good profile.
UNREADABLE_KEY = "_unreadable"

#: Fields read as numbers: name -> (integer?, what it is).
NUMBER_FIELDS = {
    "param_count": (True, "a parameter count"),
    "replicas": (True, "a replica count"),
    "batch_size": (True, "a batch size"),
    "bandwidth_gbps": (False, "a bandwidth in GB/s"),
}


def positive(value: Any, integer: bool) -> int | float | None:
    """A finite positive number (an int for ``integer``), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(x) or x <= 0 or (integer and (x != int(x) or x >= 2**63)):
        return None
    return int(x) if integer else x


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def ignored_fields(md: dict) -> list[str]:
    """One note per known field whose value cannot be used (or one for a file that could not be read)."""
    notes = []
    if isinstance(md.get(UNREADABLE_KEY), str):
        notes.append(md[UNREADABLE_KEY])
    for name, (integer, what) in NUMBER_FIELDS.items():
        if name in md and md[name] is not None and positive(md[name], integer) is None:
            kind = "a positive whole number" if integer else "a positive number"
            notes.append(f"tfadvisor_run.json: {name} = {_shown(md[name])} is not {kind} ({what}): ignored")
    if "link" in md and md["link"] is not None and not (isinstance(md["link"], str) and md["link"]):
        notes.append(f"tfadvisor_run.json: link = {_shown(md['link'])} is not a link name: ignored")
    hosts = md.get("hosts")
    if hosts is not None and not isinstance(hosts, (list, tuple)) and positive(hosts, True) is None:
        notes.append(f"tfadvisor_run.json: hosts = {_shown(hosts)} is not a host count or list: ignored")
    spe, bad = steps_per_execution(md)
    if spe is None and bad is not None:
        notes.append(f"tfadvisor_run.json: steps_per_execution = {_shown(bad)} is not a positive whole number "
                     "(training steps per step marker): ignored")
    names = md.get("host_names")
    if names is not None and not isinstance(names, (list, tuple)):
        notes.append(f"tfadvisor_run.json: host_names = {_shown(names)} is not a list: ignored")
    return notes


def steps_per_execution(md: dict) -> tuple[int | None, Any]:
    """Training steps per step marker: ``steps.steps_per_execution`` (the Keras callback writes it)
    or a top-level ``steps_per_execution``. Returns (k or None, the unusable value or None)."""
    steps = md.get("steps")
    raw = steps.get("steps_per_execution") if isinstance(steps, dict) else None
    if raw is None:
        raw = md.get("steps_per_execution")
    if raw is None:
        return None, None
    k = positive(raw, True)
    return (k, None) if k is not None else (None, raw)


__all__ = ["NUMBER_FIELDS", "UNREADABLE_KEY", "ignored_fields", "positive", "steps_per_execution"]
