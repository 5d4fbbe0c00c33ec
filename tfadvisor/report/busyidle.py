"""Busy vs idle over the steps' wall time, drawn from time, true at any number of gaps.

The row is cut into one column per ~pixel; each column's idle time (the ``idle`` lane of the
``timeline`` table: nothing in the gaps analysis' busy set ran) is drawn as a bar of that share of
the row's height, red where it lies between two steps, orange inside a step. So the red and orange
*area* is the idle share, whether the window holds one long gap or a thousand short ones. Above
it a proportion bar gives the same shares as numbers; gaps with a notable amount of idle are
marked with triangles so short ones can be found.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tfadvisor.report import svg
from tfadvisor.report.formatting import fmt_num
from tfadvisor.report.plots import BUSY, IDLE_BETWEEN, IDLE_WITHIN, as_floats, has_rows
from tfadvisor.report.svg import W, esc, missing, nice_ticks

COLUMNS = 600
MAX_MARKERS = 300


def idle_columns(timeline: pd.DataFrame, steps: Any, columns: int = COLUMNS) -> dict[str, Any] | None:
    """Idle time per column of the steps' wall time (the trace window without steps), split into
    between and inside steps: ``{lo, hi, between, within}`` (ps; arrays of ``columns``)."""
    if not has_rows(timeline) or "lane" not in timeline.columns:
        return None
    win = timeline[timeline["lane"] == "window"]
    idle = timeline[timeline["lane"] == "idle"]
    have_steps = has_rows(steps) and {"start_ps", "end_ps"} <= set(steps.columns)
    if have_steps:
        s = np.sort(pd.to_numeric(steps["start_ps"]).to_numpy(np.int64))
        e = np.sort(pd.to_numeric(steps["end_ps"]).to_numpy(np.int64))
        lo, hi = int(s[0]), int(e[-1])
        gs, ge = e[:-1], s[1:]
        ok = ge > gs
        gs, ge = gs[ok], ge[ok]
    elif len(win):
        lo, hi = int(win["start_ps"].iloc[0]), int(win["end_ps"].iloc[0])
        gs = ge = np.empty(0, np.int64)
    else:
        return None
    if hi <= lo:
        return None
    ss = idle["start_ps"].to_numpy(np.int64)
    se = idle["end_ps"].to_numpy(np.int64)
    dens = idle["covered_ps"].to_numpy(float) / np.maximum(se - ss, 1)
    cols = lo + (hi - lo) * np.arange(columns + 1) / columns
    pts = np.unique(np.clip(np.concatenate([ss, se, gs, ge, cols.astype(np.int64), [lo, hi]]), lo, hi))
    a, b = pts[:-1], pts[1:]
    mid = (a + b) / 2
    k = np.searchsorted(ss, mid, side="right") - 1
    inside = (k >= 0) & (mid < se[np.maximum(k, 0)])
    amount = np.where(inside, dens[np.maximum(k, 0)], 0.0) * (b - a)
    g = np.searchsorted(gs, mid, side="right") - 1
    between = (g >= 0) & (mid < ge[np.maximum(g, 0)]) if gs.shape[0] else np.zeros(mid.shape[0], bool)
    col = np.minimum(((mid - lo) / (hi - lo) * columns).astype(np.int64), columns - 1)
    return {"lo": lo, "hi": hi, "columns": columns,
            "between": np.bincount(col, weights=np.where(between, amount, 0.0), minlength=columns),
            "within": np.bincount(col, weights=np.where(between, 0.0, amount), minlength=columns)}


def busy_idle_svg(timeline: Any, steps: Any, gaps: Any, metrics: Any, plot_id: str = "plot-busy",
                  why: str = "no activity timeline") -> str:
    """The proportion bar and the time row (see the module docstring); ``metrics``: the host's (whether it
    has a device, the gaps analysis' threshold)."""
    device_present = metrics.get("device_present")
    title = "Busy vs idle over the steps' wall time"
    cols = idle_columns(timeline, steps) if isinstance(timeline, pd.DataFrame) else None
    if cols is None:
        return missing(plot_id, title, why)
    lo, hi, n = cols["lo"], cols["hi"], cols["columns"]
    span = hi - lo
    bet, wit = cols["between"], cols["within"]
    pct_b, pct_w = 100 * bet.sum() / span, 100 * wit.sum() / span
    pct_busy = 100 - pct_b - pct_w
    who = "device" if device_present else "training threads"
    x0, pw = 130, W - 150
    row2 = 112
    marks = _marks(gaps, lo, span, x0, pw, row2)
    # the legend names what is drawn: no swatch for a share that is zero, no marker when none is
    items = [(f"{who} busy", BUSY)] + [(label, colour) for label, colour, pct in (
        ("idle between steps", IDLE_BETWEEN, pct_b), ("idle inside a step", IDLE_WITHIN, pct_w)) if pct > 0]
    if marks:
        items.append((f"gap with {fmt_num(metrics.get('gap_threshold_ms'))} ms or more idle", "tri:" + IDLE_BETWEEN))
    legend, ly = svg.legend(items, x0, 206)
    out = [svg.begin(plot_id, int(ly + 6), title).replace(
        ' class="plot"', f' class="plot" data-idle-pct="{pct_b + pct_w:.4f}" data-idle-between-pct="{pct_b:.4f}"', 1)]
    # the proportion bar: the shares as numbers
    out.append(svg.text(x0 - 6, 30, "share of time", "end"))
    x = x0
    for cls, pct, colour, label in (("busy", pct_busy, BUSY, f"{who} busy"),
                                    ("between", pct_b, IDLE_BETWEEN, "idle between steps"),
                                    ("within", pct_w, IDLE_WITHIN, "idle inside steps")):
        w = pw * pct / 100
        out.append(svg.rect(x, 14, w, 24, colour, f"{label}: {fmt_num(pct)} %",
                         f'class="share share-{cls}" data-pct="{pct:.4f}"'))
        if w > 60:
            out.append(svg.text(x + w / 2, 30, f"{fmt_num(pct, 2)} %", "middle", 'fill="#fff" font-weight="bold"'))
        x += w
    out.append(svg.text(x0, 52, f"{who} busy {fmt_num(pct_busy, 3)} %, idle between steps {fmt_num(pct_b, 3)} %, "
                             f"idle inside steps {fmt_num(pct_w, 3)} %", "start"))
    # the steps row
    row1, row2, rh = 70, 112, 44
    out.append(svg.text(x0 - 6, row1 + 19, "steps", "end"))
    if has_rows(steps) and {"start_ps", "end_ps"} <= set(steps.columns):
        st = pd.to_numeric(steps["start_ps"]).to_numpy(float)
        en = pd.to_numeric(steps["end_ps"]).to_numpy(float)
        sid = steps["step"].to_numpy() if "step" in steps.columns else np.arange(len(st))
        if len(st) <= pw / 2:
            for i in range(len(st)):
                xa = x0 + (st[i] - lo) / span * pw
                tip = f"step {sid[i]}: {fmt_num((en[i] - st[i]) / 1e9)} ms, at {fmt_num((st[i] - lo) / 1e9)} ms"
                out.append(svg.rect(xa, row1, max((en[i] - st[i]) / span * pw, 0.5), 28,
                                 "#4e79a7" if i % 2 == 0 else "#a0cbe8", tip))
        else:
            out.append(svg.rect(x0, row1, pw, 28, "#a0cbe8", f"{fmt_num(len(st))} steps (too many to draw one by one)"))
    else:
        out.append(svg.text(x0 + 4, row1 + 19, "(no step markers: the whole traced window)"))
    # the time row: busy background, idle per column as a share of the height
    out.append(svg.text(x0 - 6, row2 + rh / 2 + 4, f"{who}", "end"))
    out.append(svg.rect(x0, row2, pw, rh, BUSY, f"{who} busy {fmt_num(pct_busy)} % of the time", 'class="busy-row"'))
    cw = pw / n
    colw = span / n
    for cls, vals, colour, base in (("idle-between", bet, IDLE_BETWEEN, np.zeros(n)),
                                    ("idle-within", wit, IDLE_WITHIN, bet)):
        frac, below = np.round(vals / colw, 4), np.round(base / colw, 4)
        i = 0
        while i < n:  # runs of equal columns as one rect
            j = i + 1
            while j < n and frac[j] == frac[i] and below[j] == below[i]:
                j += 1
            if frac[i] > 0:
                h = rh * min(frac[i], 1.0)
                y = row2 + rh - rh * min(below[i], 1.0) - h
                where = "between steps" if cls == "idle-between" else "inside a step"
                tip = (f"{fmt_num(100 * frac[i])} % idle {where} at"
                       f" {fmt_num((i * colw) / 1e9)}-{fmt_num((j * colw) / 1e9)} ms")
                out.append(svg.rect(x0 + i * cw, y, (j - i) * cw, h, colour, tip, f'class="{cls}"'))
            i = j
    out.append(marks)
    ticks = [t for t in nice_ticks(0, span / 1e9) if t <= span / 1e9 * 1.0001]
    out.append(svg.x_axis(x0, row2 + rh + 4, pw, ticks, 0, span / 1e9, "ms", "time since the first step's start (ms)"))
    out.append(legend)
    out.append("</svg>")
    return "".join(out)


