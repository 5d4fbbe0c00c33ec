"""The HTML report: one self-contained file (inline CSS, SVG and one small script; no fonts, no CDN).

``write_html(result, path)`` writes it; ``render_html(result) -> str`` returns it. Sections:
summary; findings (severity, impact, message, evidence, the plots that answer it, fix with code in
``<pre><code>``); the zoomable timeline; then the plots no finding took, in this order:

=================  ======================================================  ===================
id                 what                                                    data
=================  ======================================================  ===================
plot-steps         step time per step (or per bin), stacked by category    table ``steps``
plot-busy          busy vs idle over the steps' wall time, drawn from time ``timeline``, ``gaps``
plot-timeline      zoomable lanes of the window (report/timeline.py)       ``timeline``, ``steps``
plot-tfdata        tf.data time per stage (+ the stage table)              ``tfdata_stages``
plot-precision     precision mix of device compute                         ``precision_mix``
plot-memory        memory in use over time, peak, top live allocations     ``memory_timeline``,
                                                                           ``memory_live_at_peak``
plot-allreduce     AllReduce measured vs expected                          ``allreduce_*`` metrics
plot-hosts         per-host step time (multi-host runs)                    ``result.hosts``
plot-datafiles     training data files by size (``--data``)                ``data_files_sizes``
=================  ======================================================  ===================

A plot sits beside the first finding whose evidence names its data (``PLOT_FOR_EVIDENCE``). A plot
whose data the trace lacks is a box with the same id saying so and why (the note the analysis left,
when there is one). Every trace-derived string is escaped.
"""

from __future__ import annotations

import datetime as _dt
import numbers
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tfadvisor._version import __version__
from tfadvisor.report import busyidle, run_label, stepchart, timeline
from tfadvisor.report import plots as P
from tfadvisor.report.formatting import fmt_bytes, fmt_num, fmt_value
from tfadvisor.report.plots import esc

PLOT_IDS = ("plot-steps", "plot-busy", "plot-timeline", "plot-tfdata", "plot-precision", "plot-memory",
            "plot-allreduce", "plot-hosts", "plot-datafiles")

CSS = """
:root { --fg:#1d1d1f; --muted:#666; --line:#ddd; --bg:#fff; --panel:#f7f7f9;
        --crit:#c62828; --warn:#ef6c00; --info:#1565c0; }
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0; line-height: 1.45; font-size: 14px; }
main { max-width: 1040px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 2px; } h2 { font-size: 18px; margin: 28px 0 8px;
     border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; margin: 12px 0 6px; }
.sub { color: var(--muted); margin: 0 0 12px; }
nav a { margin-right: 12px; color: var(--info); text-decoration: none; font-size: 13px; }
.cards { display: flex; flex-wrap: wrap; gap: 8px; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px;
        min-width: 130px; }
.card .v { font-size: 17px; font-weight: 600; } .card .k { font-size: 12px; color: var(--muted); }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; max-width: 100%; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
td.long { overflow-wrap: anywhere; }
th { background: var(--panel); } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.tablewrap { max-width: 100%; }
.finding { border: 1px solid var(--line); border-left: 6px solid var(--info); border-radius: 6px;
           padding: 8px 14px; margin: 10px 0; background: #fff; }
.finding.sev-critical, .finding.sev-high, .finding.sev-error { border-left-color: var(--crit); }
.finding.sev-warning, .finding.sev-medium { border-left-color: var(--warn); }
.badge { display: inline-block; font-size: 11px; font-weight: 700; text-transform: uppercase; color: #fff;
         background: var(--info); border-radius: 3px; padding: 1px 6px; margin-right: 6px; vertical-align: 2px; }
.badge.sev-critical, .badge.sev-high, .badge.sev-error { background: var(--crit); }
.badge.sev-warning, .badge.sev-medium { background: var(--warn); }
.finding h3 { display: inline; } .impact { color: var(--muted); margin-left: 8px; }
.rule { color: var(--muted); font-family: monospace; font-size: 12px; margin-left: 8px; }
pre { background: #f4f4f6; border: 1px solid var(--line); border-radius: 4px; padding: 8px 10px;
      white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12.5px; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; }
p code, li code, td code { background: #f4f4f6; padding: 0 3px; border-radius: 3px; }
figure { margin: 8px 0 16px; } figcaption { color: var(--muted); font-size: 12px; }
svg.plot { max-width: 100%; height: auto; background: #fff; }
.missing { margin: 6px 0; border: 1px dashed #bbb; background: var(--panel); color: #555; padding: 10px 14px;
           border-radius: 6px; }
.ok { color: #2e7d32; }
details summary { cursor: pointer; color: var(--info); }
.finding-plot { border-top: 1px dashed var(--line); padding-top: 6px; }
.finding-plot h4 { margin: 4px 0; font-size: 13px; color: var(--muted); }
.tl-bar { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin: 4px 0; }
.tl-bar button { font-size: 12px; padding: 2px 9px; border: 1px solid #bbb; border-radius: 4px; background: #fff;
                 cursor: pointer; }
.tl-chip.sev-critical, .tl-chip.sev-high, .tl-chip.sev-error { border-color: var(--crit); color: var(--crit); }
.tl-chip.sev-warning, .tl-chip.sev-medium { border-color: var(--warn); color: var(--warn); }
.tl-range { color: var(--muted); font-size: 12px; margin: 0 6px; }
.tl-chips { font-size: 12px; color: var(--muted); }
svg.tl-svg { width: 100%; display: block; user-select: none; cursor: grab; }
footer { color: var(--muted); font-size: 12px; margin-top: 32px; }
"""


