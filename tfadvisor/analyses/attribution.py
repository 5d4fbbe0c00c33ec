"""Where every millisecond went: the window and each step split into named parts that sum to 100 %,
for the run as a whole and for each device on its own, with the ops, kernels and Python functions
that took each part.

Scopes: the ``window`` (the traced span) and, when there are steps, each step from its start to the
next step's start (wall clock, what Keras prints as ms/step; the last step ends where its marker ends).

Lanes and their parts (each instant goes to the first part that covers it):

* ``all``, the run: device work by op category (:data:`OP_CATEGORIES`, in that order; on a CPU-only
  trace the TF ops on the host, which is the device there) > ``input`` (host-to-device copies, waits
  for the next batch) > ``between_steps`` (from a step's marker end to the next step's start:
  callbacks, logging, the loop's Python; in a Keras marker also the time after the train function's work
  ends, where Keras runs the batch-end hooks: :func:`~tfadvisor.analyses.step_detect.work_ends`) > ``runtime``
  (kernel launches, function calls, eager dispatch, the TF executor) > ``host_ops`` (TF ops on the host beside a
  device) > ``python`` (Python-side work the trace records) > ``idle`` (nothing traced). Window time before the first or
  after the last step is ``outside_steps``.
* each device (``GPU:0``, ``TPU:1``): its own activity (kernels, copies, XLA ops) by op category,
  the rest ``idle``. Devices are never merged: each is its own lane. A kernel's category is its name's
  or, where it comes first, that of the XLA op it runs for (``hlo_op``): an attention call's buffer
  fills are attention time.

Items: per lane and part, the ops (kernels, XLA ops, TF op types) with their summed time, count and
mean; Python functions (``$file:line name`` events of JAX's and TF's Python tracer) by self time
(their time less that of the events nested in them). Item shares are of the lane's busy time.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, replace

import numpy as np

import tfadvisor._native as _native
from tfadvisor.analyses import device_lines as dl
from tfadvisor.analyses.activity import DEVICE_H2D_RE, PYTHON_FRAME_PREFIX, TF_OP_RE, Activity
from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.names import CACHED_NAMES, name_test
from tfadvisor.analyses.opcost import INPUT_OPS, category, display_type, kernel_type
from tfadvisor.analyses.placement import op_type
from tfadvisor.analyses.step_detect import StepSet, work_ends
from tfadvisor.analyses.steps import python_host_activity, training_steps, wall_ends
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.spans import rowsets
from tfadvisor.spans.intervals import (
    EMPTY,
    Measure,
    complement,
    outermost,
    priority_split,
    priority_split_lanes,
    run_bounds,
)
from tfadvisor.spans.rowsets import RowSet, line_sets, row_set

#: Op categories, in the order they take an instant two of them share.
OP_CATEGORIES = ("collective", "matrix", "data_movement", "optimizer", "gather_scatter", "custom_call",
                 "elementwise")
#: Every part of the ``all`` lane, in report order.
PARTS = OP_CATEGORIES + ("input", "between_steps", "runtime", "host_ops", "python", "idle", "outside_steps")
#: How many items each lane and part keeps.
TOP_ITEMS = 5
#: The metrics that name items, and the spread of the devices' own splits (the ``attribution`` table's device lanes):
#: left out on a host compared only (:attr:`tfadvisor.analyses.base.Context.detail`).
DETAIL_METRICS = ("attr_top_items", "attr_python_top", "attr_python_top_pct", "attr_device_busy_spread_pct",
                  *(f"attr_{c}_items" for c in PARTS))
#: A Python frame event: ``$file.py:123 function``.
_FRAME_RE = re.compile(r"^\$(?P<file>[^:\s]*):(?P<line>\d+) (?P<fn>.*)$")
#: A Python-tracer event of a C function: ``$module function`` (``$<unknown> sort``).
_CFUNC_RE = re.compile(r"^\$(?P<mod>\S*) (?P<fn>.+)$")
#: The stat a device kernel names the XLA op it runs for with (JAX/XLA on GPU): the kernel is part of that op.
KERNEL_OP_STAT = "hlo_op"
EVENT_STATS = (KERNEL_OP_STAT,)

DECLARED = declare(
    "attribution",
    ("attr_basis", "", "what the shares are of: `steps` (the steps' wall time, start to next start) or `window` "
                       "(the traced span, when there are no steps)"),
    ("attr_wall_ms", "ms", "the wall time the shares are of"),
    *[(f"attr_{c}_pct", "%", f"share of that wall time: {c.replace('_', ' ')}") for c in PARTS],
    *[(f"attr_{c}_ms", "ms", f"{c.replace('_', ' ')}: ms per training step (basis `steps`; a marker covers "
                             "`steps_per_execution` of them), or ms in the window (`window`)")
      for c in PARTS],
    *[(f"attr_{c}_items", "", f"{c.replace('_', ' ')}: the items (ops, kernels, Python functions) with the most "
                              "time in it, with their share of it") for c in PARTS],
    ("attr_top_part", "", "the part with the most time (idle and outside_steps aside)"),
    ("attr_top_part_pct", "%", "its share"),
    ("attr_top_items", "", "the items (ops, kernels, Python functions) with the most time in the top part"),
    ("attr_python_top", "", "the Python functions with the most self time, with their share of the Python threads' "
                            "time (the window x the Python threads that ran them)"),
    ("attr_python_top_pct", "%", "the first of them: its share of the Python threads' time"),
    ("attr_devices", "count", "devices with a lane of their own"),
    ("attr_device_busy_spread_pct", "%", "busy share of the busiest device less that of the least busy"),
    doc="The run's wall time split into parts that sum to 100 % (device work by op category, input, between "
        "steps, runtime, host ops, Python, idle), for the run and for each device; the items in each part.",
    tables="`attribution` (scope (`window`: the traced span; each step's split is in `attribution_steps`), lane, "
           "part, ms, pct: each scope and lane sums to 100), `attribution_steps` "
           "(step, start_ps, end_ps, wall_ms, one `<part>_ms` column per part of the `all` lane), "
           "`attribution_items` (lane, part, item, kind, ms, pct, count, mean_ms)",
)


# ------------------------------------------------------------------------------------------
# Item names and self time
# ------------------------------------------------------------------------------------------

def item_name(name: str, on_device: bool = True) -> tuple[str, str]:
    """(display name, kind) of an event: a Python frame ``fn (file:line)``, an HLO op by its instruction name,
    a TF op by its type, a kernel (on a device; another host event) by its short name."""
    m = _FRAME_RE.match(name)
    if m:
        return f"{m['fn']} ({m['file']}:{m['line']})", "python"
    m = _CFUNC_RE.match(name)
    if m:
        return (f"{m['fn']} ({m['mod']})" if m["mod"] and m["mod"] != "<unknown>" else m["fn"]), "python"
    if name.startswith(PYTHON_FRAME_PREFIX):
        return "<python>", "python"
    if name.startswith("%"):
        return display_type(name[1:].split(" ", 1)[0]), "xla_op"  # HLO text: the instruction's name
    if TF_OP_RE.match(name):
        return display_type(op_type(name) or name), "tf_op"
    return kernel_type(name), ("kernel" if on_device else "event")


def self_time(plane: Plane, rows: np.ndarray) -> np.ndarray:
    """Self time (ps) of each row: its duration less that of the rows directly nested in it on the same line.

    Events on one thread nest properly (a TraceMe inside a Python frame inside a step marker); depth is the
    number of rows open at an event's start, and an event's parent the last earlier row one level up.
    """
    n = rows.shape[0]
    if n == 0:
        return np.zeros(0, np.int64)
    s = plane.ev_start_ps[rows]
    e = plane.ends(rows)
    ln = plane.ev_line[rows].astype(np.int64)
    order = np.lexsort((-e, s, ln))
    s, e, ln = s[order], e[order], ln[order]
    dur = e - s
    out = dur.copy()
    b_ = run_bounds(ln)
    for a, b in zip(b_[:-1].tolist(), b_[1:].tolist()):
        ss, ee = s[a:b], e[a:b]
        # rows open at each start: started at or before it (earlier in order) and not ended by it
        ends_sorted = np.sort(ee)
        depth = np.arange(b - a) - np.searchsorted(ends_sorted, ss, side="right")
        parent = np.full(b - a, -1, np.int64)
        by_depth = np.argsort(depth, kind="stable")  # rows grouped by depth, in order within each
        bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
        for d in range(1, int(depth.max()) + 1):
            kids = by_depth[bounds[d]:bounds[d + 1]]
            ups = by_depth[bounds[d - 1]:bounds[d]]
            if not kids.size or not ups.size:
                continue
            pos = np.searchsorted(ups, kids) - 1
            ok = pos >= 0
            parent[kids[ok]] = ups[pos[ok]]
        has = parent >= 0
        if has.any():
            child = np.bincount(parent[has], weights=dur[a:b][has], minlength=b - a)
            out[a:b] = np.maximum(dur[a:b] - child.astype(np.int64), 0)
    res = np.empty(n, np.int64)
    res[order] = out
    return res


# ------------------------------------------------------------------------------------------
# Lanes
# ------------------------------------------------------------------------------------------

class _Items:
    """Per (lane, part): item -> [ps, count, kind]."""

    def __init__(self) -> None:
        self.acc: dict[tuple[str, str], dict[str, list]] = {}
        self.later: list[tuple[str, _Named, np.ndarray, np.ndarray]] = []  # device lanes, added when read

    def add_devices(self, devices: list[tuple[str, _Named, np.ndarray, np.ndarray]]) -> None:
        """Each device's per-name totals ``(lane, named, time, count)``: into lane ``all`` now, into the device's
        own lane when the items are read (:meth:`settled`: only the items table reads them). Where the devices
        name the same things in the same order (one metadata, the usual case), their totals are added device
        by device as arrays, in the same order as one device after the other would: the same sums."""
        # kept for later without their per-row columns (a big trace's rows must not outlive the analysis)
        self.later.extend((lane, replace(named, codes=EMPTY, cat=EMPTY), tot, cnt) for lane, named, tot, cnt in devices)
        if not devices:
            return
        first = devices[0][1]
        if len(devices) > 1 and all(np.array_equal(d[1].labels, first.labels) and np.array_equal(d[1].label_cat,
                                                                                                 first.label_cat)
                                    for d in devices[1:]):
            tot, cnt = devices[0][2].astype(np.float64), devices[0][3].astype(np.int64)
            for _, _, t, c in devices[1:]:
                tot = tot + t
                cnt = cnt + c
            devices = [("all", first, tot, cnt)]
        for _, named, tot, cnt in devices:
            self.add_by_category(("all",), named, tot, cnt)

    def settled(self) -> _Items:
        """These items with the device lanes added."""
        for lane, named, tot, cnt in self.later:
            self.add_by_category((lane,), named, tot, cnt)
        self.later = []
        return self

    def add(self, lane: str, part: str, named: _Named, sel: np.ndarray, ps: np.ndarray) -> None:
        """Add the rows ``sel`` (a mask over ``named``'s rows) with their times ``ps`` (one per selected row),
        summed per name first (a trace has millions of events and few names)."""
        codes = named.codes[sel]
        if not codes.shape[0]:
            return
        n = named.labels.shape[0]
        self.add_totals(lane, part, named, np.bincount(codes, weights=ps, minlength=n),
                        np.bincount(codes, minlength=n))

    def add_totals(self, lane: str, part: str, named: _Named, tot: np.ndarray, cnt: np.ndarray,
                   which: np.ndarray | None = None) -> None:
        """Add per-name totals (time and count by ``named.labels`` index), only the names ``which`` selects."""
        d = self.acc.setdefault((lane, part), {})
        use = cnt > 0 if which is None else (cnt > 0) & which
        for i in np.flatnonzero(use).tolist():
            _bump(d, named, str(named.labels[i]), float(tot[i]), int(cnt[i]))

    def add_by_category(self, lanes: tuple[str, ...], named: _Named, tot: np.ndarray, cnt: np.ndarray) -> None:
        """Add per-name totals to each of ``lanes``, each name under its op category (names of none skipped):
        as :meth:`add_totals` once per lane and category, in one pass over the names."""
        by_cat = [[self.acc.setdefault((lane, c), {}) for lane in lanes] for c in OP_CATEGORIES]
        accs = [[d[j] for d in by_cat] for j in range(len(lanes))]
        use = np.flatnonzero((cnt > 0) & (named.label_cat >= 0))
        for i, c in zip(use.tolist(), named.label_cat[use].tolist()):
            nm, t, k = str(named.labels[i]), float(tot[i]), int(cnt[i])
            for acc in accs:
                _bump(acc[c], named, nm, t, k)

    def top(self, lane: str, part: str, k: int = TOP_ITEMS) -> list[tuple[str, float, int, str]]:
        d = self.acc.get((lane, part), {})
        return [(n, v[0], v[1], v[2]) for n, v in sorted(d.items(), key=lambda kv: (-kv[1][0], kv[0]))[:k]]


def _bump(d: dict[str, list], named: _Named, nm: str, ps: float, count: int) -> None:
    """Add ``ps`` and ``count`` to item ``nm`` of one (lane, part)."""
    slot = d.get(nm)
    if slot is None:
        d[nm] = [ps, count, named.kinds.get(nm, "")]
    else:
        slot[0] += ps
        slot[1] += count


@dataclass
class _Named:
    """Rows named once per metadata: row i's name is ``labels[codes[i]]`` (``codes`` is the row's metadata index
    + 1, 0 for unknown metadata, so no per-row lookup is built), ``cat[i]`` its op category's index in
    :data:`OP_CATEGORIES` (-1: not an op category)."""

    labels: np.ndarray  # by metadata index + 1; None where no row uses it
    codes: np.ndarray
    kinds: dict[str, str]
    cat: np.ndarray
    label_cat: np.ndarray  # by metadata index + 1
    tested: dict = field(default_factory=dict, repr=False, compare=False)  # label_test's answers, by test

    def totals(self, plane: Plane, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Time and count per name (by ``labels`` index) of the rows (those this was made of): see
        :func:`_sums_by_code`."""
        return _sums_by_code(plane, rows, self.labels.shape[0], self.codes)

    def label_test(self, test, keep: bool = False) -> np.ndarray:
        """``test(display name)`` per ``labels`` entry (False where unused). ``keep``: ``test`` is a function of
        the module, its answer kept (read-only) with the names, which the planes with the same names share
        (:func:`_named_codes`)."""
        got = self.tested.get(test)
        if got is None:
            got = np.array([n is not None and bool(test(str(n))) for n in self.labels], bool)
            if keep:
                got.setflags(write=False)
                self.tested[test] = got
        return got

    def per_row(self, test, keep: bool = False) -> np.ndarray:
        """``test(display name)`` for every row, evaluated once per name (``keep``: see :meth:`label_test`)."""
        return self.label_test(test, keep)[self.codes]


