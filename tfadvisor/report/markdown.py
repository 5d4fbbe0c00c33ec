"""The Markdown report: the HTML report's content as GitHub-flavoured Markdown.

``render_markdown(result) -> str``. Sections: summary, findings (evidence tables, fixes with
fenced code), step-time breakdown, idle gaps, the tf.data stage table, precision mix, memory
(peak and the largest live allocations), AllReduce measured vs expected, per-host step time,
training data files, notes. A section whose data the trace lacks says so and why.

Trace-derived names (op names contain ``<``, ``>``, ``&``, sometimes ``|``) go into code
spans with ``|`` escaped, so they render literally and do not break tables; prose from
notes escapes the characters Markdown or HTML would interpret.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from tfadvisor.report import plots as P
from tfadvisor.report import run_label
from tfadvisor.report.formatting import fmt_bytes, fmt_num, fmt_value


def render_markdown(result: Any) -> str:
    metrics = getattr(result, "metrics", None) or {}
    tables = getattr(result, "tables", None) or {}
    notes = list(getattr(result, "notes", None) or [])
    out: list[str] = [f"# tfadvisor report: {code(run_label(result))}", ""]
    out += _summary(result, metrics)
    out += _findings(getattr(result, "findings", None) or [], metrics)
    out += _steps(tables.get("steps"), metrics, notes)
    out += _gaps(tables.get("gaps"), tables.get("steps"), metrics, notes)
    out += _system_md(result)  # tfadvisor/report/system.py
    out += _input(tables.get("tfdata_stages"), metrics, notes)
    out += _precision(tables, metrics, notes)
    out += _memory(tables, metrics, notes)
    out += _allreduce(metrics, notes)
    out += _hosts(result)
    out += _datafiles(tables, metrics, notes)
    out += ["## Notes", ""]
    out += [f"- {text(n)}" for n in notes] or ["None."]
    out.append("")
    return "\n".join(out).rstrip() + "\n"


# --------------------------------------------------------------------------- escaping


def code(s: Any) -> str:
    """An inline code span that survives any content (backticks, pipes, angle brackets)."""
    s = str(s).replace("\n", " ").replace("|", "\\|")
    if not s:
        return ""
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|]|(?<!\w)_|_(?!\w)|^#|&(?=#?\w+;))")


def text(s: Any) -> str:
    """Plain text with Markdown/HTML specials backslash-escaped (renders as written)."""
    return _MD_SPECIAL.sub(lambda m: "&amp;" if m.group(0) == "&" else "\\" + m.group(0), str(s).replace("\n", " "))


def prose(s: str) -> str:
    """Rule-written text: keep its `code spans`, escape the rest."""
    parts = str(s).split("`")
    return "".join(text(p) if i % 2 == 0 else code(p) for i, p in enumerate(parts))


def _fence(body: str, lang: str = "") -> list[str]:
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`{3,}", body)), default=0) + 1)
    return [f"{ticks}{lang}", body, ticks]


def table(df: Any, limit: int = 25, columns: list[str] | None = None, code_cols: tuple[str, ...] = ()) -> list[str]:
    """A DataFrame as a Markdown table (numbers formatted, strings in code spans where named)."""
    if not P.has_rows(df):
        return []
    d = df if columns is None else df[[c for c in columns if c in df.columns]]
    more = len(d) - limit
    d = d.head(limit)
    out = ["| " + " | ".join(text(c) for c in d.columns) + " |",
           "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(d[c]) and d[c].dtype != bool else "---"
                          for c in d.columns) + "|"]
    for row in d.itertuples(index=False):
        cells = []
        for col, v in zip(d.columns, row, strict=False):
            if v is None or (isinstance(v, float) and pd.isna(v)):
                cells.append("")
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                cells.append(fmt_bytes(v) if str(col).endswith("bytes") else fmt_num(v))
            elif col in code_cols or any(ch in str(v) for ch in "<>&|`*_"):
                cells.append(code(v))
            else:
                cells.append(text(v))
        out.append("| " + " | ".join(cells) + " |")
    if more > 0:
        out.append(f"\n... and {more} more rows")
    return out + [""]


def _kv(rows: list[tuple[str, str]], head: tuple[str, str] = ("", "")) -> list[str]:
    if not rows:
        return []
    out = [f"| {head[0]} | {head[1]} |", "|---|---:|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    return out + [""]


def _unit(metrics: Any, name: str) -> str:
    return (getattr(metrics, "units", None) or {}).get(name, "")


def _mv(metrics: Any, name: str) -> str:
    v = metrics.get(name)
    s = fmt_value(v, _unit(metrics, name), name)
    return code(s) if isinstance(v, str) else text(s)


def _metric_rows(metrics: Any, names: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(label, _mv(metrics, n)) for n, label in names if metrics.get(n) is not None]


def _absent(what: str, notes: list[str], analysis: str, default: str) -> list[str]:
    return [f"_{what}: not in this trace: {text(P.notes_for(notes, analysis) or default)}_", ""]


# --------------------------------------------------------------------------- sections


def _summary(result: Any, metrics: Any) -> list[str]:
    summ = getattr(result, "summary", None) or {}
    run = getattr(result, "run", None)
    hosts = summ.get("hosts") or (list(getattr(run, "hosts", []) or []) if run is not None else [])
    rows = [("Run", code(run_label(result)))]
    if getattr(run, "directory", None):
        rows.append(("Directory", code(run.directory)))
    if hosts:
        rows.append(("Hosts", f"{len(hosts)}: " + ", ".join(code(h) for h in hosts[:8]) +
                     (" ..." if len(hosts) > 8 else "")))
    if summ.get("events") is not None:
        rows.append(("Events", fmt_num(summ["events"])))
    if summ.get("time_span_ms") is not None:
        rows.append(("Time span", fmt_value(summ["time_span_ms"], "ms")))
    if summ.get("file_bytes"):
        rows.append(("Trace size", fmt_bytes(summ["file_bytes"])))
    rows += _metric_rows(metrics, [("steps_source", "Steps found by"), *P.KEY_METRICS])
    findings = getattr(result, "findings", None) or []
    verdict = (f"**{len(findings)} finding{'s' if len(findings) != 1 else ''}**; the first: "
               f"{prose(P.get(findings[0], 'title', ''))}" if findings else "**No findings**: no rule fired.")
    return ["## Summary", "", verdict, "", *_kv(rows, ("", "value"))]


def _findings(findings: list, metrics: Any) -> list[str]:
    out = ["## Findings", ""]
    if not findings:
        return out + ["None: nothing in this profile matched a rule.", ""]
    for i, f in enumerate(findings, 1):
        sev = str(P.get(f, "severity", "info") or "info").upper()
        rule = P.finding_rule(f)
        impact = P.get(f, "impact_pct")
        head = f"### {i}. [{sev}] {prose(P.get(f, 'title', rule))} ({code(rule)})"
        out += [head, ""]
        if isinstance(impact, (int, float)) and not isinstance(impact, bool):
            out += [f"Impact: about {fmt_num(impact, 2)} % of step time.", ""]
        msg = P.get(f, "message")
        if msg:
            out += [prose(p) for p in str(msg).split("\n\n")] + [""]
        evidence = P.get(f, "evidence") or {}
        if evidence:
            items = evidence.items() if isinstance(evidence, dict) else enumerate(evidence)
            out += ["Evidence:", ""]
            out += _kv([(code(k), _ev(v, metrics, str(k))) for k, v in items], ("metric", "value"))
        fix_parts = P.finding_fix(f)
        if fix_parts:
            out += ["**Fix**", ""]
            for kind, body, lang in fix_parts:
                out += (_fence(body, lang) if kind == "code" else [prose(body)]) + [""]
        why = P.get(f, "why")
        if why:
            out += ["Why it matters: " + prose(" ".join(str(why).split())), ""]
        links = P.docs_links(P.get(f, "docs"))
        if links:
            out += ["Docs: " + ", ".join(f"<{u}>" if t == u else f"[{text(t)}](<{u}>)" for t, u in links), ""]
    return out


def _ev(v: Any, metrics: Any, name: str) -> str:
    s = fmt_value(v, _unit(metrics, name), name)
    return code(s) if isinstance(v, str) else text(s)


def _steps(steps: Any, metrics: Any, notes: list[str]) -> list[str]:
    out = ["## Step time", ""]
    if not P.has_rows(steps) or "duration_ms" not in steps.columns:
        return out + _absent("Steps", notes, "steps", "no training steps were found")
    cats = P.step_categories(steps)
    dur = pd.to_numeric(steps["duration_ms"], errors="coerce")
    rows = [("step time (mean)", fmt_value(dur.mean(), "ms")), ("median", fmt_value(dur.median(), "ms")),
            ("p90", fmt_value(dur.quantile(0.9), "ms")), ("min .. max", f"{fmt_num(dur.min())} .. "
                                                                         f"{fmt_num(dur.max())} ms")]
    out += [f"{len(steps)} steps.", ""] + _kv(rows, ("", "value"))
    if cats:
        total = float(dur.sum()) or 1.0
        out += ["Where the step time goes (mean per step):", "",
                "| category | ms per step | % of step |", "|---|---:|---:|"]
        for c in cats:
            v = pd.to_numeric(steps[f"{c}_ms"], errors="coerce").fillna(0)
            out.append(f"| {c.replace('_', ' ')} | {fmt_num(v.mean())} | {fmt_num(v.sum() / total * 100)} |")
        out.append("")
    outlier_col = next((c for c in ("outlier", "is_outlier") if c in steps.columns), None)
    if outlier_col and steps[outlier_col].fillna(False).astype(bool).any():
        o = steps[steps[outlier_col].fillna(False).astype(bool)]
        out += ["Outlier steps:", ""] + table(o, limit=10, columns=["step", "duration_ms", *[f"{c}_ms" for c in cats]])
    return out


def _gaps(gaps: Any, steps: Any, metrics: Any, notes: list[str]) -> list[str]:
    out = ["## Busy vs idle", ""]
    rows = _metric_rows(metrics, [("idle_pct", "idle"), ("idle_between_steps_pct", "idle between steps"),
                                  ("idle_within_steps_pct", "idle within steps"), ("gaps_count", "gaps"),
                                  ("gap_mean_ms", "mean gap"), ("gap_max_ms", "longest gap"),
                                  ("gap_host_activity", "host ran in the gaps")])
    if not isinstance(gaps, pd.DataFrame) and not rows:
        return out + _absent("Idle gaps", notes, "gaps", "no step or idle-gap data")
    out += _kv(rows, ("", "value"))
    if P.has_rows(gaps):
        g = gaps.copy()
        key = "idle_ms" if "idle_ms" in g.columns else "duration_ms" if "duration_ms" in g.columns else None
        if key is not None:
            g = g[pd.to_numeric(g[key], errors="coerce").fillna(0) > 0].sort_values(key, ascending=False)
        if "start_ps" in g.columns and len(g):
            lo = float(pd.to_numeric(gaps["start_ps"]).min())
            if P.has_rows(steps) and "start_ps" in steps.columns:
                lo = min(lo, float(pd.to_numeric(steps["start_ps"]).min()))
            g.insert(0, "at_ms", (pd.to_numeric(g["start_ps"]) - lo) / 1e9)
        if len(g):
            out += [f"Longest gaps (at_ms: from the window start; gaps with {fmt_num(P.gap_threshold_ms(steps))} ms "
                    "or more idle count in `gaps`):", ""]
            out += table(g, limit=10, columns=["at_ms", "duration_ms", "idle_ms", "between_steps", "host_activity"])
    elif isinstance(gaps, pd.DataFrame):
        out += ["No idle gaps found.", ""]
    return out


def _input(stages: Any, metrics: Any, notes: list[str]) -> list[str]:
    out = ["## Input pipeline (tf.data)", ""]
    out += _kv(_metric_rows(metrics, [("input_pct", "waiting for input"), ("input_severity", "severity"),
                                      ("tfdata_pipeline", "pipeline"), ("tfdata_has_prefetch", "prefetch"),
                                      ("tfdata_has_cache", "cache"),
                                      ("tfdata_map_element_us", "map time per element")]), ("", "value"))
    if not P.has_rows(stages):
        return out + _absent("Stage table", notes, "tfdata", "no tf.data iterator events")
    d = stages.sort_values("total_ms", ascending=False) if "total_ms" in stages.columns else stages
    return out + table(d, limit=40, code_cols=("iterator", "stage"))


def _precision(tables: dict, metrics: Any, notes: list[str]) -> list[str]:
    out = ["## Precision mix", ""]
    shares = P.precision_shares(tables, metrics)
    if not shares:
        return out + _absent("Precision mix", notes, "precision", "no device compute with a known precision")
    out += ["| precision | % of device compute |", "|---|---:|"]
    out += [f"| {code(k)} | {fmt_num(v)} |" for k, v in shares] + [""]
    return out + _kv(_metric_rows(metrics, [("low_precision_pct", "16-bit (fp16+bf16+int8)"),
                                            ("xprof_16bit_pct", "16-bit as xprof counts"),
                                            ("tensor_core_capable", "tensor cores")]), ("", "value"))


def _memory(tables: dict, metrics: Any, notes: list[str]) -> list[str]:
    out = ["## Memory", ""]
    tl, live = tables.get("memory_timeline"), tables.get("memory_live_at_peak")
    rows = _metric_rows(metrics, [("memory_peak_bytes", "peak in use"), ("memory_peak_time_ms", "peak at"),
                                  ("memory_capacity_bytes", "capacity"), ("memory_peak_pct", "peak / capacity"),
                                  ("memory_fragmentation", "fragmentation"), ("memory_allocator", "allocator")])
    if not P.has_rows(tl) and not P.has_rows(live) and metrics.get("memory_peak_bytes") is None:
        return out + _absent("Memory", notes, "memory", "no memory allocation events")
    out += _kv(rows, ("", "value"))
    if P.has_rows(tl) and {"time_ms", "bytes_in_use"} <= set(tl.columns):
        b = pd.to_numeric(tl["bytes_in_use"], errors="coerce")
        i = int(b.fillna(-1).to_numpy().argmax())
        out += [f"Memory timeline: {len(tl)} samples; highest {fmt_bytes(b.iloc[i])} at "
                f"{fmt_num(tl['time_ms'].iloc[i])} ms.", ""]
    shown, unnamed = P.live_at_peak(live, metrics)  # the HTML report's rule: no unnamed junk rows
    if shown is not None:
        out += ["Largest allocations live at the peak:", ""] + table(shown, limit=15, code_cols=("tf_op", "shape"))
    if unnamed:
        out += [text(unnamed), ""]
    return out


def _allreduce(metrics: Any, notes: list[str]) -> list[str]:
    out = ["## AllReduce", ""]
    if metrics.get("allreduce_ms_per_step") is None:
        return out + _absent("AllReduce", notes, "collectives", "no AllReduce / collective ops")
    out += _kv(_metric_rows(metrics, [("allreduce_ms_per_step", "measured per step"),
                                      ("allreduce_expected_ms", "expected (params x 4 B / bandwidth)"),
                                      ("allreduce_expected_ring_ms", "expected, ring all-reduce"),
                                      ("allreduce_ratio", "measured / expected"), ("allreduce_pct", "% of step"),
                                      ("allreduce_overlap_pct", "overlapped with compute"),
                                      ("param_count", "parameters"), ("link_bandwidth_gbps", "link GB/s"),
                                      ("replicas", "replicas")]), ("", "value"))
    if metrics.get("allreduce_expected_ms") is None:
        out += ["Expected time needs the parameter count and link bandwidth: pass `--params` and `--bandwidth`.", ""]
    return out


def _hosts(result: Any) -> list[str]:
    out = ["## Hosts", ""]
    hosts = getattr(result, "hosts", None) or []
    df = P.host_rows(hosts, (getattr(result, "tables", None) or {}).get("hosts"))
    if len(df) < 2:
        n = len(hosts) or len(getattr(getattr(result, "run", None), "files", ()) or ())
        return out + [f"_Per-host step times: not in this trace: {n or 'no'} host{'s' if n != 1 else ''} profiled; "
                      "the comparison needs two or more._", ""]
    cols = [c for c in ("host", "steps", "steps_count", "step_time_mean_ms", "step_time_p90_ms", "step_time_max_ms",
                        "compute_ms", "wait_ms", "work_ratio", "input_pct", "idle_pct", "allreduce_ms_per_step")
            if c in df.columns and df[c].notna().any()]
    return out + table(df, limit=64, columns=cols, code_cols=("host",))


def _datafiles(tables: dict, metrics: Any, notes: list[str]) -> list[str]:
    out = ["## Training data files", ""]
    sizes = tables.get("data_files_sizes")
    if metrics.get("data_files_count") is None and not P.has_rows(sizes):
        return out + ["_Not checked: pass `--data DIR_OR_GLOB` (local or `gs://`)._", ""]
    out += _kv(_metric_rows(metrics, [("data_files_count", "files"), ("data_total_bytes", "total"),
                                      ("data_file_min_bytes", "smallest"), ("data_file_median_bytes", "median"),
                                      ("data_file_p90_bytes", "p90"), ("data_largest_file_bytes", "largest"),
                                      ("data_small_files_pct", "files under 1 MiB"),
                                      ("data_huge_files_count", "files over 1 GiB")]), ("", "value"))
    out += table(sizes, limit=20)
    largest = tables.get("data_largest_files")
    if P.has_rows(largest):
        out += ["Largest files:", ""] + table(largest, limit=10, code_cols=("path",))
    return out


def _system_md(result: Any) -> list[str]:
    from tfadvisor.report import system

    return system.markdown(result)
