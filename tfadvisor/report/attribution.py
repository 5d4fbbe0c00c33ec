"""Where the time goes, as every report shows it: the run's wall time split into parts (the
``attribution`` analysis) with the items in each part, then each device's own split.

:func:`attribution` builds the one plain structure the terminal, Markdown, HTML and JSON reports read:
``{"basis", "wall_ms", "lanes": [{"lane", "parts": [{"part", "label", "pct", "ms", "items": [...]}]}], "host",
"hosts": [{"host", "parts": [{"part", "pct"}], "distance_pts"}]}`` (with several hosts, the lanes are the median
host's and ``hosts`` gives every host's split and how far it is from the median host's, in percentage points).
The ``all`` lane is on the basis of the metrics (the steps' wall time, or the window without steps);
a device lane is its share of the window. Parts under :data:`MIN_PCT` are left out; each lane's shares,
all parts counted, sum to 100.
"""

from __future__ import annotations

from typing import Any

from tfadvisor.model.table import Table
from tfadvisor.report import plain

#: Part -> label.
LABELS = {
    "collective": "collectives", "matrix": "matrix (GEMM/conv/attention)", "data_movement": "data movement",
    "optimizer": "optimizer updates", "gather_scatter": "gathers/scatters", "custom_call": "custom calls",
    "elementwise": "element-wise/fusions", "input": "input", "between_steps": "between steps",
    "runtime": "runtime (launches, calls, dispatch)", "host_ops": "host work (TF ops, runtime threads)",
    "python": "Python",
    "idle": "idle", "outside_steps": "outside the steps",
}
#: Parts smaller than this share are not listed.
MIN_PCT = 0.5
#: Items listed per part.
ITEMS = 3


def _rows(tables: Any, name: str) -> list[dict]:
    """A table's rows, read from the stored :class:`Table` when it is one (no pandas on the text path)."""
    if name not in tables:
        return []
    raw = tables.table(name) if hasattr(tables, "table") else None  # a Table, or what its function builds
    if raw is None:
        raw = tables[name]
    if isinstance(raw, Table):
        return [raw.row(i) for i in range(len(raw))]
    return raw.to_dict("records") if hasattr(raw, "to_dict") else []


#: Devices whose splits differ by at most this many percentage points (every part) are shown as one lane.
ALIKE_PTS = 1.0


def attribution(result: Any, max_devices: int = 16, group: bool = False) -> dict[str, Any] | None:
    """The attribution of ``result`` for the reports, or None when the analysis found nothing to split.

    ``group``: alike devices (within :data:`ALIKE_PTS` on every part) as one lane, ``GPU:0-7``, with their
    mean split and ``devices`` naming them (for the text reports; JSON keeps every device)."""
    metrics = getattr(result, "metrics", None) or {}
    tables = getattr(result, "tables", None) or {}
    basis = plain(metrics.get("attr_basis"))
    wall = plain(metrics.get("attr_wall_ms"))
    if not basis or not wall:
        return None
    items: dict[tuple[str, str], list[dict]] = {}
    for r in _rows(tables, "attribution_items"):
        items.setdefault((str(r["lane"]), str(r["part"])), []).append(
            {"item": str(r["item"]), "kind": str(r["kind"]), "ms": plain(r["ms"]), "pct": plain(r["pct"]),
             "count": int(r["count"]), "mean_ms": plain(r["mean_ms"])})

    def part(lane: str, name: str, pct: float, ms: float) -> dict:
        return {"part": name, "label": LABELS.get(name, name.replace("_", " ")), "pct": pct, "ms": ms,
                "items": items.get((lane, name), [])[:ITEMS]}

    all_parts = []
    for name in LABELS:
        pct = plain(metrics.get(f"attr_{name}_pct"))
        if isinstance(pct, (int, float)) and pct >= MIN_PCT:
            all_parts.append(part("all", name, float(pct), float(pct) * float(wall) / 100.0))
    lanes = [{"lane": "all", "parts": sorted(all_parts, key=lambda p: -p["pct"])}]
    devices: dict[str, list[dict]] = {}
    for r in _rows(tables, "attribution"):
        if r["scope"] != "window" or r["lane"] == "all" or float(r["pct"]) < MIN_PCT:
            continue
        devices.setdefault(str(r["lane"]), []).append(part(str(r["lane"]), str(r["part"]), float(r["pct"]),
                                                           float(r["ms"])))
    groups = _alike(devices) if group else [[d] for d in devices]
    for names in groups[:max_devices]:
        lanes.append(_lane(names, devices))
    hosts = []  # several hosts: the lanes are the median host's, each host's own split in brief
    for h in getattr(result, "hosts", None) or []:
        hm = getattr(h, "metrics", None) or {}
        parts = sorted(((n, plain(hm.get(f"attr_{n}_pct"))) for n in LABELS), key=lambda kv: -(kv[1] or 0))
        every = {n: float(v) for n, v in parts if isinstance(v, (int, float))}
        hosts.append({"host": str(getattr(h, "host", "?")), "_every": every,
                      "parts": [{"part": n, "pct": float(v)} for n, v in parts if isinstance(v, (int, float))
                                and v >= MIN_PCT]})
    mine = {n: plain(metrics.get(f"attr_{n}_pct")) or 0.0 for n in LABELS}
    for h in hosts:  # how far each host's split is from the median host's (percentage points, largest part)
        got = h.pop("_every")
        h["distance_pts"] = max((abs(got.get(n, 0.0) - float(v)) for n, v in mine.items()), default=0.0)
    return {"basis": str(basis), "wall_ms": float(wall), "devices": len(devices),
            "devices_shown": sum(len(g) for g in groups[:max_devices]), "lanes": lanes,
            "host": plain(metrics.get("median_host")) if len(hosts) > 1 else None,
            "hosts": hosts if len(hosts) > 1 else []}


