"""Text for ``tfadvisor rules`` (the list) and ``tfadvisor rules explain ID`` (one rule in full), and
:func:`markdown_blocks`, the one reading of a rule's Markdown (its fix, why, example) into prose and code
that this page and the reports (terminal, Markdown, HTML) share."""

from __future__ import annotations

import functools
import re
import textwrap
from pathlib import Path
from typing import Any, NamedTuple

from tfadvisor.advice.rules import Rule, builtin_rules_dir

WIDTH = 80


class Block(NamedTuple):
    """A run of a Markdown text: ``kind`` ``code`` (a fenced or indented code block) or ``text`` (the lines
    between code blocks, as written)."""

    kind: str
    body: str  # code: the code, the block's own indentation and fences removed; text: the lines as written
    lang: str  # code: the fence's info string ("python"), "" for indented code and text
    source: str  # the block's lines as written (a code block's fences included)


@functools.cache
def _parser() -> Any:
    from markdown_it import MarkdownIt  # ~30 ms to import: only once a text is split

    return MarkdownIt("commonmark")


#: A line that opens a fence at the margin: three or more backticks or tildes, then the info string.
_FENCE = re.compile(r"(`{3,}|~{3,})(.*)\Z", re.S)
#: An ordered list item's marker at the margin.
_ORDERED = re.compile(r"\d{1,9}[.)](?:[ \t]|\Z)")


def _simple_fences(lines: list[str]) -> list[tuple[int, int, str]] | None:
    """The fenced code blocks of a text whose only block structure CommonMark could read as code is closed
    fences at the margin: ``[(first line, line after the closing fence, info string)]``; None for any other
    text (a list, a block quote, HTML, an indented line outside a fence, a tab, NUL, an unclosed fence, a line
    inside a fence that could close it from an indent), which :func:`markdown_blocks` hands to markdown-it.
    Where it answers, its blocks are markdown-it's (tests/test_report_fix.py compares them on every rule's
    text); it spares the CommonMark parser's import (~16 ms warm, its ~380 KB of source cold)."""
    out: list[tuple[int, int, str]] = []
    open_at, marker, info = -1, "", ""
    for i, ln in enumerate(lines):
        if "\t" in ln or "\0" in ln:
            return None
        if open_at >= 0:
            body = ln.rstrip(" ")
            if body[:1] == marker[0] and len(body) >= len(marker) and body == marker[0] * len(body):
                out.append((open_at, i + 1, info))
                open_at = -1
            elif ln[:1] == " " and ln.lstrip(" ")[:3] in ("```", "~~~"):
                return None  # an indented line that may close the fence: CommonMark's rules, not ours
            continue
        if not ln.strip(" "):
            continue
        if ln[0] in " -*+><" or _ORDERED.match(ln):
            return None
        if ln.startswith(("```", "~~~")):  # fewer than three: an inline code span or text, no fence
            m = _FENCE.match(ln)
            if m is None or (ln[0] == "`" and "`" in m.group(2)):
                return None
            open_at, marker, info = i, m.group(1), m.group(2)
    return None if open_at >= 0 else out


def markdown_blocks(text: str) -> list[Block]:
    """``text`` as CommonMark reads it (markdown-it-py): its fenced and indented code blocks, anywhere (in a
    list item too), and the text between them, in order. Text blocks keep their blank lines; line ends
    are normalised to LF. A text of prose and closed fences at the margin is read without markdown-it
    (:func:`_simple_fences`): the same blocks."""
    s = str(text).replace("\r\n", "\n").replace("\r", "\n")
    lines = s.split("\n")
    out: list[Block] = []
    pos = 0

    def prose(end: int) -> None:
        if end > pos:
            chunk = "\n".join(lines[pos:end])
            out.append(Block("text", chunk, "", chunk))

    simple = _simple_fences(lines)
    if simple is not None:
        codes = [(start, end, "code", info, "".join(ln + "\n" for ln in lines[start + 1:end - 1]))
                 for start, end, info in simple]
    else:
        codes = [(*tok.map, tok.type, tok.info, tok.content) for tok in _parser().parse(s)
                 if tok.type in ("fence", "code_block") and tok.map]
    for start, end, kind, info, content in codes:
        prose(start)
        lang = info.strip() if kind != "code_block" else ""
        out.append(Block("code", content, lang, "\n".join(lines[start:end])))
        pos = end
    prose(len(lines))
    return out


def _where(rule: Rule) -> str:
    """The rule's file relative to the built-in rules directory when it is one of ours."""
    p = Path(rule.path)
    try:
        rel = p.resolve().relative_to(builtin_rules_dir().resolve())
        shown = f"rules/{rel.as_posix()}"
    except (ValueError, OSError):
        shown = str(p)
    return f"{shown}:{rule.line}" if rule.line else shown


def list_rules_text(rules: list[Rule]) -> str:
    """One line per rule: id, severities, title (wrapped to 80 columns)."""
    if not rules:
        return "no rules loaded"
    id_w = max(len("ID"), max(len(r.id) for r in rules))
    sev_w = max(len("SEVERITY"), max(len("/".join(r.severities)) for r in rules))
    title_w = max(20, WIDTH - id_w - sev_w - 4)
    out = [f"{'ID':<{id_w}}  {'SEVERITY':<{sev_w}}  TITLE"]
    for r in rules:
        lines = textwrap.wrap(r.title, title_w) or [""]
        out.append(f"{r.id:<{id_w}}  {'/'.join(r.severities):<{sev_w}}  {lines[0]}")
        out.extend(" " * (id_w + sev_w + 4) + rest for rest in lines[1:])
    out.append("")
    out.extend(textwrap.wrap(f"{len(rules)} rules. `tfadvisor rules explain ID` shows one in full; "
                             "add your own with --rules DIR.", WIDTH))
    return "\n".join(out)


