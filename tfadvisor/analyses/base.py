"""What every analysis returns, and the context analyses share.

An analysis is a function ``analyze(trace, ctx) -> AnalysisResult``. It reads the
columnar :class:`~tfadvisor.trace.Trace`, may read earlier results through ``ctx``
(``ctx.result("steps")``), and returns named scalar metrics (with units) and pandas
tables. A metric whose data is absent from the trace is ``None`` with a note saying
why; it is never invented as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tfadvisor.trace import Plane, StatColumn, Trace

PS_PER_MS = 1e9
PS_PER_US = 1e6


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
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, value: Any, unit: str = "", doc: str = "") -> None:
        self.metrics[name] = Metric(_plain(value), unit, doc)

    def missing(self, names: list[str] | tuple[str, ...], why: str, unit: str = "") -> None:
        """Declare metrics unavailable on this trace (value None) and note why."""
        for n in names:
            self.metrics.setdefault(n, Metric(None, unit, ""))
        if why not in self.notes:
            self.notes.append(why)


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
    cache: dict[str, Any] = field(default_factory=dict)

    def result(self, name: str) -> AnalysisResult | None:
        return self.results.get(name)

    def metric(self, name: str) -> Any:
        for r in self.results.values():
            if name in r.metrics:
                return r.metrics[name].value
        return None

    def table(self, name: str) -> pd.DataFrame | None:
        for r in self.results.values():
            if name in r.tables:
                return r.tables[name]
        return None

    def stats(self, plane: Plane, names: list[str] | tuple[str, ...]) -> dict[str, StatColumn]:
        """``plane.stat_columns(names)``: each column read once per analysis run (one pass for
        all the names not read yet)."""
        key = ("tfadvisor.stats", id(plane))
        if key not in self.cache:
            self.cache[key] = (plane, {})  # the plane is kept so that its id stays unique
        cache = self.cache[key][1]
        want = [n for n in names if n not in cache]
        if want:
            cache.update(plane.stat_columns(want))
        return {n: cache[n] for n in names}


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars, so metrics serialise to JSON as they are."""
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


AnalysisFn = "Callable[[Trace, Context], AnalysisResult]"
__all__ = ["AnalysisResult", "Context", "Metric", "Options", "PS_PER_MS", "PS_PER_US", "Trace"]