def write_html(result: Any, path: str | os.PathLike) -> Path:
    """Write the self-contained HTML report of ``result`` to ``path`` (parents created)."""
    out = Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(result), encoding="utf-8")
    return out


#: Evidence metric name prefixes -> the plot that answers a finding citing them.
PLOT_FOR_EVIDENCE = (
    ("plot-hosts", ("straggler", "slowest_host", "load_imbalance", "hosts_", "missing_host")),
    ("plot-busy", ("idle_", "gap_")),
    ("plot-steps", ("step_time", "step_outlier", "input_", "kernel_launch", "python_overhead", "eager_")),
    ("plot-tfdata", ("tfdata_",)),
    ("plot-precision", ("fp16", "bf16", "fp32", "tf32", "int8", "low_precision", "matrix_", "tensor_core",
                        "xprof_16bit")),
    ("plot-memory", ("memory_",)),
    ("plot-allreduce", ("allreduce_", "collective")),
    ("plot-datafiles", ("data_",)),
)


def render_html(result: Any) -> str:
    metrics = getattr(result, "metrics", None) or {}
    tables = getattr(result, "tables", None) or {}
    notes = list(getattr(result, "notes", None) or [])
    label = run_label(result)
    findings = getattr(result, "findings", None) or []
    plots = _plots(result, metrics, tables, notes)
    placed = _place(findings, plots)
    nav = [("summary", "Summary"), ("findings", "Findings"), ("timeline", "Timeline")]
    nav += [(pid if pid in placed else anchor, title) for pid, (anchor, title, content, _) in plots.items()
            if not _is_missing(content)]
    nav += [("absent", "Not in this trace"), ("notes", "Notes"), ("metrics", "All metrics")]
    body = [
        f"<header><h1>tfadvisor report</h1><p class=\"sub\">{esc(label)}</p>",
        "<nav>" + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in nav) + "</nav></header>",
        _summary(result, metrics),
        _findings(findings, metrics, plots, placed),
        _section("timeline", "Timeline of the capture window",
                 timeline.timeline_html(result, why=P.notes_for(notes, "timeline") or "no activity timeline"),
                 "Zoom with the mouse wheel or the buttons, drag to pan, double-click to reset; a finding's "
                 "button zooms to the spans it is about (lanes it names are tinted and starred). Each bar's "
                 "height is the share of its time that was active."),
    ]
    absent = []
    for pid, (anchor, title, content, caption) in plots.items():
        if pid in placed:
            continue
        if _is_missing(content):
            absent.append(content)
        else:
            body.append(_section(anchor, title, content, caption))
    system = _system_html(result)
    if _is_missing(system):
        absent.append(system[:system.index("</div>") + 6])  # the box, not the lines' legend
    else:
        body.append(_section("system", "System: CPU, GPU, disk, network", system,
                             "Sampled by the capture beside the profile (tfadvisor_system.<host>.npz)."))
    if absent:
        body.append('<section id="absent"><h2>Not in this trace</h2><p class="sub">The plots this profile has no '
                    "data for, and why.</p>" + "".join(absent) + "</section>")
    body += [
        _notes(notes),
        _all_metrics(metrics),
        f"<footer>Generated by tfadvisor {esc(__version__)} on "
        f"{esc(_dt.datetime.now().strftime('%Y-%m-%d %H:%M'))}. This file is self-contained and works offline."
        "</footer>",
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>tfadvisor: {esc(label)}</title><style>{CSS}</style></head>"
            "<body><main>" + "\n".join(body) + "</main></body></html>\n")


