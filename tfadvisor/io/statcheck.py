"""Stat values range-checked as they are loaded, so that no analysis turns an absurd one into a figure.

Each value of a stat the analyses read (:data:`tfadvisor.model.values.EVENT_STATS`, at event and event
metadata level; :data:`~tfadvisor.model.values.PLANE_STATS` at plane level) is checked against what the
stat holds: a non-finite double, a value past int64 (a uint64 above it, a double at 2**63 or more), a
negative size or count, or a value of the wrong type (text where a number belongs, a number where a name
does) is dropped, as if the writer had not set it, with one ``load:`` note per kind of problem naming the
stats and a value. Values of the right type and range, of every other stat, are untouched; so is every
sane profile.

Only the rows whose kind can be wrong for their stat are looked at (one lookup per stat row, in numpy);
text is parsed once per distinct value.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

import tfadvisor.model.kinds as kinds
from tfadvisor.model.trace import Plane
from tfadvisor.model.values import (
    EVENT_STATS,
    NEGATIVE,
    NOT_FINITE,
    PAST_INT64,
    PLANE_STATS,
    TWO_63,
    WRONG_TYPE,
    Expect,
    problem,
)

_NUMBERS = (kinds.KIND_DOUBLE, kinds.KIND_UINT64, kinds.KIND_INT64)
_TEXTS = (kinds.KIND_STR, kinds.KIND_BYTES, kinds.KIND_REF)
_N_KINDS = max(kinds.KIND_NONE, kinds.KIND_DOUBLE, kinds.KIND_UINT64, kinds.KIND_INT64, kinds.KIND_STR,
               kinds.KIND_BYTES, kinds.KIND_REF, kinds.KIND_GZIP) + 1
#: The note of each problem (``{n}`` values, ``{examples}``).
_NOTES = {
    NOT_FINITE: "{n:,} stat value(s) that are not finite numbers ({examples}): ignored",
    PAST_INT64: "{n:,} stat value(s) past int64 ({examples}): ignored",
    NEGATIVE: "{n:,} negative stat value(s) where a size or count is expected ({examples}): ignored",
    WRONG_TYPE: "{n:,} stat value(s) of the wrong type ({examples}): ignored",
}
_EXAMPLES = 3


class Found:
    """The values dropped so far, per problem: how many, and a value of each stat (the first few stats)."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}
        self.examples: dict[str, dict[str, str]] = {}

    def add(self, what: str, n: int, stat: str, value: str, expect: Expect) -> None:
        if n <= 0:
            return
        self.count[what] = self.count.get(what, 0) + n
        ex = self.examples.setdefault(what, {})
        if stat not in ex and len(ex) < _EXAMPLES:
            want = "" if what != WRONG_TYPE else " where text is expected" if expect.kind == "text" else \
                " where a number is expected"
            ex[stat] = f"{stat} = {value}{want}"

    def notes(self) -> list[str]:
        return [_NOTES[w].format(n=self.count[w], examples=", ".join(self.examples[w].values()))
                for w in (NOT_FINITE, PAST_INT64, NEGATIVE, WRONG_TYPE) if self.count.get(w)]


def check_stats(planes: Iterable[Plane]) -> list[str]:
    """Drop the out-of-range values of the stats the analyses read from ``planes`` (in place); return the notes
    on what was dropped."""
    found = Found()
    for p in planes:
        _plane_level(p, found)
        _event_level(p, found)
        _metadata_level(p, found)
    return found.notes()


def _plane_level(p: Plane, found: Found) -> None:
    for name in [n for n in p.stats if n in PLANE_STATS]:
        v = p.stats[name]
        what = problem(v, PLANE_STATS[name])
        if what is not None:
            found.add(what, 1, name, _shown(v), PLANE_STATS[name])
            del p.stats[name]


def _event_level(p: Plane, found: Found) -> None:
    bad = _bad_rows(p, p.st_stat, p.st_kind, p.st_value, found)
    if bad is None:
        return
    keep = np.ones(p.st_kind.shape[0], bool)
    keep[bad] = False
    p.st_event = p.st_event[keep]
    p.st_stat = p.st_stat[keep]
    p.st_kind = p.st_kind[keep]
    p.st_value = p.st_value[keep]


def _metadata_level(p: Plane, found: Found) -> None:
    ms = p.meta_stats
    if not len(ms):
        return
    bad = _bad_rows(p, ms["stat"], ms["kind"], ms["raw"], found)
    if bad is None:
        return
    keep = np.ones(len(ms), bool)
    keep[bad] = False
    p.meta_stats = ms.take(np.flatnonzero(keep))  # the table is shared with other planes: a new one


_TEXT, _ID, _NUMBER = 1, 2, 3
_CLASS = {"text": _TEXT, "id": _ID, "number": _NUMBER}
_CODE = {NOT_FINITE: 1, PAST_INT64: 2, NEGATIVE: 3, WRONG_TYPE: 4}
_PROBLEM = {c: w for w, c in _CODE.items()}


