"""``tfadvisor export``: the trace and tfadvisor's annotations as a Chrome/Perfetto JSON trace.

The file is the JSON object form of the Trace Event Format (``{"traceEvents": [...]}``), which
ui.perfetto.dev and chrome://tracing open:

* every plane of every host is a process (``pid``), every line of it a thread (``tid``), named
  with ``M`` (metadata) events; every XEvent a complete (``ph: "X"``) slice, ``ts``/``dur`` in
  microseconds from the start of the trace;
* one ``tfadvisor <host>`` process per host with the tracks ``steps`` (one slice per step;
  outliers say so), ``gaps between steps`` and ``findings`` (one slice per finding over the
  window, with its severity and message); a multi-host run has its findings once, on the
  ``findings`` track of a ``tfadvisor run`` process instead;
* the findings are those ``tfadvisor analyze`` reports (the same analysis, run-level findings of a
  multi-host run included); every slice a finding is about carries ``args["tfadvisor.rule"]``
  (rule ids, comma-separated): what its rule declares it marks (``marks``, from
  :mod:`tfadvisor.analyses.marks`: the input waits, copies, collectives, launches, eager dispatches;
  every step, the outlier steps, the gaps the gaps analysis counts). A finding of a multi-host run
  is about every host's spans (the run's per-step figures are the median host's, every host runs the
  same program), unless its rule's ``scope`` names one host (``host:<metric>``) or none (``none``).

``max_events`` bounds the size: beyond it the longest trace events are kept (all annotated
slices and tfadvisor's tracks always are) and ``otherData`` says how many were left out.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pandas as pd

from tfadvisor.analyses.marks import event_mask
from tfadvisor.analyses.variation import held_steps
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.report import get

#: Default bound on the trace events written (about 100 bytes each).
MAX_EVENTS = 1_000_000
RULE_ARG = "tfadvisor.rule"
PS_PER_US = 1_000_000

def host_parts(result: Any) -> tuple[list[tuple[str, Mapping[str, pd.DataFrame], list]], list | None]:
    """``(hosts, run_findings)`` for :func:`write_export` from an ``analyze`` Result: per host its
    tables and the findings about it; ``run_findings`` is every finding, once, for a multi-host run
    (None for one host: its findings go on its own track)."""
    findings = list(getattr(result, "findings", None) or [])
    hosts = list(getattr(result, "hosts", None) or [])
    if len(hosts) <= 1:
        name = hosts[0].host if hosts else ""
        return [(name, result.tables, findings)], None
    metrics = result.metrics

    def about(f: Any, host: str) -> bool:
        scope = _scope(f)
        if scope == "none":
            return False
        if scope.startswith("host:"):
            return str(metrics.get(scope[len("host:"):])) == host
        return True

    return [(h.host, h.tables, [f for f in findings if about(f, h.host)]) for h in hosts], findings


def _us(ps: Any, t0: int = 0) -> float:
    return round((int(ps) - t0) / PS_PER_US, 6)


def _field(f: Any, name: str, default: Any) -> Any:
    """A finding's field, from a Finding or its dict (:func:`tfadvisor.report.get`), ``default`` for None."""
    v = get(f, name)
    return default if v is None else v


def _rule_of(f: Any) -> str:
    return str(_field(f, "rule", ""))


def _marks(f: Any) -> list[str]:
    return [str(m) for m in _field(f, "marks", [])]


def _scope(f: Any) -> str:
    return str(_field(f, "scope", "run"))


def _marking(findings: list, mark: str) -> list[str]:
    """The rule ids of the findings that mark ``mark``, each once."""
    return list(dict.fromkeys(_rule_of(f) for f in findings if mark in _marks(f)))


