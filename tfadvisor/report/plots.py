"""Inline SVG plots for the HTML report, plus the data helpers both reports share.

Why hand-written SVG rather than matplotlib, plotly or a JS charting library:

* The report must be one file that works offline. A JS library would have to be inlined
  (hundreds of KB) and would need a browser with scripts enabled; plotly alone is ~3 MB.
  SVG is native to every browser, needs no script, prints, and stays sharp when zoomed.
* matplotlib is a heavy optional dependency (and slow to import) for six simple chart
  shapes; tfadvisor's analysis path needs only numpy/pandas. Rasterised PNGs would also lose
  per-element ``<title>`` tooltips (hover a bar to see the step, its categories, the op).
* The charts here are deliberately few and simple (horizontal bars, a memory line, per-host
  bars; the step chart is in ``stepchart.py``, the zoomable timeline in ``timeline.py``), drawn
  with the primitives of ``svg.py``, with exact control of escaping: every trace-derived string
  goes through :func:`svg.esc` (op names contain ``<``, ``>`` and ``&``).

Each ``*_svg`` function returns an ``<svg id=...>`` string or, when its data is absent,
:func:`svg.missing` -- a ``<div>`` with the same id saying what is not in this trace and why.
Large inputs are thinned (memory samples reduced keeping each bucket's max) so a report of
a million-event trace stays small.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from tfadvisor.model.categories import STEP_CATEGORIES as CATEGORIES
from tfadvisor.report import svg
from tfadvisor.report.formatting import fmt_bytes, fmt_num, fmt_value
from tfadvisor.report.svg import PALETTE, W, byte_ticks, esc, missing, nice_ticks

#: Step-time categories in display order, with colours.
CATEGORY_ORDER = CATEGORIES
CATEGORY_COLOURS = {
    "device_compute": "#4e79a7",
    "input": "#e15759",
    "host_compute": "#f28e2b",
    "kernel_launch": "#76b7b2",
    "collective": "#59a14f",
    "between_steps": "#edc948",
    "idle": "#bab0ac",
    "other": "#b07aa1",
    "unattributed": "#e9e9e9",
}
BUSY = "#59a14f"
IDLE_BETWEEN = "#e15759"
IDLE_WITHIN = "#f28e2b"

MAX_MEMORY_POINTS = 2000
MAX_BARS = 25


# --------------------------------------------------------------------------- data helpers


def has_rows(df: Any) -> bool:
    return isinstance(df, pd.DataFrame) and len(df) > 0


def step_wall_column(steps: pd.DataFrame) -> str:
    """The steps table's column of each step's wall time (start to the next start: what its categories
    sum to); ``duration_ms`` (the marker) in tables from before it."""
    return "wall_ms" if "wall_ms" in steps.columns else "duration_ms"


def train_steps(steps: pd.DataFrame) -> np.ndarray:
    """The training steps each row of the steps table holds (a marker under Keras ``steps_per_execution=k`` holds
    k; 1 in tables from before the column): what a row's times are divided by to be per training step, as the
    headline's step time."""
    if "train_steps" not in steps.columns:
        return np.ones(len(steps))
    return np.maximum(pd.to_numeric(steps["train_steps"], errors="coerce").fillna(1).to_numpy(np.float64), 1.0)


def step_categories(steps: pd.DataFrame) -> list[str]:
    """The ``<category>_ms`` columns of the steps table, in display order (names without _ms).

    Known categories first; another ``*_ms`` column counts as a category only if adding it keeps
    the per-step sum within the step's wall time (so ``period_ms``, ``self_ms``... are left out).
    """
    skip = {"duration_ms", "start_ms", "end_ms", "time_ms", "period_ms", "self_ms", "wall_ms", "mean_ms",
            "total_ms", "step_time_ms"}
    numeric = [c for c in steps.columns if str(c).endswith("_ms") and c not in skip
               and pd.api.types.is_numeric_dtype(steps[c])]
    cats = [c for c in CATEGORY_ORDER if f"{c}_ms" in numeric]
    if "duration_ms" not in steps.columns:
        return cats
    dur = as_floats(steps, step_wall_column(steps))
    total = sum((as_floats(steps, f"{c}_ms") for c in cats), np.zeros(len(steps)))
    for col in sorted(c for c in numeric if c[:-3] not in cats):
        cand = total + as_floats(steps, col)
        if (cand <= dur * 1.02 + 1e-9).all():
            cats.append(col[:-3])
            total = cand
    return cats


