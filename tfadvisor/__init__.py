"""tfadvisor: read TensorFlow Profiler traces and say why training is slow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfadvisor._version import __version__

# The public names are imported on first use (PEP 562), so that ``import tfadvisor`` and the command
# line's ``--help`` do not pay for numpy, pandas and the analyses.
_LAZY = {
    "Result": "tfadvisor.api",
    "analyze": "tfadvisor.api",
    "TraceError": "tfadvisor.errors",
    "profile": "tfadvisor.capture.session",  # capture helpers; TensorFlow is imported only when used
    "step": "tfadvisor.capture.markers",
    "load": "tfadvisor.io.reader",
    "Plane": "tfadvisor.model.trace",
    "Trace": "tfadvisor.model.trace",
}

__all__ = ["Plane", "Result", "Trace", "TraceError", "__version__", "analyze", "load", "profile", "step"]

if TYPE_CHECKING:
    from tfadvisor.api import Result, analyze
    from tfadvisor.capture.markers import step
    from tfadvisor.capture.session import profile
    from tfadvisor.errors import TraceError
    from tfadvisor.io.reader import load
    from tfadvisor.model.trace import Plane, Trace


def __getattr__(name: str):
    import importlib.util

    module = _LAZY.get(name)
    if module is None:
        # ``tfadvisor.io.reader`` and the like after a bare ``import tfadvisor`` (they used to be imported by it)
        if not name.startswith("_") and importlib.util.find_spec(f"tfadvisor.{name}") is not None:
            return importlib.import_module(f"tfadvisor.{name}")
        raise AttributeError(f"module 'tfadvisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
