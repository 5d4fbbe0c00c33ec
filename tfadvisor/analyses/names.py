"""Tests of event names, cached per process.

The same names come back on every device of a host and on every host of a run (one kernel name,
eight GPUs, 256 hosts), and the tests that classify them are regular expressions over long C++
signatures. :func:`name_test` caches such a test by name, so each distinct name is classified once
per process; :func:`name_mask` applies one to a plane's names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

#: Distinct names remembered per test (a name is ~100 bytes: a few MB at most).
CACHED_NAMES = 1 << 15

T = TypeVar("T")


def name_test(fn: Callable[[str], T]) -> Callable[[str], T]:
    """``fn`` (a pure function of a name) cached per process."""
    return functools.lru_cache(maxsize=CACHED_NAMES)(fn)


def name_mask(names: Iterable, test: Callable[[str], object], extra: bool | None = None) -> np.ndarray:
    """``bool(test(name))`` per name, as an array (one more element ``extra`` at the end when given:
    the slot of an unknown metadata id)."""
    got = [bool(test(str(n))) for n in names]
    if extra is not None:
        got.append(extra)
    return np.array(got, bool)


__all__ = ["CACHED_NAMES", "name_mask", "name_test"]
