"""The terminal report: a summary, then the findings most important first, then the notes.

Readable in an 80-column terminal; colour only on a TTY (rich decides; ``NO_COLOR`` is
honoured). Each finding shows its severity, title, message, the evidence, the fix with
its code, and links to the TensorFlow guides.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

from rich.console import Console
from rich.text import Text

from tfadvisor.report import (
    BREAKDOWN,
    HOSTS_LISTED,
    STEP_TIME_KEYS,
    breakdown,
    cpu_only,
    get,
    notes_left,
    notes_on_findings,
    plain,
    run_label,
    step_time,
)
from tfadvisor.report.findings import caveat_labels, finding_caveats
from tfadvisor.report.formatting import fmt_bytes, fmt_num, fmt_value

SEVERITY_STYLE = {"critical": "bold red", "warning": "bold yellow", "info": "bold cyan"}


def _out(console: Console, text: str | Text, indent: int = 0, style: str = "", hang: int = 0) -> None:
    """Print ``text`` wrapped to the console width at ``indent`` (``hang`` more on continuation lines).

    Lines are wrapped here and printed unpadded, so piped output has no trailing spaces.
    """
    width = max(40, (console.width or 80)) - indent
    if isinstance(text, Text):
        plain_text, spans = text.plain, text
    else:
        plain_text, spans = str(text), None
    for para in plain_text.split("\n"):
        lines = textwrap.wrap(para, width, subsequent_indent=" " * hang, break_long_words=False,
                              break_on_hyphens=False) or [""]
        if spans is not None and len(lines) == 1 and para == plain_text:
            line = Text(" " * indent)
            line.append_text(spans)
            console.print(line, soft_wrap=True)
            continue
        for ln in lines:
            console.print(Text(" " * indent + ln, style=style), soft_wrap=True)


def _kv(console: Console, label: str, value: str) -> None:
    width = max(40, console.width or 80) - 13
    lines = textwrap.wrap(value, width, break_long_words=False, break_on_hyphens=False) or [""]
    first = Text("  ")
    first.append(f"{label:<11}", style="bold")
    first.append(lines[0])
    console.print(first, soft_wrap=True)
    for ln in lines[1:]:
        console.print(" " * 13 + ln, soft_wrap=True, highlight=False, markup=False)


def _loaded_line(summary: dict) -> str:
    planes = summary.get("planes") or []
    lines = sum(int(p.get("lines", 0) or 0) for p in planes if isinstance(p, dict))
    bits = []
    if planes:
        bits.append(f"{len(planes)} planes")
        bits.append(f"{fmt_num(lines)} lines")
    if summary.get("events") is not None:
        bits.append(f"{fmt_num(int(summary['events']))} events")
    span = plain(summary.get("time_span_ms"))
    if isinstance(span, (int, float)):
        bits.append(f"{fmt_num(span)} ms span")
    size = plain(summary.get("file_bytes"))
    if isinstance(size, (int, float)) and size:
        bits.append(fmt_bytes(size))
    return ", ".join(bits) or "n/a"


def _summary(console: Console, result: Any) -> None:
    metrics = getattr(result, "metrics", None) or {}
    summary = getattr(result, "summary", None) or {}
    console.print(Text.assemble(("tfadvisor", "bold"), " report for ", (run_label(result), "bold")))
    if (chosen := getattr(getattr(result, "run", None), "selection", None)) and chosen():
        _kv(console, "run", chosen())
    hosts = summary.get("hosts") or list(getattr(getattr(result, "run", None), "hosts", []) or [])
    if hosts:
        k = 3 if summarised(result) else 6  # the hosts are summarised below: keep this to one line
        shown = ", ".join(str(h) for h in hosts[:k]) + (f" (+{len(hosts) - k} more)" if len(hosts) > k else "")
        _kv(console, "hosts", f"{len(hosts)}: {shown}")
    _kv(console, "loaded", _loaded_line(summary))
    steps = plain(metrics.get("steps_count"))
    source = plain(metrics.get("steps_source"))
    if steps:
        spe = plain(metrics.get("steps_per_execution"))
        spe_text = (f", {int(plain(metrics.get('executions_count')))} executions of {int(spe)} (steps_per_execution "
                    f"from {plain(metrics.get('steps_per_execution_source'))})") if spe and spe > 1 else ""
        _kv(console, "steps", f"{int(steps)}" + (f" (found by {source}{spe_text})" if source else ""))
    else:
        _kv(console, "steps", "none found" + (f" ({source})" if source and source != "none" else ""))
    st = step_time(metrics)
    if any(v is not None for v in st.values()):
        parts = [f"{k} {fmt_num(st[k])}" for k in STEP_TIME_KEYS if st[k] is not None]
        _kv(console, "step time", "  ".join(parts) + " ms")
    _throughput(console, metrics)
    shares = breakdown(metrics)
    if shares:
        labels = dict(BREAKDOWN)
        ordered = sorted(shares.items(), key=lambda kv: -kv[1])
        _kv(console, "breakdown", ", ".join(f"{labels[k]} {fmt_num(v, 2)} %" for k, v in ordered
                                            if v >= 0.05) + " of step time")
    outside = plain(metrics.get("non_train_gaps_count"))
    if outside:
        _kv(console, "not steps", f"{int(outside)} validation / epoch-end interval(s) between steps, "
                                  f"{fmt_num(plain(metrics.get('non_train_ms')))} ms: not step time, not idle")
    hosts_detail = list(getattr(result, "hosts", None) or [])
    if len(hosts_detail) > 1:
        console.print()
        if summarised(result):
            _hosts_summarised(console, result, len(hosts_detail))
        else:
            _hosts_listed(console, hosts_detail, plain(metrics.get("straggler_host")))


def _throughput(console: Console, metrics: Any) -> None:
    """Throughput beside step time (evaluation and epoch ends included), the unprofiled clock and the profiler's
    inflation (said as an estimate where there is no clock)."""
    tp = plain(metrics.get("throughput_ms_per_step"))
    if not isinstance(tp, (int, float)):
        return
    text = f"{fmt_num(tp)} ms per training step over the window, evaluation and epoch ends included"
    ratio = plain(metrics.get("throughput_vs_step_time"))
    if isinstance(ratio, (int, float)) and abs(ratio - 1) >= 0.05:
        text += f" ({fmt_num(ratio, 2)}x the step time)"
    _kv(console, "throughput", text)
    un = plain(metrics.get("unprofiled_ms_per_step"))
    if isinstance(un, (int, float)):
        step = plain(metrics.get("unprofiled_step_ms"))
        _kv(console, "unprofiled", f"{fmt_num(un)} ms per training step by the callback's clock outside the window "
                                   f"({int(plain(metrics.get('unprofiled_steps_count')) or 0)} steps, evaluation and "
                                   "epoch ends included" + (f"; the steps alone {fmt_num(step)} ms, median)"
                                                            if isinstance(step, (int, float)) else ")"))
    said = plain(metrics.get("profiler_inflation_text"))
    r = plain(metrics.get("profiler_inflation"))
    if isinstance(said, str) and isinstance(r, (int, float)) and (
            plain(metrics.get("profiler_inflation_source")) == "clock" or r >= 1.1):
        _kv(console, "profiler", said)


#: Hosts that stand out listed at most (the rest: JSON).
STAND_OUT_LINES = 8


def _table(result: Any, name: str) -> Any:
    return (getattr(result, "tables", None) or {}).get(name)


def has_rows(df: Any) -> bool:
    return df is not None and hasattr(df, "columns") and len(df) > 0


def _hosts_listed(console: Console, hosts: list, straggler: Any) -> None:
    console.print(Text("Hosts", style="bold"))
    for h in hosts:
        m = getattr(h, "metrics", None) or {}
        name = str(getattr(h, "host", "?"))
        bits = [f"{int(plain(m.get('steps_count')) or 0)} steps"]
        for key, label, unit in (("step_time_mean_ms", "step", "ms"), ("step_device_compute_pct", "compute", "%"),
                                 ("step_collective_pct", "collectives", "%"), ("step_input_pct", "input", "%")):
            v = plain(m.get(key))
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                bits.append(f"{label} {fmt_num(v, 2)}{' ' if unit == 'ms' else ''}{unit}")
        label = f"{name} (straggler)" if straggler and name == straggler else name
        _out(console, f"{label}: " + ", ".join(bits), 2, hang=2)


def _hosts_summarised(console: Console, result: Any, n: int) -> None:
    """Many hosts: each per-host figure's spread over the hosts, then the hosts that stand out, with why."""
    dist = _table(result, "hosts_distribution")
    console.print(Text.assemble(("Hosts", "bold"), f" ({n}; --format json lists every host)"))
    rows = [("", "median", "p10-p90", "min-max", "spread")]
    for r in dist.to_dict("records"):
        v, unit = (fmt_bytes, "") if r["unit"] == "bytes" else (fmt_num, " ms")
        spread = f"{r['spread_pct']:.2g} %" if r["spread_pct"] is not None else ""
        rows.append((r["figure"], v(r["median"]) + unit, f"{v(r['p10'])}-{v(r['p90'])}", f"{v(r['min'])}-{v(r['max'])}",
                     spread))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        cells = [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        _out(console, "  ".join(cells).rstrip(), 2, style="dim" if r is rows[0] else "")
    hosts = _table(result, "hosts")
    out = hosts[hosts["stands_out"].astype(str) != ""] if has_rows(hosts) and "stands_out" in hosts else hosts[:0]
    if not len(out):
        _out(console, f"No host stands out: all {n} are within the spread above.", 2)
        return
    _out(console, f"{len(out)} of {n} hosts stand out:", 2)
    for r in out.head(STAND_OUT_LINES).to_dict("records"):
        _out(console, f"{r['host']}: {r['stands_out']}", 4, hang=2)
    if len(out) > STAND_OUT_LINES:
        _out(console, f"(+{len(out) - STAND_OUT_LINES} more: --format json for all)", 4, style="dim")


def _fix_parts(fix: str) -> list[tuple[str, str]]:
    """[(kind, text)]: prose paragraphs and code blocks (read by :func:`advice.docs.markdown_blocks`)."""
    from tfadvisor.advice.docs import markdown_blocks  # loaded with the rules that made the finding

    out: list[tuple[str, str]] = []
    for block in markdown_blocks(fix):
        if block.kind == "code":
            out.append(("code", block.body.rstrip("\n")))
        else:
            out += [("text", p) for p in _paragraphs(block.body)]
    return out


def _paragraphs(s: str) -> list[str]:
    paras = []
    for para in re.split(r"\n[ \t]*\n", s):
        if not para.strip():
            continue
        lines = [ln.strip() for ln in para.strip().splitlines()]
        # keep list items on their own lines; join the rest
        merged: list[str] = []
        for ln in lines:
            if ln.startswith(("- ", "* ")) or not merged:
                merged.append(ln)
            else:
                merged[-1] += " " + ln
        paras.append("\n".join(merged))
    return paras


def _fix(console: Console, fix: str, indent: int) -> None:
    """A fix's prose (wrapped) and code (never re-wrapped), indented."""
    for kind, body in _fix_parts(fix):
        if kind == "code":
            for ln in body.splitlines():
                console.print(Text(" " * (indent + 2) + ln.rstrip(), style="green" if console.is_terminal else ""),
                              soft_wrap=True)
        else:
            for item in body.split("\n"):
                _out(console, item, indent, hang=2 if item.startswith(("- ", "* ")) else 0)


def _finding(console: Console, i: int, f: Any, units: dict, brief: bool = False) -> None:
    sev = str(get(f, "severity", "info"))
    head = Text()
    head.append(f"{i}. ")
    head.append(sev.upper(), style=SEVERITY_STYLE.get(sev, "bold"))
    head.append(f"  {get(f, 'title', '')}", style="bold")
    console.print(head, soft_wrap=True)
    impact = get(f, "impact_pct")
    sub = str(get(f, "rule", ""))
    if isinstance(impact, (int, float)) and not isinstance(impact, bool):
        sub += f" · about {fmt_num(impact, 2)} % of time at stake"
    _out(console, sub, 3, style="dim")
    _out(console, str(get(f, "message", "")), 3)
    labels = caveat_labels(f)
    if labels:
        _out(console, f"Caveat: {'; '.join(labels)} (above)", 3, hang=2, style="yellow" if console.is_terminal else "")
    if brief:
        return
    evidence = get(f, "evidence") or {}
    if evidence:
        shown = ", ".join(f"{k} = {fmt_value(v, name=k, units=units)}" for k, v in evidence.items())
        _out(console, "Evidence: " + shown, 3, hang=2)
    fix = str(get(f, "fix", "") or "")
    if fix:
        console.print(Text("   Fix:", style="bold green"), soft_wrap=True)
        _fix(console, fix, 5)
    for a in get(f, "also", None) or []:
        _out(console, f"Also, for the same cost: {a.get('title', '')} ({a.get('rule', '')})", 3, hang=2,
             style="bold")
        _out(console, str(a.get("message", "") or ""), 5)
        _fix(console, str(a.get("fix", "") or ""), 5)
    docs = get(f, "docs") or []
    if docs:
        console.print(Text("   Docs:", style="bold"), soft_wrap=True)
        for url in docs:  # never wrapped, so they stay clickable
            console.print(Text("     " + str(url), style="blue" if console.is_terminal else ""), soft_wrap=True)


#: Hosts listed under "Where the time goes" (those least like the median host).
HOST_LINES = 4


def _attribution(console: Console, result: Any) -> None:
    """Where the time goes: the run's parts with their top items, then each device's split."""
    from tfadvisor.report.attribution import LABELS, attribution, basis_text, items_text, unlike_hosts

    att = attribution(result, group=True)
    if att is None:
        return
    console.print()
    console.print(Text.assemble(("Where the time goes", "bold underline"), f", % of {basis_text(att)}"))
    for lane in att["lanes"]:
        if lane["lane"] == "all":
            for p in lane["parts"]:
                line = f"{p['label']} {fmt_num(p['pct'], 2)} %"
                if p["items"]:
                    line += ": " + items_text(p)
                _out(console, line, 2, hang=4)
        else:
            _out(console, f"{lane['lane']}: " + ", ".join(f"{p['label']} {fmt_num(p['pct'], 2)} %"
                                                         for p in lane["parts"]), 2, hang=4)
    hosts, more, near = unlike_hosts(att.get("hosts") or [], HOST_LINES, fill=True)
    for h in hosts:  # the hosts least like the median host first
        _out(console, f"{h['host']}: " + ", ".join(f"{LABELS.get(p['part'], p['part'])} {fmt_num(p['pct'], 2)} %"
                                                     for p in h["parts"][:4]), 2, hang=4)
    if more:
        _out(console, f"(+{more} more hosts, each within {fmt_num(near, 2)} points of the median host: "
                      "--format json for all)", 2, style="dim")
    if att["devices"] > att["devices_shown"]:
        _out(console, f"(+{att['devices'] - att['devices_shown']} more devices: --format json for all)", 2,
             style="dim")


def _program_parts(console: Console, result: Any) -> None:
    """Where the op time goes, by part of the program (layers, optimizer, loss, metrics: the ops' name scopes)."""
    from tfadvisor.report.attribution import program_parts

    pp = program_parts(result)
    if pp is None:
        return
    console.print()
    console.print(Text.assemble(("By part of your program", "bold underline"),
                                ", the compute time above (and on a CPU the ops' dispatch) by the ops' name scopes"))
    if pp["names_from"]:
        _out(console, f"named as the program names them, from {pp['names_from']}", 2, style="dim")
    for r in pp["rows"]:
        ms = f", {fmt_num(r['ms_per_step'], 3)} ms" if r["ms_per_step"] is not None else ""
        _out(console, f"{r['label']} {fmt_num(r['pct'], 2)} %{ms}: {r['types']}", 2, hang=4)
    if pp["more"]:
        _out(console, f"(+{pp['more']} more: --format json --tables, table components)", 2, style="dim")


def _system(console: Console, result: Any) -> None:
    """System utilisation and start-up (tfadvisor/report/system.py), when the capture sampled them."""
    from tfadvisor.report import system

    line = system.terminal_line(result)
    if line:
        _kv(console, "system", line)


def summarised(result: Any) -> bool:
    """Whether the report summarises the hosts (more than :data:`HOSTS_LISTED`, with their distribution)."""
    return len(getattr(result, "hosts", None) or []) > HOSTS_LISTED and has_rows(_table(result, "hosts_distribution"))


def print_result(result: Any, console: Console | None = None, brief: bool = False, full: bool = False,
                 notes: bool = False) -> None:
    """Print the summary, the findings (most important first) and the notes; ``brief``: each finding's title,
    rule and message only, and the number of notes (for a training log: the end of a capture window).

    A run summarised over many hosts is shown at a glance (one screen): its findings brief, unless ``full``.
    Of the notes only those that change what a finding shown means are listed (with the findings' numbers), the
    others counted in one line, unless ``notes`` or ``full``: then every note."""
    console = console or Console(highlight=False)
    units = dict(getattr(getattr(result, "metrics", None), "units", None) or {})
    _summary(console, result)
    _system(console, result)
    if not brief:
        _attribution(console, result)
        _program_parts(console, result)
    glance = not brief and not full and summarised(result)
    brief = brief or glance
    findings = list(getattr(result, "findings", None) or [])
    console.print()
    if not findings:
        console.print(Text("No findings: no rule matched this profile.", style="bold green"))
    else:
        counts = {}
        for f in findings:
            counts[get(f, "severity", "info")] = counts.get(get(f, "severity", "info"), 0) + 1
        tally = ", ".join(f"{counts[s]} {s}" for s in ("critical", "warning", "info") if s in counts)
        console.print(Text.assemble(("Findings", "bold underline"), f" ({tally}), most important first"))
        for c in finding_caveats(findings):
            _out(console, f"Caveat: {c}", 2, hang=2, style="yellow" if console.is_terminal else "")
        for i, f in enumerate(findings, 1):
            console.print()
            _finding(console, i, f, units, brief)
    all_notes = [str(n) for n in getattr(result, "notes", None) or []]
    if glance and (findings or all_notes):
        console.print()
        _out(console, f"Evidence, fixes and {len(all_notes)} note(s) on what this trace could not tell: --full (or "
                      "--format markdown, --html)", 0, style="dim")
    elif all_notes and brief:
        console.print()
        _out(console, f"{len(all_notes)} note(s) on what this trace could not tell: in the full report", 0,
             style="dim")
    elif all_notes and (notes or full):
        console.print()
        console.print(Text("Notes: what this trace could not tell", style="bold"))
        for n in all_notes:
            _out(console, f"- {n}", 2, hang=2)
    elif all_notes:
        _notes_grouped(console, result, findings, all_notes)


def _notes_grouped(console: Console, result: Any, findings: list, all_notes: list[str]) -> None:
    """The notes that change what a finding shown means, then one line counting the others."""
    console.print()
    on = notes_on_findings(result, findings)
    for n, nums in on:
        _out(console, f"Note on finding{'s' if len(nums) > 1 else ''} {', '.join(map(str, nums))}: {n}", 0, hang=2)
    left = notes_left(all_notes, [n for n, _ in on], cpu_only(result))
    if left:
        _out(console, left, 0, style="dim")


__all__ = ["print_result"]
