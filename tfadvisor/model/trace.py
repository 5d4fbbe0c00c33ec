"""The columnar trace model: what the reader produces and every analysis reads.

One :class:`Plane` per XPlane (a host's CPU or one device) holds numpy columns for its
events and their stats; metadata (event and stat names) is kept once per plane and
events refer to it by dense index. A :class:`Trace` is the planes of every host file of
one run, plus the run's metadata file when the capture wrote one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

import tfadvisor._native as _native
import tfadvisor.model.kinds as kinds
from tfadvisor.model.names import host_name
from tfadvisor.model.program import EventFacts
from tfadvisor.model.table import Table, factorize

if TYPE_CHECKING:
    import pandas as pd

# Line names as TF writes them, old and new spellings.
FRAMEWORK_OPS_LINES = ("Framework Ops", "TensorFlow Ops")
FRAMEWORK_SCOPE_LINES = ("Framework Name Scope", "TensorFlow Name Scope")
STEP_LINES = ("Steps",)

_EMPTY = np.empty(0, np.int64)
#: :meth:`Plane.max_end` reads the events this many at a time.
END_SLICE = 1 << 20


@dataclass
class StatColumn:
    """The values of one stat name over a plane's events (event-level, else metadata-level)."""

    plane: Plane
    name: str
    rows: np.ndarray  # event rows (int64), ascending
    kind: np.ndarray  # kinds.KIND_* per value
    raw: np.ndarray  # int64 payload per value

    @classmethod
    def empty(cls, plane: Plane, name: str) -> StatColumn:
        return cls(plane, name, _EMPTY, np.empty(0, np.uint8), _EMPTY)

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Index into this column of each (event) row: -1 where the event lacks the stat."""
        rows = np.asarray(rows, np.int64)
        if len(self) == 0 or rows.size == 0:
            return np.full(rows.shape, -1, np.int64)
        i = np.minimum(np.searchsorted(self.rows, rows), len(self) - 1)
        return np.where(self.rows[i] == rows, i, -1)

    def values_at(self, rows: np.ndarray, integer: bool = False) -> np.ndarray:
        """Values at event rows: float64 with NaN where absent, or with ``integer`` int64 (exact
        for addresses; see :meth:`integers`) with -1 where absent."""
        pos = self.positions(rows)
        missing = -1 if integer else np.nan
        if len(self) == 0:
            return np.full(pos.shape, missing)
        values = self.integers() if integer else self.numeric()
        return np.where(pos >= 0, values[pos], missing)

    def codes(self) -> tuple[np.ndarray, list[str]]:
        """Dense codes for the values, and the string of each code.

        Values stored as references to stat metadata (the usual case for ``tf_op``,
        ``kernel_details``, ``allocator_name``...) are coded by their reference; inline strings
        by their bytes (grouped in C on their FNV-1a hash, compared byte for byte where hashes
        are equal, so a collision never merges two strings), so that no Python loop runs per
        value. Only one value per code is formatted (numbers as text).
        """
        return self.plane.value_codes(self.kind, self.raw)

    def strings_at(self, rows: np.ndarray, missing=None) -> np.ndarray:
        """Values at event rows as str (object array, ``missing`` where absent); only the
        distinct values are formatted."""
        pos = self.positions(rows)
        out = np.full(pos.shape, missing, dtype=object)
        ok = pos >= 0
        if ok.any():
            sel = pos[ok]
            codes, strings = self.plane.value_codes(self.kind[sel], self.raw[sel])
            out[ok] = np.array(strings, dtype=object)[codes]
        return out

    def numeric(self) -> np.ndarray:
        """Values as float64 (NaN for string values)."""
        out = self.raw.astype(np.float64)
        k = self.kind
        dbl = k == kinds.KIND_DOUBLE
        if dbl.any():
            out[dbl] = self.raw[dbl].view(np.float64)
        u = k == kinds.KIND_UINT64
        if u.any():
            out[u] = self.raw[u].view(np.uint64).astype(np.float64)
        s = (k == kinds.KIND_STR) | (k == kinds.KIND_BYTES) | (k == kinds.KIND_REF) | (k == kinds.KIND_NONE)
        if s.any():
            out[s] = np.nan
        return out

    def integers(self) -> np.ndarray:
        """Values as int64 (doubles truncated; strings, and doubles int64 cannot hold, -1)."""
        out = self.raw.copy()
        dbl = self.kind == kinds.KIND_DOUBLE
        if dbl.any():
            d = self.raw[dbl].view(np.float64)
            ok = np.abs(d) < 2.0**63  # False for NaN and inf: no invalid cast
            out[dbl] = np.where(ok, np.where(ok, d, 0.0).astype(np.int64), -1)
        s = (self.kind == kinds.KIND_STR) | (self.kind == kinds.KIND_BYTES) | (self.kind == kinds.KIND_REF)
        out[s] = -1
        return out

    def strings(self) -> np.ndarray:
        """Values as an object array of str (numbers formatted)."""
        return self.plane._stat_strings(self.kind, self.raw)

    def per_event(self, numeric: bool = True) -> np.ndarray:
        """A full-length column over the plane's events (NaN / None where absent)."""
        n = self.plane.n_events
        if numeric:
            out = np.full(n, np.nan)
            out[self.rows] = self.numeric()
        else:
            out = np.full(n, None, dtype=object)
            out[self.rows] = self.strings()
        return out