class _Writer:
    """Writes trace events (JSON text) to ``out`` as the elements of one array, in chunks."""

    CHUNK = 20_000

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.events: list[str] = []
        self.count = 0

    def add(self, text: str) -> None:
        self.events.append(text)
        if len(self.events) >= self.CHUNK:
            self.flush()

    def flush(self) -> None:
        if self.events:
            self.out.write((",\n" if self.count else "") + ",\n".join(self.events))
            self.count += len(self.events)
            self.events.clear()

    @property
    def n(self) -> int:
        return self.count + len(self.events)

    def meta(self, pid: int, what: str, name: str, tid: int | None = None) -> None:
        ev: dict[str, Any] = {"ph": "M", "pid": pid, "name": what, "args": {"name": name}}
        if tid is not None:
            ev["tid"] = tid
        self.add(json.dumps(ev))

    def sort_index(self, pid: int, index: int) -> None:
        self.add(json.dumps({"ph": "M", "pid": pid, "name": "process_sort_index",
                                       "args": {"sort_index": index}}))

    def slice(self, pid: int, tid: int, name: str, ts: float, dur: float, args: dict | None = None,
              cat: str = "tfadvisor") -> None:
        ev: dict[str, Any] = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            ev["args"] = args
        self.add(json.dumps(ev))


def _plane_events(w: _Writer, plane: Plane, pid: int, t0: int, rows: np.ndarray,
                  rules_by_meta: dict[int, str]) -> None:
    """The chosen rows of one plane as X slices, one thread per line."""
    names = [json.dumps(str(n)) for n in plane.event_names]
    cat = json.dumps("device" if plane.is_device else "host")
    start = plane.ev_start_ps[rows]
    dur = plane.ev_dur_ps[rows]
    meta = plane.ev_meta[rows]
    tids = _line_tids(plane)[plane.ev_line[rows]]
    unknown = json.dumps("<unknown>")
    for s, d, m, tid in zip(start.tolist(), dur.tolist(), meta.tolist(), tids.tolist()):
        name = names[m] if m >= 0 else unknown
        rule = rules_by_meta.get(m)
        args = f',"args":{{"{RULE_ARG}":{json.dumps(rule)}}}' if rule else ""
        w.add(f'{{"ph":"X","cat":{cat},"name":{name},"pid":{pid},"tid":{int(tid)},'
                        f'"ts":{round((s - t0) / PS_PER_US, 6)},"dur":{round(d / PS_PER_US, 6)}{args}}}')


def _line_tids(plane: Plane) -> np.ndarray:
    """One small thread id per line (1..n): Perfetto reads ``tid`` as a 32-bit number and puts any
    larger or negative one (XPlane line ids are 64-bit) on the process's own track, merging threads."""
    return np.arange(1, len(plane.lines) + 1, dtype=np.int64)


def _rules_by_meta(plane: Plane, findings: Iterable[Any]) -> dict[int, str]:
    """Event metadata index -> the comma-joined rule ids whose findings mark events of that kind."""
    out: dict[int, list[str]] = {}
    for f in findings:
        rule = _rule_of(f)
        for mark in _marks(f):
            for m in np.flatnonzero(event_mask(plane, mark)).tolist():
                if rule not in out.setdefault(m, []):
                    out[m].append(rule)
    return {m: ",".join(r) for m, r in out.items()}


def _choose_rows(planes: list[Plane], annotated: list[np.ndarray], budget: int | None) -> tuple[list[np.ndarray], int]:
    """Rows to write per plane: all when within ``budget``, else every annotated event plus the longest
    of the others (one duration threshold over all planes). Returns the rows and how many were left out."""
    total = sum(p.n_events for p in planes)
    if budget is None or total <= budget:
        return [np.arange(p.n_events) for p in planes], 0
    keep_ann = [np.flatnonzero(a) for a in annotated]
    room = max(0, budget - sum(k.shape[0] for k in keep_ann))
    others = [p.ev_dur_ps[~a] for p, a in zip(planes, annotated)]
    pool = np.concatenate(others) if others else np.empty(0, np.int64)
    if room == 0 or pool.shape[0] == 0:
        cut = np.iinfo(np.int64).max
    elif room >= pool.shape[0]:
        cut = np.iinfo(np.int64).min
    else:
        cut = np.partition(pool, pool.shape[0] - room)[pool.shape[0] - room]
    takes = [a | (p.ev_dur_ps > cut) for p, a in zip(planes, annotated)]
    free = room - sum(int((t & ~a).sum()) for t, a in zip(takes, annotated))
    for p, take in zip(planes, takes):
        if free > 0:  # ties at the threshold, in time order, while room is left
            ties = np.flatnonzero(~take & (p.ev_dur_ps == cut))[:free]
            take[ties] = True
            free -= ties.shape[0]
    rows = [np.flatnonzero(t) for t in takes]
    return rows, total - sum(r.shape[0] for r in rows)


