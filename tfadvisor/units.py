"""Helpers every stage may use (no dependencies): sizes in binary units, finite numbers."""

from __future__ import annotations

import math
from typing import Any


def finite_number(v: Any) -> float | None:
    """``v`` as a float, or None for None, booleans, text, NaN and infinity."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def human_bytes(n: float) -> str:
    """Binary units, as ``ls -h`` and the reports show sizes: ``1.5 MiB``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


__all__ = ["finite_number", "human_bytes"]
