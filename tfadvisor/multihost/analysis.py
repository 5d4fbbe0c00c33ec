"""Multi-host profiles: analyse every host file (through :mod:`tfadvisor.multihost.runtime`), then compare the hosts.

A run with several host files (``<run>/<host>.xplane.pb``, one per worker of a
``MultiWorkerMirroredStrategy``/Horovod/TPU job) is analysed one host at a time: each task loads
ONE host file and sends back only the small per-host result (:mod:`tfadvisor.multihost.worker`),
at most ``jobs`` hosts in flight, in this process, in worker processes or on a Dask cluster
(:mod:`tfadvisor.multihost.runtime`). The scaling view across runs is :mod:`tfadvisor.multihost.scaling`.

The per-host results are combined identically whatever ran them (:func:`combine_hosts`):

* the table ``hosts`` (one row per host: steps, step time, per-step category times,
  compute / input / "work" per step, AllReduce per step, memory peak) and ``hosts_steps``
  (host x step, aligned by step number);
* cross-host metrics (source ``multihost``, listed in ``tfadvisor/analyses/README.md``):
  ``hosts_count``, ``hosts_expected``, ``missing_hosts``, ``missing_hosts_count``,
  ``straggler_host``, ``straggler_ratio``, ``slowest_host``, ``slowest_host_ratio``,
  ``load_imbalance_pct``, ``slowest_host_excess_pct``, ``hosts_misaligned``, ``hosts_misaligned_count``,
  ``common_steps``, ``median_host``;
* run-level per-step figures are those of the **median host** (by work per step, compute +
  input, or by mean step time where that is unknown; the lower median for an even count): a
  real, typical host, and the reference of every cross-host ratio. Averages over hosts would mix the straggler
  (all compute) with the hosts waiting for it (compute + AllReduce wait) into a step no host
  ran; the per-host detail is in ``Result.hosts`` and the ``hosts`` table.

Steps are aligned by step number, not by wall clock (each host file's timestamps are relative
to its own profile start). Per-host figures use the steps every host has (``common_steps``),
minus the first and last when the steps table leaves them out of its statistics.

Straggler: a host's *work* per step is its compute (device compute, host compute, kernel
launch, other) plus input time. The slowest host is a straggler when its work is more than
1.2x the median host's and the other hosts see it as a longer AllReduce wait (their median
AllReduce time per step is longer than its own); with no AllReduce in the trace the ratio alone
decides. ``load_imbalance_pct`` is (max - min) / the median host's compute time per step;
``slowest_host_excess_pct`` is the slowest host's work beyond the median host's, % of the
median host's step time (the time the run would gain per step: the rules' impact).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tfadvisor.analyses import HostAnalysis, Metric, Metrics, Options
from tfadvisor.analyses.devices import DECLARED as DEVICES
from tfadvisor.analyses.hosts import DECLARED, STAND_OUT_MADS, STAND_OUT_REL, STRAGGLER_RATIO
from tfadvisor.analyses.steps import CATEGORIES, marker_steps  # CATEGORIES: the steps table's ``<category>_ms``
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import Run, host_name
from tfadvisor.io.reader import _size, read_run_metadata
from tfadvisor.io.runmeta import positive as _positive
from tfadvisor.model.table import Table, Tables, to_float
from tfadvisor.multihost.runtime import Observer, run_hosts
from tfadvisor.multihost.runtime.local import PEAK_PER_FILE_BYTE
from tfadvisor.units import finite_number

if TYPE_CHECKING:
    import pandas as pd  # imported where a table is built: the metric registry reads this module

#: Categories that count as compute (work that is not input and not waiting).
COMPUTE = ("device_compute", "host_compute", "kernel_launch", "other")

#: Up to this many hosts every host is analysed in full. Above it each host runs the comparison analyses
#: only (:data:`tfadvisor.analyses.COMPARISON`) and sends back the tables read per host
#: (:data:`tfadvisor.multihost.worker.HOST_TABLES`): the others are half of a small host's analysis, and
#: the reports read them for the median host and the hosts that stand out only, which are analysed again
#: in full once they are known (at most :data:`FULL_STAND_OUTS` of the latter).
ALL_TABLES_UP_TO = 16

#: Of a run of many hosts, the hosts that stand out analysed again in full (the straggler first) at most.
FULL_STAND_OUTS = 4

Progress = Callable[[int, int], None]


def analyze_run(
    run: Run,
    options: Options | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    trace: Any = None,
):
    """The one path from a run to its metrics and tables (no findings): every host of a multi-host run
    through :func:`analyze_hosts`, a single host here (``trace``: already loaded, not read again).
    The facade (:func:`tfadvisor.api.analyze`) and the scaling view both start here."""
    from tfadvisor.analyses import analyze_trace, event_stats, options_from
    from tfadvisor.io.reader import load_run
    from tfadvisor.multihost.result import RunResult

    if len(run.files) > 1:
        return analyze_hosts(run, options=options, progress=progress, jobs=jobs, dask=dask)
    trace = trace if trace is not None else load_run(run, progress=progress, stats=event_stats())
    opts = options_from(trace, options)
    host = analyze_trace(trace, opts, host=trace.hosts[0] if trace.hosts else "")
    return RunResult(run=run, summary=trace.summary(), metrics=host.metrics, tables=Tables(host.tables),
                     notes=list(host.notes), hosts=[host], options=opts)


def analyze_hosts(
    run: Run,
    options: Options | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
    dask: str | None = None,
    observe: Observer | None = None,
):
    """Analyse every host of ``run`` in parallel and combine them into one ``api.Result``.

    ``jobs`` / ``dask``: the executor (:mod:`tfadvisor.multihost.runtime`). ``progress(bytes_done, bytes_total)``
    as hosts finish. ``observe``: called with a :class:`tfadvisor.multihost.runtime.HostEvent` as each host is
    started and finished (:class:`tfadvisor.multihost.runtime.InFlight` keeps the peak number in flight)."""
    hosts = list(dict.fromkeys(run.hosts))
    if not hosts:
        raise TraceError(run.directory, "no host files in this run")
    if jobs is not None and jobs < 1:
        raise TraceError("--jobs", f"must be 1 or more (got {jobs})")
    metadata = read_run_metadata(run.directory)
    sizes = dict.fromkeys(hosts, 0)  # one pass over the files (256 hosts: 65,536 name tests when asked per host)
    for f in run.files:
        sizes[host_name(f)] += _size(f)
    total = sum(sizes.values())
    done = 0
    if progress is not None:
        progress(0, total)
    payloads: dict[str, dict] = {}
    full: dict[str, dict] = {}  # the hosts analysed again in full (hosts_in_full), by the same workers
    tables = "all" if len(hosts) <= ALL_TABLES_UP_TO else "host"
    compared: list = []  # _rows_of the comparison payloads, worked out once for more() and combine_hosts

    def more() -> list[str]:
        got = [payloads[h] for h in hosts]
        compared[:] = [_rows_of(got)]
        return hosts_in_full(got, compared[0])

    stream, executor = run_hosts(run, hosts, options, jobs=jobs, dask=dask, total_bytes=total, observe=observe,
                                 tables=tables, more=more if tables == "host" else None, sizes=sizes)
    canon: dict[str, dict] = {}
    try:
        for host, payload in stream:
            if host in payloads:
                full[host] = _checked(payload)
                continue
            payloads[host] = _shared(_checked(payload), canon)
            done += sizes.get(host, 0)
            if progress is not None:
                progress(done, total)
    finally:
        stream.close()  # on an error: cancel what has not started, stop the workers
    ordered = [payloads[h] for h in hosts]

    def in_full(host: str) -> dict:
        stream, _ = run_hosts(run, [host], options, jobs=1, dask=dask, tables="all")
        try:
            _, payload = next(stream)
        finally:
            stream.close()
        return _checked(payload)

    return combine_hosts(run, ordered, metadata=metadata, executor=executor, in_full=in_full, full=full,
                         rows=compared[0] if compared else None)


def _shared(payload: dict, canon: dict[str, dict]) -> dict:
    """``payload`` with its metrics' units, meanings and sources replaced by ``canon``'s where equal (hosts
    alike send the same ones: a run of many hosts keeps one copy, not one per host)."""
    for key in ("units", "docs", "source"):
        if canon.get(key) == payload.get(key):
            payload[key] = canon[key]
        else:
            canon[key] = payload.get(key)
    return payload


def _checked(payload: dict) -> dict:
    """A host's payload; a host's bad input (sent back as ``error``: it does not pickle) raised again here."""
    if "error" in payload:
        raise TraceError(payload["error"]["path"], payload["error"]["problem"])
    return payload


# ---------------------------------------------------------------------------------------------
# Combining the hosts
# ---------------------------------------------------------------------------------------------
def _host_analysis(p: dict) -> HostAnalysis:
    m = Metrics()
    m.update(p["metrics"])
    for have, sent in ((m.units, p["units"]), (m.docs, p["docs"]), (m.source, p["source"])):
        have.update({k: sent.get(k, "") for k in m})
    m.notes.update({k: list(v) for k, v in p.get("qualified", {}).items()})
    return HostAnalysis(host=p["host"], metrics=m, tables=Tables(p["tables"]), notes=list(p["notes"]), results={})


def _steps_of(ha: HostAnalysis) -> Table | None:
    """A host's steps table as columns, without building its DataFrame (None without steps)."""
    if "steps" not in ha.tables:
        return None
    raw = ha.tables.raw("steps")
    if callable(raw) and not isinstance(raw, Table):
        raw = ha.tables["steps"]
    if raw is None or isinstance(raw, Table):
        return raw
    return Table({c: raw[c].to_numpy() for c in raw.columns}, n=len(raw))  # a DataFrame