def _host_views(result: Any, metrics: Any) -> tuple[str, list[tuple[str, str, Any]]]:
    """For a multi-host run: which host the run-level charts show (`` of host1, the median host``),
    and the other hosts to draw beside them: ``(host, what it is, HostAnalysis)``, the straggler's."""
    hosts = list(getattr(result, "hosts", None) or [])
    if len(hosts) < 2:
        return "", []
    median = str(metrics.get("median_host") or "")
    suffix = f": {median}, the median host" if median else ""
    extra = []
    for name, what in ((metrics.get("straggler_host"), "the straggler"),):
        h = next((h for h in hosts if str(h.host) == str(name)), None)
        if name and h is not None and str(name) != median:
            extra.append((str(h.host), what, h))
    return suffix, extra


def _other_hosts(extra: list, draw: Any) -> str:
    """The same chart for each of ``extra`` hosts, under a heading naming it."""
    out = []
    for host, what, h in extra:
        svg = draw(host, getattr(h, "tables", {}) or {}, getattr(h, "metrics", {}) or {})
        if not _is_missing(svg):
            out.append(f'<h4 class="host-view">{esc(host)}, {esc(what)}</h4>{svg}')
    return "".join(out)


def _safe_id(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in str(text))


def _plots(result: Any, metrics: Any, tables: dict, notes: list[str]) -> dict[str, tuple[str, str, str, str]]:
    """plot id -> (section anchor, title, content, caption), in page order. In a multi-host run the
    step and busy/idle charts are the median host's (the run's per-step figures), and say so; a
    straggler's own charts follow them."""
    who = "device" if metrics.get("device_present") else "training threads"
    of_host, extra = _host_views(result, metrics)
    steps_svg = stepchart.steps_svg(tables.get("steps"),
                                    why=P.notes_for(notes, "steps") or "no training steps were found")
    busy_svg = busyidle.busy_idle_svg(tables.get("timeline"), tables.get("steps"), tables.get("gaps"),
                                      metrics.get("device_present"),
                                      why=P.notes_for(notes, "timeline", "gaps") or "no activity timeline")
    if extra and not _is_missing(steps_svg):
        steps_svg += _other_hosts(extra, lambda host, t, m: stepchart.steps_svg(
            t.get("steps"), plot_id=f"plot-steps-{_safe_id(host)}"))
    busy_svg += _gaps_line(metrics, tables.get("steps"))
    if extra and not _is_missing(busy_svg):
        busy_svg += _other_hosts(extra, lambda host, t, m: busyidle.busy_idle_svg(
            t.get("timeline"), t.get("steps"), t.get("gaps"), m.get("device_present"),
            plot_id=f"plot-busy-{_safe_id(host)}") + _gaps_line(m, t.get("steps")))
    return {
        "plot-steps": ("steps", f"Step time per step{of_host}", steps_svg,
                       "Each bar is one step (or, with many steps, the mean of a few, as the axis says), split "
                       "into where its time went; the axis reaches the slowest step. Hover a bar for its numbers."),
        "plot-busy": ("busy", f"Busy vs idle{of_host}",
                      busy_svg,
                      "Top: the shares of the steps' wall time. Row: time runs left to right; in each pixel "
                      f"column the red height is the share the {who} had no work between steps, the orange the "
                      "share inside a step with nothing traced at all, so their area is the idle time. Triangles "
                      "mark the gaps the findings count."),
        "plot-tfdata": ("input", "Input pipeline (tf.data)",
                        P.tfdata_svg(tables.get("tfdata_stages"),
                                     why=P.notes_for(notes, "tfdata") or "no tf.data iterator events")
                        + _input_line(metrics) + _table(tables.get("tfdata_stages"), "tfdata-stages", limit=40), ""),
        "plot-precision": ("precision", "Precision mix",
                           P.precision_svg(P.precision_shares(tables, metrics),
                                           why=P.notes_for(notes, "precision")
                                           or "no device compute with a known precision")
                           + _precision_line(metrics), ""),
        "plot-memory": ("memory", "Memory",
                        P.memory_svg(tables.get("memory_timeline"), metrics.get("memory_peak_bytes"),
                                     metrics.get("memory_capacity_bytes"),
                                     why=P.notes_for(notes, "memory") or "no memory allocation events")
                        + _memory_live(tables.get("memory_live_at_peak"), metrics), ""),
        "plot-allreduce": ("allreduce", "AllReduce",
                           P.allreduce_svg(metrics.get("allreduce_ms_per_step"), metrics.get("allreduce_expected_ms"),
                                           metrics.get("allreduce_expected_ring_ms"),
                                           why=P.notes_for(notes, "collectives") or "no AllReduce / collective ops")
                           + _allreduce_line(metrics), ""),
        "plot-hosts": ("hosts", "Hosts",
                       P.hosts_svg(getattr(result, "hosts", None) or [], tables.get("hosts"), why=_hosts_why(result))
                       + _hosts_table(getattr(result, "hosts", None) or [], tables.get("hosts")), ""),
        "plot-datafiles": ("datafiles", "Training data files",
                           P.datafiles_svg(tables.get("data_files_sizes"),
                                           why=P.notes_for(notes, "datafiles")
                                           or "no training data files were checked (pass --data DIR_OR_GLOB)")
                           + _datafiles_line(metrics) + _table(tables.get("data_largest_files"), "data-largest-files"),
                           ""),
    }


