"""Reporters: they take a :class:`tfadvisor.api.Result` and render it.

``terminal.print_result`` (rich, 80 columns), ``json_report.result_to_dict`` (the stable JSON
shape), ``markdown.render_markdown`` and ``html.write_html``. Reporters may import
``tfadvisor.advice``; nothing in the pipeline imports them.

The helpers below are shared by the terminal and JSON reporters: the step-time summary and
breakdown read from the metrics, and value formatting.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from tfadvisor.units import human_bytes

#: Step-time categories (metric ``step_<name>_pct``) in display order, with labels.
BREAKDOWN = (
    ("device_compute", "device compute"),
    ("input", "input"),
    ("host_compute", "host compute"),
    ("kernel_launch", "kernel launch"),
    ("collective", "collectives"),
    ("idle", "idle"),
    ("other", "other"),
)

STEP_TIME_KEYS = ("mean", "median", "p90", "min", "max")


def plain(value: Any) -> Any:
    """A JSON-safe Python value: numpy scalars unwrapped, NaN/inf -> None, containers recursed."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return plain(value.item())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    return str(value)


def get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or dict key: findings may be Finding objects or their ``to_dict()``."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def run_label(result: Any) -> str:
    """The result's run as the reports name it (``?`` when it has none)."""
    run = getattr(result, "run", None)
    if run is None:
        return "?"
    try:
        return run.label()
    except Exception:  # noqa: BLE001 - a hand-made run object
        return str(getattr(run, "directory", None) or getattr(run, "name", run))


def step_time(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """``{mean, median, p90, min, max}`` in ms from the steps analysis (None where unknown)."""
    return {k: plain(metrics.get(f"step_time_{k}_ms")) for k in STEP_TIME_KEYS}


def breakdown(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Known step-time category shares (% of step time), in display order."""
    out = {}
    for key, _ in BREAKDOWN:
        v = plain(metrics.get(f"step_{key}_pct"))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


def format_number(v: Any, digits: int = 3) -> str:
    """About ``digits`` significant figures, thousands separators, no scientific notation
    (``n/a`` for None and NaN; a value that is no number as text)."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, numbers.Integral):
        return f"{int(v):,}"
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if math.isnan(f):
        return "n/a"
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    if f == 0:
        return "0"
    if f.is_integer() and abs(f) < 1e15:
        return f"{int(f):,}"
    if abs(f) >= 10**digits:
        return f"{f:,.0f}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(f)))))
    return f"{f:.{min(decimals, 6)}f}"


def unit_of(name: str, units: Mapping[str, str] | None = None) -> str:
    unit = (units or {}).get(name) or ""
    if unit:
        return unit
    if "_ms_per_" in name:
        return "ms"
    for suffix, u in (("_bytes", "bytes"), ("_pct", "%"), ("_ms", "ms"), ("_us", "us")):
        if name.endswith(suffix):
            return u
    return ""


def format_metric(name: str, value: Any, units: Mapping[str, str] | None = None) -> str:
    """A metric value with its unit, human-readable: ``78.2 %``, ``1.5 GiB``, ``12.3 ms``."""
    value = plain(value)
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    unit = unit_of(name, units)
    if unit in ("bytes", "B"):
        return human_bytes(value)
    if unit in ("%", "pct", "percent"):
        return f"{format_number(value)} %"
    if unit == "fraction":  # a share of 1 reads as a percentage
        return f"{format_number(100 * float(value))} %"
    if unit in ("ms", "us", "s", "GB/s"):
        return f"{format_number(value)} {unit}"
    return format_number(value)


__all__ = ["BREAKDOWN", "STEP_TIME_KEYS", "breakdown", "format_metric", "format_number", "get", "human_bytes", "plain",
           "run_label", "step_time", "unit_of"]
