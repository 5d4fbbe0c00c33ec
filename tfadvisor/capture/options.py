"""How the profiler is set up: tracer levels and CPU memory events.

Tracer levels: TensorFlow 2.21's ``tf.profiler.experimental.start`` drops them (it logs
``... expects an i value`` and uses the defaults 2/0/1). A session asked for other levels
checks once whether this TensorFlow applies them and warns when not; ``tfadvisor capture
service`` passes them through xprof to a profiler server, which does apply them.

Memory events on the CPU: TensorFlow records allocations of the host allocator only when
``TF_CPU_ALLOCATOR_USE_BFC=true`` was in the environment before TF created its allocator
(its first op). :func:`enable_memory_events` sets it and warns when it is already too late.
"""

from __future__ import annotations

import os
import sys
import tempfile
from types import ModuleType
from typing import Any

from tfadvisor.capture.base import warn

MEMORY_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
DEFAULT_LEVELS = {"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 1}


def profiler_options(
    options: Any = None,
    *,
    host_tracer_level: int | None = None,
    python_tracer_level: int | None = None,
    device_tracer_level: int | None = None,
    delay_ms: int | None = None,
) -> dict[str, Any]:
    """One options dict from a ``ProfilerOptions``/dict and explicit levels (levels win).

    Levels: host 1 (critical) .. 3 (verbose), default 2; python 0/1 (Python function
    calls, costly), default 0; device 0/1 (GPU/TPU activity), default 1.
    """
    out: dict[str, Any] = {**DEFAULT_LEVELS, "delay_ms": None}
    if options is not None:
        given = options._asdict() if hasattr(options, "_asdict") else dict(options)
        unknown = set(given) - set(out)
        if unknown:
            raise ValueError(f"unknown profiler option(s): {', '.join(sorted(unknown))}")
        out.update({k: v for k, v in given.items() if v is not None})
    for key, value in (("host_tracer_level", host_tracer_level), ("python_tracer_level", python_tracer_level),
                       ("device_tracer_level", device_tracer_level), ("delay_ms", delay_ms)):
        if value is not None:
            out[key] = int(value)
    return out


def tf_options(tf: ModuleType, opts: dict[str, Any]) -> Any:
    """``tf.profiler.experimental.ProfilerOptions`` from :func:`profiler_options`' dict."""
    return tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=opts["host_tracer_level"],
        python_tracer_level=opts["python_tracer_level"],
        device_tracer_level=opts["device_tracer_level"],
        delay_ms=opts.get("delay_ms"),
    )


_levels_honoured: bool | None = None


def _probe_marker_function() -> int:
    return 1


def local_levels_honoured(tf: ModuleType) -> bool:
    """Whether ``tf.profiler.experimental.start`` applies tracer levels in this TensorFlow.

    Found out once per process with a tiny session using the Python tracer: honoured when
    the probe function shows up in the saved trace.
    """
    global _levels_honoured
    if _levels_honoured is None:
        try:
            with tempfile.TemporaryDirectory(prefix="tfadvisor_probe_") as tmp:
                tf.profiler.experimental.start(tmp, options=tf.profiler.experimental.ProfilerOptions(
                    host_tracer_level=1, python_tracer_level=1, device_tracer_level=0))
                try:
                    _probe_marker_function()
                finally:
                    tf.profiler.experimental.stop()
                found = False
                for dirpath, _dirs, files in os.walk(tmp):
                    for f in files:
                        with open(os.path.join(dirpath, f), "rb") as fh:
                            found = found or b"_probe_marker_function" in fh.read()
                _levels_honoured = found
        except Exception:  # noqa: BLE001 - cannot tell: assume they are
            _levels_honoured = True
    return _levels_honoured


def check_levels(tf: ModuleType, opts: dict[str, Any]) -> None:
    """Warn when levels other than the defaults were asked for and this TensorFlow ignores them."""
    wanted = {k: opts[k] for k in DEFAULT_LEVELS if opts.get(k) is not None and opts[k] != DEFAULT_LEVELS[k]}
    if wanted and not local_levels_honoured(tf):
        given = ", ".join(f"{k}={v}" for k, v in wanted.items())
        warn(f"TensorFlow {getattr(tf, '__version__', '?')} ignores tracer levels given to "
             f"tf.profiler.experimental.start ({given}); the defaults are used. To capture with other levels, "
             "start a profiler server in the program (tf.profiler.experimental.server.start(PORT)) and capture "
             "with `tfadvisor capture service localhost:PORT`, which passes them through xprof")


def tf_initialized() -> bool:
    """Whether TensorFlow's eager context (and with it the CPU allocator) already exists."""
    if "tensorflow" not in sys.modules:
        return False
    try:
        from tensorflow.python.eager import context

        ctx = context.context_safe()
        return bool(ctx is not None and getattr(ctx, "_initialized", False))
    except Exception:  # noqa: BLE001 - cannot tell: assume it started
        return True


def enable_memory_events() -> bool:
    """Set ``TF_CPU_ALLOCATOR_USE_BFC=true``; warn (and return False) when TF already started.

    TensorFlow reads the variable when it creates its CPU allocator, at the first op.
    Setting it after that has no effect on this process: CPU memory events will be
    missing (GPU allocations are recorded regardless).
    """
    if os.environ.get(MEMORY_ENV, "").lower() == "true":
        return True
    late = tf_initialized()
    os.environ[MEMORY_ENV] = "true"
    if late:
        warn(f"memory=True: TensorFlow is already running in this process, so {MEMORY_ENV}=true comes too late "
             "for CPU memory events; set it in the environment before starting Python "
             f"({MEMORY_ENV}=true python train.py) or use `tfadvisor capture run --memory`")
        return False
    return True