def category_colour(cat: str, i: int) -> str:
    return CATEGORY_COLOURS.get(cat, PALETTE[i % len(PALETTE)])


def as_floats(df: pd.DataFrame, col: str) -> np.ndarray:
    """Column ``col`` as floats (what is not a number: 0)."""
    return pd.to_numeric(df[col], errors="coerce").fillna(0.0).to_numpy(dtype=float)


def precision_shares(tables: dict, metrics: dict) -> list[tuple[str, float]]:
    """(precision class, % of device compute), from table ``precision_mix`` or the ``*_pct`` metrics."""
    df = tables.get("precision_mix")
    if has_rows(df):
        label_col = next((c for c in ("precision", "class", "dtype", "category", "kind") if c in df.columns), None)
        if label_col is None:
            label_col = next((c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])), None)
        pct_col = next((c for c in ("pct", "share_pct", "time_pct", "percent", "compute_pct") if c in df.columns), None)
        val_col = next((c for c in ("time_ms", "ms", "total_ms", "duration_ms", "time_ps", "time_us")
                        if c in df.columns), None)
        if label_col is not None and (pct_col or val_col):
            vals = as_floats(df, pct_col or val_col)
            total = vals.sum()
            if pct_col is None and total > 0:
                vals = vals / total * 100
            out = [(str(lbl), float(v)) for lbl, v in zip(df[label_col], vals, strict=False) if v > 0]
            if out:
                return out
    out = []
    for cls in ("fp16", "bf16", "tf32", "fp32", "int8"):
        v = metrics.get(f"{cls}_pct")
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            out.append((cls, float(v)))
    return out


# --------------------------------------------------------------------------- the plots


def _named(df: pd.DataFrame, col: str) -> pd.Series:
    """Rows whose ``col`` names something (not empty, ``(null)`` or ``invalid``)."""
    if col not in df.columns:
        return pd.Series(False, index=df.index)
    v = df[col].astype(str).str.strip()
    return ~v.isin(["", "(null)", "invalid", "nan", "None", "INVALID", "<NA>"])


def live_at_peak(df: Any, metrics: Any = None) -> tuple[pd.DataFrame | None, str]:
    """The table ``memory_live_at_peak`` as the reports show it: ``(rows, sentence)``. ``rows``: the
    allocations with an op or a shape, largest first (placeholder data types blanked), None when
    none has; ``sentence``: what the other rows (nothing named them) add up to, true to the trace
    (the XLA/JAX runtime is named only for a JAX trace), or "" when there are none."""
    if not has_rows(df):
        return None, ""
    d = df.sort_values("bytes", ascending=False, kind="stable") if "bytes" in df.columns else df
    known = _named(d, "tf_op") | _named(d, "shape")
    shown = None
    if known.any():
        shown = d[known].copy()
        if "data_type" in shown.columns:
            shown["data_type"] = shown["data_type"].where(_named(shown, "data_type"), "")
    rest = d[~known]
    if not len(rest):
        return shown, ""
    n = int(pd.to_numeric(rest["count"], errors="coerce").fillna(1).sum()) if "count" in rest.columns else len(rest)
    b = float(pd.to_numeric(rest["bytes"], errors="coerce").fillna(0).sum()) if "bytes" in rest.columns else 0.0
    one = n == 1
    jax = str((metrics or {}).get("framework") or "").lower() == "jax"
    why = ("the XLA/JAX runtime's own buffers record none" if jax
           else f"the allocator recorded none for {'it' if one else 'them'}")
    sentence = (f"{fmt_num(n)} live allocation{'' if one else 's'} ({fmt_bytes(b)}) "
                f"{'carries' if one else 'carry'} no op, shape or data type in the trace ({why}), so "
                f"{'it is' if one else 'they are'} not listed by name.")
    return shown, sentence