def _lookup(p: Plane) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, Expect]] | None:
    """Per dense stat id (a last entry for unknown ids, -1): per value kind, whether a value of that kind may be wrong
    for the stat; its class (0: not checked); its least value (-inf: any); and each checked id's :class:`Expect`.
    Only the ids the analyses read (``Plane.stat_index``: the first of a name) are checked. None where none is."""
    index = p.stat_index
    spec = {index[n]: e for n, e in EVENT_STATS.items() if n in index}
    if not spec:
        return None
    n = len(p.stat_names) + 1
    look = np.zeros((n, _N_KINDS), bool)
    cls = np.zeros(n, np.uint8)
    lo = np.full(n, -np.inf)
    for sid, e in spec.items():
        cls[sid] = _CLASS[e.kind]
        if e.kind == "text":
            look[sid, list(_NUMBERS)] = True
            continue
        look[sid, [kinds.KIND_DOUBLE, *_TEXTS]] = True
        if e.kind == "number":
            look[sid, kinds.KIND_UINT64] = True
            if e.lo is not None:
                look[sid, kinds.KIND_INT64] = True
                lo[sid] = e.lo
    return look, cls, lo, spec


def _bad_rows(p: Plane, stat: np.ndarray, kind: np.ndarray, raw: np.ndarray, found: Found) -> np.ndarray | None:
    """The rows (of the given stat columns) whose value is wrong for its stat; None where there are none. One lookup
    per row finds the few whose kind may be wrong for their stat; only those are looked at."""
    if not kind.shape[0]:
        return None
    got = _lookup(p)
    if got is None:
        return None
    look, cls_of, lo_of, spec = got
    cand = np.flatnonzero(look[stat, kind])  # an unknown stat id (-1) reads the last row: never looked at
    if not cand.shape[0]:
        return None
    c_stat = stat[cand].astype(np.int64)
    c_kind = kind[cand]
    c_raw = raw[cand].astype(np.int64, copy=False)
    cls, lo = cls_of[c_stat], lo_of[c_stat]
    code = np.zeros(cand.shape[0], np.int8)
    is_num = (c_kind == kinds.KIND_DOUBLE) | (c_kind == kinds.KIND_UINT64) | (c_kind == kinds.KIND_INT64)
    code[is_num & (cls == _TEXT)] = _CODE[WRONG_TYPE]
    dbl = np.flatnonzero((c_kind == kinds.KIND_DOUBLE) & (cls != _TEXT))
    if dbl.shape[0]:
        d = c_raw[dbl].view(np.float64)
        fin = np.isfinite(d)
        mag = np.abs(np.where(fin, d, 0.0))
        code[dbl] = np.where(~fin, _CODE[NOT_FINITE], np.where(mag >= TWO_63, _CODE[PAST_INT64],
                                                                np.where(d < lo[dbl], _CODE[NEGATIVE], 0)))
    number = cls == _NUMBER
    code[number & (c_kind == kinds.KIND_UINT64) & (c_raw < 0)] = _CODE[PAST_INT64]  # its int64 bits negative
    code[number & (c_kind == kinds.KIND_INT64) & (c_raw < lo)] = _CODE[NEGATIVE]
    txt = np.flatnonzero(~is_num & (c_kind != kinds.KIND_NONE))  # text for a number or an id: parsed once each
    if txt.shape[0]:
        t_stat = c_stat[txt]
        for sid in np.unique(t_stat).tolist():
            sel = txt[t_stat == sid]
            codes, strings = p.value_codes(c_kind[sel], c_raw[sel])
            per = np.array([_CODE.get(problem(v, spec[sid]), 0) for v in strings], np.int8)
            code[sel] = per[codes]
    bad = np.flatnonzero(code)
    if not bad.shape[0]:
        return None
    # the notes: per problem, how many, and the first value of each stat
    b_stat, b_code = c_stat[bad], code[bad]
    key = b_code.astype(np.int64) * (len(p.stat_names) + 1) + b_stat
    _, first, count = np.unique(key, return_index=True, return_counts=True)
    for i, k in zip(first.tolist(), count.tolist()):
        j = bad[i]
        sid = int(c_stat[j])
        found.add(_PROBLEM[int(code[j])], int(k), str(p.stat_names[sid]),
                  _shown_raw(p, int(c_kind[j]), int(c_raw[j])), spec[sid])
    return cand[bad]


def _shown_raw(p: Plane, kind: int, raw: int) -> str:
    if kind in _TEXTS:
        return _shown(str(p._stat_strings(np.array([kind], np.uint8), np.array([raw], np.int64))[0]))
    if kind == kinds.KIND_DOUBLE:
        return repr(float(np.int64(raw).view(np.float64)))
    if kind == kinds.KIND_UINT64:
        return str(int(np.int64(raw).view(np.uint64)))
    return str(raw)


def _shown(v: object) -> str:
    text = repr(v) if isinstance(v, (str, bytes)) else str(v)
    return text if len(text) <= 40 else text[:37] + "..."


__all__ = ["check_stats"]
