"""System samples in the reports: utilisation timelines (HTML), the figures (text, Markdown, JSON).

The HTML and Markdown reports lay them out from the view model (report/view.py, templates/).

Reads the ``system`` analysis' tables (``system_timeline``, ``system_summary``, ``startup``)
and metrics. The HTML timelines share the x axis of the busy/idle timeline above them (the
profiled window, in ms since its first step or gap), so a dip in CPU or GPU lines up with
the steps it slowed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfadvisor.report.formatting import fmt_num, fmt_value
from tfadvisor.report.plots import W, _svg_open, _text, _x_axis, esc, has_rows, missing, nice_ticks, notes_for

#: (label, metric) rows of the utilisation table, in order; rows without a value are left out.
TABLE = (
    ("CPU busy (all cores)", "system_cpu_util_pct"), ("CPU busy, p90", "system_cpu_util_p90_pct"),
    ("training process CPU", "system_proc_cpu_pct"), ("other processes CPU", "system_other_cpu_pct"),
    ("idle cores", "system_cpu_idle_cores"), ("GPU sampler", "system_gpu_sampler"), ("GPU busy", "system_gpu_util_pct"),
    ("least busy GPU", "system_gpu_util_min_pct"), ("GPU memory peak", "system_gpu_mem_used_pct"),
    ("GPU power", "system_gpu_power_w"), ("host memory peak", "system_mem_used_pct"),
    ("process RSS peak", "system_proc_rss_max_bytes"), ("swap I/O", "system_swap_io_mbps"),
    ("disk read", "system_disk_read_mbps"), ("disk write", "system_disk_write_mbps"),
    ("disk busy (busiest)", "system_disk_busy_pct"), ("network receive", "system_net_recv_mbps"),
    ("network send", "system_net_sent_mbps"), ("samples", "system_samples_count"),
    ("sampler CPU", "system_sampler_overhead_pct"),
    ("start-up to first step", "startup_to_first_step_s"), ("  before fit()", "startup_before_fit_s"),
    ("  fit() to first batch", "startup_fit_to_first_batch_s"), ("  first step", "startup_first_step_s"),
    ("  read calls before fit()", "startup_before_fit_read_calls"),
    ("  first IteratorGetNext", "startup_first_get_next_ms"),
)
ROWS = (  # timeline rows: label, columns (colour), unit, fixed max (None: from the data)
    ("CPU", (("cpu_pct", "#4e79a7"), ("proc_cpu_pct", "#a0cbe8")), "%", 100.0),
    ("GPU", (("gpu_util_pct", "#59a14f"),), "%", 100.0),
    ("disk", (("disk_read_mbps", "#f28e2b"), ("disk_write_mbps", "#ffbe7d")), "MB/s", None),
    ("network", (("net_recv_mbps", "#b07aa1"), ("net_sent_mbps", "#d4a6c8")), "MB/s", None),
)


def _value(metrics: Any, name: str) -> str:
    return fmt_value(metrics.get(name), name=name, units=getattr(metrics, "units", None))


def table_rows(metrics: Any) -> list[tuple[str, str]]:
    """(label, value) for each known figure; empty when the run has neither samples nor start-up."""
    rows = [(label, _value(metrics, name)) for label, name in TABLE if metrics.get(name) is not None]
    if metrics.get("system_gpu_sampler") == "none" and rows:
        rows = [(lab, "none (no GPU sampler)" if lab == "GPU sampler" else v) for lab, v in rows]
    return rows


def to_dict(result: Any) -> dict[str, Any]:
    """The JSON ``system`` object: the table as {metric: value} and the timeline's size."""
    metrics = getattr(result, "metrics", None) or {}
    tables = getattr(result, "tables", None) or {}
    tl = tables.raw("system_timeline") if "system_timeline" in tables else None  # the Table: no pandas needed
    return {
        "figures": {name: metrics.get(name) for _, name in TABLE if metrics.get(name) is not None},
        "samples": int(len(tl)) if tl is not None else 0,
    }


def terminal_line(result: Any) -> str:
    """The figures in one line for the terminal summary (it wraps); empty without any."""
    m = getattr(result, "metrics", None) or {}
    short = (("CPU", "system_cpu_util_pct"), ("process", "system_proc_cpu_pct"),
             ("idle cores", "system_cpu_idle_cores"),
             ("GPU", "system_gpu_util_pct"), ("memory peak", "system_mem_used_pct"),
             ("disk read", "system_disk_read_mbps"), ("net recv", "system_net_recv_mbps"),
             ("start-up", "startup_to_first_step_s"))
    parts = [f"{label} {_value(m, name)}" for label, name in short if m.get(name) is not None]
    if parts and m.get("system_gpu_sampler") == "none":
        parts.insert(3, "no GPU sampler")
    return ", ".join(parts)


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
    out = [_svg_open(plot_id, height, title)]

    def xs(ps: np.ndarray) -> np.ndarray:
        return x0 + (ps - lo) / (hi - lo) * pw

    y = 16.0
    for label, cols, unit, fixed in rows:
        vals = [pd.to_numeric(tl[c], errors="coerce").to_numpy(float) for c, _ in cols if c in tl.columns]
        top = fixed or max([float(np.nanmax(v)) for v in vals if np.isfinite(v).any()] + [0.0])
        top = top if top > 0 else 1.0
        out.append(f'<rect x="{x0}" y="{y:.1f}" width="{pw}" height="{rh}" fill="#f7f7f7"/>')
        out.append(_text(x0 - 6, y + rh / 2, label, "end"))
        out.append(_text(x0 - 6, y + rh / 2 + 12, f"0-{fmt_num(top)} {unit}", "end", 'fill="#777" font-size="9"'))
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
    out.append(_x_axis(x0, y - gap + 4, pw, ticks, 0, span_ms, "ms", "time since window start (ms)"))
    out.append("</svg>")
    return "".join(out)


__all__ = ["table_rows", "terminal_line", "timeline_svg", "to_dict"]