def unlike_hosts(hosts: list[dict], limit: int, fill: bool) -> tuple[list[dict], int, float | None]:
    """The hosts whose split is more than :data:`ALIKE_PTS` from the median host's, least alike first, at
    most ``limit`` (``fill``: when none is, the ``limit`` least alike); how many are left out, and the
    largest distance among them (None when none is)."""
    every = sorted(hosts, key=lambda h: -h["distance_pts"])
    shown = [h for h in every if h["distance_pts"] > ALIKE_PTS][:limit]
    if fill and not shown:
        shown = every[:limit]
    left = every[len(shown):]
    return shown, len(left), (left[0]["distance_pts"] if left else None)


def _alike(devices: dict[str, list[dict]]) -> list[list[str]]:
    """Devices in groups whose splits are within :data:`ALIKE_PTS` of the group's first device's, in order."""
    pct = {d: {p["part"]: p["pct"] for p in parts} for d, parts in devices.items()}
    groups: list[list[str]] = []
    for d in devices:
        for g in groups:
            ref = pct[g[0]]
            if all(abs(pct[d].get(k, 0.0) - ref.get(k, 0.0)) <= ALIKE_PTS for k in set(ref) | set(pct[d])):
                g.append(d)
                break
        else:
            groups.append([d])
    return groups


def _lane(names: list[str], devices: dict[str, list[dict]]) -> dict[str, Any]:
    """One lane: a device's split, or a group's mean split (items are per device: a group lists none)."""
    if len(names) == 1:
        return {"lane": names[0], "parts": sorted(devices[names[0]], key=lambda p: -p["pct"])}
    sums: dict[str, dict] = {}
    for d in names:
        for p in devices[d]:
            q = sums.setdefault(p["part"], {**p, "pct": 0.0, "ms": 0.0, "items": []})
            q["pct"] += p["pct"] / len(names)
            q["ms"] += p["ms"] / len(names)
    return {"lane": f"{_span(names)} ({len(names)} alike)", "devices": list(names),
            "parts": sorted(sums.values(), key=lambda p: -p["pct"])}


def _span(names: list[str]) -> str:
    """``GPU:0-7`` for consecutive numbers of one kind, else the names joined."""
    kinds = {n.rsplit(":", 1)[0] for n in names}
    nums = [n.rsplit(":", 1)[-1] for n in names]
    if len(kinds) == 1 and all(x.isdigit() for x in nums):
        ints = [int(x) for x in nums]
        if ints == list(range(ints[0], ints[0] + len(ints))):
            return f"{kinds.pop()}:{ints[0]}-{ints[-1]}"
    return ", ".join(names)


def basis_text(att: dict[str, Any]) -> str:
    """What the ``all`` lane's shares are of, in words."""
    host = f" on {att['host']} (the median host)" if att.get("host") else ""
    if att["basis"] == "steps":
        return f"the steps' wall time{host}, start to next start ({att['wall_ms']:,.1f} ms)"
    return f"the traced window{host} ({att['wall_ms']:,.1f} ms; no steps)"


def items_text(p: dict[str, Any]) -> str:
    """``name 83 %, name 9 %`` of a part's items (their share of the part's busy time)."""
    return ", ".join(f"{i['item']} {i['pct']:.0f} %" for i in p["items"])


#: Parts of the program listed by the reports (the ``components`` table has them all).
PROGRAM_PARTS = 8


def program_parts(result: Any, limit: int = PROGRAM_PARTS) -> dict[str, Any] | None:
    """Where the compute time goes by part of the program (the ``components`` analysis): rows of ``label``, ``pct``
    (of the wall time, as "Where the time goes"), ``ms_per_step`` (per step, or in the window without steps) and
    ``types``, the largest first; ``more``: rows left out; ``names_from``: where the parts' names came from besides
    their scopes (the model config in an event file, the run file), "" where nowhere else.
    None when the trace names no part of a program (no TF ops with scopes)."""
    rows = _rows(getattr(result, "tables", None) or {}, "components")
    if not rows:
        return None
    out = []
    for r in rows[:limit]:
        ms = r.get("ms_per_step")
        out.append({"label": str(r["label"]), "pct": float(r["pct"]),
                    "ms_per_step": float(ms) if isinstance(ms, (int, float)) and ms == ms else None,
                    "types": str(r.get("types") or "")})
    scope = "its name scope"
    sources = sorted({str(r["names_from"]) for r in rows if r.get("names_from") and r["names_from"] != scope})
    return {"rows": out, "more": max(0, len(rows) - limit), "names_from": " and ".join(sources)}


__all__ = ["ITEMS", "LABELS", "MIN_PCT", "PROGRAM_PARTS", "attribution", "basis_text", "items_text", "program_parts"]
