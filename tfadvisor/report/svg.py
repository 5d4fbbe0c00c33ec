"""SVG primitives for the HTML report's plots: escaping, round ticks, and the pieces a plot is made of.

Every plot (report/plots.py, stepchart.py, busyidle.py, system_plot.py) is a ``<svg>`` of width
:data:`W` in viewBox units, opened by :func:`begin` and closed with ``</svg>``, built from
:func:`text`, :func:`rect`, :func:`legend` and the axes; when its data is absent it is the
:func:`missing` box instead. Every trace-derived string goes through :func:`esc` (op names contain
``<``, ``>`` and ``&``); the pieces here escape what they are given.
"""

from __future__ import annotations

import html as _html
import math
from typing import Any

from tfadvisor.report.formatting import tick_labels

W = 760  # viewBox width of every plot
FONT = 11
#: Series colours (colour-blind friendly-ish), in the order plots take them.
PALETTE = ("#4e79a7", "#e15759", "#f28e2b", "#76b7b2", "#59a14f", "#bab0ac", "#b07aa1", "#edc948",
           "#ff9da7", "#9c755f")


# --------------------------------------------------------------------------- escaping and ticks


def esc(value: Any) -> str:
    """HTML/SVG-escape any value (quotes too, so it is safe inside attributes)."""
    return _html.escape("" if value is None else str(value), quote=True)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0, 1.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    t = start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 12))
    return ticks


def byte_ticks(hi: float, n: int = 4) -> list[float]:
    """Round ticks in binary units (0, 1 GiB, 2 GiB, ...) covering [0, hi]."""
    scale = 1.0
    while hi / scale >= 1024 and scale < 1024**4:
        scale *= 1024
    return [t * scale for t in nice_ticks(0, hi / scale, n)]


# --------------------------------------------------------------------------- pieces


def missing(plot_id: str, title: str, why: str) -> str:
    """The box shown instead of a plot whose data this trace does not have."""
    return (f'<div class="missing" id="{esc(plot_id)}" role="note"><strong>{esc(title)}</strong>: '
            f"not in this trace: {esc(why)}</div>")


def begin(plot_id: str, height: int, title: str) -> str:
    """A plot's opening ``<svg>`` tag (``W`` wide, ``height`` high) with its ``<title>``; the caller closes it."""
    return (f'<svg id="{esc(plot_id)}" class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" '
            f'width="100%" role="img" aria-label="{esc(title)}" font-family="sans-serif" font-size="{FONT}">'
            f"<title>{esc(title)}</title>")


def text(x: float, y: float, s: str, anchor: str = "start", extra: str = "") -> str:
    """A ``<text>`` at (x, y); ``extra``: more attributes (dark grey fill unless it sets one)."""
    if "fill=" not in extra:
        extra += ' fill="#333"'
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {extra}>{esc(s)}</text>'


def rect(x: float, y: float, w: float, h: float, fill: str, tip: str | None = None, extra: str = "") -> str:
    """A ``<rect>`` (negative sizes drawn as 0) with ``tip`` as its hover ``<title>``."""
    tip_el = f"<title>{esc(tip)}</title>" if tip else ""
    return (f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(w, 0):.2f}" height="{max(h, 0):.2f}" fill="{fill}" {extra}>'
            f"{tip_el}</rect>")


def legend(items: list[tuple[str, str]], x: float, y: float, width: float = W - 20) -> tuple[str, float]:
    """Swatches in rows (a colour ``tri:<colour>`` draws a triangle marker); returns (svg, y below the legend)."""
    out = []
    cx, cy = x, y
    for label, colour in items:
        w = 18 + 7 * len(label)
        if cx + w > width and cx > x:
            cx, cy = x, cy + 16
        if colour.startswith("tri:"):  # a marker, not a swatch
            out.append(f'<path d="M{cx},{cy - 9} L{cx + 11},{cy - 9} L{cx + 5.5},{cy + 1} Z" fill="{colour[4:]}"/>'
                       + text(cx + 15, cy, label))
        else:
            out.append(rect(cx, cy - 9, 11, 11, colour) + text(cx + 15, cy, label))
        cx += w + 10
    return "".join(out), cy + 8


def y_axis(x0: float, y0: float, h: float, ticks: list[float], lo: float, hi: float, unit: str,
           x1: float, label: str) -> str:
    """Left axis with gridlines from x0 to x1; y0 is the bottom."""
    out = [f'<line x1="{x0}" y1="{y0 - h}" x2="{x0}" y2="{y0}" stroke="#333"/>']
    for t, tick in zip(ticks, tick_labels(ticks, unit)):
        y = y0 - (t - lo) / (hi - lo) * h
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e3e3e3"/>')
        out.append(text(x0 - 4, y + 4, tick, "end"))
    out.append(text(14, y0 - h / 2, label, "middle", f'transform="rotate(-90 14 {y0 - h / 2:.1f})"'))
    return "".join(out)


def x_axis(x0: float, y0: float, w: float, ticks: list[float], lo: float, hi: float, unit: str, label: str) -> str:
    """Bottom axis from x0, ``w`` wide, at y0, with tick marks and the label under it."""
    out = [f'<line x1="{x0}" y1="{y0}" x2="{x0 + w}" y2="{y0}" stroke="#333"/>']
    for t, tick in zip(ticks, tick_labels(ticks, unit)):
        x = x0 + (t - lo) / (hi - lo) * w
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 4}" stroke="#333"/>')
        out.append(text(x, y0 + 15, tick, "middle"))
    out.append(text(x0 + w / 2, y0 + 30, label, "middle"))
    return "".join(out)


__all__ = ["FONT", "PALETTE", "W", "begin", "byte_ticks", "esc", "legend", "missing", "nice_ticks", "rect", "text",
           "x_axis", "y_axis"]