def _sums_by_code(plane: Plane, rows: np.ndarray, n: int, codes: np.ndarray | None = None,
                  into: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Time and count of ``rows`` per code (``codes``, one per row; without them, metadata index + 1 of the rows
    with known metadata and a positive duration), added ``into`` given totals, in one pass (``_native.row_sums``).
    Durations are whole picoseconds, so the float sums are exact in any order while a code's total is below
    2**53 ps (2.5 h)."""
    tot, cnt = into if into is not None else (np.zeros(n), np.zeros(n, np.int64))
    _native.row_sums(plane.ev_dur_ps, rows, codes, plane.ev_meta, tot, cnt)
    return tot, cnt


def _named(plane: Plane, rows: np.ndarray) -> _Named:
    """Display names of rows (by metadata, once each), their kinds, and each row's op category."""
    codes = plane.ev_meta[rows]
    codes += 1  # -1 (unknown) -> 0; in place (a big host has tens of millions of rows)
    n = len(plane.event_names) + 1
    seen = np.zeros(n, bool)
    seen[codes] = True  # not np.bincount: it copies int32 codes to int64 first (8 bytes a row)
    used = np.flatnonzero(seen)
    named = _named_codes(plane, used)
    return replace(named, codes=codes, cat=named.label_cat[codes])


#: :func:`_named_codes` keeps its answers for planes of at most this many names (by names, codes used and place: the
#: devices of a host, and the hosts of a run, repeat them), at most :data:`NAMED_ENTRIES` of them.
NAMED_NAMES = 4096
NAMED_ENTRIES = 256


def _named_codes(plane: Plane, used: np.ndarray) -> _Named:
    """The names of the codes ``used`` (metadata index + 1), without rows (``codes`` and ``cat`` empty); read-only,
    shared by the planes with the same names and codes used."""
    if len(plane.event_names) > NAMED_NAMES:
        return _name_codes(plane.event_names, used.tolist(), plane.is_device)
    return _kept_name_codes(tuple(plane.event_names.tolist()), tuple(used.tolist()), plane.is_device)


@functools.lru_cache(maxsize=NAMED_ENTRIES)
def _kept_name_codes(names: tuple, used: tuple[int, ...], on_device: bool) -> _Named:
    return _name_codes(names, used, on_device)


def _name_codes(names, used, on_device: bool) -> _Named:
    n = len(names) + 1
    labels = np.full(n, None, dtype=object)
    cat_of = np.full(n, -1, np.int8)
    kinds: dict[str, str] = {}
    for k in used:
        nm, kind, c = (_item(str(names[k - 1]), on_device) if k > 0
                       else ("<unknown>", "", _category_index("<unknown>")))
        labels[k] = nm
        kinds[nm] = kind
        cat_of[k] = c
    labels.setflags(write=False)
    cat_of.setflags(write=False)
    return _Named(labels, EMPTY, kinds, EMPTY, cat_of)


def _category_index(display: str) -> int:
    """The index in :data:`OP_CATEGORIES` of a display name's op category (-1: not one of them)."""
    c = category(display)
    return OP_CATEGORIES.index(c) if c in OP_CATEGORIES else -1


@name_test
def _is_h2d(name: str) -> bool:
    return DEVICE_H2D_RE.search(name) is not None


@functools.lru_cache(maxsize=CACHED_NAMES)
def _item(name: str, on_device: bool) -> tuple[str, str, int]:
    """(display name, kind, op category index) of an event's name (:func:`item_name`; once per name, place
    and process)."""
    nm, kind = item_name(name, on_device)
    return nm, kind, _category_index(nm)


def _device_rows(p: Plane) -> np.ndarray:
    lines = dl.activity_lines(p)
    if not lines.size:
        return EMPTY
    rows = p.timed_rows_on_lines(lines)
    if rows.size and dl.activity_kind(p) != dl.STREAM:
        rows = outermost(p, rows)  # XLA Ops nest (a fusion's sub-ops)
    return rows


def _device_lane(p: Plane, detail: bool) -> tuple[str, dict[str, Measure], Measure | None, tuple | None] | None:
    """A device's lane: its name, its op categories' interval sets, its H2D copies' set (None without any) and
    (with ``detail``, else None) its items ``(lane, named, time, count)``, the names without their per-row columns
    (a big device's rows do not outlive this call); None without activity."""
    rows = _device_rows(p)
    if not rows.size:
        return None
    named = _with_op_categories(p, rows, _named(p, rows))
    lane = dl.short_name(p)
    is_h2d = named.per_row(_is_h2d, keep=True)
    h2d = row_set(p, rows[is_h2d]) if is_h2d.any() else None
    del is_h2d
    item = None
    if detail:
        tot, cnt = named.totals(p, rows)
        item = (lane, replace(named, codes=EMPTY, cat=EMPTY), tot, cnt)
    named = replace(named, codes=EMPTY)  # the per-row names let go: the categories' sets need the categories only
    return lane, _category_measures(p, rows, named), h2d, item


def _with_op_categories(plane: Plane, rows: np.ndarray, named: _Named) -> _Named:
    """``named`` with each kernel in the op category of the XLA op it runs for (its ``hlo_op`` stat) where that
    comes first in :data:`OP_CATEGORIES`: a kernel is part of its op, so the helpers a library runs inside an
    attention or GEMM custom call (buffer fills, RNG state) and a convolution's im2col count as that op. A moved
    kernel gets a code of its own past the metadata's (one per name and category): its items stay under its name,
    in the op's category. ``named`` itself where no kernel moves (no streams, no such stat)."""
    if not rows.size or dl.activity_kind(plane) != dl.STREAM or not plane.has_stat(KERNEL_OP_STAT):
        return named
    col = plane.stat_columns((KERNEL_OP_STAT,), rows)[KERNEL_OP_STAT]
    codes, strings = col.codes()
    if not strings:
        return named
    op_cat = np.array([_category_index(display_type(s)) for s in strings] + [-1], np.int8)  # once per op name
    pos = col.positions(rows)
    row_op = op_cat[np.where(pos >= 0, codes[np.maximum(pos, 0)], -1)]  # -1: the row names no op
    own = named.cat
    moved = (row_op >= 0) & ((own < 0) | (row_op < own))
    if not moved.any():
        return named
    n, k = named.labels.shape[0], len(OP_CATEGORIES)
    pair, inv = np.unique(named.codes[moved].astype(np.int64) * k + row_op[moved], return_inverse=True)
    new_codes = named.codes.astype(np.int32 if n + pair.shape[0] < 2**31 else np.int64)
    new_codes[moved] = n + inv.reshape(-1)
    labels = np.concatenate([named.labels, named.labels[pair // k]])
    label_cat = np.concatenate([named.label_cat, (pair % k).astype(named.label_cat.dtype)])
    seen = np.zeros(labels.shape[0], bool)
    seen[new_codes] = True
    labels[~seen] = None  # a name all of whose rows moved is no longer used by itself
    labels.setflags(write=False)
    label_cat.setflags(write=False)
    return _Named(labels, new_codes, named.kinds, label_cat[new_codes], label_cat)


def _category_measures(plane: Plane, rows: np.ndarray, named: _Named) -> dict[str, Measure | RowSet]:
    """Each op category's wall-time set of the device's rows (a big device's read over its lines, by a byte of
    category an event: see :func:`line_sets`)."""
    used = named.label_test(_any_name, keep=True)  # the names some row has
    present = np.unique(named.label_cat[used])  # ascending: OP_CATEGORIES' order
    cats = [ci for ci in present.tolist() if ci >= 0]
    if plane.n_events > rowsets.ROWSET_MIN_ROWS and dl.activity_kind(plane) == dl.STREAM:
        cat = np.full(plane.n_events, -1, np.int8)  # the rows' own: activity lines' timed events
        cat[rows] = named.cat
        return dict(zip([OP_CATEGORIES[ci] for ci in cats], line_sets(plane, dl.activity_lines(plane), cat, cats)))
    if present.shape[0] == 1 and cats:  # every row of one category (the usual device): its rows as they are
        return {OP_CATEGORIES[cats[0]]: Measure.of_rows(plane, rows)}
    return {OP_CATEGORIES[ci]: Measure.of_rows(plane, rows[named.cat == ci]) for ci in cats}


def _host_op_items(host: Plane, act: Activity, items: _Items, has_device: bool,
                   layers: dict[str, list[Measure]]) -> None:
    """The host's TF ops (and eager kernels) into ``items`` by op category, input ops left out (they are waits,
    not math): as ``host_ops`` beside devices, else each category its own part, with its interval set added to
    ``layers`` (the per-row columns of a big host do not outlive this call)."""
    op_rows = act.rows.get("op", EMPTY)
    ek = act.rows.get("eager_kernel", EMPTY)
    rows = np.union1d(op_rows, ek) if ek.shape[0] else op_rows
    if not rows.shape[0]:
        return
    named = _named(host, rows)
    named_ok = named.label_test(lambda n: not INPUT_OPS.match(n))  # False where no row has the name
    tot, cnt = named.totals(host, rows)
    for ci, c in enumerate(OP_CATEGORIES):
        which = named_ok & (named.label_cat == ci)  # by name: some row is an op of category c, not an input op
        if not which.any():
            continue
        if not has_device:  # with devices the host's ops are not layers of their own
            layers[c].append(Measure.of_rows(host, rows[which[named.codes]]))
        items.add_totals("all", c if not has_device else "host_ops", named, tot, cnt, which)


def _any_name(_: str) -> bool:
    return True


def _split(windows: tuple[np.ndarray, np.ndarray], layers: list[tuple[str, Measure | None]],
           rest: str) -> dict[str, np.ndarray]:
    out = priority_split(windows, layers)
    out[rest] = out.get(rest, 0) + out.pop("_rest")
    return out


# ------------------------------------------------------------------------------------------
# The analysis
# ------------------------------------------------------------------------------------------

def analyze(trace: Trace, ctx: Context, *, act: Activity, steps: StepSet, step_table: Table | None) -> AnalysisResult:
    res = AnalysisResult("attribution")
    lo, hi = act.span
    if hi <= lo:
        res.missing(list(DECLARED.names()), "an empty window: nothing to attribute")
        return res
    items = _Items()
    host = act.host

    # the device lanes, and the device work of the run (op categories over every device)
    dev_layers: dict[str, list[Measure]] = {c: [] for c in OP_CATEGORIES}
    dev_lanes: list[tuple[str, dict[str, Measure]]] = []
    h2d_dev: list[Measure] = []
    dev_items: list[tuple[str, _Named, np.ndarray, np.ndarray]] = []
    for p in act.devices:
        got = _device_lane(p, ctx.detail)
        if got is None:
            continue
        lane, meas, h2d, item = got
        dev_lanes.append((lane, meas))
        for c, m in meas.items():
            dev_layers[c].append(m)
        if h2d is not None:
            h2d_dev.append(h2d)
        if item is not None:
            dev_items.append(item)
    items.add_devices(dev_items)

    # host: TF ops (the device on a CPU-only trace), runtime, Python
    has_device = bool(dev_lanes)
    host_op_layers: dict[str, list[Measure]] = {c: [] for c in OP_CATEGORIES}
    if host is not None and (ctx.detail or not has_device):  # beside devices it names items only
        _host_op_items(host, act, items, has_device, host_op_layers)

    # the scopes: the window, and each step's wall time (the steps table's: start to the next start,
    # to its own end before a validation or an epoch end, which are outside the steps)
    n = int(steps.start.shape[0])
    st = step_table
    same = st is not None and len(st) == n
    if n:
        w_end = np.asarray(st["wall_end_ps"], np.int64) if same else wall_ends(steps.start, steps.end,
                                                                                 np.full(n, "", object))
        work = np.asarray(st["work_end_ps"], np.int64) if same else work_ends(host, steps.start, steps.end)
        gaps = Measure.union(np.minimum(work, w_end), w_end)
        held = (w_end[:-1] < steps.start[1:])  # validation, epoch ends: not in any step
        v_lo, v_hi = w_end[:-1][held], steps.start[1:][held]
        o_lo, o_hi = complement(steps.start[:1], w_end[-1:], lo, hi)
        outside = Measure.union(np.concatenate((o_lo, v_lo)), np.concatenate((o_hi, v_hi)))
    else:
        w_end = np.zeros(0, np.int64)
        gaps = Measure.empty()
        outside = Measure.empty()

    g = act.get
    py = python_host_activity(act, ctx, steps) if host is not None else Measure.empty()
    layers: list[tuple[str, Measure | None]] = [("outside_steps", outside)]
    if has_device:
        layers += [(c, m) for c in OP_CATEGORIES for m in dev_layers[c]]
        layers += [("input", g("input_wait")), ("input", g("h2d_api"))] + [("input", m) for m in h2d_dev]
        layers += [("between_steps", gaps), ("runtime", g("launch")), ("host_ops", g("train_threads")),
                   ("runtime", g("eager")), ("python", py), ("idle", g("func"))]
    else:
        layers += [("input", g("input_wait")), ("between_steps", gaps), ("collective", g("collective"))]
        layers += [(c, m) for c in OP_CATEGORIES for m in host_op_layers[c]]
        layers += [("runtime", g("launch")), ("runtime", g("runtime")), ("runtime", g("func")),
                   ("runtime", g("eager")), ("python", py)]
    win = (np.array([lo], np.int64), np.array([hi], np.int64))
    if n:  # one split over the steps and the time before and after them; the window's is their sum
        a = np.concatenate((steps.start, [lo, min(max(w_end[-1], lo), hi)], v_lo))
        b = np.concatenate((w_end, [max(min(steps.start[0], hi), lo), hi], v_hi))
        per_all = _split((a, b), layers, "idle")
        per = {c: np.asarray(v)[:n] for c, v in per_all.items()}
        whole = {c: np.asarray(v).sum(keepdims=True) for c, v in per_all.items()}
        window_ps = int((b - a).sum())
    else:
        whole = _split(win, layers, "idle")
        window_ps = hi - lo
    rows_out: list[tuple[str, str, str, float, float]] = []
    _scope_rows(rows_out, "window", "all", whole, window_ps)
    lanes = dev_lanes if ctx.detail else []  # each device's own split: with detail only (DETAIL_METRICS)
    per_lane = priority_split_lanes(lo, hi, [[(c, meas.get(c)) for c in OP_CATEGORIES] for _, meas in lanes])
    for (lane, _), dsplit in zip(lanes, per_lane):
        dsplit["idle"] = dsplit.get("idle", 0) + dsplit.pop("_rest")
        _scope_rows(rows_out, "window", lane, dsplit, hi - lo)

    # Python functions by self time (Python tracer frames), inside steps or between them
    py_threads = 0
    if ctx.detail:
        py_threads = _python_items(act, steps, w_end, items)
        _host_event_items(act, items)

    # the steps' split, and the basis of the metrics
    if n:
        tbl = Table({"step": steps.number, "start_ps": steps.start, "end_ps": w_end,
                     "wall_ms": (w_end - steps.start) / PS_PER_MS}, n=n)
        for c in PARTS:
            tbl[f"{c}_ms"] = np.asarray(per.get(c, np.zeros(n)), np.float64) / PS_PER_MS
        res.tables["attribution_steps"] = tbl
        basis_ps = {c: float(np.asarray(per.get(c, 0)).sum()) for c in PARTS}
        wall = float((w_end - steps.start).sum())
        res.add("attr_basis", "steps")
    else:
        basis_ps = {c: float(np.asarray(whole.get(c, 0)).sum()) for c in PARTS}
        wall = float(hi - lo)
        res.add("attr_basis", "window")
    res.add("attr_wall_ms", wall / PS_PER_MS)
    # per training step, as the step time (the step table's rows are these steps)
    per_step = max(training_steps(step_table) if step_table is not None and len(step_table) == n else n, 1)
    for c in PARTS:
        res.add(f"attr_{c}_pct", 100.0 * basis_ps[c] / wall if wall > 0 else None)
        res.add(f"attr_{c}_ms", basis_ps[c] / per_step / PS_PER_MS)
        busy_c = _lane_busy(items, "all", c)
        if ctx.detail and busy_c > 0:
            res.add(f"attr_{c}_items", ", ".join(f"{nm} {100.0 * v / busy_c:.0f} %" for nm, v, _, _ in
                                                 items.top("all", c, 3)))
        elif ctx.detail:
            res.missing([f"attr_{c}_items"], "")  # a part of no named items (idle, between steps): nothing to note
    ranked = sorted((c for c in PARTS if c not in ("idle", "outside_steps")), key=lambda c: -basis_ps[c])
    top = ranked[0]
    if not ctx.detail:
        res.without_detail(DETAIL_METRICS)
    if basis_ps[top] > 0:
        res.add("attr_top_part", top)
        res.add("attr_top_part_pct", 100.0 * basis_ps[top] / wall)
        busy = _lane_busy(items, "all", top)
        if ctx.detail:
            res.add("attr_top_items", ", ".join(f"{nm} {100.0 * v / busy:.0f} %" for nm, v, _, _ in
                                                items.top("all", top, 3)) if busy > 0 else "")
    else:
        res.missing(["attr_top_part", "attr_top_part_pct", "attr_top_items"], "nothing but idle time in the window")
    py_top = items.top("all", "python_self", 3)
    if py_top and py_top[0][1] > 0:
        span = float(hi - lo) * max(py_threads, 1)
        res.add("attr_python_top", ", ".join(f"{nm} {100.0 * v / span:.0f} %" for nm, v, _, _ in py_top))
        res.add("attr_python_top_pct", 100.0 * py_top[0][1] / span)
    elif ctx.detail:
        res.missing(["attr_python_top", "attr_python_top_pct"], "no Python frames in the trace (JAX's or TF's Python "
                                                                "tracer was off)")
    res.add("attr_devices", len(dev_lanes))
    if ctx.detail and len(dev_lanes) >= 2:
        busy = [100.0 - next((r[4] for r in rows_out if r[0] == "window" and r[1] == lane and r[2] == "idle"), 0.0)
                for lane, _ in dev_lanes]
        res.add("attr_device_busy_spread_pct", max(busy) - min(busy))
    elif ctx.detail:
        res.missing(["attr_device_busy_spread_pct"], "fewer than two devices with activity")

    res.tables["attribution"] = Table({
        "scope": np.array([r[0] for r in rows_out], dtype=object),
        "lane": np.array([r[1] for r in rows_out], dtype=object),
        "part": np.array([r[2] for r in rows_out], dtype=object),
        "ms": np.array([r[3] for r in rows_out], np.float64),
        "pct": np.array([r[4] for r in rows_out], np.float64),
    }, n=len(rows_out))
    res.tables["attribution_items"] = functools.partial(_items_table, items)  # built when read
    return res


def _scope_rows(out: list, scope: str, lane: str, split: dict[str, np.ndarray], total_ps: int) -> None:
    for part in PARTS:
        v = split.get(part)
        if v is None:
            continue
        ps = float(np.asarray(v).sum())
        if ps > 0:
            out.append((scope, lane, part, ps / PS_PER_MS, 100.0 * ps / total_ps if total_ps > 0 else 0.0))


def _lane_busy(items: _Items, lane: str, part: str) -> float:
    return float(sum(v[0] for v in items.acc.get((lane, part), {}).values()))


def _python_items(act: Activity, steps, w_end: np.ndarray, items: _Items) -> int:
    """Self time of every event on the Python threads; frames named as functions, the rest by name. Events
    starting between steps are items of ``between_steps``, the others of ``python`` (and all frames of the
    ``python_self`` ranking). Returns how many Python threads ran the ranked frames (their self time adds up
    over the threads: one thread's is at most the window)."""
    p = act.host
    if p is None or not act.python_lines.size:
        return 0
    rows = p.timed_rows_on_lines(act.python_lines)
    if not rows.size:
        return 0
    selft = self_time(p, rows)
    named = _named(p, rows)
    marker = np.isin(rows, act.rows.get("roots", EMPTY)) | np.isin(rows, act.rows.get("profiled_batch", EMPTY))
    frame = named.per_row(lambda n: named.kinds.get(n) == "python")
    keep = ~marker & (selft > 0)
    s = p.ev_start_ps[rows]
    if steps.start.shape[0]:  # the steps' wall time only: not the profiler starting and stopping around them
        keep &= (s >= steps.start[0]) & (s < w_end[-1])
    if steps.start.shape[0] > 1:
        k = np.searchsorted(steps.start, s, side="right") - 1
        between = (k >= 0) & (k < steps.start.shape[0] - 1) & (s >= steps.end[np.clip(k, 0, None)])
    else:
        between = np.zeros(rows.shape[0], bool)
    for part, sel in (("between_steps", keep & between), ("python", keep & ~between & frame),
                      ("python_self", keep & frame)):
        items.add("all", part, named, sel, selft[sel])
    return int(np.unique(p.ev_line[rows[keep & frame]]).shape[0])


def _host_event_items(act: Activity, items: _Items) -> None:
    """Items of ``input`` (waits for data) and ``runtime`` (launches, function calls, eager dispatch)."""
    p = act.host
    if p is None:
        return
    n = len(p.event_names) + 1
    for part, keys in (("input", ("input", "h2d_api")), ("runtime", ("launch", "func", "eager"))):
        # per-metadata totals (a big trace has millions of launches: no per-row columns of them all)
        tot, cnt = np.zeros(n), np.zeros(n, np.int64)
        for k in keys:
            _sums_by_code(p, act.rows.get(k, EMPTY), n, into=(tot, cnt))
        if cnt.any():
            items.add_totals("all", part, _named_codes(p, np.flatnonzero(cnt)), tot, cnt)


def _items_table(items: _Items) -> Table:
    items = items.settled()
    cols: dict[str, list] = {"lane": [], "part": [], "item": [], "kind": [], "ms": [], "pct": [], "count": [],
                             "mean_ms": []}
    for (lane, part) in sorted(items.acc):
        busy = _lane_busy(items, lane, part)
        for nm, v, c, kind in items.top(lane, part):
            cols["lane"].append(lane)
            cols["part"].append(part)
            cols["item"].append(nm)
            cols["kind"].append(kind)
            cols["ms"].append(v / PS_PER_MS)
            cols["pct"].append(100.0 * v / busy if busy > 0 else 0.0)
            cols["count"].append(int(c))
            cols["mean_ms"].append(v / PS_PER_MS / c if c else 0.0)
    return Table({k: np.array(v, dtype=object if k in ("lane", "part", "item", "kind") else
                              (np.int64 if k == "count" else np.float64)) for k, v in cols.items()},
                 n=len(cols["lane"]))


__all__ = ["OP_CATEGORIES", "PARTS", "analyze", "item_name", "self_time"]
