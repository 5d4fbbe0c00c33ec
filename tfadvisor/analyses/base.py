"""What every analysis returns, and the context analyses share.

An analysis is a function ``analyze(trace, ctx, *, <inputs>) -> AnalysisResult``. It reads the
columnar :class:`~tfadvisor.model.trace.Trace` and the inputs its keyword-only parameters name
(:mod:`tfadvisor.analyses.inputs`), may read earlier metrics through ``ctx`` (``ctx.metric(...)``),
and returns named scalar metrics (with units) and tables
(:class:`~tfadvisor.model.table.Table` columns, or a function building a pandas DataFrame when read).
A metric whose data is absent from the trace is ``None`` with a note saying why; it is never
invented as zero.

Every module that produces metrics declares them once, at module level::

    METRICS = declare("steps", ("steps_count", "count", "training steps found"), ..., doc="...", tables="...")

:meth:`AnalysisResult.add` refuses a name its analysis did not declare (and a unit that differs
from the declared one), so the code and the declarations cannot drift. The declarations of all
modules (:func:`tfadvisor.analyses.metric_registry`) are what rules are checked against and what
``tfadvisor/analyses/README.md`` is generated from (``python -m tfadvisor.analyses.docs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfadvisor.model.table import Table, Tables
from tfadvisor.model.trace import Plane, StatColumn, Trace

PS_PER_MS = 1e9
PS_PER_US = 1e6


@dataclass(frozen=True)
class MetricSpec:
    """A declared metric: its name, unit (``ms``, ``%``, ``bytes``, ``count`` or empty) and meaning."""

    name: str
    unit: str = ""
    doc: str = ""


@dataclass(frozen=True)
class Declarations:
    """The metrics one producer (an analysis, or ``datafiles`` / ``multihost``) may add, in order."""

    source: str
    metrics: tuple[MetricSpec, ...]
    doc: str = ""  # prose for the generated README
    tables: str = ""  # the tables the producer adds, for the generated README

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {m.name: m for m in self.metrics})

    def __contains__(self, name: object) -> bool:
        return name in self._by_name  # type: ignore[attr-defined]

    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.metrics)

    def spec(self, name: str) -> MetricSpec:
        """The declaration of ``name``; raises :class:`UndeclaredMetric` if there is none."""
        m = self._by_name.get(name)  # type: ignore[attr-defined]
        if m is None:
            raise UndeclaredMetric(f"metric {name!r} is not declared by {self.source!r}: add it to that module's "
                                   "METRICS = declare(...)")
        return m


class UndeclaredMetric(ValueError):
    """An analysis added a metric its module does not declare (or with another unit)."""


_DECLARED: dict[str, Declarations] = {}


def declare(source: str, *metrics: tuple[str, str, str] | MetricSpec, doc: str = "", tables: str = "") -> Declarations:
    """Declare the metrics of ``source`` (each ``(name, unit, doc)``); one declaration per source."""
    specs = tuple(m if isinstance(m, MetricSpec) else MetricSpec(*m) for m in metrics)
    dup = {m.name for m in specs if sum(n.name == m.name for n in specs) > 1}
    if dup:
        raise ValueError(f"{source}: metrics declared twice: {sorted(dup)}")
    decl = Declarations(source, specs, doc.strip(), tables.strip())
    _DECLARED[source] = decl
    return decl


def declarations(source: str) -> Declarations:
    """What ``source`` declared (its module must have been imported)."""
    try:
        return _DECLARED[source]
    except KeyError:
        raise UndeclaredMetric(f"no metric declarations for {source!r}: its module has no METRICS = declare(...)") \
            from None


@dataclass
class Metric:
    """One named figure: its value (None when the trace lacks the data), unit and meaning."""

    value: Any
    unit: str = ""
    doc: str = ""


@dataclass
class AnalysisResult:
    name: str
    metrics: dict[str, Metric] = field(default_factory=dict)
    tables: Tables = field(default_factory=Tables)  # a Table, or a function building a DataFrame
    notes: list[str] = field(default_factory=list)
    tf_only_notes: list[str] = field(default_factory=list)  # notes about TF machinery: not shown on JAX traces
    #: note -> the metrics it qualifies (:meth:`qualify`): a report shows it beside the findings resting on them
    qualifies: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def add(self, name: str, value: Any, doc: str = "") -> None:
        """Set a declared metric: its unit and text come from the declaration; ``doc`` (optional) replaces
        the text for this run where it depends on the run (a threshold, a source). Raises
        :class:`UndeclaredMetric` for a name this analysis did not declare."""
        spec = declarations(self.name).spec(name)
        self.metrics[name] = Metric(_plain(value), spec.unit, doc or spec.doc)

    def without_detail(self, names: list[str] | tuple[str, ...]) -> None:
        """Leave out the metrics ``names`` on a host compared only (:attr:`Context.detail`), with a note naming them
        (:data:`NO_DETAIL`)."""
        self.missing(names, f"{', '.join(names)}: {NO_DETAIL}")

    def missing(self, names: list[str] | tuple[str, ...], why: str, tf_only: bool = False) -> None:
        """Declare metrics unavailable on this trace (value None) and note why. ``tf_only``: the note speaks of
        TensorFlow's machinery (tf.data, tf.function, TF ops), so it is left out on a JAX trace."""
        decl = declarations(self.name)
        for n in names:
            spec = decl.spec(n)
            self.metrics.setdefault(n, Metric(None, spec.unit, spec.doc))
        if why and why not in self.notes:
            self.notes.append(why)
            if tf_only:
                self.tf_only_notes.append(why)

    def qualify(self, names: list[str] | tuple[str, ...], why: str) -> None:
        """Note ``why`` as changing what the metrics ``names`` mean on this trace (a stand-in source, a cap, a
        guess at the steps): the terminal report shows it without ``--notes`` when a finding shown rests on one of
        them; the notes that only say what the trace lacks (:meth:`missing`) are counted there, not listed."""
        decl = declarations(self.name)
        for n in names:
            decl.spec(n)  # an undeclared name is an error here, as in add()
        if why not in self.notes:
            self.notes.append(why)
        self.qualifies[why] = tuple(dict.fromkeys((*self.qualifies.get(why, ()), *names)))


