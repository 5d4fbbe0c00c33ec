"""The reports' view model: what the HTML and Markdown reports show, built from a result.

``build(result)`` returns a :class:`View` of an ``api.Result`` (or ``RunResult``): the summary, the
findings (evidence, fix, why, docs, the plots placed beside them), the sections (figures, tables
with their cells already written, why a section's data is absent), the plots, the timeline viewer's
data, the notes and every metric, as plain dataclasses. Each part is built the first time a
template reads it, once. Every number is written here, by :mod:`report.formatting`; the templates
(``templates/report.html.j2``, ``report.md.j2``) only lay the view out and escape it.

Text stays text: escaping is the renderers' (HTML autoescape, Markdown's filters). The SVG plots and
the timeline's data and script are built by our own code (every trace-derived string in them escaped
by ``svg.esc``) and come as :class:`markupsafe.Markup`, the one kind of value the HTML template
writes as it is.

HTML plots, in page order; each sits beside the first finding whose rule names it (the rule's
``plots``); one whose data the trace lacks is a box with the same id saying why:

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
"""

from __future__ import annotations

import datetime as _dt
import numbers
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup

from tfadvisor._version import __version__
from tfadvisor.analyses.marks import PLOTS
from tfadvisor.report import (
    HOSTS_LISTED,
    KEY_METRICS,
    busyidle,
    cpu_only,
    get,
    notes_for,
    notes_left,
    notes_on_findings,
    run_label,
    stepchart,
    system,
    system_plot,
    timeline,
)
from tfadvisor.report import plots as P
from tfadvisor.report.findings import (
    caveat_labels,
    docs_links,
    finding_caveats,
    finding_fix,
    finding_rule,
    split_fix,
)
from tfadvisor.report.formatting import fmt_bytes, fmt_num, fmt_value

PLOT_IDS = ("plot-steps", "plot-busy", "plot-timeline", "plot-tfdata", "plot-precision", "plot-memory",
            "plot-allreduce", "plot-hosts", "plot-datafiles")


#: A table with more columns than this (after the empty ones are dropped) and few rows is drawn
#: turned on its side in HTML (one column per row), so that it fits the page without scrolling.
MAX_COLUMNS = 10

# (metric, label) lists: the figures each section shows. ``*_LINE``: the shorter line under a plot (HTML),
# where the plot draws the rest; ``*_FIGURES``: the section's table (Markdown, which has no plots).
INPUT_FIGURES = (("input_pct", "waiting for input"), ("input_severity", "severity"), ("tfdata_pipeline", "pipeline"),
                 ("tfdata_has_prefetch", "prefetch"), ("tfdata_has_cache", "cache"),
                 ("tfdata_map_element_us", "map time per element"))
BUSY_LINE = (("idle_pct", "idle in all"), ("idle_between_steps_pct", "between steps"),
             ("idle_within_steps_pct", "inside steps"))
BUSY_FIGURES = (("idle_pct", "idle"), ("idle_between_steps_pct", "idle between steps"),
                ("idle_within_steps_pct", "idle within steps"), ("gaps_count", "gaps"), ("gap_mean_ms", "mean gap"),
                ("gap_max_ms", "longest gap"), ("gap_host_activity", "host ran in the gaps"))
PRECISION_LINE = (("low_precision_pct", "16-bit (fp16+bf16+int8)"), ("xprof_16bit_pct", "as xprof counts"),
                  ("tensor_core_capable", "tensor cores"), ("compute_capability", "compute capability"))
PRECISION_FIGURES = (("low_precision_pct", "16-bit (fp16+bf16+int8)"), ("xprof_16bit_pct", "16-bit as xprof counts"),
                     ("tensor_core_capable", "tensor cores"))
MEMORY_LINE = (("memory_peak_bytes", "peak"), ("memory_capacity_bytes", "capacity"),
               ("memory_peak_pct", "peak / capacity"), ("memory_fragmentation", "fragmentation"),
               ("memory_allocator", "allocator"))
MEMORY_FIGURES = (("memory_peak_bytes", "peak in use"), ("memory_peak_time_ms", "peak at"),
                  ("memory_capacity_bytes", "capacity"), ("memory_peak_pct", "peak / capacity"),
                  ("memory_fragmentation", "fragmentation"), ("memory_allocator", "allocator"))
ALLREDUCE_LINE = (("allreduce_pct", "share of step"), ("allreduce_overlap_pct", "overlapped"),
                  ("allreduce_ratio", "measured / expected"), ("param_count", "parameters"),
                  ("link_bandwidth_gbps", "link GB/s"), ("replicas", "replicas"))
ALLREDUCE_FIGURES = (("allreduce_ms_per_step", "measured per step"),
                     ("allreduce_expected_ms", "expected (params x 4 B / bandwidth)"),
                     ("allreduce_expected_ring_ms", "expected, ring all-reduce"),
                     ("allreduce_ratio", "measured / expected"), ("allreduce_pct", "% of step"),
                     ("allreduce_overlap_pct", "overlapped with compute"), ("param_count", "parameters"),
                     ("link_bandwidth_gbps", "link GB/s"), ("replicas", "replicas"))
