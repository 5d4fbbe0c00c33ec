"""Analyses: one module per concern, each ``analyze(trace, ctx, *, <inputs>) -> AnalysisResult``.

They run in the order of :data:`ORDER` (later ones may read earlier results through the
context); the inputs an analysis reads besides the trace (the activity model, the steps, the step
table, memory events) are keyword-only parameters of its ``analyze``, built once and passed by
:mod:`tfadvisor.analyses.inputs`. Together they give a :class:`Metrics` mapping that the rule engine
reads, plus named tables for reports and notebooks (numpy columns, or functions, made pandas DataFrames
only when read: see :mod:`tfadvisor.model.table`).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any

from tfadvisor.analyses.base import AnalysisResult, Context, Declarations, Metric, Options, declarations, declare
from tfadvisor.io.runmeta import ignored_fields
from tfadvisor.io.runmeta import positive as _positive
from tfadvisor.model.table import Tables
from tfadvisor.model.trace import Trace

#: Module names under ``tfadvisor.analyses``, in the order they run.
ORDER = (
    "steps",
    "capture_quality",  # does the window show steady-state training (steps, active devices, busy share)
    "devices",  # the devices of the host against each other: the slow one the others wait for
    "variation",  # steps grouped by what runs in them: work in some steps only, its period and cost
    "gaps",
    "throughput",  # wall time per step with evaluation and epoch ends; the time outside the steps; the profiler's cost
    "system",  # system samples and start-up (tfadvisor_system.<host>.npz, tfadvisor_run.json): input reads the CPU
    "input",
    "tfdata",
    "placement",
    "opcost",  # op time by type and category (matrix, elementwise, optimizer, ...)
    "attribution",  # the window and each step split into parts summing to 100 %, per device too
    "components",  # the compute parts by part of the program (layers, optimizer, loss, metrics), from name scopes
    "roofline",  # per device and op: FLOP/s and bytes/s against the peaks (where the trace has counts)
    "precision",
    "memory",
    "collectives",
    "eager",
    "overhead",
    "timeline",  # bounded activity lanes of the window, for the reports' timeline view
)


#: The analyses each host of a run of many hosts needs for the cross-host comparison (step time and its
#: parts, each host's split of its time, its devices, memory and collectives, its gaps); the median host and
#: the hosts that stand out get all.
COMPARISON = ("steps", "devices", "gaps", "input", "attribution", "memory", "collectives")


#: Producers of metrics that are not in :data:`ORDER`, as ``source: module``.
OTHER_PRODUCERS = {"datafiles": "tfadvisor.analyses.datafiles", "multihost": "tfadvisor.analyses.hosts"}


def metric_registry() -> dict[str, Declarations]:
    """Every producer's declared metrics (the analyses in :data:`ORDER`, then ``datafiles`` and
    ``multihost``): the names rules may use, and what ``tfadvisor/analyses/README.md`` is made from."""
    modules = {name: f"tfadvisor.analyses.{name}" for name in ORDER} | OTHER_PRODUCERS
    for module in modules.values():
        importlib.import_module(module)
    return {source: declarations(source) for source in modules}


@functools.cache
def event_stats() -> frozenset[str]:
    """The event-level stat names the analyses read: every module's ``EVENT_STATS`` (a module that reads a stat
    declares it there; :meth:`~tfadvisor.model.trace.Plane.stat_columns` refuses a name the reader did not keep).
    The reader drops the others as it decodes (:func:`tfadvisor.io.reader.load_run`'s ``stats``)."""
    names: set[str] = set()
    for info in pkgutil.iter_modules(__path__):
        names.update(getattr(importlib.import_module(f"{__name__}.{info.name}"), "EVENT_STATS", ()))
    return frozenset(names)


def known_metrics() -> frozenset[str]:
    """All declared metric names."""
    return frozenset(n for d in metric_registry().values() for n in d.names())


class Metrics(dict):
    """Metric name -> value (None when the trace lacks the data), with units and meanings."""

    def __init__(self) -> None:
        super().__init__()
        self.units: dict[str, str] = {}
        self.docs: dict[str, str] = {}
        self.source: dict[str, str] = {}
        #: metric -> the notes (as :attr:`HostAnalysis.notes` words them) that change what it means on this trace
        #: (:meth:`AnalysisResult.qualify`)
        self.notes: dict[str, list[str]] = {}

    def qualified_by(self, note: str, names: tuple[str, ...]) -> None:
        """Record ``note`` (worded as in the notes, its analysis's name first) as qualifying each of ``names``."""
        for name in names:
            have = self.notes.setdefault(name, [])
            if note not in have:
                have.append(note)

    def put(self, analysis: str, name: str, m: Metric) -> None:
        self[name] = m.value
        self.units[name] = m.unit
        self.docs[name] = m.doc
        self.source[name] = analysis


@dataclass
class HostAnalysis:
    """Everything the analyses found on one host's planes."""

    host: str
    metrics: Metrics
    tables: Tables = field(default_factory=Tables)
    notes: list[str] = field(default_factory=list)
    results: dict[str, AnalysisResult] = field(default_factory=dict)


def analyze_trace(trace: Trace, options: Options | None = None, host: str | None = None,
                  only: tuple[str, ...] | None = None, detail: bool = True) -> HostAnalysis:
    """Run every analysis (or those in ``only``, in :data:`ORDER`) over ``trace`` (normally one host's planes);
    ``detail``: see :attr:`Context.detail`."""
    ctx = Context(options=options or Options(), detail=detail)
    metrics = Metrics()
    tables = Tables()
    notes: list[str] = [f"load: {n}" for h in trace.hosts for n in trace.load_notes.get(h, [])]
    tagged: list[tuple[str, str, bool]] = []
    from tfadvisor.analyses.inputs import run  # the analyses' modules: imported when analysing

    for name in ORDER if only is None else [n for n in ORDER if n in only]:
        module = importlib.import_module(f"tfadvisor.analyses.{name}")
        res: AnalysisResult = run(module.analyze, trace, ctx)
        ctx.results[name] = res
        for mname, m in res.metrics.items():
            metrics.put(name, mname, m)
        tables.update_raw(res.tables)
        tagged.extend((name, n, n in res.tf_only_notes) for n in res.notes)
    jax = metrics.get("framework") == "jax"  # no note about TF's machinery on a JAX trace
    notes.extend(f"{name}: {n}" for name, n, tf_only in tagged if not (tf_only and jax))
    for name, res in ctx.results.items():
        for n, names in res.qualifies.items():
            if f"{name}: {n}" in notes:
                metrics.qualified_by(f"{name}: {n}", names)
    return HostAnalysis(host=host or ",".join(trace.hosts), metrics=metrics, tables=tables, notes=notes,
                        results=ctx.results)


def detail_metrics_of(name: str) -> tuple[str, ...]:
    """What analysis ``name`` (of :data:`ORDER`) leaves out on a host compared only: its module's ``DETAIL_METRICS``
    (see :attr:`Context.detail`)."""
    return getattr(importlib.import_module(f"tfadvisor.analyses.{name}"), "DETAIL_METRICS", ())


def detail_metrics() -> frozenset[str]:
    """The metrics the analyses leave out on a host compared only (:func:`detail_metrics_of` each of them)."""
    return frozenset(m for name in ORDER for m in detail_metrics_of(name))


def options_from(trace: Trace, options: Options | None = None) -> Options:
    """Fill unset options from the run's metadata file (written by the Keras callback); values that
    are not finite positive numbers (or, for ``link``, a string) are ignored, with a note per field
    in ``trace.load_notes``."""
    o = options or Options()
    md: dict[str, Any] = trace.run_metadata if isinstance(trace.run_metadata, dict) else {}
    for note in ignored_fields(md):
        for h in trace.hosts:
            have = trace.load_notes.setdefault(h, [])
            if note not in have:
                have.append(note)
    if o.param_count is None:
        o.param_count = _positive(md.get("param_count"), True)
    if o.replicas is None:
        o.replicas = _positive(md.get("replicas"), True)
    if o.batch_size is None:
        o.batch_size = _positive(md.get("batch_size"), True)
    if o.link is None and isinstance(md.get("link"), str) and md.get("link"):
        o.link = md["link"]
    if o.bandwidth_gbps is None:
        o.bandwidth_gbps = _positive(md.get("bandwidth_gbps"), False)
    return o


__all__ = ["COMPARISON", "AnalysisResult", "Context", "Declarations", "HostAnalysis", "Metric", "Metrics", "ORDER",
           "Options", "analyze_trace", "declare", "detail_metrics", "detail_metrics_of", "known_metrics",
           "metric_registry", "options_from"]