def _step_numbers(tbl: Table | None) -> set[int]:
    if tbl is None or "step" not in tbl or len(tbl) == 0:
        return set()
    s = to_float(tbl["step"])
    return {int(x) for x in s[~np.isnan(s)]}


def _alignment(steps: dict[str, set[int]]) -> tuple[set[int], list[str]]:
    """(steps common to every host with steps, hosts whose step numbers do not line up).

    A host lines up when at least half of its steps are step numbers that more than half of
    the hosts have."""
    with_steps = {h: s for h, s in steps.items() if s}
    if not with_steps:
        return set(), []
    common = set.intersection(*with_steps.values())
    if len(with_steps) < 2:
        return common, []
    counts: dict[int, int] = {}
    for s in with_steps.values():
        for x in s:
            counts[x] = counts.get(x, 0) + 1
    majority = {x for x, c in counts.items() if c > len(with_steps) / 2}
    bad = [h for h, s in with_steps.items() if len(s & majority) < 0.5 * len(s)]
    return common, bad


def _host_row(ha: HostAnalysis, common: set[int], payload: dict) -> dict[str, Any]:
    m = ha.metrics
    tbl = _steps_of(ha)
    row: dict[str, Any] = {
        "host": ha.host,
        "steps": int(m.get("steps_count") or 0),
        "steps_used": 0,
        "step_time_mean_ms": finite_number(m.get("step_time_mean_ms")),
        "step_time_median_ms": finite_number(m.get("step_time_median_ms")),
    }
    cat = {c: None for c in CATEGORIES}
    if tbl is not None and len(tbl):
        sel = np.ones(len(tbl), bool)
        if common and "step" in tbl:
            in_common = np.isin(to_float(tbl["step"]), list(common))
            if in_common.any():
                sel = in_common
        if "in_stats" in tbl:
            stats = sel & np.asarray(tbl["in_stats"], bool)
            if stats.any():
                sel = stats
        row["steps_used"] = int(sel.sum())
        # per training step, as the step time: a marker under steps_per_execution=k holds k of them
        k = marker_steps(tbl)[sel].astype(np.float64)
        for c in CATEGORIES:
            col = f"{c}_ms"
            if col in tbl:
                cat[c] = _per_training_step(tbl[col][sel], k)
        if "duration_ms" in tbl:
            row["step_time_used_ms"] = _per_training_step(tbl["duration_ms"][sel], k)
    for c in CATEGORIES:
        row[f"{c}_ms"] = cat[c]
    known = [cat[c] for c in COMPUTE if cat[c] is not None]
    row["compute_ms"] = float(sum(known)) if known else None
    row["input_ms"] = cat["input"]
    row["work_ms"] = (row["compute_ms"] + (cat["input"] or 0.0)) if row["compute_ms"] is not None else None
    row["wait_ms"] = ((cat["collective"] or 0.0) + (cat["idle"] or 0.0)) if cat["collective"] is not None else None
    inp = finite_number(m.get("input_pct"))
    row["input_pct"] = inp if inp is not None else finite_number(m.get("step_input_pct"))
    ar = finite_number(m.get("allreduce_ms_per_step"))
    if ar is None and m.get("allreduce_present") and cat["collective"] is not None:
        ar = cat["collective"]
    row["allreduce_ms_per_step"] = ar
    row["memory_peak_bytes"] = finite_number(m.get("memory_peak_bytes"))
    row["device_straggler"] = m.get("device_straggler")
    row["device_straggler_ratio"] = finite_number(m.get("device_straggler_ratio"))
    summ = payload.get("summary") or {}
    row["events"] = int(summ.get("events") or 0)
    row["file_bytes"] = int(summ.get("file_bytes") or 0)
    row.setdefault("step_time_used_ms", None)
    return row


