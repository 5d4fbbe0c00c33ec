"""What each line of a device plane is, as TF 1.x-2.x, XLA/JAX and xprof write them.

A device plane (``/device:GPU:N``, ``/device:TPU:N``) mixes raw activity with lines derived
from it. Each kind is used for one thing only, so no time is counted twice:

* ``stream`` (``Stream #N(...)``): GPU activity as CUPTI/ROCm record it: kernels, copies,
  collectives. Device busy time comes from here.
* ``xla_ops`` (``XLA Ops``): HLO ops. On a TPU (no streams) the device activity itself; on a
  GPU derived from the kernels, so only used where a plane has no stream.
* ``ops`` (``TensorFlow Ops`` / ``Framework Ops``): the framework op each stretch of device
  time belongs to (op attribution), derived.
* ``steps`` (``Steps``): one event per training step on this device.
* ``name_scope``, ``xla_modules``, ``async_xla_ops``, ``xla_traceme``, ``launch_stats``,
  ``overhead`` (``CUPTI overhead``), ``source``, ``sparse_core*``, ``host_offload``,
  ``counters``: derived or bookkeeping lines, never activity.
* ``other``: a line of no known kind; treated as activity when the plane has neither streams
  nor ``XLA Ops`` (older or foreign writers).
"""

from __future__ import annotations

import numpy as np

from tfadvisor.model.trace import FRAMEWORK_OPS_LINES, FRAMEWORK_SCOPE_LINES, Plane

STREAM = "stream"
OPS = "ops"
NAME_SCOPE = "name_scope"
STEPS = "steps"
XLA_MODULES = "xla_modules"
XLA_OPS = "xla_ops"
OTHER = "other"

#: Line name -> kind, for every derived or bookkeeping line a known writer puts on a device plane.
LINE_KINDS: dict[str, str] = {
    **{n: OPS for n in FRAMEWORK_OPS_LINES},
    **{n: NAME_SCOPE for n in FRAMEWORK_SCOPE_LINES},
    "Steps": STEPS,
    "XLA Modules": XLA_MODULES,
    "XLA Ops": XLA_OPS,
    "Async XLA Ops": "async_xla_ops",
    "XLA TraceMe": "xla_traceme",
    "Launch Stats": "launch_stats",
    "CUPTI overhead": "overhead",
    "Source code": "source",
    "SparseCore": "sparse_core",
    "Sparse Core": "sparse_core",
    "Sparse Core Ops": "sparse_core",
    "Sparse Core Modules": "sparse_core",
    "Sparse Core Steps": "sparse_core_steps",
    "Host Offload Ops": "host_offload",
    "_counters_": "counters",
}

#: Every named (non-stream) line kind writers put on device planes.
DERIVED_LINE_NAMES = frozenset(LINE_KINDS)


def line_kind(name: str, raw: str = "") -> str:
    """The kind of one line from its display name and its name."""
    for n in (name, raw):
        if n.startswith("Stream"):
            return STREAM
    for n in (name, raw):
        k = LINE_KINDS.get(n)
        if k is not None:
            return k
    return OTHER


def plane_line_kinds(plane: Plane) -> np.ndarray:
    """The kind of every line of a plane (object array, one entry per row of ``plane.lines``)."""
    cached = plane.__dict__.get("_tfadvisor_line_kinds")
    if cached is not None:
        return cached
    names = [str(n) for n in plane.line_names]
    raw = [str(n) for n in plane.lines["name"]] if len(plane.lines) else []
    out = np.array([line_kind(n, r) for n, r in zip(names, raw)], dtype=object)
    plane.__dict__["_tfadvisor_line_kinds"] = out
    return out


def lines_of(plane: Plane, *kinds: str) -> np.ndarray:
    """Indexes of the lines of the given kinds."""
    return np.array([i for i, k in enumerate(plane_line_kinds(plane).tolist()) if k in kinds], np.int64)


def activity_lines(plane: Plane) -> np.ndarray:
    """Lines holding the device's own activity: the streams; without streams the ``XLA Ops``
    lines (TPU); without either, every line of no known kind (found once per plane)."""
    cached = plane.__dict__.get("_tfadvisor_activity_lines")
    if cached is not None:
        return cached
    out = np.empty(0, np.int64)
    for kinds in ((STREAM,), (XLA_OPS,), (OTHER,)):
        idx = lines_of(plane, *kinds)
        if idx.size:
            out = idx
            break
    out.setflags(write=False)  # shared by every caller: read-only
    plane.__dict__["_tfadvisor_activity_lines"] = out
    return out


def activity_kind(plane: Plane) -> str | None:
    """Which kind of line :func:`activity_lines` took (None when the plane has none)."""
    idx = activity_lines(plane)
    return str(plane_line_kinds(plane)[idx[0]]) if idx.size else None


def op_lines(plane: Plane) -> np.ndarray:
    """Lines that attribute device time to ops: ``TensorFlow Ops``/``Framework Ops``, else ``XLA Ops``."""
    idx = lines_of(plane, OPS)
    return idx if idx.size else lines_of(plane, XLA_OPS)


def step_lines(plane: Plane) -> np.ndarray:
    """The plane's ``Steps`` lines."""
    return lines_of(plane, STEPS)


def short_name(plane: Plane) -> str:
    """``/device:GPU:4`` -> ``GPU:4``."""
    n = str(plane.name)
    return n[len("/device:"):] if n.startswith("/device:") else n


__all__ = ["DERIVED_LINE_NAMES", "LINE_KINDS", "NAME_SCOPE", "OPS", "OTHER", "STEPS", "STREAM", "XLA_MODULES",
           "XLA_OPS", "activity_kind", "activity_lines", "line_kind", "lines_of", "op_lines", "plane_line_kinds",
           "short_name", "step_lines"]