DATAFILES_LINE = (("data_files_count", "files"), ("data_total_bytes", "total"), ("data_file_median_bytes", "median"),
                  ("data_file_p90_bytes", "p90"), ("data_largest_file_bytes", "largest"),
                  ("data_small_files_pct", "under 1 MiB"), ("data_huge_files_count", "over 1 GiB"))
DATAFILES_FIGURES = (("data_files_count", "files"), ("data_total_bytes", "total"), ("data_file_min_bytes", "smallest"),
                     ("data_file_median_bytes", "median"), ("data_file_p90_bytes", "p90"),
                     ("data_largest_file_bytes", "largest"), ("data_small_files_pct", "files under 1 MiB"),
                     ("data_huge_files_count", "files over 1 GiB"))
HOST_COLUMNS = ("host", "steps", "steps_count", "step_time_mean_ms", "step_time_p90_ms", "step_time_max_ms",
                "compute_ms", "wait_ms", "work_ratio", "input_pct", "idle_pct", "allreduce_ms_per_step", "stands_out")
SPREAD_COLUMNS = ("figure", "unit", "hosts", "median", "p10", "p90", "min", "max", "spread_pct")


# --------------------------------------------------------------------------- the view's parts


@dataclass
class Figure:
    """One figure, written: ``label`` and ``text``; ``literal``: text from the trace or the run, not a
    number (Markdown writes it as code)."""

    label: str
    text: str
    literal: bool = False


@dataclass
class Cell:
    """One table cell, written (``""``: empty); ``num``: a number; ``ident``: a name from the trace."""

    text: str = ""
    num: bool = False
    ident: bool = False


@dataclass
class Table:
    id: str
    columns: list[str]
    numeric: list[bool]  # per column: numbers (right-aligned)
    rows: list[list[Cell]]
    more: int = 0  # rows left out
    folded: str = ""  # HTML: drawn closed, under this summary

    @property
    def sideways(self) -> bool:
        """Wide and short: drawn one column per row (HTML)."""
        return len(self.columns) > MAX_COLUMNS and len(self.rows) <= MAX_COLUMNS


@dataclass
class Line:
    """A line of figures under a plot (``label: value`` ...), or a sentence (``text``)."""

    figures: list[Figure] = field(default_factory=list)
    text: str = ""
    id: str = ""


@dataclass
class HostView:
    """A plot drawn again for one more host of a multi-host run (the straggler)."""

    host: str
    what: str
    svg: Markup
    lines: list[Line] = field(default_factory=list)


@dataclass
class Plot:
    """One HTML plot and what goes under it, in this order: lines, other hosts, heading, table, note."""

    id: str
    anchor: str  # its section's id when no finding took it
    title: str
    svg: Markup  # or the 'not in this trace' box
    caption: str = ""
    lines: list[Line] = field(default_factory=list)
    hosts: list[HostView] = field(default_factory=list)
    heading: str = ""
    table: Table | None = None
    more_tables: list[Table] = field(default_factory=list)
    note: str = ""
    note_id: str = ""
    needs_params: bool = False  # AllReduce: say how to get the expected time
    placed: int | None = None  # the finding it sits beside

    @property
    def missing(self) -> bool:
        return is_missing(self.svg)


@dataclass
class Finding:
    n: int
    rule: str
    severity: str  # lower case
    title: str
    impact: str  # "~55" in "% of step time", "" when unknown
    message: str
    evidence: list[Figure]
    fix: list[tuple[str, str, str]]  # (text | code, body, language)
    why: str
    docs: list[tuple[str, str]]  # (title, url)
    plot_ids: list[str]  # the plots its rule declares (``plots``)
    caveats: list[str] = field(default_factory=list)  # conditions that make it uncertain, a few words each
    also: list[Also] = field(default_factory=list)  # other explanations of the same cost, folded into it


@dataclass
class Also:
    """Another explanation of a finding's cost (a rule folded into it): its rule, title, message and fix."""

    rule: str
    title: str
    message: str
    fix: list[tuple[str, str, str]]


@dataclass
class Summary:
    run: str
    directory: str
    hosts: list[str]
    events: str
    time_span: str
    trace_size: str
    steps_source: Figure | None
    figures: list[Figure]  # the headline figures (report.KEY_METRICS)
    findings: int
    first: str  # the first finding's title


@dataclass
class Steps:
    count: int = 0
    figures: list[Figure] = field(default_factory=list)
    breakdown: list[tuple[str, str, str]] = field(default_factory=list)  # (category, ms per step, % of step)
    outliers: Table | None = None
    absent: str = ""


@dataclass
class Gaps:
    figures: list[Figure] = field(default_factory=list)
    threshold: str = ""
    longest: Table | None = None
    none_found: bool = False
    absent: str = ""


