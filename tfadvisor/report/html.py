"""The HTML report: one self-contained file (inline CSS, SVG and one small script; no fonts, no CDN).

``write_html(result, path)`` writes it; ``render_html(result) -> str`` returns it: report/view.py's
view of the result laid out by ``templates/report.html.j2`` (the parts the notebook shows too in
``macros.html.j2``, the stylesheet in ``report.css``). Sections: summary; findings (severity,
impact, message, evidence, the plots that answer them, fix with code in ``<pre><code>``); the
zoomable timeline; the plots no finding took (``view.PLOT_IDS``, described there); the system
samples; the plots this trace has no data for, and why; notes; every metric.

The template is autoescaped, so every trace-derived string is escaped wherever it goes; the plots
(SVG our code drew) come as Markup, as do the two filters below.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from jinja2 import Environment
from markupsafe import Markup, escape

from tfadvisor.report import view
from tfadvisor.report.templating import TEMPLATES, environment
from tfadvisor.report.view import MAX_COLUMNS, PLOT_IDS

CSS = (TEMPLATES / "report.css").read_text(encoding="utf-8")


def write_html(result: Any, path: str | os.PathLike) -> Path:
    """Write the self-contained HTML report of ``result`` to ``path`` (parents created)."""
    out = Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(result), encoding="utf-8")
    return out


def render_html(result: Any) -> str:
    return env().get_template("report.html.j2").render(v=view.build(result), css=Markup(CSS))


def prose(text: Any) -> Markup:
    """Plain text to paragraphs, with `inline code` spans; everything escaped."""
    out = []
    for para in str(text).split("\n\n"):
        chunks = para.split("`")
        html = "".join(escape(c) if i % 2 == 0 else f"<code>{escape(c)}</code>" for i, c in enumerate(chunks))
        out.append(f"<p>{html.replace(chr(10), '<br>')}</p>")
    return Markup("".join(out))


def breakable(text: Any) -> Markup:
    """Escaped text that may wrap after ``_``, ``::``, ``/`` and ``,`` (long op and iterator names)."""
    out = str(escape(text))
    for sep in ("_", "::", "/", ","):
        out = out.replace(sep, sep + "<wbr>")
    return Markup(out)


@functools.cache
def env() -> Environment:
    """The HTML templates' environment (autoescaped), with :func:`prose` and :func:`breakable`."""
    return environment({"prose": prose, "breakable": breakable})


def _table(df: Any, css_id: str, limit: int = 25, columns: list[str] | None = None) -> str:
    """One table as the report draws it (view.table, laid out by macros.html.j2's ``table``)."""
    return str(env().get_template("macros.html.j2").module.table(view.table(df, css_id, limit, columns)))


__all__ = ["CSS", "MAX_COLUMNS", "PLOT_IDS", "breakable", "env", "prose", "render_html", "write_html"]
