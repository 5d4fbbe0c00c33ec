"""How the profiler is set up: tracer levels and CPU memory events.

Tracer levels: TensorFlow 2.21's ``tf.profiler.experimental.start`` drops them (it logs
``... expects an i value`` and uses the defaults 2/0/1). A session asked for other levels
checks once whether this TensorFlow applies them and warns when not; ``tfadvisor capture
service`` passes them through xprof to a profiler server, which does apply them.

Memory events on the CPU: TensorFlow records allocations of the host allocator only when
``TF_CPU_ALLOCATOR_USE_BFC=true`` was in the environment before TF created its allocator
(its first op). :func:`enable_memory_events` sets it and warns when it is already too late.

What a capture is asked for is one :class:`CaptureOptions`, checked when it is made: a
:class:`~tfadvisor.capture.session.ProfileSession` (``tfadvisor.profile``) is made from one, and the
Keras callback keeps one and makes each window's session from it. :class:`CaptureOptionsView` gives
both their attributes (``logdir``, ``options``, ``top`` ...), read from that one object.
"""

from __future__ import annotations

import operator
import os
import sys
import tempfile
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TextIO

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


def whole(value: Any) -> int | None:
    """``value`` as a whole number (an int, a whole float or its text, a numpy integer), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    try:  # numpy integers
        return operator.index(value)
    except TypeError:
        return None


def whole_at_least(name: str, value: Any, minimum: int) -> int:
    """``value`` as a whole number ``>= minimum``; a ``ValueError`` naming ``name`` otherwise."""
    n = whole(value)
    if n is None or n < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return n


@dataclass
class CaptureOptions:
    """What one capture is asked for, checked here, once, when it is made.

    ``logdir``: where the profiler writes (local or ``gs://``). ``profiler``: the profiler's options,
    :func:`profiler_options`' dict (tracer levels, ``delay_ms``; a ``ProfilerOptions`` or a partial dict is
    completed); :meth:`make` takes them as ``tfadvisor.profile`` and the callback do. ``memory``: CPU memory
    events (:func:`enable_memory_events`, when the profiler starts). ``analyze``: analyse the profile when the
    capture ends (``report_json``/``report_html``, also written, imply it) and print the ``top`` findings.
    ``verbose``: print ``tfadvisor: ...`` lines on ``stream`` (default stdout); ``hint``: when not analysing,
    print how to. ``metadata``: extra keys for ``tfadvisor_run.json``; ``source``: who captured (its
    ``capture.by``). ``system``: system samples: None for ``TFADVISOR_SYSTEM`` or 10 Hz, False for none, a
    number for that rate.
    """

    logdir: str
    profiler: Any = None
    memory: bool = False
    analyze: bool = False
    report_json: str | os.PathLike | None = None
    report_html: str | os.PathLike | None = None
    top: int = 3
    verbose: bool = True
    stream: TextIO | None = None
    hint: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = "tfadvisor.profile"
    system: bool | float | None = None

    def __post_init__(self) -> None:
        self.logdir = os.fspath(self.logdir)
        self.top = whole_at_least("top", self.top, 1)
        self.profiler = profiler_options(self.profiler)
        self.analyze = self.analyze or bool(self.report_json) or bool(self.report_html)
        self.metadata = dict(self.metadata or {})

    @classmethod
    def make(
        cls,
        logdir: str | os.PathLike,
        options: Any = None,
        *,
        host_tracer_level: int | None = None,
        python_tracer_level: int | None = None,
        device_tracer_level: int | None = None,
        delay_ms: int | None = None,
        **fields: Any,
    ) -> CaptureOptions:
        """From the arguments ``tfadvisor.profile`` and the Keras callback take: the profiler's options as a
        ``ProfilerOptions`` or dict and as explicit levels (the levels win), the other fields by name."""
        profiler = profiler_options(options, host_tracer_level=host_tracer_level,
                                    python_tracer_level=python_tracer_level,
                                    device_tracer_level=device_tracer_level, delay_ms=delay_ms)
        return cls(os.fspath(logdir), profiler, **fields)


def _view(name: str, doc: str) -> property:
    def get(self: Any) -> Any:
        return getattr(self.capture, name)

    def put(self: Any, value: Any) -> None:
        setattr(self.capture, name, value)

    return property(get, put, doc=doc)


class CaptureOptionsView:
    """The attributes of a holder of a :class:`CaptureOptions` (``self.capture``), read from it and written to it:
    a :class:`~tfadvisor.capture.session.ProfileSession` and the Keras callback that made it see the same values."""

    capture: CaptureOptions

    logdir = _view("logdir", "Where the profiler writes.")
    options = _view("profiler", "The profiler's options (:func:`profiler_options`' dict).")
    memory = _view("memory", "Record CPU memory events.")
    analyze = _view("analyze", "Analyse the profile when the capture ends.")
    report_json = _view("report_json", "Also write the JSON report here.")
    report_html = _view("report_html", "Also write the HTML report here.")
    top = _view("top", "How many findings to print.")
    verbose = _view("verbose", "Print ``tfadvisor: ...`` lines.")
    stream = _view("stream", "Where those lines go (None: stdout).")
    hint = _view("hint", "When not analysing, print how to analyse the profile.")
    source = _view("source", "Who captured (``tfadvisor_run.json`` ``capture.by``).")


def tf_options(tf: ModuleType, opts: dict[str, Any], local: bool = True) -> Any:
    """``tf.profiler.experimental.ProfilerOptions`` from :func:`profiler_options`' dict; None (TensorFlow's own
    defaults, which :data:`DEFAULT_LEVELS` are) where the dict asks for nothing else, or, ``local``, where this
    TensorFlow ignores the levels given to ``tf.profiler.experimental.start`` (:func:`check_levels` says so).

    TF 2.21 reads none of the options it is given that way: its C++ side logs ``<option> expects an i value``
    for each one, whatever the Python type (int, numpy, a None ``delay_ms``), and does not apply them
    (:func:`local_levels_honoured` finds no Python tracer events). Given no options it logs nothing."""
    if opts.get("delay_ms") is None and all(opts.get(k) == v for k, v in DEFAULT_LEVELS.items()):
        return None
    if local and _levels_honoured is False:
        return None
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