@dataclass
class Section:
    """A topic's figures and tables (tf.data, precision, memory, AllReduce, hosts, data files)."""

    figures: list[Figure] = field(default_factory=list)
    table: Table | None = None
    largest: Table | None = None  # data files: the largest ones
    shares: list[Figure] = field(default_factory=list)  # precision: class -> % of device compute
    text: str = ""  # a sentence (memory: the timeline's peak; the allocations nothing names)
    note: str = ""
    absent: str = ""
    needs_params: bool = False
    spread: Table | None = None  # many hosts: each per-host figure's spread over the hosts
    every: Table | None = None  # many hosts: every host (HTML: folded)


@dataclass
class System:
    figures: list[Figure]
    why: str
    result: Any = field(default=None, repr=False)

    @cached_property
    def svg(self) -> Markup:
        """The utilisation timelines, or the 'not in this trace' box (drawn when first read)."""
        return _svg(system_plot.timeline_svg(self.result))

    @property
    def missing(self) -> bool:
        return is_missing(self.svg)


@dataclass
class Timeline:
    box: Markup | None  # the 'not in this trace' box, when there is no timeline
    data: dict = field(default_factory=dict)  # for the viewer (the template writes it with |tojson)
    chips: list[dict] = field(default_factory=list)  # {sev, rule, title} per finding
    dropped: str = ""
    script: Markup = Markup("")


class View:
    """Everything the reports show of one result. Each part is built from the result the first time a
    template reads it, then kept: the Markdown report never draws a plot, the HTML report never builds
    the Markdown's step and gap tables, the notebook never builds the timeline."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self._metrics = getattr(result, "metrics", None) or {}
        self._tables = getattr(result, "tables", None) or {}
        self._findings = list(getattr(result, "findings", None) or [])
        self.notes = [str(n) for n in getattr(result, "notes", None) or []]
        self.label = run_label(result)
        self.version = __version__
        self.generated = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")

    @cached_property
    def summary(self) -> Summary:
        return _summary(self.result, self._metrics, self._findings)

    @cached_property
    def findings(self) -> list[Finding]:
        units = getattr(self._metrics, "units", None) or {}
        return [_finding(i, f, units) for i, f in enumerate(self._findings, 1)]

    @cached_property
    def notes_on_findings(self) -> list[tuple[str, list[tuple[int, str]]]]:
        """The notes that change what a finding shown means, each with its findings' (number, rule)."""
        return [(n, [(i, finding_rule(self._findings[i - 1])) for i in nums])
                for n, nums in notes_on_findings(self.result, self._findings)]

    @cached_property
    def notes_other(self) -> list[str]:
        """The other notes: what the trace could not tell (shown folded)."""
        on = {n for n, _ in self.notes_on_findings}
        return [n for n in self.notes if n not in on]

    @cached_property
    def notes_other_label(self) -> str:
        """The folded notes' summary line: how many, from how many analyses."""
        return notes_left(self.notes_other, [], cpu_only(self.result)).removesuffix(": --notes")

    @cached_property
    def caveats(self) -> list[str]:
        """The conditions that make findings uncertain, each once, in the order the findings name them."""
        return finding_caveats(self._findings)

    @cached_property
    def program_parts(self) -> dict | None:
        """Where the op time goes by part of the program (tfadvisor/report/attribution.py), figures as text."""
        from tfadvisor.report.attribution import program_parts

        pp = program_parts(self.result)
        if pp is None:
            return None
        for r in pp["rows"]:
            r["pct_text"] = fmt_num(r["pct"], 2)
            r["ms_text"] = fmt_num(r["ms_per_step"], 3) if r["ms_per_step"] is not None else ""
        return pp

    @cached_property
    def attribution(self) -> dict | None:
        """Where the time goes (tfadvisor/report/attribution.py), with its basis in words."""
        from tfadvisor.report.attribution import LABELS, attribution, basis_text, items_text, unlike_hosts

        att = attribution(self.result, group=True)
        if att is not None:
            att["basis_text"] = basis_text(att)
            for lane in att["lanes"]:
                for p in lane["parts"]:
                    p["items_text"] = items_text(p)
                    p["pct_text"] = fmt_num(p["pct"], 2)
                    p["ms_text"] = fmt_num(p["ms"])
            att["hosts_more"], att["alike_text"] = 0, ""
            if len(att["hosts"]) > HOSTS_LISTED:  # many hosts: those unlike the median host's split, the others counted
                att["hosts"], att["hosts_more"], near = unlike_hosts(att["hosts"], HOSTS_LISTED, fill=False)
                att["alike_text"] = fmt_num(near, 2) if near is not None else ""
            for h in att["hosts"]:
                h["parts_text"] = ", ".join(f"{LABELS.get(p['part'], p['part'])} {fmt_num(p['pct'], 2)} %"
                                            for p in h["parts"])
                h["distance_text"] = fmt_num(h["distance_pts"], 2)
        return att

    @cached_property
    def steps(self) -> Steps:
        return _steps(self._tables.get("steps"), self.notes)

    @cached_property
    def gaps(self) -> Gaps:
        return _gaps(self._tables.get("gaps"), self._tables.get("steps"), self._metrics, self.notes)

    @cached_property
    def system(self) -> System:
        return _system(self.result, self._metrics, self.notes)

    @cached_property
    def input(self) -> Section:
        return _input(self._tables.get("tfdata_stages"), self._metrics, self.notes)

    @cached_property
    def precision(self) -> Section:
        return _precision(self._tables, self._metrics, self.notes)

    @cached_property
    def memory(self) -> Section:
        return _memory(self._tables, self._metrics, self.notes)

    @cached_property
    def allreduce(self) -> Section:
        return _allreduce(self._metrics, self.notes)

    @cached_property
    def hosts(self) -> Section:
        return _hosts(self.result)

    @cached_property
    def datafiles(self) -> Section:
        return _datafiles(self._tables, self._metrics)

    @cached_property
    def all_metrics(self) -> list[tuple[str, str, str]]:
        """(name, value, meaning) of every metric."""
        docs = getattr(self._metrics, "docs", None) or {}
        return [(str(k), _value(self._metrics, k), str(docs.get(k, ""))) for k in self._metrics]

    @cached_property
    def plots(self) -> list[Plot]:
        """The HTML plots in page order, each drawn one placed beside the first (most important)
        finding whose rule names it; a 'not in this trace' box stays in its section."""
        plots = _plots(self.result, self, self._metrics, self._tables, self.notes)
        by_id = {p.id: p for p in plots}
        for i, f in enumerate(self.findings):
            for pid in f.plot_ids:
                if not by_id[pid].missing and by_id[pid].placed is None:
                    by_id[pid].placed = i
        return plots

    @cached_property
    def timeline(self) -> Timeline:
        return _timeline(self.result, self.notes)

    @property
    def nav(self) -> list[tuple[str, str]]:
        """(anchor, title) of the HTML report's links, in page order."""
        out = [("summary", "Summary")] + ([("attribution", "Where the time goes")] if self.attribution else [])
        out += [("findings", "Findings"), ("timeline", "Timeline")]
        out += [(p.id if p.placed is not None else p.anchor, p.title) for p in self.plots if not p.missing]
        return out + [("absent", "Not in this trace"), ("notes", "Notes"), ("metrics", "All metrics")]

    def plot(self, plot_id: str) -> Plot | None:
        return next((p for p in self.plots if p.id == plot_id), None)

    def beside(self, f: Finding) -> list[Plot]:
        """The plots drawn beside finding ``f``."""
        return [p for pid in f.plot_ids if (p := self.plot(pid)) is not None and p.placed == f.n - 1]

    def see_also(self, f: Finding) -> list[Plot]:
        """The plots ``f``'s rule names that sit beside an earlier finding."""
        return [p for pid in f.plot_ids if (p := self.plot(pid)) is not None and p.placed not in (None, f.n - 1)]


