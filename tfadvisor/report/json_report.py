"""The JSON report: one object, a stable shape (``schema_version``), for CI and scripts.

``result_to_dict(result) -> dict`` (what ``Result.to_dict()`` and ``--format json`` give)::

    {
      "schema_version": 1,                 # the JSON contract: tfadvisor/schemas/analyze.schema.json
      "schema_minor": 1,
      "version": "0.1.0",                  # tfadvisor version
      "run": {"name", "directory", "label", "hosts": [..], "files": [..], "other_runs": [..]},
      "summary": {
        "steps": 10,                       # int, 0 when no steps were found
        "steps_source": "trace_context",   # how steps were found, or null
        "step_time_ms": {"mean", "median", "p90", "min", "max"},   # numbers or null
        "breakdown_pct": {"input": 78.2, "host_compute": 15.0, ...},  # known categories only
        "loaded": {...}                    # what was read: run, files, hosts, events, time_span_ms, planes
      },
      "metrics": {"input_pct": 78.2, ...}, # every metric, null when the trace lacks it
      "units": {"input_pct": "%", ...},
      "findings": [                        # most important first
        {"rule", "severity", "title", "message", "impact_pct", "evidence": {metric: value},
         "fix", "why", "docs": [url, ...]}
      ],
      "notes": ["steps: ...", ...],        # what could not be measured, and why
      "hosts": [{"host", "metrics", "notes"}],  # per host when several hosts were analysed, else []
      "options": {"param_count", "bandwidth_gbps", "link", "replicas", "batch_size", ...},
      "system": {"figures": {metric: value}, "samples": n}   # system samples and start-up, when captured
      "attribution": {"basis", "wall_ms", "devices", "devices_shown",   # where the time goes (null: nothing
                      "lanes": [{"lane", "parts": [{"part", "label", "pct", "ms", "items": [...]}]}]}  # to split)
    }

``--format json --tables`` adds ``"tables": {name: [{column: value}, ...]}``: every table of the
result (``steps``, ``gaps``, ``host_ops``, ...), one object per row, columns as in
``result.tables`` (times in ps as ``*_ps``, durations in ms as ``*_ms``).

Additions bump ``schema_minor``; a renamed or removed key bumps ``schema_version`` (the policy and the
schema: :mod:`tfadvisor.report.schema`, ``tfadvisor schema analyze``).
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from typing import Any

from tfadvisor._version import SCHEMA_VERSION, __version__, schema_fields
from tfadvisor.report import breakdown, plain, step_time
from tfadvisor.report.attribution import attribution


def _finding_dict(f: Any) -> dict[str, Any]:
    if hasattr(f, "to_dict"):
        return plain(f.to_dict())
    if isinstance(f, dict):
        return plain(f)
    return plain(vars(f))


def _run_dict(run: Any) -> dict[str, Any]:
    if run is None:
        return {}
    try:
        label = run.label()
    except Exception:  # noqa: BLE001 - a hand-made run object
        label = str(getattr(run, "directory", "") or getattr(run, "name", ""))
    hosts = getattr(run, "hosts", None)
    return {
        "name": getattr(run, "name", None),
        "directory": getattr(run, "directory", None),
        "label": label,
        "hosts": list(hosts) if hosts is not None else [],
        "files": list(getattr(run, "files", ()) or ()),
        "other_runs": list(getattr(run, "others", ()) or ()),  # runs beside it in the logdir (--run to pick)
    }


def _steps(metrics: Any) -> int:
    v = plain(metrics.get("steps_count")) if metrics is not None else None
    try:
        return int(v) if v is not None else 0
    except (TypeError, ValueError):
        return 0


def result_to_dict(result: Any) -> dict[str, Any]:
    """The stable JSON shape of a :class:`~tfadvisor.api.Result` (see the module docstring)."""
    metrics = getattr(result, "metrics", None) or {}
    units = getattr(metrics, "units", None) or {}
    hosts = list(getattr(result, "hosts", None) or [])
    options = getattr(result, "options", None)
    return {
        **schema_fields(),
        "version": __version__,
        "run": _run_dict(getattr(result, "run", None)),
        "summary": {
            "steps": _steps(metrics),
            "steps_source": plain(metrics.get("steps_source")),
            "step_time_ms": step_time(metrics),
            "throughput_ms_per_step": plain(metrics.get("throughput_ms_per_step")),
            "profiler_inflation": plain(metrics.get("profiler_inflation")),
            "profiler_inflation_source": plain(metrics.get("profiler_inflation_source")),
            "breakdown_pct": breakdown(metrics),
            "loaded": plain(getattr(result, "summary", None) or {}),
        },
        "metrics": {str(k): plain(v) for k, v in metrics.items()},
        "units": {str(k): str(v) for k, v in units.items()},
        "findings": [_finding_dict(f) for f in getattr(result, "findings", None) or []],
        "notes": [str(n) for n in getattr(result, "notes", None) or []],
        "hosts": [
            {
                "host": getattr(h, "host", ""),
                "metrics": {str(k): plain(v) for k, v in (getattr(h, "metrics", None) or {}).items()},
                "notes": [str(n) for n in getattr(h, "notes", None) or []],
            }
            for h in hosts
        ] if len(hosts) > 1 else [],
        "options": plain(asdict(options)) if is_dataclass(options) else {},
        "system": plain(_system(result)),  # tfadvisor/report/system.py
        "attribution": plain(attribution(result)),  # tfadvisor/report/attribution.py
    }


def tables_to_dict(tables: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each table as a list of rows (``{column: value}``, JSON-safe values)."""
    out = {}
    for name, df in tables.items():
        if hasattr(df, "to_dict"):
            out[str(name)] = [plain(r) for r in df.to_dict(orient="records")]
    return out


def _system(result: Any) -> dict[str, Any]:
    from tfadvisor.report import system

    return system.to_dict(result)


def runs_to_dict(logdir: str, runs: list[Any]) -> dict[str, Any]:
    """``tfadvisor runs --format json``: the runs under ``logdir``, newest last."""
    return {**schema_fields(), "logdir": str(logdir),
            "runs": [{"name": r.name, "directory": r.directory, "label": r.label(), "hosts": list(r.hosts),
                      "files": list(r.files)} for r in runs]}


def rules_to_dict(rules: list[Any]) -> dict[str, Any]:
    """``tfadvisor rules --format json``: each rule in full."""
    from tfadvisor.advice import rule_dict

    return {**schema_fields(), "rules": [rule_dict(r) for r in rules]}


__all__ = ["SCHEMA_VERSION", "result_to_dict", "rules_to_dict", "runs_to_dict", "tables_to_dict"]
