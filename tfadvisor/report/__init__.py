"""Reporters: they take a :class:`tfadvisor.api.Result` and render it.

``terminal.print_result`` (rich, 80 columns), ``json_report.result_to_dict`` (the stable JSON
shape), ``markdown.render_markdown`` and ``html.write_html``. Reporters may import
``tfadvisor.advice``; nothing in the pipeline imports them.

The helpers below are shared by the reporters: the headline figures, the step-time summary and
breakdown read from the metrics, the analyses' notes, JSON-safe values. Numbers are written by
:mod:`tfadvisor.report.formatting` alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tfadvisor.model.categories import STEP_CATEGORIES as CATEGORIES

#: Step-time categories (metric ``step_<name>_pct``) in display order, with labels.
BREAKDOWN = tuple((c, {"collective": "collectives"}.get(c, c.replace("_", " "))) for c in CATEGORIES)

#: Up to this many hosts the reports list every host; above it, how each per-host figure is spread over
#: the hosts and the hosts that stand out (JSON always lists every host).
HOSTS_LISTED = 16

STEP_TIME_KEYS = ("mean", "median", "p90", "min", "max")

#: The headline figures of the summary, in order: (metric, label).
KEY_METRICS = (
    ("steps_count", "Steps"),
    ("step_time_mean_ms", "Step time (mean)"),
    ("step_time_median_ms", "Step time (median)"),
    ("step_time_p90_ms", "Step time (p90)"),
    ("throughput_ms_per_step", "Throughput (ms per step, evaluation and epoch ends included)"),
    ("unprofiled_ms_per_step", "Unprofiled throughput (clock outside the window, ms per step)"),
    ("unprofiled_step_ms", "Unprofiled step time (clock, median)"),
    ("profiler_inflation", "Profiler inflation"),
    ("input_pct", "Waiting for input"),
    ("idle_pct", "Idle"),
    ("step_device_compute_pct", "Device compute"),
    ("step_host_compute_pct", "Host compute"),
    ("eager_pct", "Eager execution"),
    ("python_overhead_pct", "Python overhead"),
    ("low_precision_pct", "16-bit device compute"),
    ("memory_peak_bytes", "Memory peak"),
    ("allreduce_ms_per_step", "AllReduce per step"),
    ("data_files_count", "Data files"),
    ("data_small_files_pct", "Data files under 1 MiB"),
)


def plain(value: Any) -> Any:
    """A JSON-safe Python value: numpy scalars unwrapped, NaN/inf -> None, containers recursed."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "item") and getattr(value, "shape", None) == ():
        return plain(value.item())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):
        return plain(value.tolist())
    return str(value)


def get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute or dict key: findings may be Finding objects or their ``to_dict()``."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def run_label(result: Any) -> str:
    """The result's run as the reports name it (``?`` when it has none)."""
    run = getattr(result, "run", None)
    if run is None:
        return "?"
    try:
        return run.label()
    except Exception:  # noqa: BLE001 - a hand-made run object
        return str(getattr(run, "directory", None) or getattr(run, "name", run))


def notes_for(notes: list[str], *analyses: str) -> str | None:
    """The first note an analysis left (``"memory: no allocation events ..."``), without the prefix."""
    for n in notes or []:
        for a in analyses:
            if str(n).startswith(f"{a}: "):
                return str(n)[len(a) + 2:]
    return None


def notes_on_findings(result: Any, findings: Any) -> list[tuple[str, list[int]]]:
    """The notes that change what a finding shown means, each once with the numbers (from 1) of the findings it
    qualifies, in the notes' order: a note qualifies the metrics its analysis named
    (:meth:`tfadvisor.analyses.AnalysisResult.qualify`, kept as ``result.metrics.notes``), and a finding whose
    evidence holds one of them."""
    qualified = getattr(getattr(result, "metrics", None), "notes", None) or {}
    on: dict[str, list[int]] = {}
    for i, f in enumerate(findings or [], 1):
        for metric in get(f, "evidence", None) or {}:
            for n in qualified.get(metric, ()):
                if i not in on.setdefault(str(n), []):
                    on[str(n)].append(i)
    return [(str(n), on[str(n)]) for n in getattr(result, "notes", None) or [] if str(n) in on]


def cpu_only(result: Any) -> bool:
    """Whether the run's trace has host planes only (no ``/device:`` plane): most notes then say what a GPU,
    NCCL or a device allocator would have shown."""
    planes = (getattr(result, "summary", None) or {}).get("planes") or []
    names = [str(p.get("name", "")) for p in planes if isinstance(p, dict)]
    return bool(names) and not any(n.startswith("/device:") for n in names)


def notes_left(notes: list[str], shown: list[str], cpu: bool) -> str:
    """One line for the notes not shown: how many, from how many analyses (``--notes`` lists them)."""
    rest = [str(n) for n in notes if str(n) not in shown]
    if not rest:
        return ""
    sources = len({n.split(": ", 1)[0] for n in rest})
    more = "more " if shown else ""
    return (f"{len(rest)} {more}note{'s' if len(rest) > 1 else ''} ({sources} "
            f"{'analyses' if sources > 1 else 'analysis'}) on what this {'CPU-only ' if cpu else ''}trace could not "
            "tell: --notes")


def step_time(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """``{mean, median, p90, min, max}`` in ms from the steps analysis (None where unknown)."""
    return {k: plain(metrics.get(f"step_time_{k}_ms")) for k in STEP_TIME_KEYS}


def breakdown(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Known step-time category shares (% of step time), in display order."""
    out = {}
    for key, _ in BREAKDOWN:
        v = plain(metrics.get(f"step_{key}_pct"))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


__all__ = ["BREAKDOWN", "KEY_METRICS", "STEP_TIME_KEYS", "breakdown", "cpu_only", "get", "notes_for", "notes_left",
           "notes_on_findings", "plain", "run_label", "step_time"]
