"""The zoomable timeline of the capture window: data for it, and its small embedded viewer.

Lanes per host: the steps (outliers in red), the ``timeline`` table's activity lanes (device
compute, copies, collectives, training threads, input waits, tf.data workers, python, idle), and
on top one lane of the findings: the spans each finding's rule marks (the counted idle gaps, the
outlier steps, the memory peak); the lanes a rule declares (``lanes``) are tagged with its rule id.
Data goes into the page as JSON (times in ms since the earliest window start, each span with the
share of it that was active); the report's template writes the viewer's toolbar and inlines
``timeline.js`` (next to this module), which draws it as SVG, coalescing spans narrower than a pixel
so that a bar's height is the active share of its time, and zooms with the wheel, drag, buttons and
the finding chips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tfadvisor.analyses.timeline import widest
from tfadvisor.analyses.variation import held_steps
from tfadvisor.report import get
from tfadvisor.report.findings import finding_rule
from tfadvisor.report.formatting import fmt_num
from tfadvisor.report.plots import has_rows

#: Spans kept per lane in the page (the analysis keeps up to 3000; fewer for many hosts).
MAX_SPANS = 2500
#: In a multi-host run, a kind of activity lane active less than this share of the window on every
#: host draws next to nothing at full view: it is left out on all hosts (and named under the
#: viewer), unless a finding is about it. One host's lanes are left out only when empty.
MIN_LANE_SHARE = 0.01

JS = (Path(__file__).with_name("timeline.js")).read_text(encoding="utf-8")


def _thin(s: np.ndarray, e: np.ndarray, c: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """At most ``limit`` spans: the widest holes kept, covered time summed over merged spans."""
    n = s.shape[0]
    if n <= limit:
        return s, e, c
    keep = np.concatenate([[0], widest(s[1:] - e[:-1], limit - 1) + 1])
    last = np.append(keep[1:], n) - 1
    cs = np.concatenate([[0], np.cumsum(c)])
    return s[keep], e[last], cs[last + 1] - cs[keep]


def _lane(name: str, s: np.ndarray, e: np.ndarray, c: np.ndarray | None, t0: float, limit: int,
          **extra: Any) -> dict:
    order = np.argsort(s, kind="stable")
    s, e = s[order].astype(float), e[order].astype(float)
    c = (e - s) if c is None else c[order].astype(float)
    s, e, c = _thin(s, e, c, limit)
    frac = np.round(100 * c / np.maximum(e - s, 1)).astype(int)
    lane = {"name": name, "s": _ms(s - t0), "e": _ms(e - t0)}
    if (frac < 100).any():
        lane["f"] = np.clip(frac, 0, 100).tolist()
    lane.update(extra)
    return lane


def _ms(ps: np.ndarray) -> list[float]:
    return [round(v, 6) for v in (ps / 1e9).tolist()]


def _findings_marks(findings: list, tables: dict, metrics: Any) -> list[dict]:
    """Per finding: rule, title, severity, the lanes its rule lights up, its own spans (ps): what its rule
    declares (``lanes``, ``marks``, ``plots``, ``scope``: :mod:`tfadvisor.analyses.marks`)."""
    out = []
    steps, gaps, mem = tables.get("steps"), tables.get("gaps"), tables.get("memory_timeline")
    for f in findings or []:
        marks, plots = set(get(f, "marks") or ()), set(get(f, "plots") or ())
        spans: list[tuple[float, float, str]] = []
        if "gaps" in marks and has_rows(gaps) and "marked" in gaps.columns:  # what the mark selects
            for r in gaps[gaps["marked"].to_numpy(bool)].itertuples():
                spans.append((float(r.start_ps), float(r.end_ps), f"idle gap: {fmt_num(getattr(r, 'idle_ms', 0))} ms"))
        if "outlier_steps" in marks and has_rows(steps) and "outlier" in steps.columns:
            for r in steps[steps["outlier"].fillna(False).astype(bool)].itertuples():
                label = f"outlier step {r.step}: {fmt_num(r.duration_ms, 4)} ms"
                spans.append((float(r.start_ps), float(r.end_ps), label))
        if "pattern_steps" in marks and has_rows(steps):
            held = set().union(*held_steps(tables.get("step_patterns")))
            for r in steps[steps["step"].isin(list(held))].itertuples():
                spans.append((float(r.start_ps), float(r.wall_end_ps), f"step {r.step}: {fmt_num(r.wall_ms, 4)} ms"))
        if "memory" in plots and has_rows(mem) and "time_ps" in mem.columns:
            t = float(mem["time_ps"].iloc[int(np.argmax(pd.to_numeric(mem["bytes_in_use"]).to_numpy()))])
            spans.append((t, t, "memory peak"))
        scope = str(get(f, "scope", "run") or "run")
        host = metrics.get(scope[len("host:"):]) if scope.startswith("host:") else None  # that host's lanes
        out.append({"rule": finding_rule(f), "title": str(get(f, "title", "") or ""),
                    "host": str(host) if isinstance(host, str) and host else None,
                    "sev": str(get(f, "severity", "info") or "info").lower(), "lanes": list(get(f, "lanes") or ()),
                    "spans": spans})
    return out


def _active_ms(lane: dict) -> float:
    """The time a lane's spans were active (ms)."""
    f = lane.get("f")
    return float(sum((e - s) * (f[i] / 100 if f else 1.0) for i, (s, e) in enumerate(zip(lane["s"], lane["e"]))))