def hbar_svg(plot_id: str, title: str, labels: list[str], values: list[float], unit: str, xlabel: str,
             tips: list[str] | None = None, colours: list[str] | None = None,
             marks: list[tuple[float, str, str]] | None = None) -> str:
    """Horizontal bars (longest list first as given), value printed at the bar end.

    ``marks``: vertical reference lines (value, label, colour).
    """
    labels = labels[:MAX_BARS]
    values = [float(v) for v in values[:MAX_BARS]]
    n = len(labels)
    shown = [lb if len(lb) <= 34 else lb[:15] + "…" + lb[-18:] for lb in labels]
    x0 = 20 + min(34, max((len(s) for s in shown), default=4)) * 6.2
    pw = W - x0 - 90
    bh, gap, top = 20, 6, 12
    y_axis = top + n * (bh + gap)
    height = int(y_axis + 40)
    vmax = max([*values, *(m[0] for m in marks or [])], default=0) or 1.0
    ticks = nice_ticks(0, vmax)
    hi = ticks[-1]
    out = [svg.begin(plot_id, height, title)]
    for t in ticks:
        x = x0 + t / hi * pw
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{y_axis}" stroke="#e3e3e3"/>')
    for i, (lb, v) in enumerate(zip(shown, values, strict=False)):
        y = top + i * (bh + gap)
        colour = colours[i] if colours else PALETTE[0]
        tip = tips[i] if tips else f"{labels[i]}: {fmt_value(v, unit)}"
        out.append(svg.text(x0 - 6, y + bh / 2 + 4, lb, "end"))
        out.append(svg.rect(x0, y, v / hi * pw, bh, colour, tip))
        out.append(svg.text(x0 + v / hi * pw + 4, y + bh / 2 + 4, fmt_value(v, unit)))
    for value, label, colour in marks or []:
        x = x0 + value / hi * pw
        out.append(f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{y_axis}" stroke="{colour}" '
                   f'stroke-dasharray="4 3" stroke-width="1.5"><title>{esc(label)}</title></line>')
    out.append(svg.x_axis(x0, y_axis, pw, ticks, 0, hi, unit, xlabel))
    out.append("</svg>")
    return "".join(out)


def tfdata_svg(stages: Any, plot_id: str = "plot-tfdata", why: str = "no tf.data iterator events") -> str:
    title = "tf.data pipeline: time in each stage"
    if not has_rows(stages):
        return missing(plot_id, title, why)
    df = stages
    label_col = next((c for c in ("stage", "iterator", "name") if c in df.columns), df.columns[0])
    val_col = next((c for c in ("self_ms", "total_ms", "time_ms", "mean_us") if c in df.columns), None)
    if val_col is None:
        return missing(plot_id, title, "the stage table has no timing column")
    vals = as_floats(df, val_col)
    order = np.argsort(-vals, kind="stable")
    labels, values, tips = [], [], []
    for i in order[:MAX_BARS]:
        row = df.iloc[int(i)]
        labels.append(str(row[label_col]))
        values.append(float(vals[i]))
        tips.append("\n".join(f"{c}: {row[c]}" for c in df.columns))
    unit = "ms" if val_col.endswith("_ms") else "us"
    xlabel = ("self time (ms): the stage's own time, without the stages it reads from" if val_col == "self_ms"
              else val_col.replace("_", " "))
    return hbar_svg(plot_id, title, labels, values, unit, xlabel, tips, colours=[PALETTE[1]] * len(labels))


def precision_svg(shares: list[tuple[str, float]], plot_id: str = "plot-precision",
                  why: str = "no device compute with a known precision") -> str:
    """One 100 % bar split by precision class, plus a legend with the percentages."""
    title = "Precision mix of device compute"
    if not shares:
        return missing(plot_id, title, why)
    colours = {"fp16": "#59a14f", "bf16": "#8cd17d", "int8": "#b6992d", "tf32": "#f28e2b", "fp32": "#4e79a7",
               "fp64": "#9c755f"}
    x0, pw, y, bh = 20, W - 40, 14, 34
    total = sum(v for _, v in shares) or 1.0
    items = [(f"{k}: {fmt_num(v)} %", colours.get(k.lower(), PALETTE[(i + 5) % len(PALETTE)]))
             for i, (k, v) in enumerate(shares)]
    legend, ly = svg.legend(items, x0, y + bh + 46)
    out = [svg.begin(plot_id, int(ly + 6), title)]
    x = x0
    for (k, v), (_, colour) in zip(shares, items, strict=False):
        w = v / total * pw
        out.append(svg.rect(x, y, w, bh, colour, f"{k}: {fmt_num(v)} % of device compute time"))
        if w > 40:
            out.append(svg.text(x + w / 2, y + bh / 2 + 4, f"{k} {fmt_num(v, 2)}%", "middle", 'fill="#fff"'))
        x += w
    ticks = [0, 25, 50, 75, 100]
    out.append(svg.x_axis(x0, y + bh, pw, ticks, 0, 100, "%", "% of device compute time"))
    out.append(legend)
    out.append("</svg>")
    return "".join(out)