def _is_missing(content: str) -> bool:
    """A 'not in this trace' box (plots.missing), possibly followed by text lines."""
    return content.lstrip().startswith('<div class="missing"')


def _plots_for(finding: Any) -> list[str]:
    """The plot ids a finding's evidence names, in PLOT_FOR_EVIDENCE order."""
    ev = P.get(finding, "evidence") or {}
    keys = [str(k) for k in (ev.keys() if isinstance(ev, dict) else [])]
    return [pid for pid, prefixes in PLOT_FOR_EVIDENCE if any(k.startswith(prefixes) for k in keys)]


def _place(findings: list, plots: dict) -> dict[str, int]:
    """plot id -> index of the finding it sits beside: the first (most important) finding whose
    evidence names it; only drawn plots move (a 'not in this trace' box stays in its section)."""
    placed: dict[str, int] = {}
    for i, f in enumerate(findings):
        for pid in _plots_for(f):
            if pid in plots and pid not in placed and not _is_missing(plots[pid][2]):
                placed[pid] = i
    return placed


# --------------------------------------------------------------------------- sections


def _section(anchor: str, title: str, content: str, caption: str = "") -> str:
    shown = not content.startswith('<div class="missing"')
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption and shown else ""
    return f'<section id="{anchor}"><h2>{esc(title)}</h2><figure>{content}{cap}</figure></section>'


def _unit(metrics: Any, name: str) -> str:
    return (getattr(metrics, "units", None) or {}).get(name, "")


def _mv(metrics: Any, name: str) -> str:
    return fmt_value(metrics.get(name), _unit(metrics, name), name)


def _summary(result: Any, metrics: Any) -> str:
    summ = getattr(result, "summary", None) or {}
    run = getattr(result, "run", None)
    hosts = summ.get("hosts") or (list(getattr(run, "hosts", []) or []) if run is not None else [])
    facts = [
        ("Run", run_label(result)),
        ("Directory", getattr(run, "directory", None) or summ.get("run_dir")),
        ("Hosts", f"{len(hosts)}: {', '.join(map(str, hosts[:8]))}{' ...' if len(hosts) > 8 else ''}"
         if hosts else None),
        ("Events", fmt_num(summ.get("events")) if summ.get("events") is not None else None),
        ("Time span", fmt_value(summ.get("time_span_ms"), "ms") if summ.get("time_span_ms") is not None else None),
        ("Trace size", fmt_bytes(summ.get("file_bytes")) if summ.get("file_bytes") else None),
        ("Steps found by", metrics.get("steps_source")),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts if v not in (None, ""))
    cards = "".join(
        f'<div class="card"><div class="v">{esc(_mv(metrics, name))}</div><div class="k">{esc(label)}</div></div>'
        for name, label in P.KEY_METRICS if metrics.get(name) is not None)
    findings = getattr(result, "findings", None) or []
    verdict = (f"<p><strong>{len(findings)} finding{'s' if len(findings) != 1 else ''}</strong>; the first: "
               f"{esc(P.get(findings[0], 'title', ''))}</p>" if findings
               else '<p class="ok"><strong>No findings</strong>: no rule fired on this profile.</p>')
    return (f'<section id="summary"><h2>Summary</h2>{verdict}<table>{rows}</table>'
            f'<div class="cards">{cards}</div></section>')