# --------------------------------------------------------------------------- building it


def build(result: Any) -> View:
    """The view of ``result`` (its parts built as the templates read them)."""
    return View(result)


def is_missing(content: str) -> bool:
    """A 'not in this trace' box (svg.missing)."""
    return content.lstrip().startswith('<div class="missing"')


def _value(metrics: Any, name: str) -> str:
    return fmt_value(metrics.get(name), name=name, units=getattr(metrics, "units", None))


def figures(metrics: Any, names: tuple[tuple[str, str], ...]) -> list[Figure]:
    """The figures of ``names`` the metrics have (not None), written with their units."""
    return [Figure(label, _value(metrics, n), isinstance(metrics.get(n), str)) for n, label in names
            if metrics.get(n) is not None]


def _str(v: Any) -> str:
    return "" if v is None else str(v)


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, float) and pd.isna(v)) or (isinstance(v, str) and not v.strip())


def _cell(col: Any, v: Any, ident: bool) -> Cell:
    if _blank(v):
        return Cell()
    if isinstance(v, numbers.Number) and not isinstance(v, (bool, np.bool_)):
        return Cell(fmt_bytes(v) if str(col).endswith("bytes") else fmt_num(v), num=True)
    return Cell(str(v), ident=ident)


def table(df: Any, table_id: str = "", limit: int = 25, columns: list[str] | tuple[str, ...] | None = None,
          idents: tuple[str, ...] = ()) -> Table | None:
    """The first ``limit`` rows of ``df`` written (``columns``: those, in that order), without the
    columns that have nothing in them; ``idents``: columns of names from the trace. None without rows."""
    if not P.has_rows(df):
        return None
    d = df if columns is None else df[[c for c in columns if c in df.columns]]
    more = len(d) - limit
    d = d.head(limit)
    cols = [(c, t, d.iloc[:, i].tolist()) for i, (c, t) in enumerate(zip(d.columns, d.dtypes))]
    cols = [(c, t, vs) for c, t, vs in cols if not all(_blank(v) for v in vs)]  # columns with nothing in them
    cells = [[_cell(c, v, c in idents) for v in vs] for c, _, vs in cols]
    return Table(table_id, [str(c) for c, _, _ in cols],
                 [pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t) for _, t, _ in cols],
                 [list(row) for row in zip(*cells)], max(more, 0))


