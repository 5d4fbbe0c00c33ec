"""The Python API: ``tfadvisor.analyze(path) -> Result``, a thin facade over the stages.

logdir -> reader (Trace) -> analyses (Metrics + tables) -> rule engine (findings).
Reporters take a :class:`Result`; none of the stages imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from tfadvisor.analyses import Options
from tfadvisor.io.discovery import Run, resolve
from tfadvisor.multihost.analysis import analyze_run
from tfadvisor.multihost.result import RunResult


class Result(RunResult):
    __doc__ = RunResult.__doc__

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape (documented in README)."""
        from tfadvisor.report.json_report import result_to_dict

        return result_to_dict(self)

    def _repr_html_(self) -> str:
        """The notebook view: summary, findings with their plots, the step chart."""
        from tfadvisor.report.notebook import result_html

        return result_html(self)

    @classmethod
    def of(cls, r: RunResult) -> Result:
        """The facade's Result holding the same data as ``r``."""
        return r if isinstance(r, cls) else cls(**{f.name: getattr(r, f.name) for f in fields(RunResult)})


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

    ``trace``: the run's :class:`~tfadvisor.model.trace.Trace`, when the caller has loaded it already
    (``tfadvisor export``); a one-host run is then not read twice."""
    chosen = path if isinstance(path, Run) else resolve(path, run=run)
    result = Result.of(analyze_run(chosen, options=options, progress=progress, jobs=jobs, dask=dask, trace=trace))
    if data:
        from tfadvisor.analyses.datafiles import check_data_files

        files = check_data_files(data)
        for name, m in files.metrics.items():
            result.metrics.put("datafiles", name, m)
        result.tables.update_raw(files.tables)
        result.notes.extend(f"datafiles: {n}" for n in files.notes)
    from tfadvisor.advice import evaluate, load_rules

    result.findings = evaluate(result.metrics, load_rules(extra_dirs=rules_dirs))
    return result
