"""Capture profiles from inside a training program: ``tfadvisor.profile`` and ``tfadvisor.step``.

``profile(logdir)`` starts the TensorFlow profiler, stops it when the block ends, writes
``tfadvisor_run.json`` (what the trace cannot tell: parameter count, batch size, replicas,
devices, versions, steps) into the run directory the profiler created
(``<logdir>/plugins/profile/<run>/``), then analyses the profile and prints the report with its
top findings (``analyze=False`` turns that off)::

    with tfadvisor.profile("logs/prof", model=model, batch_size=64):
        for i in range(20):
            with tfadvisor.step(i):
                train_step(next(it))

``step(n)`` marks one training step, which is how the analyses find step boundaries in custom
loops. Nothing raises into training: problems are :class:`CaptureWarning` warnings.

The code lives in :mod:`tfadvisor.capture`: ``session`` (start/stop, run facts, system samples),
``markers`` (step markers), ``analysis`` (the analysis at the end of the window), ``options``
(``CaptureOptions``, what a capture is asked for, which ``profile`` and the Keras callback share;
tracer levels, memory events), ``rundirs``, ``runfacts``, ``signals``.
"""

from __future__ import annotations

from tfadvisor.capture.base import CaptureWarning
from tfadvisor.capture.markers import step
from tfadvisor.capture.session import ProfileSession, profile

__all__ = ["CaptureWarning", "ProfileSession", "profile", "step"]
