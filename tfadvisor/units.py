"""Formatting helpers every stage may use (no dependencies): sizes in binary units."""

from __future__ import annotations


def human_bytes(n: float) -> str:
    """Binary units, as ``ls -h`` and the reports show sizes: ``1.5 MiB``."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


__all__ = ["human_bytes"]
