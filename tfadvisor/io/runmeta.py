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
    notes.extend(keras_facts(md)[1])
    notes.extend(clock_facts(md)[1])
    return notes


#: ``keras.layers[]`` entries read as whole numbers: the layer's parameter count and its sizes.
LAYER_NUMBERS = ("params", "units", "filters", "input_dim", "output_dim", "num_heads", "key_dim")


def _names(value: Any) -> list[str] | None:
    """A list of non-empty strings (or one string), else None."""
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value):
        return list(value)
    return None


def _layer(row: Any) -> dict[str, Any] | None:
    """One ``keras.layers`` entry with the fields that can be used (None when it has no path of names)."""
    if not isinstance(row, dict):
        return None
    path = _names(row.get("path"))
    if not path:
        return None
    out: dict[str, Any] = {"path": path}
    if isinstance(row.get("class"), str) and row["class"]:
        out["class"] = row["class"]
    if isinstance(row.get("dtype_policy"), str) and row["dtype_policy"]:
        out["dtype_policy"] = row["dtype_policy"]
    for k in LAYER_NUMBERS:
        v = row.get(k)
        if v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) \
                and v >= 0 and v == int(v) and v < 2**63:
            out[k] = int(v)
    shape = row.get("output_shape")
    if isinstance(shape, list) and len(shape) <= 16 and all(
            d is None or (isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63) for d in shape):
        out["output_shape"] = shape
    return out


def keras_facts(md: dict) -> tuple[dict[str, Any], list[str]]:
    """The usable part of ``keras`` (what the Keras callback records of the model: layers, dtype policy, optimizer,
    compiled loss and metrics, steps_per_execution) and one note per field that cannot be used. Unusable layer
    entries are left out (counted in one note)."""
    k = md.get("keras")
    if k is None:
        return {}, []
    if not isinstance(k, dict):
        return {}, [f"tfadvisor_run.json: keras = {_shown(k)} is not an object (the model's facts): ignored"]
    out: dict[str, Any] = {}
    notes: list[str] = []
    for key in ("model", "class", "dtype_policy"):
        v = k.get(key)
        if isinstance(v, str) and v:
            out[key] = v
        elif v is not None:
            notes.append(f"tfadvisor_run.json: keras.{key} = {_shown(v)} is not a name: ignored")
    rows = k.get("layers")
    if rows is not None:
        if isinstance(rows, (list, tuple)):
            good = [r for r in (_layer(x) for x in rows) if r is not None]
            out["layers"] = good
            if len(good) < len(rows):
                notes.append(f"tfadvisor_run.json: {len(rows) - len(good)} of the {len(rows)} keras.layers entries "
                             "have no path of layer names: ignored")
        else:
            notes.append(f"tfadvisor_run.json: keras.layers = {_shown(rows)} is not a list: ignored")
    for key in ("loss", "metrics"):
        v = k.get(key)
        if v is not None:
            names = _names(v)
            if names is None and isinstance(v, (list, tuple)) and not v:
                names = []
            if names is None:
                notes.append(f"tfadvisor_run.json: keras.{key} = {_shown(v)} is not a list of names: ignored")
            else:
                out[key] = names
    opt = k.get("optimizer")
    if opt is not None:
        if isinstance(opt, dict) and isinstance(opt.get("class"), str) and opt["class"]:
            cfg = opt.get("config")
            out["optimizer"] = {"class": opt["class"],
                                "config": {str(a): b for a, b in cfg.items() if b is None or isinstance(
                                    b, (bool, int, str)) or (isinstance(b, float) and math.isfinite(b))}
                                if isinstance(cfg, dict) else {}}
        else:
            notes.append(f"tfadvisor_run.json: keras.optimizer = {_shown(opt)} names no optimizer class: ignored")
    spe = k.get("steps_per_execution")
    if spe is not None:
        n = positive(spe, True)
        if n is None:
            notes.append(f"tfadvisor_run.json: keras.steps_per_execution = {_shown(spe)} is not a positive whole "
                         "number: ignored")
        else:
            out["steps_per_execution"] = n
    return out, notes


#: ``clock``: the sides of the profiled window the Keras callback times, and the kinds of interval it records.
CLOCK_SIDES = ("before", "inside", "after")
CLOCK_KINDS = ("", "validation", "epoch_end")
#: At most this many intervals a side (the callback writes at most ``clock_steps``, 5,000 by default).
MAX_CLOCK = 100_000


def _ms_list(v: Any, n: int | None) -> list[float] | None:
    """A list of finite numbers >= 0 (of length ``n`` when given), else None."""
    if not isinstance(v, list) or len(v) > MAX_CLOCK or (n is not None and len(v) != n):
        return None
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0 for x in v):
        return None
    return [float(x) for x in v]


def _clock_side(s: Any) -> dict[str, list] | None:
    """One side of ``clock`` (``ms``, ``steps``, ``kind``, ``eval_ms``: one entry per interval), or None."""
    if not isinstance(s, dict):
        return None
    ms = _ms_list(s.get("ms"), None)
    if ms is None:
        return None
    n = len(ms)
    steps = s.get("steps")
    if not isinstance(steps, list) or len(steps) != n or any(positive(x, True) is None or isinstance(x, float)
                                                               for x in steps):
        return None
    kind = s.get("kind", [""] * n)
    if not isinstance(kind, list) or len(kind) != n or any(k not in CLOCK_KINDS for k in kind):
        return None
    ev = _ms_list(s.get("eval_ms", [0.0] * n), n)
    if ev is None:
        return None
    return {"ms": ms, "steps": [int(x) for x in steps], "kind": list(kind), "eval_ms": ev}


def clock_facts(md: dict) -> tuple[dict[str, Any], list[str]]:
    """The usable part of ``clock`` (the Keras callback's wall clock per execution of training steps before, inside
    and after the profiled window, no profiler outside it: ``{side: {ms, steps, kind, eval_ms}}``, one entry per
    interval from an execution's start to the next one's, ``kind`` saying what came between: ``validation``,
    ``epoch_end`` or nothing) and one note per side that cannot be used."""
    c = md.get("clock")
    if c is None:
        return {}, []
    if not isinstance(c, dict):
        return {}, [f"tfadvisor_run.json: clock = {_shown(c)} is not an object (the unprofiled step times): ignored"]
    out: dict[str, Any] = {}
    notes: list[str] = []
    for side in CLOCK_SIDES:
        if c.get(side) is None:
            continue
        got = _clock_side(c[side])
        if got is None:
            notes.append(f"tfadvisor_run.json: clock.{side} is not lists of equal length (ms and eval_ms finite "
                         f"numbers >= 0, steps positive whole numbers, kind one of {CLOCK_KINDS}, at most "
                         f"{MAX_CLOCK:,}): ignored")
        else:
            out[side] = got
    return out, notes


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


__all__ = ["CLOCK_KINDS", "CLOCK_SIDES", "NUMBER_FIELDS", "UNREADABLE_KEY", "clock_facts", "ignored_fields",
           "keras_facts", "positive", "steps_per_execution"]