def _marks(gaps: Any, lo: int, span: int, x0: float, pw: float, row: float) -> str:
    if not has_rows(gaps) or not {"start_ps", "end_ps", "counted"} <= set(gaps.columns):
        return ""
    idle = as_floats(gaps, "idle_ms") if "idle_ms" in gaps.columns else as_floats(gaps, "duration_ms")
    big = np.flatnonzero(gaps["counted"].to_numpy(bool))  # the gaps the gaps analysis counts
    big = big[np.argsort(-idle[big], kind="stable")][:MAX_MARKERS]
    gs = pd.to_numeric(gaps["start_ps"]).to_numpy(float)
    ge = pd.to_numeric(gaps["end_ps"]).to_numpy(float)
    act = gaps["host_activity"].astype(str).to_numpy() if "host_activity" in gaps.columns else None
    out = []
    for i in big:
        x = x0 + ((gs[i] + ge[i]) / 2 - lo) / span * pw
        tip = (f"gap at {fmt_num((gs[i] - lo) / 1e9)} ms: {fmt_num(idle[i])} ms idle of "
               f"{fmt_num((ge[i] - gs[i]) / 1e9)} ms" + (f"; the host ran {act[i]}" if act is not None else ""))
        out.append(f'<path class="gap-mark" d="M{x - 4:.1f},{row - 10:.1f} L{x + 4:.1f},{row - 10:.1f} '
                   f'L{x:.1f},{row - 2:.1f} Z" fill="{IDLE_BETWEEN}"><title>{esc(tip)}</title></path>')
    return "".join(out)


__all__ = ["busy_idle_svg", "idle_columns"]