def memory_svg(timeline: Any, peak_bytes: Any = None, capacity: Any = None, plot_id: str = "plot-memory",
               why: str = "no memory allocation events") -> str:
    """Bytes in use over time (a step line), the peak marked, the capacity as a dashed line."""
    title = "Memory in use over time"
    if not has_rows(timeline) or not {"time_ms", "bytes_in_use"} <= set(timeline.columns):
        return missing(plot_id, title, why)
    series = []  # (label, t, b) per allocator, the one with the highest peak first
    if "allocator" in timeline.columns and timeline["allocator"].nunique() > 1:
        for name, g in timeline.groupby("allocator", sort=False):
            series.append((str(name), as_floats(g, "time_ms"), as_floats(g, "bytes_in_use")))
        series.sort(key=lambda x: -x[2].max())
        series = series[:5]
    else:
        label = str(timeline["allocator"].iloc[0]) if "allocator" in timeline.columns else "bytes in use"
        series.append((label, as_floats(timeline, "time_ms"), as_floats(timeline, "bytes_in_use")))
    thinned = []
    for label, t, b in series:
        order = np.argsort(t, kind="stable")
        thinned.append((label, t[order], b[order]))
    label0, t, b = thinned[0]
    ipk = int(np.argmax(b))
    t_pk, b_pk = float(t[ipk]), float(b[ipk])
    if peak_bytes is not None and isinstance(peak_bytes, (int, float)) and peak_bytes > b_pk:
        b_pk_label = float(peak_bytes)
    else:
        b_pk_label = b_pk
    for k, (label, tk, bk) in enumerate(thinned):
        if len(tk) > MAX_MEMORY_POINTS:  # keep each bucket's max so the peak survives thinning
            per = math.ceil(len(tk) / MAX_MEMORY_POINTS)
            edges = np.arange(0, len(tk), per)
            idx = np.array([a + int(np.argmax(bk[a:a + per])) for a in edges])
            thinned[k] = (label, tk[idx], bk[idx])
    t = np.concatenate([x[1] for x in thinned])
    b = np.concatenate([x[2] for x in thinned])
    tlo, thi = float(t.min()), float(t.max())
    if thi <= tlo:
        thi = tlo + 1
    cap = float(capacity) if isinstance(capacity, (int, float)) and not isinstance(capacity, bool) and capacity > 0 \
        else None
    ymax = max(b_pk_label, float(b.max()), 1.0)
    if cap is not None and cap < ymax * 3:
        ymax = max(ymax, cap)
    yt = byte_ticks(ymax, 4)
    yhi = yt[-1]
    x0, y0, pw, ph = 80, 190, W - 100, 160
    colours = [PALETTE[0], PALETTE[2], PALETTE[4], PALETTE[6], PALETTE[9]]
    legend, ly = svg.legend([(lbl if len(thinned) > 1 else f"bytes in use ({lbl})" if lbl != "bytes in use" else lbl,
                           colours[k]) for k, (lbl, _, _) in enumerate(thinned)] + [("peak", "#d62728")]
                         + ([("capacity", "#555")] if cap is not None and cap <= yhi else []), x0, y0 + 48)
    out = [svg.begin(plot_id, int(ly + 6), title)]
    out.append(svg.y_axis(x0, y0, ph, yt, 0, yhi, "bytes", x0 + pw, "in use"))

    def px(tv: float) -> float:
        return x0 + (tv - tlo) / (thi - tlo) * pw

    def py(bv: float) -> float:
        return y0 - bv / yhi * ph

    for k, (lbl, tk, bk) in reversed(list(enumerate(thinned))):
        d = [f"M{px(tk[0]):.1f},{py(bk[0]):.1f}"]
        for i in range(1, len(tk)):
            d.append(f"H{px(tk[i]):.1f}V{py(bk[i]):.1f}")
        path = "".join(d)
        if k == 0:
            out.append(f'<path d="{path}H{px(tk[-1]):.1f}V{y0}H{px(tk[0]):.1f}Z" fill="{colours[0]}" '
                       'fill-opacity="0.15"/>')
        out.append(f'<path d="{path}" fill="none" stroke="{colours[k]}" stroke-width="1.5"><title>'
                   f"{esc(lbl)}: up to {esc(fmt_bytes(bk.max()))}</title></path>")
    if cap is not None and cap <= yhi:
        out.append(f'<line x1="{x0}" y1="{py(cap):.1f}" x2="{x0 + pw}" y2="{py(cap):.1f}" stroke="#555" '
                   f'stroke-dasharray="6 4"><title>capacity {esc(fmt_bytes(cap))}</title></line>')
    pk_tip = f"peak {fmt_bytes(b_pk_label)} at {fmt_num(t_pk)} ms"
    out.append(f'<circle cx="{px(t_pk):.1f}" cy="{py(b_pk):.1f}" r="5" fill="#d62728"><title>{esc(pk_tip)}'
               f"</title></circle>")
    anchor = "end" if px(t_pk) > x0 + pw * 0.7 else "start"
    dx = -8 if anchor == "end" else 8
    out.append(svg.text(px(t_pk) + dx, max(py(b_pk) - 6, 12), pk_tip, anchor, 'fill="#d62728" font-weight="bold"'))
    xt = [v for v in nice_ticks(tlo, thi) if tlo <= v <= thi]
    out.append(svg.x_axis(x0, y0, pw, xt, tlo, thi, "ms", "time (ms)"))
    out.append(legend)
    out.append("</svg>")
    return "".join(out)