def _findings(findings: list, metrics: Any, plots: dict | None = None, placed: dict | None = None) -> str:
    if not findings:
        return ('<section id="findings"><h2>Findings</h2><p class="ok">None: nothing in this profile matched a '
                "rule.</p></section>")
    parts = ['<section id="findings"><h2>Findings</h2>']
    for i, f in enumerate(findings, 1):
        sev = str(P.get(f, "severity", "info") or "info").lower()
        rule = P.finding_rule(f)
        impact = P.get(f, "impact_pct")
        impact_s = (f'<span class="impact">~{esc(fmt_num(impact, 2))} % of step time</span>'
                    if isinstance(impact, (int, float)) and not isinstance(impact, bool) else "")
        parts.append(f'<article class="finding sev-{esc(sev)}" id="finding-{esc(rule)}">'
                     f'<span class="badge sev-{esc(sev)}">{esc(sev)}</span>'
                     f"<h3>{i}. {esc(P.get(f, 'title', rule))}</h3>{impact_s}<span class=\"rule\">{esc(rule)}</span>")
        msg = P.get(f, "message")
        if msg:
            parts.append(_prose(str(msg)))
        evidence = P.get(f, "evidence") or {}
        if evidence:
            rows = "".join(f"<tr><th><code>{esc(k)}</code></th><td class=\"num\">"
                           f"{esc(fmt_value(v, _unit(metrics, k), str(k)))}</td></tr>"
                           for k, v in (evidence.items() if isinstance(evidence, dict) else enumerate(evidence)))
            parts.append(f'<details open><summary>Evidence</summary><table class="evidence">{rows}</table></details>')
        parts.append(_finding_plots(i - 1, f, plots or {}, placed or {}))
        fix_parts = P.finding_fix(f)
        if fix_parts:
            parts.append('<div class="fix"><strong>Fix</strong>')
            for kind, text, lang in fix_parts:
                if kind == "code":
                    cls = f' class="language-{esc(lang)}"' if lang else ""
                    parts.append(f"<pre><code{cls}>{esc(text)}</code></pre>")
                else:
                    parts.append(_prose(text))
            parts.append("</div>")
        why = P.get(f, "why")
        if why:
            parts.append(f"<details><summary>Why it matters</summary>{_prose(str(why).strip())}</details>")
        links = P.docs_links(P.get(f, "docs"))
        if links:
            parts.append("<p>Docs: " + ", ".join(f'<a href="{esc(u)}">{esc(t)}</a>' for t, u in links) + "</p>")
        parts.append("</article>")
    parts.append("</section>")
    return "".join(parts)


def _finding_plots(i: int, f: Any, plots: dict, placed: dict) -> str:
    """The plots that answer finding ``i``: drawn here when it is the first to name them, else linked."""
    out, links = [], []
    for pid in _plots_for(f):
        if pid not in plots or pid not in placed:
            continue
        _, title, content, caption = plots[pid]
        if placed[pid] == i:
            cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
            out.append(f'<figure class="finding-plot"><h4>{esc(title)}</h4>{content}{cap}</figure>')
        else:
            links.append(f'<a href="#{pid}">{esc(title)}</a>')
    if links:
        out.append(f'<p class="sub">See also: {", ".join(links)} (beside an earlier finding).</p>')
    return "".join(out)


def _prose(text: str) -> str:
    """Plain text to paragraphs, with `inline code` spans; everything escaped."""
    out = []
    for para in text.split("\n\n"):
        chunks = para.split("`")
        html = "".join(esc(c) if i % 2 == 0 else f"<code>{esc(c)}</code>" for i, c in enumerate(chunks))
        out.append(f"<p>{html.replace(chr(10), '<br>')}</p>")
    return "".join(out)