def _absent(notes: list[str], default: str, *analyses: str) -> str:
    return notes_for(notes, *analyses) or default


def _summary(result: Any, metrics: Any, findings: list) -> Summary:
    summ = getattr(result, "summary", None) or {}
    run = getattr(result, "run", None)
    hosts = summ.get("hosts") or (list(getattr(run, "hosts", []) or []) if run is not None else [])
    source = metrics.get("steps_source")
    return Summary(
        run=run_label(result),
        directory=str(getattr(run, "directory", None) or summ.get("run_dir") or ""),
        hosts=[str(h) for h in hosts],
        events=fmt_num(summ["events"]) if summ.get("events") is not None else "",
        time_span=fmt_value(summ["time_span_ms"], "ms") if summ.get("time_span_ms") is not None else "",
        trace_size=fmt_bytes(summ["file_bytes"]) if summ.get("file_bytes") else "",
        steps_source=Figure("Steps found by", fmt_value(source), isinstance(source, str)) if source is not None
        else None,
        figures=figures(metrics, KEY_METRICS),
        findings=len(findings),
        first=_str(get(findings[0], "title", "")) if findings else "",
    )


def _finding(n: int, f: Any, units: Any) -> Finding:
    rule = finding_rule(f)
    impact = get(f, "impact_pct")
    evidence = get(f, "evidence") or {}
    items = evidence.items() if isinstance(evidence, dict) else enumerate(evidence)
    msg, why = get(f, "message"), get(f, "why")
    return Finding(
        n=n, rule=rule, severity=str(get(f, "severity", "info") or "info").lower(),
        title=_str(get(f, "title", rule)),
        impact=fmt_num(impact, 2) if isinstance(impact, (int, float)) and not isinstance(impact, bool) else "",
        message=str(msg) if msg else "",
        evidence=[Figure(str(k), fmt_value(v, name=str(k), units=units), isinstance(v, str)) for k, v in items],
        fix=finding_fix(f),
        why=str(why) if why else "",
        docs=docs_links(get(f, "docs")),
        plot_ids=_plots_for(f),
        caveats=caveat_labels(f),
        also=[Also(str(a.get("rule", "")), _str(a.get("title", "")), str(a.get("message", "") or ""),
                   split_fix(a.get("fix"))) for a in get(f, "also", None) or [] if isinstance(a, dict)],
    )


def _steps(steps: Any, notes: list[str]) -> Steps:
    if not P.has_rows(steps) or "duration_ms" not in steps.columns:
        return Steps(absent=_absent(notes, "no training steps were found", "steps"))
    cats = P.step_categories(steps)
    # a row is a step marker: under steps_per_execution it holds several training steps, and every figure here is per
    # training step over the steps the statistics count, as the headline's (the mean weighs each marker by its steps;
    # median and spread are of the markers' figures); the count and the outliers are of every step found
    every, k_every = steps, P.train_steps(steps)
    k = k_every
    sel = steps["in_stats"].fillna(False).astype(bool).to_numpy() if "in_stats" in steps.columns else None
    if sel is not None and sel.any():
        steps, k = steps[sel], k[sel]
    # wall clock per training step, start to the next start (the headline's definition)
    dur = pd.to_numeric(steps["ms_per_step" if "ms_per_step" in steps.columns else "duration_ms"], errors="coerce")
    mean = float(np.nansum(dur.to_numpy() * k) / k[dur.notna().to_numpy()].sum()) if dur.notna().any() else None
    out = Steps(count=int(k_every.sum()), figures=[
        Figure("step time (mean)", fmt_value(mean, "ms")), Figure("median", fmt_value(dur.median(), "ms")),
        Figure("p90", fmt_value(dur.quantile(0.9), "ms")),
        Figure("min .. max", f"{fmt_num(dur.min())} .. {fmt_num(dur.max())} ms")])
    total = float(pd.to_numeric(steps[P.step_wall_column(steps)], errors="coerce").sum()) or 1.0
    for c in cats:
        v = pd.to_numeric(steps[f"{c}_ms"], errors="coerce").fillna(0)
        out.breakdown.append((c.replace("_", " "), fmt_num(v.sum() / k.sum()), fmt_num(v.sum() / total * 100)))
    flag = next((c for c in ("outlier", "is_outlier") if c in every.columns), None)
    if flag and every[flag].fillna(False).astype(bool).any():
        # the marker's own times, and (under steps_per_execution) the training steps they are the sum of
        per = ["train_steps"] if "train_steps" in every.columns and float(k_every.max()) > 1 else []
        per += ["ms_per_step"] if "ms_per_step" in every.columns else []
        out.outliers = table(every[every[flag].fillna(False).astype(bool)], "step-outliers", limit=10,
                             columns=["step", *per, "duration_ms", *[f"{c}_ms" for c in cats]])
    return out