def allreduce_svg(measured: Any, expected: Any, expected_ring: Any = None, plot_id: str = "plot-allreduce",
                  why: str = "no AllReduce / collective ops in this trace") -> str:
    title = "AllReduce per step: measured vs expected"
    if not isinstance(measured, (int, float)) or isinstance(measured, bool):
        return missing(plot_id, title, why)
    labels, values, colours, tips = ["measured"], [float(measured)], [PALETTE[1]], [
        f"measured AllReduce time per step: {fmt_num(measured)} ms"]
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        labels.append("expected: params x 4 B / bandwidth")
        values.append(float(expected))
        colours.append(PALETTE[0])
        tips.append(f"expected at the link bandwidth: {fmt_num(expected)} ms")
    if isinstance(expected_ring, (int, float)) and not isinstance(expected_ring, bool):
        labels.append("expected, ring all-reduce")
        values.append(float(expected_ring))
        colours.append(PALETTE[3])
        tips.append(f"expected for a ring all-reduce (x 2(N-1)/N): {fmt_num(expected_ring)} ms")
    return hbar_svg(plot_id, title, labels, values, "ms", "ms per step", tips, colours)


def host_rows(hosts: list, hosts_table: Any = None) -> pd.DataFrame:
    """One row per host: host, step_time_mean_ms, min/p90/max when known, and ``<category>_ms`` means."""
    if has_rows(hosts_table) and {"host", "step_time_mean_ms"} <= set(hosts_table.columns):
        return hosts_table.reset_index(drop=True)
    rows = []
    for h in hosts or []:
        m = getattr(h, "metrics", {}) or {}
        row = {"host": str(getattr(h, "host", "?"))}
        for k in ("steps_count", "step_time_mean_ms", "step_time_min_ms", "step_time_p90_ms", "step_time_max_ms",
                  "input_pct", "idle_pct", "allreduce_ms_per_step"):
            row[k] = m.get(k)
        mean = m.get("step_time_mean_ms")
        for c in CATEGORY_ORDER:  # per-category ms from the step shares
            pct = m.get(f"step_{c}_pct")
            if isinstance(pct, (int, float)) and isinstance(mean, (int, float)):
                row[f"{c}_ms"] = mean * pct / 100
        rows.append(row)
    return pd.DataFrame(rows)


