"""Conditions of a capture that make its findings uncertain: caveats on the findings they touch, never gates.

A window that is not steady state, a tf.data cache still being written, a competing load: each, when it holds, is
said once at the top of a report and on each finding it touches (:func:`tfadvisor.advice.explain.explain`), but
not on the findings of the rules that report the condition themselves (a rule's ``reports = ["<id>"]``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tfadvisor.advice.expr import Expr, Template


@dataclass(frozen=True)
class Caveat:
    """A condition of the capture that makes findings uncertain: when it holds (``when``), ``text`` is said on
    the findings of the parts in ``parts`` (every finding when empty) but those of the rules that report the
    condition itself (a rule's ``reports = "<id>"``)."""

    id: str
    label: str  # a few words, for each finding it touches
    when: str
    text: str  # the whole condition, said once at the top of a report
    parts: tuple[str, ...] = ()

    def holds(self, metrics: Mapping[str, Any]) -> bool:
        return _expr(self.when).test(metrics)

    def render(self, metrics: Mapping[str, Any]) -> str:
        return _template(self.text).render(metrics)


@functools.cache
def _expr(text: str) -> Expr:
    return Expr(text)


@functools.cache
def _template(text: str) -> Template:
    return Template(text)


CAVEATS = (
    Caveat("not_steady", "window not steady state", "capture_steady_state == false",
           "the window is not steady-state training ({capture_issues}): its figures may not hold for the rest of "
           "the run"),
    Caveat("cache_fill", "tf.data cache being written", "capture_phase == 'cache_fill'",
           "a tf.data cache is still being written in this window: the input pipeline's cost here is the first "
           "pass's, later passes read the cache", parts=("input",)),
    Caveat("competing_load", "competing load", "system_other_cpu_pct >= 20",
           "other processes used {system_other_cpu_pct:.0f} % of the CPU during the capture: times may be "
           "inflated by them"),
)


__all__ = ["CAVEATS", "Caveat"]