def _finding_slice(w: _Writer, pid: int, f: Any, t0: int, t1: int, hosts: list[str] | None = None) -> None:
    d = f.to_dict() if hasattr(f, "to_dict") else dict(f)
    args = {RULE_ARG: d.get("rule"), "severity": d.get("severity"), "message": d.get("message"),
            "impact_pct": d.get("impact_pct")}
    if hosts is not None:
        args["hosts"] = ", ".join(hosts)
    w.slice(pid, 3, f"{d.get('severity', '')}: {d.get('title', '')}", 0.0, _us(t1, t0), args)


def _host_tracks(w: _Writer, pid: int, host: str, tables: Mapping[str, pd.DataFrame], findings: list,
                 t0: int, t1: int, findings_track: bool = True) -> tuple[int, Counter]:
    """The ``tfadvisor <host>`` process: steps, gaps and (``findings_track``) findings tracks.
    Returns the slices written and how many steps / gaps carry a rule."""
    n = w.n
    marked: Counter = Counter()
    w.meta(pid, "process_name", f"tfadvisor {host}".strip())
    w.sort_index(pid, -1)
    tracks = ((1, "steps"), (2, "gaps between steps")) + (((3, "findings"),) if findings_track else ())
    for tid, label in tracks:
        w.meta(pid, "thread_name", label, tid)
    steps = tables.get("steps")
    step_rules, outlier_rules = _marking(findings, "steps"), _marking(findings, "outlier_steps")
    pattern_rules = _marking(findings, "pattern_steps")
    held = set().union(*held_steps(tables.get("step_patterns")))
    if steps is not None and len(steps):
        for row in steps.itertuples(index=False):
            out = bool(getattr(row, "outlier", False))
            on = step_rules + [r for r in outlier_rules if out and r not in step_rules]
            on += [r for r in pattern_rules if int(row.step) in held and r not in on]
            args: dict[str, Any] = {"step": int(row.step), "duration_ms": round(float(row.duration_ms), 4),
                                    "outlier": bool(getattr(row, "outlier", False))}
            if on:
                args[RULE_ARG] = ",".join(on)
                marked["steps"] += 1
            w.slice(pid, 1, f"step {int(row.step)}", _us(row.start_ps, t0), _us(row.end_ps, row.start_ps),
                    args)
    gaps = tables.get("gaps")
    if gaps is not None and len(gaps):
        gap_rules = _marking(findings, "gaps")
        selects = gap_rules and "marked" in gaps.columns  # what the mark selects (the gaps analysis says)
        about = gaps["marked"].to_numpy(bool) if selects else np.zeros(len(gaps), bool)
        for row, on in zip(gaps.itertuples(index=False), about.tolist()):
            args = {"duration_ms": round(float(row.duration_ms), 4), "host_activity": str(row.host_activity)}
            if "idle_ms" in gaps:
                args["idle_ms"] = round(float(row.idle_ms), 4)
            if on:
                args[RULE_ARG] = ",".join(gap_rules)
                marked["gaps"] += 1
            w.slice(pid, 2, "gap", _us(row.start_ps, t0), _us(row.end_ps, row.start_ps), args)
    if findings_track:
        for f in findings:
            _finding_slice(w, pid, f, t0, t1)
    return w.n - n, marked


