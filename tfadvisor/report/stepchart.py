"""The step-time chart: every step as one stacked bar, or, past :data:`MAX_BARS` steps, bins of
consecutive steps drawn as their mean with the slowest step of each bin as a tick above, every
outlier step marked at its own time, and the axis reaching the slowest step.

Each bar is ``<g class="step" data-first= data-last= data-ms= data-max-ms=>`` holding one
``<rect class="seg" data-cat=...>`` per category, so a reader (or a test) can check what is drawn
against the steps table.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tfadvisor.report import svg
from tfadvisor.report.formatting import fmt_num
from tfadvisor.report.plots import as_floats, category_colour, has_rows, step_categories, step_wall_column, train_steps
from tfadvisor.report.svg import PALETTE, W, esc, missing, nice_ticks

#: Most bars drawn; more steps are binned (the plot is ~680 px wide at its default size).
MAX_BARS = 340
OUTLIER = "#d62728"


def _bins(n: int) -> tuple[int, np.ndarray]:
    per = 1 if n <= MAX_BARS else math.ceil(n / MAX_BARS)
    return per, np.arange(0, n, per)


def steps_svg(steps: Any, plot_id: str = "plot-steps", why: str = "no training steps were found") -> str:
    """Step time per step (or per bin of steps), stacked by category; outliers and maxima marked."""
    title = "Step time per step, by category"
    if not has_rows(steps) or "duration_ms" not in steps.columns:
        return missing(plot_id, title, why)
    steps = steps.reset_index(drop=True)
    n = len(steps)
    # per training step, as the headline's step time: a marker under steps_per_execution holds several
    per_row = train_steps(steps)
    dur = as_floats(steps, step_wall_column(steps)) / per_row
    # the categories with time in them: a legend lists only what is drawn
    cats = [c for c in step_categories(steps) if (as_floats(steps, f"{c}_ms") > 0).any()]
    parts = {c: as_floats(steps, f"{c}_ms") / per_row for c in cats}
    rest = np.clip(dur - (sum(parts.values()) if parts else 0.0), 0, None)
    if (rest > 0.01 * np.maximum(dur, 1e-12)).any():
        parts["unattributed"] = rest
        cats = cats + ["unattributed"]
    ids = steps["step"].to_numpy() if "step" in steps.columns else np.arange(n)
    col = next((c for c in ("outlier", "is_outlier") if c in steps.columns), None)
    outl = steps[col].fillna(False).astype(bool).to_numpy() if col else np.zeros(n, bool)
    per, edges = _bins(n)
    counts = np.diff(np.append(edges, n))
    mean = np.add.reduceat(dur, edges) / counts
    mx = np.maximum.reduceat(dur, edges)
    bparts = {c: np.add.reduceat(v, edges) / counts for c, v in parts.items()}
    m = len(edges)
    hi = nice_ticks(0, max(float(dur.max()), 1e-9))[-1]
    ticks = nice_ticks(0, hi)
    x0, y0, pw, ph = 62, 200, W - 82, 170
    # the legend names what can be seen: a category under 0.1 % of the steps' time draws nothing
    seen = {c for c in cats if parts[c].sum() >= 0.001 * max(float(dur.sum()), 1e-12)}
    items = [(c.replace("_", " "), category_colour(c, i)) for i, c in enumerate(cats) if c in seen]
    if per > 1:
        items.append(("slowest step of the bin", "#222"))
    if outl.any():
        items.append(("outlier step", "tri:" + OUTLIER))
    legend, ly = svg.legend(items, x0, y0 + 48)
    head = svg.begin(plot_id, int(ly + 6), title)
    steps_n = int(per_row.sum())  # training steps: a row (a marker) holds k of them under steps_per_execution
    out = [head.replace(' class="plot"', f' class="plot" data-steps="{steps_n}" data-per-bar="{per}"', 1)]
    out.append(svg.y_axis(x0, y0, ph, ticks, 0, hi, "ms", x0 + pw, "step time (ms)"))
    slot = pw / m
    bw = max(slot * (0.8 if slot > 3 else 1.0), 0.5)

    def py(v: float) -> float:
        return y0 - v / hi * ph

    for i in range(m):
        a, b = int(edges[i]), int(edges[i] + counts[i] - 1)
        x = x0 + i * slot + (slot - bw) / 2
        name = f"step {ids[a]}" if a == b else f"steps {ids[a]}-{ids[b]} (mean of {counts[i]})"
        lines = [f"{name}: {fmt_num(mean[i])} ms" + (f", slowest {fmt_num(mx[i])} ms" if a != b else "")]
        lines += [f"{c.replace('_', ' ')}: {fmt_num(bparts[c][i])} ms" for c in cats if bparts[c][i] > 0]
        tip = "\n".join(lines)
        out.append(f'<g class="step" data-first="{esc(ids[a])}" data-last="{esc(ids[b])}" '
                   f'data-ms="{mean[i]:.6g}" data-max-ms="{mx[i]:.6g}">')
        ybase = float(y0)
        for j, c in enumerate(cats):
            h = bparts[c][i] / hi * ph
            if h <= 0:
                continue
            ybase -= h
            out.append(svg.rect(x, ybase, bw, h, category_colour(c, j), tip, f'class="seg" data-cat="{esc(c)}"'))
        if not cats:
            out.append(svg.rect(x, py(mean[i]), bw, mean[i] / hi * ph, PALETTE[0], tip, 'class="seg" data-cat="step"'))
        if a != b:
            out.append(f'<line class="bin-max" x1="{x:.2f}" x2="{x + bw:.2f}" y1="{py(mx[i]):.2f}" '
                       f'y2="{py(mx[i]):.2f}" stroke="#222" stroke-width="1.5"><title>{esc(tip)}</title></line>')
        out.append("</g>")
    for k in np.flatnonzero(outl):  # each outlier at its own time, even inside a bin
        cx = x0 + (k // per + 0.5) * slot
        yt = py(dur[k]) - 2
        out.append(f'<path class="outlier" data-step="{esc(ids[k])}" data-ms="{dur[k]:.6g}" '
                   f'd="M{cx - 4:.1f},{yt - 7:.1f} L{cx + 4:.1f},{yt - 7:.1f} L{cx:.1f},{yt:.1f} Z" '
                   f'fill="{OUTLIER}"><title>outlier: step {esc(ids[k])}, {esc(fmt_num(dur[k]))} ms</title></path>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + pw}" y2="{y0}" stroke="#333"/>')
    every = max(1, math.ceil(m / 10))
    for i in range(0, m, every):
        out.append(svg.text(x0 + (i + 0.5) * slot, y0 + 14, str(ids[int(edges[i])]), "middle"))
    xlabel = ("step (every step is one bar)" if per == 1 else
              f"step: {fmt_num(n)} steps, each bar the mean of {per} consecutive steps, the tick above it the slowest")
    if float(per_row.max()) > 1:  # steps_per_execution: a bar is a call of the train function, ms per training step
        xlabel = (f"step: {fmt_num(steps_n)} steps in {fmt_num(n)} calls of {fmt_num(float(per_row.max()))}, each bar "
                  + ("a call" if per == 1 else f"the mean of {per} calls") + ", in ms per training step")
    out.append(svg.text(x0 + pw / 2, y0 + 30, xlabel, "middle"))
    out.append(legend)
    out.append("</svg>")
    return "".join(out)


__all__ = ["MAX_BARS", "steps_svg"]
