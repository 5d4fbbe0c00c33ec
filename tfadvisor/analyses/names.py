"""Tests of event names, cached per process.

The same names come back on every device of a host and on every host of a run (one kernel name,
eight GPUs, 256 hosts), and the tests that classify them are regular expressions over long C++
signatures. :func:`name_test` caches such a test by name, so each distinct name is classified once
per process; :func:`name_values` (and :func:`name_mask`) applies one to a plane's names, once per distinct list of
names: the arrays it returns are shared, read-only.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

#: Distinct names remembered per test (a name is ~100 bytes: a few MB at most).
CACHED_NAMES = 1 << 15

T = TypeVar("T")


def name_test(fn: Callable[[str], T]) -> Callable[[str], T]:
    """``fn`` (a pure function of a name) cached per process."""
    return functools.lru_cache(maxsize=CACHED_NAMES)(fn)


#: Arrays of :func:`name_values` remembered (most recently used kept): one per test and distinct list of names.
CACHED_ARRAYS = 256
_ARRAYS: OrderedDict[tuple, np.ndarray] = OrderedDict()


def name_values(names: Iterable, test: Callable[[str], object], dtype=bool, extra=None) -> np.ndarray:
    """``test(name)`` per name as an array of ``dtype`` (one more element ``extra`` at the end when given: the slot
    of an unknown metadata id); read-only. Worked out once per test and list of names: the devices of a host, and
    the hosts of a run, repeat their metadata's names, so a plane's lookup costs a hash of its names."""
    key = (test, np.dtype(dtype).str, extra, tuple(names.tolist() if isinstance(names, np.ndarray) else names))
    got = _ARRAYS.get(key)
    if got is not None:
        _ARRAYS.move_to_end(key)
        return got
    vals = [test(str(n)) for n in key[3]]
    if np.dtype(dtype) == np.bool_:
        vals = [bool(v) for v in vals]
    if extra is not None:
        vals.append(extra)
    got = np.array(vals, dtype) if vals else np.zeros(0, dtype)
    got.setflags(write=False)
    _ARRAYS[key] = got
    if len(_ARRAYS) > CACHED_ARRAYS:
        _ARRAYS.popitem(last=False)
    return got


def name_mask(names: Iterable, test: Callable[[str], object], extra: bool | None = None) -> np.ndarray:
    """``bool(test(name))`` per name, as a read-only array (one more element ``extra`` at the end when given:
    the slot of an unknown metadata id); see :func:`name_values`."""
    return name_values(names, test, bool, extra)


__all__ = ["CACHED_ARRAYS", "CACHED_NAMES", "name_mask", "name_test", "name_values"]