def export_events(out: TextIO, trace: Trace, hosts: list[tuple[str, Mapping[str, pd.DataFrame], list]],
                  max_events: int | None = MAX_EVENTS, run_findings: list | None = None) -> dict[str, int]:
    """Write the trace's events (the ``traceEvents`` array's elements) to ``out``; returns counts.
    ``hosts`` is ``(host, tables, findings about that host)`` per host; ``run_findings`` (a
    multi-host run's findings, each once) go on a ``tfadvisor run`` process instead of the hosts'
    findings tracks."""
    t0, t1 = trace.time_span_ps()
    w = _Writer(out)
    by_host = {h: fs for h, _, fs in hosts}
    planes = [p for p in trace.planes if p.n_events]
    rules_meta = [_rules_by_meta(p, by_host.get(p.host, [])) for p in planes]
    annotated = []
    for p, rm in zip(planes, rules_meta):
        mm = np.zeros(len(p.event_names), bool)
        mm[list(rm)] = True
        annotated.append(p.event_mask(mm))
    rows, dropped = _choose_rows(planes, annotated, max_events)
    tracks = 0
    marked: Counter = Counter()
    if run_findings is not None:
        pid = 9_999
        w.meta(pid, "process_name", "tfadvisor run")
        w.sort_index(pid, -2)
        w.meta(pid, "thread_name", "findings", 3)
        n = w.n
        for f in run_findings:
            _finding_slice(w, pid, f, t0, t1, [h for h, _, fs in hosts if any(g is f for g in fs)])
        tracks += w.n - n
    for i, (host, tables, findings) in enumerate(hosts):
        written, on = _host_tracks(w, 10_000 + i, host, tables, findings, t0, t1, run_findings is None)
        tracks += written
        marked += on
    for pid, (p, r, rm) in enumerate(zip(planes, rows, rules_meta), start=1):
        w.meta(pid, "process_name", f"{p.host} {p.name}".strip())
        w.sort_index(pid, pid)
        ids = p.lines["id"] if "id" in p.lines else np.arange(len(p.lines))
        for tid, lid, lname in zip(_line_tids(p).tolist(), ids.tolist(), p.line_names.tolist()):
            w.meta(pid, "thread_name", f"{lname} (line {lid})", tid)
        _plane_events(w, p, pid, t0, r, rm)
    w.flush()
    return {"dropped": int(dropped), "written": int(sum(x.shape[0] for x in rows)),
            "annotated": int(sum(int(a.sum()) for a in annotated)), "tracks": tracks,
            "marked_steps": marked["steps"], "marked_gaps": marked["gaps"]}


def write_export(path: str | Path, trace: Trace, hosts: list[tuple[str, Mapping[str, pd.DataFrame], list]],
                 max_events: int | None = MAX_EVENTS, run_findings: list | None = None) -> dict[str, int]:
    """Write the JSON trace to ``path``; returns counts (events written, left out, annotated).
    ``otherData["tfadvisor.findings"]`` lists the findings' rule ids, most important first."""
    with Path(path).open("w", encoding="utf-8") as fh:
        fh.write('{"displayTimeUnit":"ms","traceEvents":[\n')
        counts = export_events(fh, trace, hosts, max_events, run_findings)
        every = run_findings if run_findings is not None else [f for _, _, fs in hosts for f in fs]
        other = {"tfadvisor.run": trace.run_name, "tfadvisor.dropped_events": counts["dropped"],
                 "tfadvisor.max_events": max_events,
                 "tfadvisor.findings": list(dict.fromkeys(_rule_of(f) for f in every))}
        fh.write("\n],\n\"otherData\":" + json.dumps(other) + "}\n")
    return counts


__all__ = ["MAX_EVENTS", "RULE_ARG", "export_events", "host_parts",
           "write_export"]
