"""System samples in the reports: the figures (text, Markdown, JSON); the HTML timelines are drawn
by :mod:`tfadvisor.report.system_plot`.

The HTML and Markdown reports lay them out from the view model (report/view.py, templates/).
Reads the ``system`` analysis' metrics (and, for the JSON, the size of ``system_timeline``).
"""

from __future__ import annotations

from typing import Any

from tfadvisor.report.formatting import fmt_value

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


__all__ = ["ROWS", "TABLE", "table_rows", "terminal_line", "to_dict"]