@dataclass
class Plane:
    """One XPlane as columns."""

    host: str
    id: int
    name: str
    lines: Table  # per line: id, display_id, name, display_name, timestamp_ns, duration_ps, first_event, n_events
    event_names: np.ndarray  # object, by dense metadata index
    event_display_names: np.ndarray  # object, display_name or name
    event_meta_ids: np.ndarray  # original metadata ids, sorted
    stat_names: np.ndarray  # object, by dense stat metadata index
    ev_line: np.ndarray  # row in ``lines``: int8, int16 or int32, the fewest bytes that hold it (reader.index_type)
    ev_meta: np.ndarray  # dense event metadata index (-1 unknown): int8, int16 or int32, as ev_line
    ev_start_ps: np.ndarray  # int64: absolute start, ps
    ev_dur_ps: np.ndarray  # int64
    st_event: np.ndarray  # int32: event row of each stat
    st_stat: np.ndarray  # dense stat metadata index: int8, int16 or int32, as ev_line
    st_kind: np.ndarray  # uint8: kinds.KIND_*
    st_value: np.ndarray  # int64 payload (double bits, ints, ref index, string index); int32 where all fit
    str_pool: np.ndarray  # uint8: bytes of all string values
    str_off: np.ndarray  # int64 offsets into str_pool
    str_len: np.ndarray  # int64
    meta_stats: Table  # metadata-level stats: meta, stat, kind, raw
    stats: dict = field(default_factory=dict)  # plane-level stats by name
    child_ids: dict = field(default_factory=dict)  # dense meta -> list of child dense metas
    kept_stats: frozenset | None = None  # the event-level stat names the reader kept (None: all)
    stats_skipped: int = 0  # event-level stats the reader dropped (not in ``kept_stats``)

    def __repr__(self) -> str:
        return f"<Plane {self.host} {self.name!r}: {len(self.lines)} lines, {self.n_events:,} events>"

    # --- sizes and lookups -------------------------------------------------------
    @property
    def n_events(self) -> int:
        return int(self.ev_start_ps.shape[0])

    @property
    def n_stats(self) -> int:
        return int(self.st_stat.shape[0])

    @property
    def is_device(self) -> bool:
        return self.name.startswith("/device:")

    @property
    def is_host(self) -> bool:
        return self.name.startswith("/host:CPU")

    @cached_property
    def stat_index(self) -> dict[str, int]:
        """Stat name -> its first dense index."""
        n = len(self.stat_names)
        return dict(zip(self.stat_names[::-1].tolist(), range(n - 1, -1, -1)))  # the first index is set last

    def ends(self, rows) -> np.ndarray:
        """End (ps) of the event rows (an index array, a mask or a slice): start + duration, computed where asked
        (a column of every event's end would cost 8 bytes per event for as long as the plane lives)."""
        return self.ev_start_ps[rows] + self.ev_dur_ps[rows]

    def max_end(self) -> int:
        """The latest event end (ps), computed in slices (no column of every end); the plane must have events."""
        step = END_SLICE
        return max(int(self.ends(slice(i, i + step)).max()) for i in range(0, self.n_events, step))

    @cached_property
    def line_names(self) -> np.ndarray:
        """Display name when set, else name, per line."""
        if len(self.lines) == 0:
            return np.empty(0, dtype=object)
        dn = self.lines["display_name"]
        nm = self.lines["name"]
        return np.where(dn != "", dn, nm)

    def nbytes(self) -> int:
        cols = (self.ev_line, self.ev_meta, self.ev_start_ps, self.ev_dur_ps, self.st_event, self.st_stat,
                self.st_kind, self.st_value, self.str_pool, self.str_off, self.str_len)
        return int(sum(c.nbytes for c in cols))

    # --- selecting events ------------------------------------------------------------
    def meta_mask(self, match: str | re.Pattern | Iterable[str] | None = None, *, prefix: str | None = None,
                  display: bool = False) -> np.ndarray:
        """Boolean mask over event metadata: exact names, a regex, or a prefix."""
        names = self.event_display_names if display else self.event_names
        if prefix is not None:
            return np.fromiter((n.startswith(prefix) for n in names), bool, len(names))
        if isinstance(match, re.Pattern):
            return np.fromiter((match.search(n) is not None for n in names), bool, len(names))
        if isinstance(match, str):
            return names == match
        wanted = set(match or ())
        return np.fromiter((n in wanted for n in names), bool, len(names))

    def event_mask(self, meta_mask: np.ndarray) -> np.ndarray:
        """Per-event mask from a metadata mask (unknown metadata never matches)."""
        ext = np.append(meta_mask, False)  # index -1 -> False
        return ext[self.ev_meta]

    def events_named(self, match, **kw) -> np.ndarray:
        """Event rows whose name matches (see :meth:`meta_mask`)."""
        return self.rows_with_meta(self.meta_mask(match, **kw))

    def rows_with_meta(self, meta_mask: np.ndarray) -> np.ndarray:
        """Event rows (ascending) whose metadata is set in ``meta_mask`` (unknown metadata never matches): the
        rows of :meth:`event_mask`, found without a mask of every event."""
        return _native.rows_where(self.ev_meta, meta_mask)

    def line_rows(self, names: Iterable[str] = (), *, prefix: str | None = None) -> np.ndarray:
        """Line indexes whose (display) name is one of ``names`` or starts with ``prefix``."""
        ln = self.line_names
        raw = self.lines["name"]
        wanted = set(names)
        hit = [
            (n in wanted or r in wanted or (prefix is not None and (n.startswith(prefix) or r.startswith(prefix))))
            for n, r in zip(ln, raw)
        ]
        return np.flatnonzero(np.array(hit, dtype=bool))

    def rows_on_lines(self, line_rows: np.ndarray) -> np.ndarray:
        """Event rows (ascending) on the lines ``line_rows``, found without a mask of every event."""
        sel = np.zeros(len(self.lines) + 1, dtype=bool)
        sel[np.asarray(line_rows, dtype=np.int64)] = True
        return _native.rows_where(self.ev_line, sel)

    def on_lines(self, rows: np.ndarray, line_rows: np.ndarray) -> np.ndarray:
        """Per event row of ``rows``, whether it lies on one of the lines ``line_rows``: a look-up of each row's line
        (``np.isin`` would compare every row with every line)."""
        li = np.asarray(line_rows, dtype=np.int64)
        sel = np.zeros(len(self.lines) + 1, dtype=bool)
        sel[li[(li >= 0) & (li < len(self.lines))]] = True
        return sel[self.ev_line[rows]]

    def timed_rows_on_lines(self, line_rows: np.ndarray) -> np.ndarray:
        """:meth:`rows_on_lines` of known metadata and a positive duration (tested a slice of rows at a time: no
        column of every row's duration)."""
        rows = self.rows_on_lines(line_rows)
        keep = np.empty(rows.shape[0], bool)
        for i in range(0, rows.shape[0], END_SLICE):
            r = rows[i:i + END_SLICE]
            keep[i:i + END_SLICE] = (self.ev_meta[r] >= 0) & (self.ev_dur_ps[r] > 0)
        return rows if bool(keep.all()) else rows[keep]

    def names_of(self, rows: np.ndarray) -> np.ndarray:
        ext = np.append(self.event_names, "<unknown>")
        return ext[self.ev_meta[rows]]

    # --- stats ----------------------------------------------------------------------
    @cached_property
    def stats_by_event(self) -> bool:
        """Whether the stat columns are ordered by event (as the reader writes them)."""
        se = self.st_event
        return bool(se.shape[0] < 2 or np.all(se[1:] >= se[:-1]))

    def stat(self, name: str, rows: np.ndarray | None = None, *, metadata_level: bool = True) -> StatColumn:
        """All values of stat ``name`` (or those of the given event rows): event-level, falling
        back to the event's metadata. See :meth:`stat_columns`."""
        return self.stat_columns((name,), rows, metadata_level=metadata_level)[name]

    def stat_columns(self, names: Iterable[str], rows: np.ndarray | None = None, *,
                     metadata_level: bool = True) -> dict[str, StatColumn]:
        """Stat columns for several names in one pass over the plane's stats.

        With ``rows`` (event rows), only the values of those events: as the stats are stored
        in event order, a few rows of a big plane are found by binary search instead of a pass
        over every stat. Event-level values win; where an event has none, its metadata's
        value (with ``metadata_level``).
        """
        names = list(dict.fromkeys(names))
        if self.kept_stats is not None and not self.kept_stats.issuperset(names):
            missing = sorted(set(names) - self.kept_stats)
            raise KeyError(f"stat(s) {missing} were not kept by the reader: an analysis reads them without "
                           "declaring them in its module's EVENT_STATS")
        out = {n: StatColumn.empty(self, n) for n in names}
        sids = {n: self.stat_index[n] for n in names if n in self.stat_index}
        if rows is not None:
            rows = np.asarray(rows, np.int64)
            if rows.shape[0] > 1 and not bool(np.all(rows[1:] > rows[:-1])):
                rows = np.unique(rows)
            if rows.shape[0] == 0:
                return out
            if rows.shape[0] * 50 > self.n_events or not self.stats_by_event:
                # many rows (or stats out of event order): a pass over the plane, then keep the rows
                keep = np.zeros(self.n_events, bool)
                keep[rows] = True
                for n, col in self.stat_columns(list(sids), metadata_level=metadata_level).items():
                    k = keep[col.rows]
                    out[n] = StatColumn(self, n, col.rows[k], col.kind[k], col.raw[k])
                return out
        for n, sel in zip(sids, self._stat_positions(list(sids.values()), rows)):
            ev = self.st_event[sel].astype(np.int64)
            kind, raw = self.st_kind[sel], self.st_value[sel].astype(np.int64, copy=False)  # the reader may narrow
            if ev.shape[0] > 1 and not bool(np.all(ev[1:] >= ev[:-1])):
                o = np.argsort(ev, kind="stable")
                ev, kind, raw = ev[o], kind[o], raw[o]
            if metadata_level:
                ev, kind, raw = self._with_metadata_stats(sids[n], ev, kind, raw, rows)
            out[n] = StatColumn(self, n, ev, kind, raw)
        return out

    def _stat_positions(self, sids: list[int], among: np.ndarray | None) -> list[np.ndarray]:
        """For each stat id, its positions in the stat columns (of the events ``among`` only)."""
        if not sids:
            return []
        if among is None:
            if len(sids) == 1:
                return [np.flatnonzero(self.st_stat == sids[0])]
            lut = np.full(len(self.stat_names) + 1, -1, np.int32)
            lut[sids] = np.arange(len(sids), dtype=np.int32)
            slot = lut[self.st_stat]
            idx = np.flatnonzero(slot >= 0)
            sl = slot[idx]
            order = np.argsort(sl, kind="stable")
            idx, sl = idx[order], sl[order]
            bounds = np.searchsorted(sl, np.arange(len(sids) + 1))
            return [idx[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        st_event = self.st_event
        q = among.astype(st_event.dtype)  # same dtype: else numpy converts the whole stat column
        lo = np.searchsorted(st_event, q, side="left")
        n = np.searchsorted(st_event, q, side="right") - lo
        tot = int(n.sum())
        if tot == 0:
            return [_EMPTY for _ in sids]
        # all stat positions of the rows: lo[i] .. lo[i] + n[i] - 1, vectorised
        idx = np.repeat(lo - np.concatenate([[0], np.cumsum(n)[:-1]]), n) + np.arange(tot)
        sid_of = self.st_stat[idx]
        return [idx[sid_of == sid] for sid in sids]

    def metadata_stat_values(self, sid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(event metadata index, kind, raw) of the metadata-level values of stat id ``sid``, or None."""
        ms = self.meta_stats
        if not len(ms):
            return None
        sel = ms["stat"] == sid
        if not sel.any():
            return None
        return ms["meta"][sel], ms["kind"][sel], ms["raw"][sel]

    def _with_metadata_stats(self, sid: int, rows: np.ndarray, kind: np.ndarray, raw: np.ndarray,
                             among: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Add the metadata-level values of a stat for the events (all, or ``among``) that have
        no event-level value (``rows``, ascending); the result stays in event order."""
        md = self.metadata_stat_values(sid)
        if md is None:
            return rows, kind, raw
        metas, mkind, mraw = md
        nm = len(self.event_names) + 1  # the last entry: unknown metadata (-1)
        has = np.zeros(nm, bool)
        lut_kind = np.zeros(nm, np.uint8)
        lut_raw = np.zeros(nm, np.int64)
        has[metas] = True
        lut_kind[metas] = mkind
        lut_raw[metas] = mraw
        if among is None:
            ev_has = has[self.ev_meta]
            if rows.shape[0]:
                ev_has[rows] = False  # event-level values win
            extra = np.flatnonzero(ev_has)
        else:
            extra = among[has[self.ev_meta[among]] & ~np.isin(among, rows)]
        if extra.shape[0] == 0:
            return rows, kind, raw
        em = self.ev_meta[extra]
        rows = np.concatenate([rows, extra])
        kind = np.concatenate([kind, lut_kind[em]])
        raw = np.concatenate([raw, lut_raw[em]])
        order = np.argsort(rows, kind="stable")
        return rows[order], kind[order], raw[order]

    def has_stat(self, name: str) -> bool:
        return name in self.stat_index

    def string_at(self, index: int) -> str:
        o = int(self.str_off[index])
        return bytes(self.str_pool[o : o + int(self.str_len[index])]).decode("utf-8", "replace")

    def value_codes(self, kind: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """Dense codes for stat values (kind, raw), and the string of each code (see
        :meth:`StatColumn.codes`)."""
        n = kind.shape[0]
        if n == 0:
            return np.empty(0, np.int64), []
        if n <= SMALL_VALUE_CODES:
            small = self._value_codes_small(kind, raw)
            if small is not None:
                return small
        is_ref = kind == kinds.KIND_REF
        is_str = (kind == kinds.KIND_STR) | (kind == kinds.KIND_BYTES)
        key = raw.astype(np.int64, copy=False)
        # Factorise each key space separately: references, inline strings, numbers of each kind.
        space = np.where(is_ref, 0, np.where(is_str, 1, 2 + kind.astype(np.int64)))
        codes = np.empty(n, np.int64)
        first_parts = []
        offset = 0
        for sp in np.unique(space):
            sel = np.flatnonzero(space == sp)
            if sp == 1:  # inline strings, by their bytes: the hash places them, equal hashes are compared
                off, ln = self.str_off[key[sel]], self.str_len[key[sel]]
                c, first = _str_groups(self.str_pool, off, ln, _fnv1a(self.str_pool, off, ln))
            else:
                c, _ = factorize(key[sel])
                # factorize numbers codes by first appearance: a code is new where it exceeds all before.
                new = np.ones(sel.size, bool)
                new[1:] = c[1:] > np.maximum.accumulate(c)[:-1]
                first = np.flatnonzero(new)
            codes[sel] = c + offset
            first_parts.append(sel[first])
            offset += len(first)
        first = np.concatenate(first_parts)
        return codes, list(self._stat_strings(kind[first], raw[first]))

    def _value_codes_small(self, kind: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
        """:meth:`value_codes` of a few values in one Python pass (the same codes: key spaces in the same
        order, each numbered by first appearance); None where an inline string lies outside the pool (the
        general path reports it)."""
        pool, off, ln = self.str_pool, self.str_off, self.str_len
        size = pool.shape[0]
        ref, s1, s2 = kinds.KIND_REF, kinds.KIND_STR, kinds.KIND_BYTES
        groups: dict[int, dict] = {}  # key space -> key -> (code within the space, first index)
        local = []
        for i, (k, v) in enumerate(zip(kind.tolist(), raw.tolist())):
            if k == ref:
                sp, key = 0, v
            elif k == s1 or k == s2:
                if not 0 <= v < off.shape[0]:
                    return None
                o, m = int(off[v]), int(ln[v])
                if m > 0 and (o < 0 or o + m > size):
                    return None
                sp, key = 1, (pool[o:o + m].tobytes() if m > 0 else b"")
            else:
                sp, key = 2 + k, v
            g = groups.setdefault(sp, {})
            c = g.get(key)
            if c is None:
                c = g[key] = (len(g), i)
            local.append((sp, c[0]))
        base, firsts = {}, []
        for sp in sorted(groups):
            base[sp] = len(firsts)
            firsts.extend(i for _, i in groups[sp].values())
        codes = np.array([base[sp] + c for sp, c in local], np.int64)
        first = np.array(firsts, np.int64)
        return codes, list(self._stat_strings(kind[first], raw[first]))

    def _stat_strings(self, kind: np.ndarray, raw: np.ndarray) -> np.ndarray:
        out = np.empty(len(raw), dtype=object)
        for i, (k, v) in enumerate(zip(kind.tolist(), raw.tolist())):
            if k == kinds.KIND_STR or k == kinds.KIND_BYTES:
                out[i] = self.string_at(v)
            elif k == kinds.KIND_REF:
                out[i] = self.stat_names[v] if 0 <= v < len(self.stat_names) else ""
            elif k == kinds.KIND_DOUBLE:
                out[i] = repr(float(np.int64(v).view(np.float64)))
            elif k == kinds.KIND_UINT64:
                out[i] = str(int(np.int64(v).view(np.uint64)))
            else:
                out[i] = str(v)
        return out

    # --- tables ---------------------------------------------------------------------
    def events(self, rows: np.ndarray | None = None) -> pd.DataFrame:
        """Events as a DataFrame (name categorical); all events or the given rows. ``line`` and ``meta`` are int64
        whatever the columns' width (a user's arithmetic on them must not wrap)."""
        import pandas as pd

        sel = slice(None) if rows is None else rows
        df = pd.DataFrame(
            {
                "line": self.ev_line[sel].astype(np.int64),
                "meta": self.ev_meta[sel].astype(np.int64),
                "name": self.names_of(np.arange(self.n_events) if rows is None else rows),
                "start_ps": self.ev_start_ps[sel],
                "duration_ps": self.ev_dur_ps[sel],
            }
        )
        if rows is not None:
            df.index = np.asarray(rows)
        return df


#: Up to this many stat values, :meth:`Plane.value_codes` codes them in one Python pass (a dict beats the
#: numpy passes' fixed cost on the few copies or samples of a small plane).
SMALL_VALUE_CODES = 64

#: ``_fnv1a(pool, off, ln)``: the 64-bit FNV-1a hash (int64) of each string ``pool[off[i]:off[i] + ln[i]]``.
_fnv1a = _native.fnv1a
#: ``_str_groups(pool, off, ln, hashes) -> (codes, first)``: the strings ``pool[off[i]:off[i] + ln[i]]`` grouped by
#: their bytes: ``codes`` numbered by first appearance (as :func:`factorize`), ``first[k]`` the index of code ``k``'s
#: first string. ``hashes`` (:func:`_fnv1a`'s) only place the strings in the lookup table: strings of equal hashes
#: are compared byte for byte, so a collision keeps two different strings apart.
_str_groups = _native.str_groups


@dataclass
class Trace:
    """All planes of one run (one or more hosts)."""

    planes: list[Plane]
    files: list[str]
    run_name: str = ""
    run_dir: str = ""
    run_metadata: dict = field(default_factory=dict)
    #: what the TensorBoard event files beside the profile say of the program (tfadvisor.io.events)
    events: EventFacts = field(default_factory=EventFacts)
    hostnames: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    file_bytes: int = 0
    load_notes: dict[str, list[str]] = field(default_factory=dict)  # host -> what loading had to fix

    def __repr__(self) -> str:
        lo, hi = self.time_span_ps()
        lines = sum(len(p.lines) for p in self.planes)
        name = self.run_name or self.run_dir or "?"
        return (f"<Trace {name!r}: {len(self.hosts)} host(s), {len(self.planes)} planes, {lines} lines, "
                f"{self.n_events:,} events, {(hi - lo) / 1e9:.4g} ms>")

    @property
    def hosts(self) -> list[str]:
        seen: dict[str, None] = {}
        for p in self.planes:
            seen.setdefault(p.host, None)
        return list(seen)

    def host(self, name: str) -> Trace:
        """The part of this trace that came from one host file."""
        return Trace(
            planes=[p for p in self.planes if p.host == name],
            files=[f for f in self.files if host_name(f) == name],
            run_name=self.run_name,
            run_dir=self.run_dir,
            run_metadata=self.run_metadata,
            events=self.events,
            load_notes={name: list(self.load_notes[name])} if name in self.load_notes else {},
        )

    def planes_named(self, prefix: str) -> list[Plane]:
        return [p for p in self.planes if p.name.startswith(prefix)]

    @property
    def host_planes(self) -> list[Plane]:
        return self.planes_named("/host:CPU")

    @property
    def device_planes(self) -> list[Plane]:
        return [p for p in self.planes if p.name.startswith("/device:") and "CUSTOM" not in p.name]

    @property
    def n_events(self) -> int:
        return sum(p.n_events for p in self.planes)

    def time_span_ps(self) -> tuple[int, int]:
        """(first event start, last event end) over all planes, in ps."""
        lo, hi = None, None
        for p in self.planes:
            if p.n_events:
                a = int(p.ev_start_ps.min())
                b = p.max_end()
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        return (lo or 0, hi or 0)

    def summary(self) -> dict:
        """What was loaded: hosts, planes, lines, events, time span."""
        lo, hi = self.time_span_ps()
        return {
            "run": self.run_name,
            "run_dir": self.run_dir,
            "files": list(self.files),
            "file_bytes": self.file_bytes,
            "hosts": self.hosts,
            "events": self.n_events,
            "time_span_ms": (hi - lo) / 1e9,
            "planes": [
                {
                    "host": p.host,
                    "name": p.name,
                    "lines": len(p.lines),
                    "events": p.n_events,
                    "stats": p.n_stats + p.stats_skipped,  # those the reader skipped too: the plane's own
                    "line_names": [str(n) for n in p.line_names],
                }
                for p in self.planes
            ],
        }