def _gaps(gaps: Any, steps: Any, metrics: Any, notes: list[str]) -> Gaps:
    out = Gaps(figures=figures(metrics, BUSY_FIGURES), threshold=fmt_num(metrics.get("gap_threshold_ms")))
    if not isinstance(gaps, pd.DataFrame) and not out.figures:
        out.absent = _absent(notes, "no step or idle-gap data", "gaps")
        return out
    if P.has_rows(gaps):
        g = gaps.copy()
        key = "idle_ms" if "idle_ms" in g.columns else "duration_ms" if "duration_ms" in g.columns else None
        if key is not None:
            g = g[pd.to_numeric(g[key], errors="coerce").fillna(0) > 0].sort_values(key, ascending=False, kind="stable")
        if "start_ps" in g.columns and len(g):
            lo = float(pd.to_numeric(gaps["start_ps"]).min())
            if P.has_rows(steps) and "start_ps" in steps.columns:
                lo = min(lo, float(pd.to_numeric(steps["start_ps"]).min()))
            g.insert(0, "at_ms", (pd.to_numeric(g["start_ps"]) - lo) / 1e9)
        out.longest = table(g, "longest-gaps", limit=10,
                            columns=["at_ms", "duration_ms", "idle_ms", "between_steps", "host_activity"])
    elif isinstance(gaps, pd.DataFrame):
        out.none_found = True
    return out


def prefetch_words(metrics: Any) -> str | None:
    """The prefetch figure in words where tf.data, not the program, made the stage that produces ahead (or no
    Prefetch stage does it); None where the plain yes or no says it (the program's own prefetch, or none)."""
    stage, by = metrics.get("tfdata_prefetch_stage"), metrics.get("tfdata_prefetch_by")
    if not metrics.get("tfdata_has_prefetch") or not stage:
        return None
    if str(stage).startswith("Prefetch"):
        return "injected by tf.data (autotune)" if by == "tf.data" else None
    return f"no Prefetch stage; {stage}{' (made by tf.data)' if by == 'tf.data' else ''} buffers ahead"


def _input(stages: Any, metrics: Any, notes: list[str]) -> Section:
    words = prefetch_words(metrics)
    out = Section(figures=[Figure(f.label, words) if f.label == "prefetch" and words else f
                           for f in figures(metrics, INPUT_FIGURES)])
    if not P.has_rows(stages):
        out.absent = _absent(notes, "no tf.data iterator events", "tfdata")
        return out
    out.table = table(stages, "tfdata-stages", limit=40, idents=("iterator", "stage"))  # in pipeline order
    return out


def _precision(tables: dict, metrics: Any, notes: list[str]) -> Section:
    shares = P.precision_shares(tables, metrics)
    return Section(figures=figures(metrics, PRECISION_FIGURES),
                   shares=[Figure(k, fmt_num(v), True) for k, v in shares],
                   absent="" if shares else _absent(notes, "no device compute with a known precision", "precision"))


def _memory(tables: dict, metrics: Any, notes: list[str]) -> Section:
    tl, live = tables.get("memory_timeline"), tables.get("memory_live_at_peak")
    out = Section(figures=figures(metrics, MEMORY_FIGURES))
    if not P.has_rows(tl) and not P.has_rows(live) and metrics.get("memory_peak_bytes") is None:
        out.absent = _absent(notes, "no memory allocation events", "memory")
    if P.has_rows(tl) and {"time_ms", "bytes_in_use"} <= set(tl.columns):
        b = pd.to_numeric(tl["bytes_in_use"], errors="coerce")
        i = int(b.fillna(-1).to_numpy().argmax())
        out.text = (f"Memory timeline: {len(tl)} samples; highest {fmt_bytes(b.iloc[i])} at "
                    f"{fmt_num(tl['time_ms'].iloc[i])} ms.")
    shown, out.note = P.live_at_peak(live, metrics)  # no unnamed junk rows; a sentence for them
    if shown is not None:
        out.table = table(shown, "memory-live-at-peak", limit=15, idents=("tf_op", "shape"))
    return out


def _allreduce(metrics: Any, notes: list[str]) -> Section:
    measured = metrics.get("allreduce_ms_per_step") is not None
    return Section(figures=figures(metrics, ALLREDUCE_FIGURES),
                   needs_params=measured and metrics.get("allreduce_expected_ms") is None,
                   absent="" if measured else _absent(notes, "no AllReduce / collective ops", "collectives"))


