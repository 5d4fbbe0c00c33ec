"""The inputs an analysis declares in its signature, each built once per trace.

An analysis is ``analyze(trace, ctx, *, <inputs>) -> AnalysisResult``; its keyword-only parameters name
what it reads besides the trace, and the scheduler (:func:`tfadvisor.analyses.analyze_trace`) passes
each, built once per analysis run (:meth:`~tfadvisor.analyses.base.Context.once`):

* ``act``: the classified activity of the host and its devices (:class:`~tfadvisor.analyses.activity.Activity`);
* ``steps``: the steps found (:class:`~tfadvisor.analyses.step_detect.StepSet`, markers or cadence);
* ``step_table``: the steps analysis' table (None without steps; the steps analysis runs first);
* ``outside_table``: the throughput analysis' table of the intervals between steps (``outside_steps``: evaluation,
  checkpoints, epoch ends; None without; the throughput analysis runs first);
* ``memory``: the memory events of every plane (a DataFrame, None when there are none);
* ``program``: what the run file and the TensorBoard event files beside the profile say of the program (its
  layers, compiled metrics, the graph's functions: :class:`~tfadvisor.analyses.program.Program`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from tfadvisor.analyses.activity import activity
from tfadvisor.analyses.base import Context
from tfadvisor.analyses.memory import memory_events
from tfadvisor.analyses.program import program
from tfadvisor.analyses.step_detect import detect_steps
from tfadvisor.analyses.steps import step_table
from tfadvisor.model.trace import Trace

#: input name -> how it is built from the trace and the run's context.
INPUTS: dict[str, Callable[[Trace, Context], Any]] = {
    "act": activity,
    "steps": detect_steps,
    "step_table": lambda trace, ctx: step_table(ctx),
    "outside_table": lambda trace, ctx: ctx.table("outside_steps"),
    "memory": memory_events,
    "program": program,
}


def declared_inputs(fn: Callable) -> list[str]:
    """The inputs ``fn`` declares: its keyword-only parameters (each one of :data:`INPUTS`)."""
    return list(_declared(fn))


@functools.lru_cache(maxsize=256)
def _declared(fn: Callable) -> tuple[str, ...]:
    """:func:`declared_inputs`, read once per function (a signature is slow to read, and a run of many hosts
    asks for each analysis' once per host)."""
    names = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]
    unknown = [n for n in names if n not in INPUTS]
    if unknown:
        raise TypeError(f"{fn.__module__}.{fn.__qualname__} asks for unknown inputs {unknown}; known: {list(INPUTS)}")
    return tuple(names)


def run(fn: Callable, trace: Trace, ctx: Context) -> Any:
    """``fn(trace, ctx, **inputs)`` with the inputs it declares."""
    return fn(trace, ctx, **{name: INPUTS[name](trace, ctx) for name in _declared(fn)})


__all__ = ["INPUTS", "declared_inputs", "run"]
