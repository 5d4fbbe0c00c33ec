"""The one number formatter of the reports: terminal, Markdown, HTML, the plots and ``tfadvisor diff``.

- :func:`fmt_num`: about 3 significant figures, thousands separators, no scientific notation and
  no padding zeros (``0.04``, ``1.5``, ``12.3``, ``1,234``).
- :func:`fmt_bytes`: binary units (``1.5 GiB``).
- :func:`fmt_value`: a metric's value with its unit (``78.2 %``, ``12.3 ms``, ``2,000 files``); the
  unit from the caller, the metrics' declared units or the name's suffix (:func:`unit_of`).
- :func:`tick_labels`: one axis' tick set, every label with the same decimals.

Not a number (None, NaN, infinity) reads ``n/a``, a boolean ``yes``/``no``, text as it is. Nothing
heavy is imported here (no numpy, pandas or jinja2): the terminal report and ``diff`` use it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from tfadvisor.units import human_bytes

#: Units that name what is counted: the number is written alone.
COUNT_UNITS = ("", "count", "counts", "n")


def _scalar(v: Any) -> Any:
    """A numpy scalar as the Python value it holds (numpy is not imported for it)."""
    if hasattr(v, "item") and getattr(v, "shape", None) == ():
        return v.item()
    return v


def fmt_num(v: Any, digits: int = 3) -> str:
    """``v`` with about ``digits`` significant figures (``n/a`` when it is no finite number; text that
    is no number as it is)."""
    v = _scalar(v)
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
    if math.isnan(f) or math.isinf(f):
        return "n/a"
    if f == 0:
        return "0"
    if f.is_integer() and abs(f) < 1e15:
        return f"{int(f):,}"
    if abs(f) >= 10**digits:
        return f"{f:,.0f}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(f)))))
    s = f"{f:.{min(decimals, 6)}f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def fmt_bytes(n: Any) -> str:
    """A size in binary units (``n/a`` when it is no finite number)."""
    n = _scalar(n)
    if n is None or isinstance(n, bool):
        return "n/a"
    try:
        f = float(n)
    except (TypeError, ValueError):
        return str(n)
    return "n/a" if math.isnan(f) or math.isinf(f) else human_bytes(f)


def unit_of(name: str, units: Mapping[str, str] | None = None) -> str:
    """A metric's unit: declared in ``units``, else read from its name (``_pct``, ``_ms``, ``_bytes``...)."""
    unit = (units or {}).get(name) or ""
    if unit:
        return unit
    if "_ms_per_" in name:
        return "ms"
    for suffix, u in (("_bytes", "bytes"), ("_pct", "%"), ("_ms", "ms"), ("_us", "us")):
        if name.endswith(suffix):
            return u
    return ""


def fmt_value(v: Any, unit: str = "", name: str = "", units: Mapping[str, str] | None = None) -> str:
    """A metric value with its unit, human-readable: ``78.2 %``, ``1.5 GiB``, ``12.3 ms``, ``3 files``.

    ``unit`` wins; without it the unit ``units`` declares for ``name``, else the one its suffix says."""
    v = _scalar(v)
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, set, frozenset)):
        return ", ".join(str(_scalar(x)) for x in v)
    unit = unit or unit_of(name, units)
    if fmt_num(v) == "n/a":
        return "n/a"
    if unit in ("bytes", "B"):
        return fmt_bytes(v)
    if unit in ("%", "pct", "percent"):
        return f"{fmt_num(v)} %"
    if unit == "fraction":  # a share of 1 reads as a percentage
        return f"{fmt_num(100 * float(v))} %"
    if unit in COUNT_UNITS:
        return fmt_num(v)
    return f"{fmt_num(v)} {unit}"


def _decimals(v: float) -> int:
    """The fewest decimals that write ``v`` exactly (at most 6)."""
    for d in range(7):
        if abs(round(v, d) - v) <= 1e-9 * max(1.0, abs(v)):
            return d
    return 6


def tick_labels(ticks: list[float], unit: str = "") -> list[str]:
    """The labels of one tick set, all with the same decimals (``0.0 0.5 1.0 1.5``, ``0 2 4``)."""
    if unit == "bytes":
        return [fmt_bytes(v).replace(".0 ", " ") for v in ticks]
    d = max((_decimals(t) for t in ticks), default=0)
    return [f"{t:,.{d}f}" for t in ticks]


__all__ = ["COUNT_UNITS", "fmt_bytes", "fmt_num", "fmt_value", "tick_labels", "unit_of"]