def _hosts(result: Any) -> Section:
    hosts = getattr(result, "hosts", None) or []
    df = P.host_rows(hosts, (getattr(result, "tables", None) or {}).get("hosts"))
    n = len(hosts) or len(getattr(getattr(result, "run", None), "files", ()) or ())
    if len(df) < 2:
        return Section(absent=f"{n or 'no'} host{'s' if n != 1 else ''} profiled; the comparison needs two or more")
    cols = [c for c in HOST_COLUMNS if c in df.columns and df[c].notna().any()]
    spread = (getattr(result, "tables", None) or {}).get("hosts_distribution")
    if len(df) <= HOSTS_LISTED or not P.has_rows(spread) or "stands_out" not in df.columns:
        return Section(table=table(df, "hosts-table", limit=HOSTS_LISTED, columns=cols, idents=("host",)))
    out = df["stands_out"].astype(str) != ""
    standing = table(df[out], "hosts-standing-out", limit=HOSTS_LISTED, columns=cols, idents=("host",))
    if standing is not None:
        standing.more = len(df) - len(standing.rows)  # the others: in the folded table and the JSON
    every = table(pd.concat([df[out], df[~out]]), "hosts-table", limit=len(df), columns=cols, idents=("host",))
    every.folded = f"All {len(df)} hosts (those that stand out first)"
    return Section(table=standing, spread=table(spread, "hosts-distribution", columns=SPREAD_COLUMNS), every=every,
                   text=f"{int(out.sum())} of {len(df)} hosts stand out" if out.any()
                   else f"No host of {len(df)} stands out")


def _datafiles(tables: dict, metrics: Any) -> Section:
    sizes = tables.get("data_files_sizes")
    if metrics.get("data_files_count") is None and not P.has_rows(sizes):
        return Section(absent="not checked")
    return Section(figures=figures(metrics, DATAFILES_FIGURES), table=table(sizes, "data-files-sizes", limit=20),
                   largest=table(tables.get("data_largest_files"), "data-largest-files", limit=10, idents=("path",)))


def _system(result: Any, metrics: Any, notes: list[str]) -> System:
    rows = [Figure(label.strip(), value) for label, value in system.table_rows(metrics)]
    return System(rows, _absent(notes, "no system samples", "system"), result)


# --------------------------------------------------------------------------- the HTML plots


def _host_views(result: Any, metrics: Any) -> tuple[str, list[tuple[str, str, Any]]]:
    """For a multi-host run: which host the run-level charts show (``: host1, the median host``),
    and the other hosts to draw beside them: ``(host, what it is, HostAnalysis)``, the straggler's."""
    hosts = list(getattr(result, "hosts", None) or [])
    if len(hosts) < 2:
        return "", []
    median = str(metrics.get("median_host") or "")
    suffix = f": {median}, the median host" if median else ""
    extra = []
    name = metrics.get("straggler_host")
    h = next((h for h in hosts if str(h.host) == str(name)), None)
    if name and h is not None and str(name) != median:
        extra.append((str(h.host), "the straggler", h))
    return suffix, extra


def _safe_id(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in str(text))


def _gaps_lines(metrics: Any) -> list[Line]:
    """What the busy/idle plot draws, in words: the idle total, then the gaps the findings count
    (idle of at least the threshold); shorter idle is in the total, not a gap."""
    out = [Line(figures(metrics, BUSY_LINE))]
    n = metrics.get("gaps_count")
    if n is None:
        return out
    thr = fmt_num(metrics.get("gap_threshold_ms"))
    if n:
        head = Figure(f"gaps between steps with {thr} ms or more idle", fmt_num(n))
        out.append(Line([head, *figures(metrics, (("gap_max_ms", "longest"), ("gap_host_activity", "the host ran")))],
                        id="gaps-counted"))
    else:
        out.append(Line(text=f"No gap between steps has {thr} ms or more idle: the idle drawn is shorter pauses, "
                             "in the totals above but not counted as gaps.", id="gaps-counted"))
    return out


def _svg(content: str) -> Markup:
    """A plot our code drew (every trace-derived string in it escaped by svg.esc)."""
    return Markup(content)


