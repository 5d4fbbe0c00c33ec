"""What a finding can mark in a trace and which plots show it, named once: a rule declares its marks
(``marks = [...]`` in its TOML), its plots (``plots = [...]``, :data:`PLOTS`) and its timeline lanes
(``lanes = [...]``, :data:`LANES`), and the export, timeline and reports read them; no layer after this one
knows a rule id.

* Event marks select trace events by their metadata, per plane, with the classifications the analyses
  use (:data:`EVENT_MARKS`): the input waits, host-to-device copies, collectives, kernel launch calls,
  eager dispatches.
* Span marks select spans of the analyses' tables (:data:`SPAN_MARKS`): every step, the outlier steps,
  the gaps between steps the gaps analysis counts.

A rule's ``scope`` says whose spans: ``run`` (every host's; the default), ``host:<metric>`` (the host
that metric names, e.g. ``host:straggler_host``) or ``none`` (no profiled host's: a missing host).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tfadvisor.analyses.activity import DEVICE_H2D_RE, H2D_API_RE, HOST_COLLECTIVE_RE, LAUNCH_RE
from tfadvisor.analyses.collectives import ALLREDUCE_KERNEL, COLLECTIVE_KERNEL
from tfadvisor.model.trace import Plane


def _none(plane: Plane) -> np.ndarray:
    return np.zeros(len(plane.event_names), bool)


def _input_wait(plane: Plane) -> np.ndarray:
    return plane.meta_mask(prefix="IteratorGetNext") if plane.is_host else _none(plane)


def _h2d(plane: Plane) -> np.ndarray:
    return plane.meta_mask(DEVICE_H2D_RE if plane.is_device else H2D_API_RE)


def _collective(plane: Plane) -> np.ndarray:
    if plane.is_device:
        return plane.meta_mask(ALLREDUCE_KERNEL) | plane.meta_mask(COLLECTIVE_KERNEL)
    return plane.meta_mask(HOST_COLLECTIVE_RE)


def _launch(plane: Plane) -> np.ndarray:
    return plane.meta_mask(LAUNCH_RE) if plane.is_host else _none(plane)


def _eager(plane: Plane) -> np.ndarray:
    return plane.meta_mask("EagerExecute") if plane.is_host else _none(plane)


#: name -> (what it marks, event metadata mask of a plane).
EVENT_MARKS: dict[str, tuple[str, Callable[[Plane], np.ndarray]]] = {
    "input_wait": ("the host's waits for the next batch (IteratorGetNext*)", _input_wait),
    "h2d": ("host-to-device copies (device copy events, host copy API calls)", _h2d),
    "collective": ("collectives: all-reduce and other collective kernels, host collective ops", _collective),
    "launch": ("CUDA kernel launch calls on the host", _launch),
    "eager": ("eager op dispatches (EagerExecute)", _eager),
}
#: name -> what it marks (spans of the analyses' tables).
SPAN_MARKS: dict[str, str] = {
    "steps": "every step of the window (the steps table)",
    "outlier_steps": "the outlier steps (the steps table's outlier column)",
    "pattern_steps": "the steps that hold work the other steps do not (the step_patterns table)",
    "gaps": "the gaps between steps the gaps analysis counts (idle of at least max(100 us, 5 % of the median step)) "
            "and the ends of Keras step markers after their train function's work (the batch-end hooks)",
}
#: name -> what it shows: the report's plots a rule may point its findings at (``plots = [...]``).
PLOTS: dict[str, str] = {
    "steps": "each step's wall time split into its parts",
    "busy": "the device (or training threads) busy and idle, and the gaps between steps",
    "tfdata": "the tf.data stages' cost per batch",
    "precision": "device compute time by precision",
    "memory": "memory in use over the window, and what is live at the peak",
    "allreduce": "the all-reduce time measured against the expected",
    "hosts": "each host's step time and work",
    "datafiles": "the sizes of the training data files",
}
#: name -> what it draws: the lanes of the report's timeline a rule's findings light up (``lanes = [...]``):
#: ``steps``, the activity lanes of the ``timeline`` table (:data:`tfadvisor.analyses.timeline.LANES`) and ``idle``.
LANES: dict[str, str] = {
    "steps": "each step of the window (outliers in red)",
    "device compute": "device kernels and ops",
    "device copies": "device copies (host to device and others)",
    "device collectives": "collective kernels on the devices",
    "training threads": "the TF ops on the training threads",
    "input wait": "the host's waits for the next batch",
    "tf.data workers": "tf.data's worker threads",
    "host collectives": "collective ops on the host",
    "python": "the python thread's host work",
    "idle": "idle time as the analyses count it",
}
#: Every mark a rule may declare.
MARKS: dict[str, str] = {**{k: d for k, (d, _) in EVENT_MARKS.items()}, **SPAN_MARKS}
#: Scopes without a metric.
SCOPES = ("run", "none")


def event_mask(plane: Plane, mark: str) -> np.ndarray:
    """The event metadata of ``plane`` that an event mark selects (all False for a span mark)."""
    entry = EVENT_MARKS.get(mark)
    return entry[1](plane) if entry else _none(plane)


def scope_problem(scope: str, known_metrics: frozenset[str] | set[str]) -> str | None:
    """Why ``scope`` is not a scope (None when it is one)."""
    if scope in SCOPES:
        return None
    if scope.startswith("host:"):
        metric = scope[len("host:"):]
        return None if metric in known_metrics else f"unknown metric {metric!r} in scope {scope!r}"
    return f"scope must be one of {', '.join(SCOPES)} or host:<metric>, not {scope!r}"


__all__ = ["EVENT_MARKS", "LANES", "MARKS", "PLOTS", "SCOPES", "SPAN_MARKS", "event_mask", "scope_problem"]