def _para(text: str, indent: str = "") -> str:
    """Wrap prose paragraphs to 80 columns; keep code blocks (:func:`markdown_blocks`) and indented/list lines
    as written."""
    out: list[str] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            out.extend(textwrap.wrap(" ".join(s.strip() for s in buf), WIDTH, initial_indent=indent,
                                     subsequent_indent=indent) or [indent])
            buf.clear()

    for block in markdown_blocks(text.strip("\r\n")):
        if block.kind == "code":
            flush()
            out.extend(indent + line.rstrip() if line.strip() else "" for line in block.source.split("\n"))
            continue
        for line in block.body.split("\n"):
            if line.lstrip().startswith(("- ", "* ")):
                flush()
                lead = line[: len(line) - len(line.lstrip())]
                out.extend(textwrap.wrap(line.strip(), WIDTH, initial_indent=indent + lead,
                                         subsequent_indent=indent + lead + "  ", break_on_hyphens=False))
            elif line.startswith((" ", "\t")):
                flush()
                out.append(indent + line.rstrip() if line.strip() else "")
            elif not line.strip():
                flush()
                out.append("")
            else:
                buf.append(line)
    flush()
    return "\n".join(out)


def _code(expr: str) -> str:
    """An expression as an indented block, its own line breaks kept."""
    return textwrap.indent(textwrap.dedent(expr.strip("\n")).strip(), "    ")


def _case_fixes(rule: Rule) -> list[tuple[str, list]]:
    """The cases' own fixes, each text once, with the (number, case) pairs that use it."""
    out: dict[str, list] = {}
    for j, c in enumerate(rule.cases, 1):
        if c.fix and c.fix.strip() != rule.fix.strip():
            out.setdefault(c.fix.strip(), []).append((j, c))
    return list(out.items())


def explain_rule(rules: list[Rule], rule_id: str) -> str | None:
    """One rule in full: what it checks, why it matters, example, fix, docs. None if no such rule."""
    rule = next((r for r in rules if r.id == rule_id), None)
    if rule is None:
        return None
    sev = rule.severity
    escalations = [f"{c.severity} in case {j}" for j, c in enumerate(rule.cases, 1)
                   if c.severity and c.severity != sev]
    parts = [f"# {rule.id}: {rule.title}", ""]
    parts.append(f"Severity: {sev}" + (f"; {'; '.join(escalations)}" if escalations else ""))
    parts.append(f"Defined in: {_where(rule)}")
    parts += ["", "## What it checks", "", "Fires when:", "", _code(rule.when.source)]
    if rule.cases:
        parts += ["", "Refinements (the first case that holds applies):"]
    for j, c in enumerate(rule.cases, 1):
        bits = []
        if c.severity:
            bits.append(f"severity {c.severity}")
        if c.title:
            bits.append(f"title \"{c.title}\"")
        if c.message:
            bits.append("its own message")
        if c.fix:
            bits.append("its own fix")
        if c.impact:
            bits.append(f"impact `{c.impact.source}`")
        parts.append(_para(f"- Case {j}, when `{c.when.source}`: " + (", ".join(bits) or "no change")))
    if rule.impact is not None:
        parts += ["", "Impact (% of time at stake; orders the findings):", "", _code(rule.impact.source)]
    if rule.evidence:
        parts.append("")
        parts.append(_para("Evidence: " + ", ".join(rule.evidence)))
    if rule.why:
        parts += ["", "## Why it matters", "", _para(rule.why)]
    if rule.example:
        parts += ["", "## Example", "", _para(rule.example)]
    parts += ["", "## How to fix", "", _para(rule.fix)]
    for fix, cases in _case_fixes(rule):
        when = " or ".join(f"`{c.when.source}` (case {j})" for j, c in cases)
        parts += ["", _para(f"When {when}:"), "", _para(fix)]
    if rule.docs:
        parts += ["", "## Learn more", ""]
        for d in rule.docs:
            parts.append(f"- {d.title}: {d.url}" if d.title and d.title != d.url else f"- {d.url}")
    return "\n".join(parts).rstrip() + "\n"


def rule_dict(rule: Rule) -> dict:
    """One rule as JSON (``tfadvisor rules --format json``; schema: ``tfadvisor schema rules``)."""

    def src(x) -> str | None:
        return getattr(x, "source", None) if x is not None else None

    return {
        "id": rule.id, "title": rule.title, "severity": rule.severity, "severities": rule.severities,
        "when": rule.when.source, "impact": src(rule.impact), "message": rule.message.source,
        "evidence": list(rule.evidence), "fix": rule.fix, "why": rule.why, "example": rule.example,
        "docs": [{"title": d.title, "url": d.url} for d in rule.docs],
        "cases": [{"when": c.when.source, "severity": c.severity, "title": c.title, "message": src(c.message),
                   "impact": src(c.impact)} for c in rule.cases],
        "marks": list(rule.marks), "scope": rule.scope, "plots": list(rule.plots), "lanes": list(rule.lanes),
        "source": _where(rule),
    }


__all__ = ["Block", "explain_rule", "list_rules_text", "markdown_blocks", "rule_dict"]
