"""The system samples' utilisation timelines in the HTML report (CPU, GPU, disk, network).

Reads the ``system`` analysis' ``system_timeline`` table. The timelines share the x axis of the
busy/idle timeline above them (the profiled window, in ms since its first step or gap), so a dip in
CPU or GPU lines up with the steps it slowed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfadvisor.report import notes_for, svg
from tfadvisor.report.formatting import fmt_num
from tfadvisor.report.plots import has_rows
from tfadvisor.report.svg import W, esc, missing, nice_ticks
from tfadvisor.report.system import ROWS


def _span(tables: dict) -> tuple[float, float] | None:
    """The busy/idle timeline's x range in ps (steps and gaps), to share its axis."""
    import pandas as pd

    lo, hi = [], []
    for name in ("steps", "gaps"):
        df = tables.get(name)
        if has_rows(df) and {"start_ps", "end_ps"} <= set(df.columns):
            lo.append(float(pd.to_numeric(df["start_ps"]).min()))
            hi.append(float(pd.to_numeric(df["end_ps"]).max()))
    return (min(lo), max(hi)) if lo and max(hi) > min(lo) else None


def timeline_svg(result: Any, plot_id: str = "plot-system") -> str:
    """CPU, GPU, disk and network over the window, one row each, on the step timeline's time axis."""
    import pandas as pd

    title = "CPU, GPU, disk and network over the profiled window"
    tables = getattr(result, "tables", None) or {}
    tl = tables.get("system_timeline")
    if not has_rows(tl) or len(tl) < 2:
        why = notes_for(list(getattr(result, "notes", None) or []), "system") or "no system samples"
        return missing(plot_id, title, why)
    t = pd.to_numeric(tl["time_ps"]).to_numpy(float)
    span = _span(tables)
    lo, hi = span if span else (float(t[0]), float(t[-1]))
    span_ms = (hi - lo) / 1e9
    x0, pw, rh, gap = 130, W - 150, 46, 14
    rows = [r for r in ROWS if r[0] != "GPU" or "gpu_util_pct" in tl.columns]
    height = 16 + len(rows) * (rh + gap) + 40
    out = [svg.begin(plot_id, height, title)]

    def xs(ps: np.ndarray) -> np.ndarray:
        return x0 + (ps - lo) / (hi - lo) * pw

    y = 16.0
    for label, cols, unit, fixed in rows:
        vals = [pd.to_numeric(tl[c], errors="coerce").to_numpy(float) for c, _ in cols if c in tl.columns]
        top = fixed or max([float(np.nanmax(v)) for v in vals if np.isfinite(v).any()] + [0.0])
        top = top if top > 0 else 1.0
        out.append(f'<rect x="{x0}" y="{y:.1f}" width="{pw}" height="{rh}" fill="#f7f7f7"/>')
        out.append(svg.text(x0 - 6, y + rh / 2, label, "end"))
        out.append(svg.text(x0 - 6, y + rh / 2 + 12, f"0-{fmt_num(top)} {unit}", "end", 'fill="#777" font-size="9"'))
        for (c, colour), v in zip(cols, vals):
            keep = np.isfinite(v) & (t >= lo - (hi - lo) * 0.05) & (t <= hi + (hi - lo) * 0.05)
            if keep.sum() < 1:
                continue
            px = np.clip(xs(t[keep]), x0, x0 + pw)
            py = y + rh - np.clip(v[keep] / top, 0, 1) * rh
            pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(px, py))
            mean = float(np.nanmean(v[keep]))
            out.append(f'<polyline points="{pts}" fill="none" stroke="{colour}" stroke-width="1.6">'
                       f"<title>{esc(c)}: mean {fmt_num(mean)} {esc(unit)}</title></polyline>")
        y += rh + gap
    ticks = [tk for tk in nice_ticks(0, span_ms) if tk <= span_ms * 1.0001]
    out.append(svg.x_axis(x0, y - gap + 4, pw, ticks, 0, span_ms, "ms", "time since window start (ms)"))
    out.append("</svg>")
    return "".join(out)


__all__ = ["timeline_svg"]