#: A table with more columns than this (after the empty ones are dropped) and few rows is drawn
#: turned on its side (one column per row), so that it fits the page without scrolling.
MAX_COLUMNS = 10


def _table(df: Any, css_id: str, limit: int = 25, columns: list[str] | None = None) -> str:
    if not P.has_rows(df):
        return ""
    d = df if columns is None else df[[c for c in columns if c in df.columns]]
    more = len(d) - limit
    d = d.head(limit)
    d = d[[c for c in d.columns if not all(_blank(v) for v in d[c])]]  # columns with nothing in them
    tail = f"<p class=\"sub\">... and {more} more rows</p>" if more > 0 else ""
    if len(d.columns) > MAX_COLUMNS and len(d) <= MAX_COLUMNS:
        first, rest = d.columns[0], list(d.columns[1:])
        head = f"<th>{_breakable(first)}</th>" + "".join(f"<th>{_breakable(v)}</th>" for v in d[first])
        body = ["<tr>" + f"<th>{_breakable(c)}</th>" + "".join(_cell(c, v) for v in d[c]) + "</tr>" for c in rest]
    else:
        head = "".join(f"<th>{_breakable(c)}</th>" for c in d.columns)
        body = ["<tr>" + "".join(_cell(c, v) for c, v in zip(d.columns, row, strict=False)) + "</tr>"
                for row in d.itertuples(index=False)]
    return (f'<div class="tablewrap"><table id="{esc(css_id)}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>{tail}")


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and pd.isna(v)) or (isinstance(v, str) and not v.strip())


def _cell(col: Any, v: Any) -> str:
    """One ``<td>``: numbers right-aligned (bytes human-readable), text breakable."""
    if _blank(v):
        return "<td></td>"
    if isinstance(v, numbers.Number) and not isinstance(v, (bool, np.bool_)):
        text = fmt_bytes(v) if str(col).endswith("bytes") else fmt_num(v)
        return f'<td class="num">{esc(text)}</td>'
    long = ' class="long"' if len(str(v)) > 24 else ""
    return f"<td{long}>{_breakable(v)}</td>"


def _breakable(text: Any) -> str:
    """Escaped text that may wrap after ``_``, ``::``, ``/`` and ``,`` (long op and iterator names)."""
    out = esc(text)
    for sep in ("_", "::", "/", ","):
        out = out.replace(sep, sep + "<wbr>")
    return out


def _line(metrics: Any, names: list[tuple[str, str]]) -> str:
    items = [f"{esc(label)}: <strong>{esc(_mv(metrics, n))}</strong>" for n, label in names
             if metrics.get(n) is not None]
    return f'<p class="figline">{" &middot; ".join(items)}</p>' if items else ""


def _gaps_line(metrics: Any, steps: Any = None) -> str:
    """What the busy/idle plot draws, in words: the idle total, then the gaps the findings count
    (idle of at least the threshold); shorter idle is in the total, not a gap."""
    s = _line(metrics, [("idle_pct", "idle in all"), ("idle_between_steps_pct", "between steps"),
                        ("idle_within_steps_pct", "inside steps")])
    n = metrics.get("gaps_count")
    if n is None:
        return s
    thr = fmt_num(P.gap_threshold_ms(steps))
    if n:
        more = [f"{esc(label)}: <strong>{esc(_mv(metrics, k))}</strong>" for k, label in
                (("gap_max_ms", "longest"), ("gap_host_activity", "the host ran")) if metrics.get(k) is not None]
        gaps = (f'<p class="figline" id="gaps-counted">gaps between steps with {esc(thr)} ms or more idle: '
                f"<strong>{esc(fmt_num(n))}</strong>{''.join(' &middot; ' + m for m in more)}</p>")
    else:
        gaps = (f'<p class="figline" id="gaps-counted">No gap between steps has {esc(thr)} ms or more idle: the idle '
                "drawn is shorter pauses, in the totals above but not counted as gaps.</p>")
    return s + gaps