def _plots(result: Any, view: View, metrics: Any, tables: dict, notes: list[str]) -> list[Plot]:
    """The plots in page order. In a multi-host run the step and busy/idle charts are the median host's
    (the run's per-step figures), and say so; a straggler's own charts follow them."""
    who = "device" if metrics.get("device_present") else "training threads"
    of_host, extra = _host_views(result, metrics)
    hosts = getattr(result, "hosts", None) or []
    steps = Plot("plot-steps", "steps", f"Step time per step{of_host}",
                 _svg(stepchart.steps_svg(tables.get("steps"),
                                          why=_absent(notes, "no training steps were found", "steps"))),
                 "Each bar is one step (or, with many steps, the mean of a few, as the axis says), split into where "
                 "its time went; the axis reaches the slowest step. Hover a bar for its numbers.")
    busy = Plot("plot-busy", "busy", f"Busy vs idle{of_host}",
                _svg(busyidle.busy_idle_svg(tables.get("timeline"), tables.get("steps"), tables.get("gaps"), metrics,
                                            why=_absent(notes, "no activity timeline", "timeline", "gaps"))),
                "Top: the shares of the steps' wall time. Row: time runs left to right; in each pixel column the "
                f"red height is the share the {who} had no work between steps, the orange the share inside a step "
                "with nothing traced at all, so their area is the idle time. Triangles mark the gaps the findings "
                "count.", lines=_gaps_lines(metrics))
    for host, what, h in extra:
        t, m = getattr(h, "tables", {}) or {}, getattr(h, "metrics", {}) or {}
        svg = _svg(stepchart.steps_svg(t.get("steps"), plot_id=f"plot-steps-{_safe_id(host)}"))
        if not steps.missing and not is_missing(svg):
            steps.hosts.append(HostView(host, what, svg))
        svg = _svg(busyidle.busy_idle_svg(t.get("timeline"), t.get("steps"), t.get("gaps"), m,
                                          plot_id=f"plot-busy-{_safe_id(host)}"))
        if not busy.missing and not is_missing(svg):
            busy.hosts.append(HostView(host, what, svg, _gaps_lines(m)))
    mem = view.memory
    return [
        steps, busy,
        Plot("plot-tfdata", "input", "Input pipeline (tf.data)",
             _svg(P.tfdata_svg(tables.get("tfdata_stages"),
                               why=_absent(notes, "no tf.data iterator events", "tfdata"))),
             lines=[Line(view.input.figures)], table=view.input.table),
        Plot("plot-precision", "precision", "Precision mix",
             _svg(P.precision_svg(P.precision_shares(tables, metrics),
                                  why=_absent(notes, "no device compute with a known precision", "precision"))),
             lines=[Line(figures(metrics, PRECISION_LINE))]),
        Plot("plot-memory", "memory", "Memory",
             _svg(P.memory_svg(tables.get("memory_timeline"), metrics.get("memory_peak_bytes"),
                               metrics.get("memory_capacity_bytes"),
                               why=_absent(notes, "no memory allocation events", "memory"))),
             lines=[Line(figures(metrics, MEMORY_LINE))],
             heading="Largest allocations live at the peak" if mem.table or mem.note else "",
             table=mem.table, note=mem.note, note_id="memory-live-unnamed"),
        Plot("plot-allreduce", "allreduce", "AllReduce",
             _svg(P.allreduce_svg(metrics.get("allreduce_ms_per_step"), metrics.get("allreduce_expected_ms"),
                                  metrics.get("allreduce_expected_ring_ms"),
                                  why=_absent(notes, "no AllReduce / collective ops", "collectives"))),
             lines=[Line(figures(metrics, ALLREDUCE_LINE))], needs_params=view.allreduce.needs_params),
        Plot("plot-hosts", "hosts", "Hosts",
             _svg(P.hosts_strip_svg(tables.get("hosts"), tables.get("hosts_distribution"))
                  if view.hosts.spread is not None else
                  P.hosts_svg(hosts, tables.get("hosts"), why=_hosts_why(result))),
             heading=view.hosts.text, table=view.hosts.table,
             more_tables=[t for t in (view.hosts.spread, view.hosts.every) if t is not None]),
        Plot("plot-datafiles", "datafiles", "Training data files",
             _svg(P.datafiles_svg(tables.get("data_files_sizes"),
                                  why=_absent(notes, "no training data files were checked (pass --data DIR_OR_GLOB)",
                                              "datafiles"))),
             lines=[Line(figures(metrics, DATAFILES_LINE))], table=view.datafiles.largest),
    ]


def _hosts_why(result: Any) -> str:
    hosts = getattr(result, "hosts", None) or []
    n = len(hosts) or len(getattr(getattr(result, "run", None), "files", ()) or ())
    if len(hosts) < 2:
        return f"{'one host was' if n == 1 else f'{n} hosts were'} profiled; per-host comparison needs two or more"
    return "no host has step times"


def _plots_for(finding: Any) -> list[str]:
    """The plot ids of the plots a finding's rule declares (``plots``), in the rule's order."""
    return [f"plot-{name}" for name in get(finding, "plots") or () if name in PLOTS]


def _timeline(result: Any, notes: list[str]) -> Timeline:
    data = timeline.timeline_data(result)
    if data is None:
        why = _absent(notes, "no activity timeline", "timeline")
        return Timeline(box=_svg(P.missing("plot-timeline", "Timeline of the capture window", why)))
    return Timeline(box=None, data=data, chips=data["findings"],
                    dropped=timeline.lane_kinds(data["dropped"]) if data["dropped"] else "",
                    script=Markup(timeline.JS))


__all__ = ["MAX_COLUMNS", "PLOT_IDS", "Cell", "Figure", "Finding", "Plot", "Table", "View",
           "build", "figures", "is_missing", "table"]