def hosts_svg(hosts: list, hosts_table: Any = None, plot_id: str = "plot-hosts",
              why: str = "a single host was profiled") -> str:
    """Per-host mean step time, stacked by category when known, with min..max whiskers."""
    title = "Step time per host"
    n_hosts = max(len(hosts or []), len(hosts_table) if has_rows(hosts_table) else 0)
    if n_hosts < 2:
        return missing(plot_id, title, why)
    df = host_rows(hosts, hosts_table)
    if not len(df) or "step_time_mean_ms" not in df.columns:
        return missing(plot_id, title, "no host has step times")
    df = df[pd.to_numeric(df["step_time_mean_ms"], errors="coerce").notna()].head(40)
    if not len(df):
        return missing(plot_id, title, "no host has step times")
    mean = as_floats(df, "step_time_mean_ms")
    cats = [c for c in CATEGORY_ORDER if f"{c}_ms" in df.columns and (as_floats(df, f"{c}_ms") > 0).any()]
    parts = {c: as_floats(df, f"{c}_ms") for c in cats}
    mn = as_floats(df, "step_time_min_ms") if "step_time_min_ms" in df.columns else None
    mx = as_floats(df, "step_time_max_ms") if "step_time_max_ms" in df.columns else None
    names = [str(h) for h in df["host"]]
    x0 = 20 + min(28, max(len(nm) for nm in names)) * 6.4
    pw = W - x0 - 100
    bh, gap, top = 18, 6, 12
    y_axis = top + len(df) * (bh + gap)
    vmax = max(float(mean.max()), float(mx.max()) if mx is not None else 0.0,
               float(sum(parts.values()).max()) if parts else 0.0, 1e-9)
    ticks = nice_ticks(0, vmax)
    hi = ticks[-1]
    total = max(float(sum(parts.values()).sum()) if parts else 0.0, 1e-12)
    items = [(c.replace("_", " "), category_colour(c, i)) for i, c in enumerate(cats)
             if parts[c].sum() >= 0.001 * total] if cats else [("mean step time", PALETTE[0])]
    if mx is not None:
        items.append(("min..max", "#333"))
    legend, ly = svg.legend(items, x0, y_axis + 48)
    out = [svg.begin(plot_id, int(ly + 6), title)]
    for t in ticks:
        x = x0 + t / hi * pw
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{y_axis}" stroke="#e3e3e3"/>')
    slowest = int(np.argmax(mean))
    for i, name in enumerate(names):
        y = top + i * (bh + gap)
        shown = name if len(name) <= 28 else name[:12] + "…" + name[-15:]
        lines = [f"{name}: mean step {fmt_num(mean[i])} ms"]
        if mx is not None and mn is not None:
            lines.append(f"min {fmt_num(mn[i])} ms, max {fmt_num(mx[i])} ms")
        lines += [f"{c.replace('_', ' ')}: {fmt_num(parts[c][i])} ms" for c in cats if parts[c][i] > 0]
        for extra in ("work_ratio", "wait_ms", "allreduce_ms_per_step", "steps"):
            if extra in df.columns and pd.notna(df[extra].iloc[i]):
                lines.append(f"{extra}: {fmt_num(df[extra].iloc[i])}")
        tip = "\n".join(lines)
        weight = ' font-weight="bold"' if i == slowest else ""
        out.append(svg.text(x0 - 6, y + bh / 2 + 4, shown, "end", weight))
        if cats:
            x = x0
            for j, c in enumerate(cats):
                w = parts[c][i] / hi * pw
                if w > 0:
                    out.append(svg.rect(x, y, w, bh, category_colour(c, j), tip))
                    x += w
        else:
            out.append(svg.rect(x0, y, mean[i] / hi * pw, bh, PALETTE[0], tip))
        end = mean[i]
        if mx is not None and mn is not None and mx[i] > 0:
            xa, xb = x0 + mn[i] / hi * pw, x0 + mx[i] / hi * pw
            out.append(f'<line x1="{xa:.1f}" y1="{y + bh / 2:.1f}" x2="{xb:.1f}" y2="{y + bh / 2:.1f}" '
                       f'stroke="#333"><title>{esc(tip)}</title></line>')
            out.append(f'<line x1="{xb:.1f}" y1="{y + 4}" x2="{xb:.1f}" y2="{y + bh - 4}" stroke="#333"/>')
            end = max(end, mx[i])
        out.append(svg.text(x0 + end / hi * pw + 6, y + bh / 2 + 4, f"{fmt_num(mean[i])} ms"))
    out.append(svg.x_axis(x0, y_axis, pw, ticks, 0, hi, "ms", "mean step time (ms), split by category; slowest "
                       "host in bold"))
    out.append(legend)
    out.append("</svg>")
    return "".join(out)


#: Hosts named beside their dot in each strip of :func:`hosts_strip_svg` (the others: hover).
STRIP_NAMED = 3


