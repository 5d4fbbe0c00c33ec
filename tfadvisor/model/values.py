"""What the stats the analyses read may hold, and the one conversion of a stat value to a number.

A valid file may give any stat any value: ``inf`` for a batch size, ``2**64 - 1`` for a byte count, a
negative parallelism, text where a number belongs. :data:`EVENT_STATS` and :data:`PLANE_STATS` say what
each stat the analyses read holds:

* ``text``: a name (``tf_op``, ``memcpy_details``...): a number there is of the wrong type;
* ``id``: an integer compared for equality only (``_p``/``_c``, ``addr``, ``step_id``): any 64-bit value
  (a uint64 above int64 is kept as its bits), a double only where finite and within int64;
* ``number``: a figure (sizes, counts, batch sizes): finite, at least ``lo`` (0 for sizes and counts),
  at most int64's largest; text only where it spells such a number or is one of ``words`` (what TF writes
  in place of a value it could not read, ``unavailable``).

The reader checks every value of these stats as it loads them (:mod:`tfadvisor.io.statcheck`) and drops
those out of range, with a ``load:`` note; :func:`as_number` and :func:`as_int` are the conversions
the analyses use on a stat value (a plane stat, a value formatted as text), which never raise, and
:func:`to_int64` casts figures computed from them (a count times a batch size) without overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INT64_MAX = 2**63 - 1
#: Doubles at or past this magnitude do not fit in int64.
TWO_63 = 2.0**63

#: What :func:`problem` finds wrong with a value.
NOT_FINITE, PAST_INT64, NEGATIVE, WRONG_TYPE = "not finite", "past int64", "negative", "wrong type"


@dataclass(frozen=True)
class Expect:
    """What one stat holds: ``kind`` ``text``, ``id`` or ``number``; a number's least value ``lo`` (None: any)
    and the ``words`` a writer may put in place of one."""

    kind: str
    lo: int | None = 0
    words: tuple[str, ...] = ()


TEXT, ID = Expect("text"), Expect("id")
COUNT = Expect("number", 0)  # sizes and counts
ANY_NUMBER = Expect("number", None)
#: tf.data's iterator stats: -1 where the value was not read (AUTOTUNE), ``unavailable`` where TF says so
_TFDATA = Expect("number", -1, ("unavailable",))

#: Event-level (and event-metadata-level) stats the analyses read (every module's ``EVENT_STATS``).
EVENT_STATS: dict[str, Expect] = {
    # names
    **dict.fromkeys(("tf_function_call", "memcpy_details", "eager_op", "name", "hlo_module", "hlo_op", "tf_op",
                     "tensor_shapes", "allocator_name", "shape", "region_type"), TEXT),
    # ids: compared, never added up
    **dict.fromkeys(("_p", "_c", "addr", "program_id", "step_id"), ID),
    # sizes and counts
    **dict.fromkeys(("step_num", "iter_num", "group_id", "tracing_count", "index_on_host", "bytes_allocated",
                     "bytes_reserved", "bytes_available", "peak_bytes_in_use", "requested_bytes", "allocation_bytes",
                     "fragmentation", "data_type", "flops", "bytes_accessed", "batch_size", "cpu_budget",
                     "threadpool_size", "is_func"), COUNT),
    "autotune": Expect("number", 0, ("true", "false")),
    **dict.fromkeys(("parallelism", "buffer_limit", "buffered_elements"), _TFDATA),
    "_r": ANY_NUMBER,
}

#: Plane-level stats the analyses read.
PLANE_STATS: dict[str, Expect] = {
    **dict.fromkeys(("profile_start_time", "profile_stop_time", "compute_cap_major", "compute_cap_minor",
                     "core_count", "clock_rate", "memory_bandwidth", "memory_size", "peak_teraflops_per_second",
                     "peak_hbm_bw_gigabytes_per_second"), COUNT),
    "device_vendor": TEXT,
}


def _parse(text: str) -> int | float | None:
    """The number ``text`` spells (an int exactly, else a float), or None."""
    s = text.strip()
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return None


def problem(v: object, expect: Expect) -> str | None:
    """What is wrong with stat value ``v`` (a Python or numpy scalar, text, bytes) for a stat that holds
    ``expect``: :data:`NOT_FINITE`, :data:`PAST_INT64`, :data:`NEGATIVE`, :data:`WRONG_TYPE`; None where
    it is fine (None itself, a value never set, is)."""
    if v is None:
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        v = bytes(v).decode("utf-8", "replace")
    is_text = isinstance(v, str)
    if expect.kind == "text":
        return None if is_text else WRONG_TYPE
    if is_text:
        if expect.words and v.strip().lower() in expect.words:
            return None
        v = _parse(v)
        if v is None:
            return WRONG_TYPE
    elif isinstance(v, bool) or not hasattr(v, "__float__"):
        return WRONG_TYPE
    if not isinstance(v, int):
        if hasattr(v, "dtype") and v.dtype.kind in "iu":  # numpy integers: exact
            v = int(v)
        else:
            f = float(v)
            if not math.isfinite(f):
                return NOT_FINITE
            if abs(f) >= TWO_63:
                return PAST_INT64
            v = f
    if expect.kind == "id":
        return None if -(2**63) <= v < 2**64 else PAST_INT64
    if v > INT64_MAX or v < -(2**63):
        return PAST_INT64
    if expect.lo is not None and v < expect.lo:
        return NEGATIVE
    return None


def _scalar(v: object) -> object:
    """``v`` with text (or bytes) that spells a number read as that number; None for None, a bool, or text that
    spells none."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (bytes, bytearray)):
        v = bytes(v).decode("utf-8", "replace")
    return _parse(v) if isinstance(v, str) else v


