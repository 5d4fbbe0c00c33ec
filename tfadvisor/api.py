"""The Python API: ``tfadvisor.analyze(path) -> Result``, a thin facade over the stages.

logdir -> reader (Trace) -> analyses (Metrics + tables) -> rule engine (findings).
Reporters take a :class:`Result`; none of the stages imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tfadvisor.analyses import HostAnalysis, Metrics, Options, analyze_trace, options_from
from tfadvisor.discovery import Run, resolve
from tfadvisor.reader import load_run


@dataclass
class Result:
    """What tfadvisor found in one run: metrics, tables, findings, per-host detail.

    In a notebook a Result shows itself as the summary, the findings and the plots beside them
    (``_repr_html_``); ``repr()`` is one line. ``result.metrics`` maps metric name -> value
    (``result.metrics.units`` the unit of each). ``result.tables`` holds pandas DataFrames, those a
    trace allows; times ``*_ps`` are picoseconds on the trace's clock, ``*_ms`` milliseconds,
    ``*_us`` microseconds, ``pct`` percent:

    * ``steps``: one row per step: ``step``, ``name``, ``start_ps``, ``end_ps``, ``duration_ms``,
      ``period_ms`` (start to next start), ``in_stats`` (used by the statistics), ``outlier``, and
      where its time went: ``device_compute_ms``, ``input_ms``, ``host_compute_ms``,
      ``kernel_launch_ms``, ``collective_ms``, ``idle_ms``, ``other_ms``.
    * ``gaps``: the time between steps: ``start_ps``, ``end_ps``, ``duration_ms``, ``idle_ms``,
      ``between_steps``, ``host_activity`` (what the host ran: ``input``, ``python``, ``idle``, ...).
    * ``input_per_step``: ``step``, ``host_wait_ms``, ``input_ms``.
    * ``host_ops`` (``op``, ``type``, ``count``, ``total_ms``, ``mean_us``, ``pct``), ``device_ops``,
      ``kernels`` and ``precision_mix`` (device compute by precision), ``tf_functions`` (``calls``,
      ``retraces``, ...), ``tfdata_stages`` (per tf.data iterator stage), ``collective_ops``.
    * ``memory_timeline`` (``allocator``, ``time_ms``, ``time_ps``, ``bytes_in_use``),
      ``memory_allocators``, ``memory_live_at_peak``.
    * ``timeline``: activity per lane as merged spans (``lane``, ``start_ps``, ``end_ps``,
      ``covered_ps``, ``count``); ``hosts`` and ``hosts_steps`` for multi-host runs.
    """

    run: Run
    summary: dict[str, Any]  # what was loaded: hosts, planes, lines, events, time span
    metrics: Metrics
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)  # tfadvisor.advice.Finding, most important first
    hosts: list[HostAnalysis] = field(default_factory=list)
    options: Options = field(default_factory=Options)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape (documented in README)."""
        from tfadvisor.report.json_report import result_to_dict

        return result_to_dict(self)

    def __repr__(self) -> str:
        label = self.run.label() if hasattr(self.run, "label") else str(self.run)
        steps = self.metrics.get("steps_count")
        mean = self.metrics.get("step_time_mean_ms")
        step = f", step time mean {mean:.3g} ms" if isinstance(mean, (int, float)) else ""
        found = ", ".join(f"{f.severity} {f.rule}" for f in self.findings[:5])
        more = f", +{len(self.findings) - 5} more" if len(self.findings) > 5 else ""
        return (f"<Result {label!r}: {len(self.hosts) or 1} host(s), {steps or 0} steps{step}; "
                f"{len(self.findings)} finding(s) [{found}{more}]; tables: {', '.join(self.tables) or 'none'}>")

    def _repr_html_(self) -> str:
        """The notebook view: summary, findings with their plots, the step chart."""
        from tfadvisor.report.notebook import result_html

        return result_html(self)


def analyze(
    path,
    *,
    run: str | None = None,
    options: Options | None = None,
    rules_dirs: tuple[str, ...] | list[str] = (),
    progress: Callable[[int, int], None] | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    data: str | None = None,
    trace: Any = None,
) -> Result:
    """Load a profile and return its metrics, tables and ordered findings.

    ``trace``: the run's :class:`~tfadvisor.trace.Trace`, when the caller has loaded it already
    (``tfadvisor export``); a one-host run is then not read twice."""
    chosen = path if isinstance(path, Run) else resolve(path, run=run)
    if len(chosen.files) > 1:
        from tfadvisor.multihost import analyze_hosts

        result = analyze_hosts(chosen, options=options, progress=progress, jobs=jobs, dask=dask)
    else:
        trace = trace if trace is not None else load_run(chosen, progress=progress)
        opts = options_from(trace, options)
        host = analyze_trace(trace, opts, host=trace.hosts[0] if trace.hosts else "")
        result = Result(run=chosen, summary=trace.summary(), metrics=host.metrics, tables=dict(host.tables),
                        notes=list(host.notes), hosts=[host], options=opts)
    if data:
        from tfadvisor.datafiles import check_data_files

        files = check_data_files(data)
        for name, m in files.metrics.items():
            result.metrics.put("datafiles", name, m)
        result.tables.update(files.tables)
        result.notes.extend(f"datafiles: {n}" for n in files.notes)
    from tfadvisor.advice import evaluate, load_rules

    result.findings = evaluate(result.metrics, load_rules(extra_dirs=rules_dirs))
    return result