def hosts_strip_svg(hosts_table: Any, spread: Any, plot_id: str = "plot-hosts") -> str:
    """Many hosts at a glance: one strip per per-host figure (``hosts_distribution``), a dot per host,
    the hosts that stand out (the ``stands_out`` column) in red and named."""
    title = "Per-host figures, one dot per host"
    if not has_rows(hosts_table) or not has_rows(spread):
        return missing(plot_id, title, "no per-host figures")
    rows = [r for r in spread.to_dict("records") if r["column"] in hosts_table.columns]
    names = [str(h) for h in hosts_table["host"]]
    out_why = [str(w) for w in hosts_table.get("stands_out", pd.Series([""] * len(names)))]
    x0, pw, sh, top = 190, W - 190 - 30, 46, 14
    n_out = sum(1 for w in out_why if w)
    foot = top + len(rows) * sh + 8
    out = [svg.begin(plot_id, int(foot + 22), title)]
    for i, r in enumerate(rows):
        y = top + i * sh + 18
        vals = as_floats(hosts_table, r["column"])
        ok = np.isfinite(vals)
        if not ok.any():
            continue
        lo, hi = float(vals[ok].min()), float(vals[ok].max())
        pad = max((hi - lo) * 0.06, abs(hi) * 0.01, 1e-12)
        lo, hi = lo - pad, hi + pad

        def x(v: float, lo: float = lo, hi: float = hi) -> float:
            return x0 + (v - lo) / (hi - lo) * pw

        def shown(v: float, unit: str = r["unit"]) -> str:
            return fmt_bytes(v) if unit == "bytes" else f"{fmt_num(v)} ms"

        out.append(svg.text(x0 - 8, y + 4, str(r["figure"]), "end"))
        out.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + pw}" y2="{y}" stroke="#ddd"/>')
        out.append(svg.text(x0, y + 17, shown(lo + pad), "start", ' fill="#666"'))
        out.append(svg.text(x0 + pw, y + 17, shown(hi - pad), "end", ' fill="#666"'))
        med = float(r["median"])
        tip = esc(f"median {shown(med)}")
        out.append(f'<line x1="{x(med):.1f}" y1="{y - 9}" x2="{x(med):.1f}" y2="{y + 9}" stroke="#333">'
                   f'<title>{tip}</title></line>')
        named = 0
        for j in np.flatnonzero(ok):  # alike hosts first, the ones that stand out on top
            if not out_why[j]:
                tip = esc(f"{names[j]}: {shown(float(vals[j]))}")
                out.append(f'<circle cx="{x(float(vals[j])):.1f}" cy="{y}" r="3" fill="{PALETTE[0]}" '
                           f'fill-opacity="0.35"><title>{tip}</title></circle>')
        for j in np.flatnonzero(ok):
            if out_why[j]:
                cx = x(float(vals[j]))
                out.append(f'<circle cx="{cx:.1f}" cy="{y}" r="4.5" fill="{PALETTE[1]}" class="stands-out">'
                           f'<title>{esc(f"{names[j]}: {shown(float(vals[j]))} ({out_why[j]})")}</title></circle>')
                if named < STRIP_NAMED:
                    anchor = "end" if cx > x0 + pw * 0.75 else "start"
                    out.append(svg.text(cx + (-7 if anchor == "end" else 7), y - 6, names[j], anchor,
                                        f' fill="{PALETTE[1]}" font-weight="bold"'))
                    named += 1
    out.append(svg.text(x0, foot + 12, f"{len(names)} hosts; {n_out} stand out (red, named; hover for why); "
                        "tick: the median", "start", ' fill="#666"'))
    out.append("</svg>")
    return "".join(out)


def datafiles_svg(sizes: Any, plot_id: str = "plot-datafiles",
                  why: str = "no training data files were checked (pass --data DIR_OR_GLOB)") -> str:
    title = "Training data files by size"
    if not has_rows(sizes) or "files" not in sizes.columns:
        return missing(plot_id, title, why)
    label_col = "bucket" if "bucket" in sizes.columns else sizes.columns[0]
    labels = [str(v) for v in sizes[label_col]]
    values = [float(v) for v in as_floats(sizes, "files")]
    tips = ["\n".join(f"{c}: {sizes.iloc[i][c]}" for c in sizes.columns) for i in range(len(sizes))]
    colours = [PALETTE[1] if "small" in str(sizes.iloc[i].get("class", "")) else
               PALETTE[2] if "huge" in str(sizes.iloc[i].get("class", "")) else PALETTE[0] for i in range(len(sizes))]
    return hbar_svg(plot_id, title, labels, values, "", "files", tips, colours)