def _input_line(metrics: Any) -> str:
    return _line(metrics, [("input_pct", "waiting for input"), ("input_severity", "severity"),
                           ("tfdata_pipeline", "pipeline"), ("tfdata_has_prefetch", "prefetch"),
                           ("tfdata_has_cache", "cache"), ("tfdata_map_element_us", "map time per element")])


def _precision_line(metrics: Any) -> str:
    return _line(metrics, [("low_precision_pct", "16-bit (fp16+bf16+int8)"), ("xprof_16bit_pct", "as xprof counts"),
                           ("tensor_core_capable", "tensor cores"), ("compute_capability", "compute capability")])


def _allreduce_line(metrics: Any) -> str:
    s = _line(metrics, [("allreduce_pct", "share of step"), ("allreduce_overlap_pct", "overlapped"),
                        ("allreduce_ratio", "measured / expected"), ("param_count", "parameters"),
                        ("link_bandwidth_gbps", "link GB/s"), ("replicas", "replicas")])
    if metrics.get("allreduce_ms_per_step") is not None and metrics.get("allreduce_expected_ms") is None:
        s += ('<p class="sub">Expected time needs the parameter count and link bandwidth: pass '
              "<code>--params</code> and <code>--bandwidth</code>.</p>")
    return s


def _memory_live(df: Any, metrics: Any) -> str:
    s = _line(metrics, [("memory_peak_bytes", "peak"), ("memory_capacity_bytes", "capacity"),
                        ("memory_peak_pct", "peak / capacity"), ("memory_fragmentation", "fragmentation"),
                        ("memory_allocator", "allocator")])
    shown, unnamed = P.live_at_peak(df, metrics)
    if shown is None and not unnamed:
        return s
    s += "<h3>Largest allocations live at the peak</h3>"
    if shown is not None:
        s += _table(shown, "memory-live-at-peak", limit=15)
    if unnamed:
        s += f'<p class="sub" id="memory-live-unnamed">{esc(unnamed)}</p>'
    return s


def _hosts_why(result: Any) -> str:
    hosts = getattr(result, "hosts", None) or []
    n = len(hosts) or len(getattr(getattr(result, "run", None), "files", ()) or ())
    if len(hosts) < 2:
        return f"{'one host was' if n == 1 else f'{n} hosts were'} profiled; per-host comparison needs two or more"
    return "no host has step times"


def _hosts_table(hosts: list, hosts_table: Any = None) -> str:
    df = P.host_rows(hosts, hosts_table)
    if len(df) < 2:
        return ""
    cols = [c for c in ("host", "steps", "steps_count", "step_time_mean_ms", "step_time_p90_ms", "step_time_max_ms",
                        "compute_ms", "wait_ms", "work_ratio", "input_pct",
                        "idle_pct", "allreduce_ms_per_step") if c in df.columns and df[c].notna().any()]
    return _table(df, "hosts-table", limit=64, columns=cols)


def _datafiles_line(metrics: Any) -> str:
    return _line(metrics, [("data_files_count", "files"), ("data_total_bytes", "total"),
                           ("data_file_median_bytes", "median"), ("data_file_p90_bytes", "p90"),
                           ("data_largest_file_bytes", "largest"), ("data_small_files_pct", "under 1 MiB"),
                           ("data_huge_files_count", "over 1 GiB")])


def _notes(notes: list[str]) -> str:
    if not notes:
        return '<section id="notes"><h2>Notes</h2><p class="sub">None.</p></section>'
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return f'<section id="notes"><h2>Notes</h2><p class="sub">What the trace could not tell, and why.</p>' \
           f"<ul>{items}</ul></section>"


def _all_metrics(metrics: Any) -> str:
    if not metrics:
        return ""
    docs = getattr(metrics, "docs", None) or {}
    rows = "".join(f"<tr><td><code>{esc(k)}</code></td><td class=\"num\">{esc(_mv(metrics, k))}</td>"
                   f"<td>{esc(docs.get(k, ''))}</td></tr>" for k in metrics)
    return (f'<section id="metrics"><h2>All metrics</h2><details><summary>{len(metrics)} metrics</summary>'
            f"<table><thead><tr><th>metric</th><th>value</th><th>meaning</th></tr></thead><tbody>{rows}</tbody>"
            "</table></details></section>")


def _system_html(result: Any) -> str:
    from tfadvisor.report import system

    return system.html_section_body(result)
