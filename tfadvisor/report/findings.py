"""A finding as the reports show it: its rule id, its fix as prose and code, its docs as links.

The fix is the rule's Markdown; it is read into prose and code blocks by
:func:`tfadvisor.advice.docs.markdown_blocks` (markdown-it-py), the one reading that ``tfadvisor rules
explain`` and every report share.
"""

from __future__ import annotations

import re
from typing import Any

from tfadvisor.report import get


def finding_rule(f: Any) -> str:
    """The finding's rule id (its id or title where a hand-made finding has no rule)."""
    return str(get(f, "rule", None) or get(f, "id", None) or get(f, "title", "") or "")


def finding_fix(f: Any) -> list[tuple[str, str, str]]:
    """A finding's fix as :func:`split_fix` parts, its ``code`` (or ``example``) last as Python."""
    parts = split_fix(get(f, "fix"))
    code = get(f, "code") or get(f, "example")
    if code:
        parts.append(("code", str(code).strip("\n"), "python"))
    return parts


def split_fix(fix: Any) -> list[tuple[str, str, str]]:
    """A fix as [(kind, text, lang)], kind ``text`` (one paragraph) or ``code``.

    Accepts Markdown (fenced and indented code blocks, as CommonMark reads them), a dict
    (``text``/``description`` and ``code``/``example``) or a list of those.
    """
    if fix is None:
        return []
    if isinstance(fix, dict):
        out: list[tuple[str, str, str]] = []
        text = fix.get("text") or fix.get("description") or fix.get("summary")
        if text:
            out += split_fix(str(text))
        code = fix.get("code") or fix.get("example")
        if code:
            out.append(("code", str(code).strip("\n"), str(fix.get("lang", fix.get("language", "python")))))
        return out
    if isinstance(fix, (list, tuple)):
        return [part for item in fix for part in split_fix(item)]
    from tfadvisor.advice.docs import markdown_blocks  # loaded with the rules that made the finding

    out = []
    for block in markdown_blocks(str(fix)):
        if block.kind == "code":
            out.append(("code", block.body.strip("\n"), block.lang))
        else:
            out += [("text", para.strip(), "") for para in re.split(r"\n[ \t]*\n", block.body) if para.strip()]
    return out


def finding_caveats(findings: Any) -> list[str]:
    """The caveats of the findings (conditions that make them uncertain) in full, each once, in the findings'
    order."""
    out: list[str] = []
    for f in findings or []:
        for c in get(f, "caveats", None) or []:
            text = str(c.get("text", "")) if isinstance(c, dict) else str(c)
            if text not in out:
                out.append(text)
    return out


def caveat_labels(f: Any) -> list[str]:
    """A finding's caveats in a few words each (the report says them in full once, above the findings)."""
    return [str(c.get("label") or c.get("text", "")) if isinstance(c, dict) else str(c)
            for c in get(f, "caveats", None) or []]


def docs_links(docs: Any) -> list[tuple[str, str]]:
    """[(title, url)] from a list of URLs, of {title, url} dicts, or one string."""
    if not docs:
        return []
    if isinstance(docs, str):
        return [(d, d) for d in re.split(r"[\s,]+", docs) if d]
    if isinstance(docs, dict):
        docs = [docs] if "url" in docs else [{"title": k, "url": v} for k, v in docs.items()]
    out = []
    for d in docs:
        if isinstance(d, dict):
            url = str(d.get("url") or d.get("href") or "")
            if url:
                out.append((str(d.get("title") or url), url))
        elif d:
            out.append((str(d), str(d)))
    return out


__all__ = ["caveat_labels", "docs_links", "finding_caveats", "finding_fix", "finding_rule", "split_fix"]