def as_number(v: object, lo: float | None = None, hi: float = INT64_MAX) -> float | None:
    """``v`` (a number of any type, or text that spells one) as a finite float within ``lo``..``hi``; None
    otherwise (NaN, inf, out of range, not a number, a bool). Never raises."""
    v = _scalar(v)
    if v is None:
        return None
    try:
        f = float(v)  # a Python int past float's range raises OverflowError
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(f) or f > hi or (lo is not None and f < lo):
        return None
    return f


def as_int(v: object, lo: int | None = None, hi: int = INT64_MAX) -> int | None:
    """``v`` as an int (a float truncated toward zero) within ``lo``..``hi`` (int64's range by default); None
    where it is not a finite number, lies outside, or is not a number at all. Never raises."""
    v = _scalar(v)
    if v is None:
        return None
    if hasattr(v, "dtype") and v.dtype.kind in "iu":  # numpy integers: exact
        v = int(v)
    if isinstance(v, int):
        n = v
    else:
        f = as_number(v, None, float("inf"))
        if f is None or abs(f) >= TWO_63:
            return None
        n = int(f)
    if n > hi or n < (-INT64_MAX - 1 if lo is None else lo):
        return None
    return n


#: The largest float64 below 2**63: the most a float column holds that int64 can.
_FLOAT_INT64_MAX = float(2**63 - 1024)


def to_int64(a, missing: int = 0) -> np.ndarray:
    """Figures computed from stat values (float64; a count times a batch size) as int64: clipped to int64's range
    (a float at 2**63 or more has no int64: numpy would warn and write garbage), ``missing`` where NaN."""
    a = np.asarray(a, np.float64)
    return np.where(np.isnan(a), float(missing), np.clip(a, -_FLOAT_INT64_MAX, _FLOAT_INT64_MAX)).astype(np.int64)


__all__ = ["ANY_NUMBER", "COUNT", "EVENT_STATS", "Expect", "ID", "INT64_MAX", "NEGATIVE", "NOT_FINITE", "PAST_INT64",
           "PLANE_STATS", "TEXT", "WRONG_TYPE", "as_int", "as_number", "problem", "to_int64"]