def _expected_hosts(metadata: dict) -> tuple[int | None, list[str] | None]:
    names = metadata.get("host_names")
    names = [str(n) for n in names] if isinstance(names, (list, tuple)) else None
    n = metadata.get("hosts")
    expected: int | None
    if isinstance(n, bool):
        expected = None
    elif isinstance(n, (int, float)):
        expected = _positive(n, True)  # NaN, inf, 2.5 or -1 hosts: unknown
    elif isinstance(n, (list, tuple)):  # a list of names under "hosts"
        names = names or [str(x) for x in n]
        expected = len(n)
    else:
        expected = None
    if expected is None and names is not None:
        expected = len(names)
    return expected, names


def _norm(name: str) -> str:
    return name.replace(":", "_").lower()


def _present(expected_name: str, loaded: list[str]) -> bool:
    """``worker0`` is present as ``worker0`` or as ``worker0_6009`` (remote capture adds the port)."""
    e = _norm(expected_name)
    for h in loaded:
        n = _norm(h)
        if n == e or re.fullmatch(re.escape(e) + r"_\d+", n) or re.fullmatch(re.escape(n) + r"_\d+", e):
            return True
    return False


def _median_host(rows: list[dict]) -> int:
    """Index of the median host (the lower median; hosts without steps last) by work per step
    (compute + input, what the straggler check compares), or by mean step time where the work
    of a host with steps is unknown. The same host is the straggler ratio's reference, so the
    slowest host is the median host only when all hosts work alike."""
    stepped = [(i, r) for i, r in enumerate(rows) if r["steps"] and r["step_time_mean_ms"] is not None]
    if not stepped:
        return 0
    key = "work_ms" if all(r["work_ms"] is not None for _, r in stepped) else "step_time_mean_ms"
    ordered = sorted(stepped, key=lambda ir: (ir[1][key], ir[1]["step_time_mean_ms"], ir[0]))
    return ordered[(len(ordered) - 1) // 2][0]


def _merge_summaries(run: Run, payloads: list[dict], executor: dict) -> dict[str, Any]:
    planes: list = []
    events = 0
    span = 0.0
    file_bytes = 0
    hosts: list[str] = []
    for p in payloads:
        s = p.get("summary") or {}
        planes.extend(s.get("planes") or [])
        events += int(s.get("events") or 0)
        span = max(span, float(s.get("time_span_ms") or 0.0))
        file_bytes += int(s.get("file_bytes") or 0)
        hosts.extend(s.get("hosts") or [p["host"]])
    return {
        "run": run.name,
        "run_dir": run.directory,
        "files": list(run.files),
        "file_bytes": file_bytes,
        "hosts": list(dict.fromkeys(hosts)),
        "events": events,
        "time_span_ms": span,  # the longest host's span: each file's clock starts at its own profile
        "planes": planes,
        **executor,
    }


def _rows_of(payloads: list[dict]) -> tuple[list[HostAnalysis], list[dict], set[int], list[str], int]:
    """The hosts' analyses, their rows of the ``hosts`` table, the step numbers every host has, the hosts
    whose steps do not line up, and the median host's index."""
    has = [_host_analysis(p) for p in payloads]
    steps = {h.host: _step_numbers(_steps_of(h)) for h in has}
    common, misaligned = _alignment(steps)
    rows = [_host_row(h, common, p) for h, p in zip(has, payloads)]
    return has, rows, common, misaligned, _median_host(rows)


def _drawn(rows: list[dict], payloads: list[dict], straggler: str | None) -> list[int]:
    """The hosts that stand out and are drawn (charts, timeline), the straggler first: at most
    :data:`FULL_STAND_OUTS` of those whose payloads hold the comparison analyses only."""
    return sorted((i for i, r in enumerate(rows) if r["stands_out"] and payloads[i].get("tables_kept") == "host"),
                  key=lambda i: (rows[i]["host"] != straggler, i))[:FULL_STAND_OUTS]


def hosts_in_full(payloads: list[dict], rows: tuple | None = None) -> list[str]:
    """The hosts :func:`combine_hosts` reads in full (every analysis and table) when the payloads hold the
    comparison analyses only: the median host, then the hosts drawn (:func:`_drawn`). Known from the
    comparison payloads alone, so that an executor can analyse them while its workers are still up.
    ``rows``: :func:`_rows_of` the payloads, when already worked out."""
    if not payloads:
        return []
    has, rows, _, misaligned, mi = rows if rows is not None else _rows_of(payloads)
    straggler, ratio, *_ = _straggler(rows, mi, len(has), [])
    med_row = rows[mi]
    _stand_out(rows, straggler, ratio, misaligned, med_row["step_time_used_ms"] or med_row["step_time_mean_ms"])
    want = [rows[mi]["host"]] if payloads[mi].get("tables_kept") == "host" else []
    return want + [rows[i]["host"] for i in _drawn(rows, payloads, straggler) if i != mi]


def combine_hosts(run: Run, payloads: list[dict], metadata: dict | None = None, executor: dict | None = None,
                  in_full: Callable[[str], dict] | None = None, full: dict[str, dict] | None = None,
                  rows: tuple | None = None):
    """Combine per-host results (from :func:`tfadvisor.multihost.worker.analyze_host`) into a Result.

    For the median host and the hosts that stand out, when their payloads hold the comparison analyses and
    per-host tables only, the payload with every analysis and table: from ``full`` (host -> payload; see
    :func:`hosts_in_full`), else from ``in_full(host)``. ``rows``: :func:`_rows_of` these payloads, when
    already worked out (:func:`hosts_in_full` did; its ``stands_out`` are set again here)."""
    from tfadvisor.multihost.result import RunResult as Result

    def whole(host: str) -> dict | None:
        got = (full or {}).get(host)
        return got if got is not None else (in_full(host) if in_full is not None else None)

    metadata = metadata or {}
    has, rows, common, misaligned, mi = rows if rows is not None else _rows_of(payloads)
    has = list(has)
    names = [h.host for h in has]
    notes: list[str] = []

    median = has[mi]
    if payloads[mi].get("tables_kept") == "host" and (got := whole(median.host)) is not None:
        median = has[mi] = _host_analysis(got)
    # what loading fixed on the other hosts (the median host's own notes are shown as they are)
    for h in has:
        if h is not median:
            notes.extend(f"load: {h.host}: {n[6:]}" for n in h.notes
                         if n.startswith("load: ") and n not in median.notes)
    metrics = Metrics()
    for k, v in median.metrics.items():
        metrics[k] = v
        metrics.units[k] = median.metrics.units.get(k, "")
        metrics.docs[k] = median.metrics.docs.get(k, "")
        metrics.source[k] = median.metrics.source.get(k, "")
    metrics.notes.update({k: list(v) for k, v in median.metrics.notes.items()})

    def put(name: str, value: Any, doc: str = "") -> None:
        spec = DECLARED.spec(name)  # raises for a metric not declared above
        metrics.put("multihost", name, Metric(_plain(value), spec.unit, doc or spec.doc))

    put("hosts_count", len(has))
    put("median_host", median.host)
    if (executor or {}).get("waited_for_memory"):
        notes.append(f"multihost: {executor['waited_for_memory']} host(s) waited for memory, not only for a free "
                     f"slot: counted at ~{PEAK_PER_FILE_BYTE} bytes per byte of their files, they did not fit "
                     f"beside the hosts in flight in the {executor['memory_available_mb']:,} MB available")
    notes.append(f"multihost: per-step figures are those of {median.host}, the median host by work per step "
                 f"(of {len(has)}); every host is in the 'hosts' table")

    # Missing hosts.
    expected, expected_names = _expected_hosts(metadata)
    missing: list[str] | None = None
    if expected_names is not None:
        missing = [n for n in expected_names if not _present(n, names)]
    put("hosts_expected", expected)
    if missing is not None:
        put("missing_hosts", ", ".join(missing) or None)
        put("missing_hosts_count", len(missing))
    elif expected is not None:
        put("missing_hosts", None)
        put("missing_hosts_count", max(0, expected - len(has)))
    else:
        put("missing_hosts", None)
        put("missing_hosts_count", None)
        notes.append("multihost: the expected host count is unknown (no hosts / host_names in tfadvisor_run.json)")

    # Alignment by step number.
    put("common_steps", len(common))
    put("hosts_misaligned", ", ".join(misaligned) or None)
    put("hosts_misaligned_count", len(misaligned))
    no_steps = [r["host"] for r in rows if not r["steps"]]
    if no_steps:
        notes.append(f"multihost: no steps on {', '.join(no_steps)}: left out of the cross-host comparison")
    if misaligned:
        notes.append(f"multihost: step numbers of {', '.join(misaligned)} do not line up with the other hosts' "
                     "(profiles of different steps?): per-host figures use each host's own steps")
    elif not common and len(rows) - len(no_steps) >= 2:
        notes.append("multihost: no step number is on every host: per-host figures use each host's own steps")

    # Straggler and imbalance.
    med_row = rows[mi]
    step_ms = med_row["step_time_used_ms"] or med_row["step_time_mean_ms"]  # the median host's step
    straggler, straggler_ratio, slowest, slowest_ratio, imbalance, excess = _straggler(rows, mi, len(has), notes)
    # What the straggler costs the others: their wait (collectives + idle) per step beyond its own.
    wait_caused = wait_caused_pct = None
    if straggler is not None:
        own = next(r for r in rows if r["host"] == straggler)["wait_ms"]
        others = [r["wait_ms"] for r in rows if r["host"] != straggler and r["steps"] and r["wait_ms"] is not None]
        if own is not None and others:
            wait_caused = max(0.0, float(np.median(others)) - own)
            if step_ms:
                wait_caused_pct = min(100.0, 100.0 * wait_caused / step_ms)
    # The run's device straggler: the slow device furthest from its host's median device, on any host.
    dev = max((r for r in rows if r["device_straggler"] and r["device_straggler_ratio"] is not None),
              key=lambda r: r["device_straggler_ratio"], default=None)
    put("device_straggler_host", dev["host"] if dev is not None else None)
    if dev is not None and dev["host"] != median.host:
        src = next(h for h in has if h.host == dev["host"]).metrics
        for k in DEVICES.names():  # a run's are those of the host of its device straggler
            metrics.put(src.source.get(k, ""), k, Metric(src.get(k), src.units.get(k, ""), src.docs.get(k, "")))
        notes.append(f"multihost: the device_* figures are {dev['host']}'s, the host of the device straggler "
                     f"{dev['device_straggler']}")
    put("straggler_wait_ms", wait_caused)
    put("straggler_wait_pct", wait_caused_pct)
    put("straggler_host", straggler,
        doc=f"host whose compute + input per step is > {STRAGGLER_RATIO}x the median host's while the others wait "
            "longer in AllReduce")
    put("straggler_ratio", straggler_ratio)
    put("slowest_host", slowest)
    put("slowest_host_ratio", slowest_ratio)
    put("load_imbalance_pct", imbalance)
    put("slowest_host_excess_pct", excess)

    _stand_out(rows, straggler, straggler_ratio, misaligned, step_ms)
    put("hosts_standing_out_count", sum(1 for r in rows if r["stands_out"]))
    for i in _drawn(rows, payloads, straggler):  # the hosts that stand out are drawn (charts, timeline): in full
        if i != mi and (got := whole(has[i].host)) is not None:
            has[i] = _host_analysis(got)
    tables = Tables(median.tables)
    # built when a report reads them (pandas is imported then, as for a single host's tables)
    tables["hosts"] = functools.partial(_hosts_frame, rows)
    tables["hosts_distribution"] = functools.partial(_distribution, rows)
    tables["hosts_steps"] = functools.partial(_hosts_steps, list(has))
    first_opts = payloads[mi].get("options") or {}
    opts = Options(**{k: v for k, v in first_opts.items() if k in {f.name for f in dataclasses.fields(Options)}})
    return Result(run=run, summary=_merge_summaries(run, payloads, executor or {}), metrics=metrics,
                  tables=tables, notes=list(median.notes) + notes, hosts=has, options=opts)


def _straggler(rows: list[dict], mi: int, n_hosts: int, notes: list[str]) -> tuple:
    """(straggler, its ratio, slowest host, its ratio, load imbalance %, slowest host's excess %) from the
    hosts' rows (``mi``: the median host's); sets each row's ``work_ratio`` and adds the notes that explain."""
    work = [(r["host"], r["work_ms"]) for r in rows if r["work_ms"] is not None and r["steps"]]
    straggler = straggler_ratio = slowest = slowest_ratio = imbalance = excess = None
    for r in rows:
        r["work_ratio"] = None
    med_row = rows[mi]
    step_ms = med_row["step_time_used_ms"] or med_row["step_time_mean_ms"]  # the median host's step
    if len(work) >= 2 and med_row["work_ms"] is not None and med_row["steps"]:
        med_work = float(med_row["work_ms"])
        if med_work > 0:
            for r in rows:
                if r["work_ms"] is not None and r["steps"]:
                    r["work_ratio"] = r["work_ms"] / med_work
            slowest, w_max = max(work, key=lambda hw: hw[1])
            slowest_ratio = w_max / med_work
            if step_ms:
                excess = min(100.0, 100.0 * (w_max - med_work) / step_ms)
            straggler_ratio = slowest_ratio
            if slowest_ratio > STRAGGLER_RATIO:
                by_host = {r["host"]: r for r in rows}
                own = by_host[slowest]["allreduce_ms_per_step"]
                others = [by_host[h]["allreduce_ms_per_step"] for h, _ in work
                          if h != slowest and by_host[h]["allreduce_ms_per_step"] is not None]
                if own is None or not others:
                    straggler = slowest
                    notes.append(f"multihost: no AllReduce time to confirm it; {slowest} is named straggler by its "
                                 f"work per step alone ({slowest_ratio:.2f}x the median host)")
                elif float(np.median(others)) > own:
                    straggler = slowest
                else:
                    straggler_ratio = None
                    notes.append(f"multihost: {slowest} works {slowest_ratio:.2f}x the median host per step, but "
                                 f"the other hosts do not wait longer in AllReduce ({float(np.median(others)):.1f} "
                                 f"vs {own:.1f} ms per step): not named a straggler")
        compute = [r["compute_ms"] for r in rows if r["compute_ms"] is not None and r["steps"]]
        med_c = float(med_row["compute_ms"] or 0.0)
        if med_c > 0 and compute:
            imbalance = 100.0 * (max(compute) - min(compute)) / med_c
    elif n_hosts >= 2:
        notes.append("multihost: fewer than two hosts with steps: no straggler or imbalance figures")
    return straggler, straggler_ratio, slowest, slowest_ratio, imbalance, excess


#: The per-host figures summarised over the hosts (``hosts_distribution``): (``hosts`` column, unit, in
#: words, checked for hosts that stand out).
FIGURES = (
    ("step_time_mean_ms", "ms", "step time", True),  # the step time the report heads with
    ("work_ms", "ms", "work (compute + input)", True),
    ("compute_ms", "ms", "compute", False),
    ("input_ms", "ms", "input", True),
    ("wait_ms", "ms", "wait (collectives + idle)", True),
    ("allreduce_ms_per_step", "ms", "AllReduce", False),
    ("memory_peak_bytes", "bytes", "memory peak", True),
)


def _figure(row: dict, column: str) -> float | None:
    v = row.get(column)
    return float(v) if v is not None and np.isfinite(v) and row["steps"] else None


def _stand_out(rows: list[dict], straggler: str | None, ratio: float | None, misaligned: list[str],
               step_ms: float | None) -> None:
    """Set each row's ``stands_out``: why the host differs from the others ("" when it does not).

    A figure stands out when it is off the hosts' median by more than ``STAND_OUT_REL`` of it, more
    than ``STAND_OUT_MADS`` robust deviations, and (for times) more than 1 % of the median host's
    step, so that jitter between alike hosts never does."""
    why: dict[str, list[str]] = {r["host"]: [] for r in rows}
    if straggler is not None and ratio is not None:
        why[straggler].append(f"straggler: works {ratio:.2f}x the median host per step")
    for r in rows:
        if r["device_straggler"] and r["device_straggler_ratio"] is not None:
            why[r["host"]].append(f"its {r['device_straggler']} works {r['device_straggler_ratio']:.2f}x the "
                                  "host's median device per step")
    for r in rows:
        if not r["steps"]:
            why[r["host"]].append("no steps")
        elif r["host"] in misaligned:
            why[r["host"]].append("its step numbers do not line up with the others'")
    for column, unit, words, check in FIGURES:
        vals = [(r["host"], _figure(r, column)) for r in rows]
        got = np.array([v for _, v in vals if v is not None], float)
        if not check or got.size < 3:
            continue
        med = float(np.median(got))
        mad = 1.4826 * float(np.median(np.abs(got - med)))
        floor = 0.01 * step_ms if unit == "ms" and step_ms else 0.0
        limit = max(STAND_OUT_REL * abs(med), STAND_OUT_MADS * mad, floor)
        for host, v in vals:
            if v is not None and abs(v - med) > limit:
                shown = (f"{v / 2**20:,.0f} vs {med / 2**20:,.0f} MiB" if unit == "bytes"
                         else f"{v:,.3g} vs {med:,.3g} ms per step")
                why[host].append(f"{words} {shown} (median)")
    for r in rows:
        r["stands_out"] = "; ".join(why[r["host"]])


def _hosts_frame(rows: list[dict]) -> pd.DataFrame:
    """The ``hosts`` table: one row per host."""
    import pandas as pd

    return pd.DataFrame(rows)


def _distribution(rows: list[dict]) -> pd.DataFrame:
    """One row per per-host figure: how it is spread over the hosts with steps."""
    import pandas as pd

    out = []
    for column, unit, words, _ in FIGURES:
        got = np.array([v for v in (_figure(r, column) for r in rows) if v is not None], float)
        if not got.size:
            continue
        med = float(np.median(got))
        out.append({"figure": words, "column": column, "unit": unit, "hosts": int(got.size), "median": med,
                    "p10": float(np.percentile(got, 10)), "p90": float(np.percentile(got, 90)),
                    "min": float(got.min()), "max": float(got.max()),
                    "spread_pct": 100.0 * float(got.max() - got.min()) / med if med else None})
    cols = ["figure", "column", "unit", "hosts", "median", "p10", "p90", "min", "max", "spread_pct"]
    return pd.DataFrame(out, columns=cols)


def _per_training_step(values: np.ndarray, k: np.ndarray) -> float:
    """The markers' ``values`` per training step: their sum over the training steps ``k`` they hold, the markers
    without a number left out (NaN when none has one)."""
    v = to_float(values) if values.dtype.kind not in "fiub" else values.astype(np.float64)
    ok = ~np.isnan(v)
    return float(v[ok].sum() / max(float(k[ok].sum()), 1.0)) if ok.any() else float("nan")


def _hosts_steps(has: list[HostAnalysis]) -> pd.DataFrame:
    """host x step marker: its training steps, duration and category times (long form, aligned by step number)."""
    import pandas as pd

    parts = []
    for h in has:
        tbl = _steps_of(h)
        if tbl is None or not len(tbl):
            continue
        cols = [c for c in ["step", "train_steps", "duration_ms", *[f"{c}_ms" for c in CATEGORIES]] if c in tbl]
        parts.append({"host": np.full(len(tbl), h.host, dtype=object), **{c: np.asarray(tbl[c]) for c in cols}})
    if not parts:
        return pd.DataFrame(columns=["host", "step", "train_steps", "duration_ms"])
    first = parts[0]
    if all(list(p) == list(first) and all(p[c].dtype == first[c].dtype for c in first) for p in parts):
        # the hosts alike (the usual case): one frame of the joined columns, not one frame per host joined
        return pd.DataFrame({c: np.concatenate([p[c] for p in parts]) for c in first})
    return pd.concat([pd.DataFrame(p) for p in parts], ignore_index=True)


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


__all__ = ["ALL_TABLES_UP_TO", "CATEGORIES", "COMPUTE", "DECLARED", "FULL_STAND_OUTS", "STRAGGLER_RATIO",
           "analyze_hosts", "analyze_run", "combine_hosts"]
