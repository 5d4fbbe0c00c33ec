"""What an analysis of one run is: :class:`RunResult` (the data; the facade's ``Result`` adds its views).

:func:`tfadvisor.multihost.analysis.analyze_run` builds one (for one host or many); the facade
(:mod:`tfadvisor.api`) wraps it as :class:`tfadvisor.api.Result`. This module imports no analysis and no
reporter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tfadvisor.analyses import HostAnalysis, Metrics, Options
from tfadvisor.io.discovery import Run
from tfadvisor.model.table import Tables


@dataclass
class RunResult:
    """What tfadvisor found in one run: metrics, tables, findings, per-host detail.

    In a notebook a Result shows itself as the summary, the findings and the plots beside them
    (``_repr_html_``); ``repr()`` is one line. ``result.metrics`` maps metric name -> value
    (``result.metrics.units`` the unit of each). ``result.tables`` maps names to pandas DataFrames
    (each built when first read), those a trace allows; times ``*_ps`` are picoseconds on the trace's
    clock, ``*_ms`` milliseconds, ``*_us`` microseconds, ``pct`` percent:

    * ``steps``: one row per step: ``step``, ``name``, ``start_ps``, ``end_ps`` (the marker),
      ``wall_end_ps`` (the next step's start), ``duration_ms`` (the marker), ``wall_ms`` (start to
      next start), ``ms_per_step`` (the step time: wall clock per training step), ``busy_ms_per_step``,
      ``period_ms``, ``in_stats`` (used by the statistics), ``outlier``, and where its wall time went
      (they sum to ``wall_ms``): ``device_compute_ms``, ``input_ms``, ``host_compute_ms``,
      ``kernel_launch_ms``, ``collective_ms``, ``between_steps_ms``, ``idle_ms``, ``other_ms``.
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
    tables: Tables = field(default_factory=Tables)
    notes: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)  # tfadvisor.advice.Finding, most important first
    hosts: list[HostAnalysis] = field(default_factory=list)
    options: Options = field(default_factory=Options)

    def __post_init__(self) -> None:
        if not isinstance(self.tables, Tables):
            self.tables = Tables(self.tables)

    def __repr__(self) -> str:
        label = self.run.label() if hasattr(self.run, "label") else str(self.run)
        steps = self.metrics.get("steps_count")
        mean = self.metrics.get("step_time_mean_ms")
        step = f", step time mean {mean:.3g} ms" if isinstance(mean, (int, float)) else ""
        found = ", ".join(f"{f.severity} {f.rule}" for f in self.findings[:5])
        more = f", +{len(self.findings) - 5} more" if len(self.findings) > 5 else ""
        return (f"<{type(self).__name__} {label!r}: {len(self.hosts) or 1} host(s), {steps or 0} steps{step}; "
                f"{len(self.findings)} finding(s) [{found}{more}]; tables: {', '.join(self.tables) or 'none'}>")