@dataclass
class Options:
    """Facts the trace cannot tell, from the command line or the run's metadata file."""

    param_count: int | None = None
    bandwidth_gbps: float | None = None  # GB/s of the link the gradients cross
    link: str | None = None
    replicas: int | None = None
    batch_size: int | None = None
    outlier_k: float = 3.0  # step outliers: duration > median + k * MAD


@dataclass
class Context:
    """Shared state while analysing one trace: options and earlier results."""

    options: Options = field(default_factory=Options)
    results: dict[str, AnalysisResult] = field(default_factory=dict)
    #: False for a host of a run of many hosts that is compared only (its metrics feed the hosts table; the median
    #: host and those that stand out are analysed again with detail): an analysis may leave out metrics it lists as
    #: ``DETAIL_METRICS`` (None, with the note :data:`NO_DETAIL`), which no report reads for such a host; its
    #: other metrics are the same with or without detail.
    detail: bool = True
    _once: dict[tuple, tuple] = field(default_factory=dict, repr=False)

    def once(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, built once per analysis run: keyed by the function itself and its arguments'
        identity (no names to collide; the arguments are kept so that their ids stay unique, all but this
        context itself: keeping it would make every analysis object a cycle for the garbage collector)."""
        key = (fn, *((0, a) if isinstance(a, (str, int, float, bool)) else (1, id(a)) for a in args))
        hit = self._once.get(key)
        if hit is None:
            hit = (tuple(a for a in args if a is not self), fn(*args))
            self._once[key] = hit
        return hit[1]

    def result(self, name: str) -> AnalysisResult | None:
        return self.results.get(name)

    def metric(self, name: str) -> Any:
        for r in self.results.values():
            if name in r.metrics:
                return r.metrics[name].value
        return None

    def table(self, name: str) -> Table | None:
        """An earlier analysis's table as numpy columns (tables other analyses read are kept as a Table)."""
        for r in self.results.values():
            if name in r.tables:
                t = r.tables.raw(name)
                assert t is None or isinstance(t, Table), f"table {name!r} is read by analyses: store it as a Table"
                return t
        return None

    def stats(self, plane: Plane, names: list[str] | tuple[str, ...]) -> dict[str, StatColumn]:
        """``plane.stat_columns(names)``: each column read once per analysis run (one pass for
        all the names not read yet)."""
        cache = self.once(_stat_store, plane)
        want = [n for n in names if n not in cache]
        if want:
            cache.update(plane.stat_columns(want))
        return {n: cache[n] for n in names}

    def stat_at(self, plane: Plane, name: str, rows: np.ndarray) -> StatColumn:
        """``plane.stat(name, rows)``: on a small plane (or for many rows) cut from the column read once per
        analysis run (:meth:`stats`), else found by binary search; the same values either way."""
        rows = np.asarray(rows, np.int64)
        if plane.st_stat.shape[0] > SMALL_PLANE_STATS and rows.shape[0] * 50 <= plane.n_events:
            return plane.stat(name, rows)
        col = self.stats(plane, (name,))[name]
        if rows.shape[0] > 1 and not bool(np.all(rows[1:] > rows[:-1])):
            rows = np.unique(rows)
        if not rows.shape[0] or not len(col):
            k = np.zeros(len(col), bool)
        else:  # which of the column's rows are asked: a binary search of each in the (sorted) rows asked
            pos = np.minimum(np.searchsorted(rows, col.rows), rows.shape[0] - 1)
            k = rows[pos] == col.rows
        return StatColumn(plane, name, col.rows[k], col.kind[k], col.raw[k])


#: The note of the metrics an analysis leaves out without :attr:`Context.detail` (after their names).
NO_DETAIL = ("not worked out on this host: of a run of many hosts, the median host and the hosts that stand out "
             "are analysed in full")


#: Up to this many stat values a plane's stat columns are read whole once per analysis run, and cut to the rows
#: each caller asks for (:meth:`Context.stat_at`): cheaper than a binary search per call.
SMALL_PLANE_STATS = 1 << 16


def _stat_store(plane: Plane) -> dict[str, StatColumn]:
    """A plane's stat columns read so far (filled by :meth:`Context.stats`)."""
    return {}


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars, so metrics serialise to JSON as they are."""
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


AnalysisFn = "Callable[[Trace, Context], AnalysisResult]"
__all__ = ["AnalysisResult", "Context", "Declarations", "Metric", "MetricSpec", "Options", "UndeclaredMetric",
           "declarations", "declare", "PS_PER_MS", "PS_PER_US", "Trace"]