def timeline_data(result: Any) -> dict | None:
    """The JSON the viewer draws (None when no host has a ``timeline`` table)."""
    hosts = list(getattr(result, "hosts", None) or [])
    per_host = [(str(getattr(h, "host", "") or ""), getattr(h, "tables", {}) or {}) for h in hosts]
    if not any(has_rows(t.get("timeline")) for _, t in per_host):
        per_host = [("", getattr(result, "tables", {}) or {})]
    per_host = [(h, t) for h, t in per_host if has_rows(t.get("timeline"))]
    if not per_host:
        return None
    limit = max(300, MAX_SPANS // max(1, len(per_host)) * 2) if len(per_host) > 2 else MAX_SPANS
    wins = [t["timeline"][t["timeline"]["lane"] == "window"] for _, t in per_host]
    t0 = min(float(w["start_ps"].min()) for w in wins if len(w))
    t1 = max(float(w["end_ps"].max()) for w in wins if len(w))
    findings = getattr(result, "findings", None) or []
    marks = _findings_marks(findings, getattr(result, "tables", {}) or {}, getattr(result, "metrics", {}))
    lanes = []
    multi = len(per_host) > 1
    for host, tables in per_host:
        prefix = f"{host}: " if multi else ""
        if not multi or host == str(getattr(result, "metrics", {}).get("median_host") or per_host[0][0]):
            ms = [m for m in marks if m["spans"]]
            if ms:
                s = np.array([sp[0] for m in ms for sp in m["spans"]])
                e = np.array([sp[1] for m in ms for sp in m["spans"]])
                lanes.append({"name": prefix + "findings", "kind": "marks", "host": host,
                              "s": _ms(s - t0), "e": _ms(e - t0),
                              "rule": [m["rule"] for m in ms for _ in m["spans"]],
                              "label": [sp[2] for m in ms for sp in m["spans"]]})
        steps = tables.get("steps")
        if has_rows(steps) and {"start_ps", "end_ps"} <= set(steps.columns):
            st = steps.sort_values("start_ps", kind="stable")
            out = st["outlier"].fillna(False).astype(bool).to_numpy() if "outlier" in st.columns else None
            ids = st["step"].astype(str).tolist() if "step" in st.columns else [str(i) for i in range(len(st))]
            extra: dict[str, Any] = {"kind": "steps", "host": host}
            if len(st) <= limit:
                extra["label"] = ids
                if out is not None and out.any():
                    extra["outlier"] = np.flatnonzero(out).tolist()
            lanes.append(_lane(prefix + "steps", st["start_ps"].to_numpy(float), st["end_ps"].to_numpy(float),
                               None, t0, limit, **extra))
        tl = tables["timeline"]
        for name, g in tl[tl["lane"] != "window"].groupby("lane", sort=False):
            lanes.append(_lane(prefix + str(name), g["start_ps"].to_numpy(float), g["end_ps"].to_numpy(float),
                               g["covered_ps"].to_numpy(float), t0, limit, kind=str(name), host=host))
    for lane in lanes:
        lane["tags"] = [m["rule"] for m in marks if lane.get("kind") in m["lanes"]
                        and m["host"] in (None, lane.get("host"))]
    span_ms = (t1 - t0) / 1e9
    floor = MIN_LANE_SHARE * span_ms if multi else 0.0
    most: dict[str, float] = {}
    for lane in lanes:
        if lane.get("kind") not in ("steps", "marks") and not lane["tags"]:
            most[lane["kind"]] = max(most.get(lane["kind"], 0.0), _active_ms(lane))
    empty = {k for k, v in most.items() if v <= floor}
    dropped = [lane["name"] for lane in lanes if lane.get("kind") in empty and not lane["tags"]]
    lanes = [lane for lane in lanes if lane["name"] not in dropped]
    return {"span_ms": span_ms, "lanes": lanes, "dropped": dropped,
            "findings": [{"rule": m["rule"], "title": m["title"], "sev": m["sev"], "lanes": m["lanes"],
                          "host": m["host"],
                          "s": _ms(np.array([sp[0] for sp in m["spans"]]) - t0),
                          "e": _ms(np.array([sp[1] for sp in m["spans"]]) - t0)} for m in marks]}


def lane_kinds(names: list[str]) -> str:
    """``host0: idle, host1: idle`` -> ``idle (every host)`` for the note under the viewer."""
    kinds = list(dict.fromkeys(n.split(": ", 1)[-1] for n in names))
    return ", ".join(kinds) + (" (every host)" if any(": " in n for n in names) else "")


__all__ = ["JS", "lane_kinds", "timeline_data"]
