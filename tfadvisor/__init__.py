"""tfadvisor: read TensorFlow Profiler traces and say why training is slow."""

from __future__ import annotations

__version__ = "0.1.0"

from tfadvisor.api import Result, analyze
from tfadvisor.errors import TraceError
from tfadvisor.profiling import profile, step  # capture helpers; TensorFlow is imported only when used
from tfadvisor.reader import load
from tfadvisor.trace import Plane, Trace

__all__ = ["Plane", "Result", "Trace", "TraceError", "__version__", "analyze", "load", "profile", "step"]
