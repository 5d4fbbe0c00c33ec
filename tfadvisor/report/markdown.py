"""The Markdown report: the HTML report's content as GitHub-flavoured Markdown.

``render_markdown(result) -> str``: report/view.py's view of the result (its figures and tables, not
its drawings) laid out by ``templates/report.md.j2``. Sections: summary, findings (evidence tables,
fixes with fenced code), step-time breakdown, idle gaps, system samples, the tf.data stage table,
precision mix, memory (peak and the largest live allocations), AllReduce measured vs expected,
per-host step time, training data files, notes. A section whose data the trace lacks says so and why.

Escaping is this module's, once, as the template's filters: trace-derived names (op names contain
``<``, ``>``, ``&``, sometimes ``|``) go into code spans with ``|`` escaped, so they render
literally and do not break tables; other text escapes the characters Markdown or HTML would
interpret; neither keeps a newline, so a table cell stays on its row.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from tfadvisor.report import view
from tfadvisor.report.templating import environment


def render_markdown(result: Any) -> str:
    text_ = _env().get_template("report.md.j2").render(v=view.build(result))
    return text_.rstrip() + "\n"


# --------------------------------------------------------------------------- escaping (the template's filters)


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


def prose(s: Any) -> str:
    """Rule-written text: keep its `code spans`, escape the rest."""
    parts = str(s).split("`")
    return "".join(text(p) if i % 2 == 0 else code(p) for i, p in enumerate(parts))


def fence(body: str, lang: str = "") -> str:
    """A fenced code block, its fence longer than any run of backticks in ``body``."""
    ticks = "`" * max(3, max((len(m) for m in re.findall(r"`{3,}", body)), default=0) + 1)
    return f"{ticks}{lang}\n{body}\n{ticks}"


def url(u: Any) -> str:
    """A link target: the characters that would end a ``<...>`` destination or start HTML percent-encoded."""
    return str(u).replace(" ", "%20").replace("<", "%3C").replace(">", "%3E").replace("\n", "%0A")


def value(f: view.Figure) -> str:
    """A figure's value: text from the trace as code, a number as text."""
    return code(f.text) if f.literal else text(f.text)


def cell(c: view.Cell) -> str:
    """A table cell: a number as written, a name (or text with Markdown specials) as code, else text."""
    if c.num or not c.text:
        return c.text
    if c.ident or any(ch in c.text for ch in "<>&|`*_"):
        return code(c.text)
    return text(c.text)


@functools.cache
def _env():
    return environment({"code": code, "text": text, "prose": prose, "fence": fence, "value": value, "cell": cell,
                        "url": url})


__all__ = ["cell", "code", "fence", "prose", "render_markdown", "text", "url", "value"]
