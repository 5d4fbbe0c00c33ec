"""The notebook view of a :class:`~tfadvisor.api.Result` (``Result._repr_html_``).

The HTML report's own parts (``templates/macros.html.j2``, laid out by ``notebook.html.j2``): its
summary cards, its findings with the plots that answer them placed beside each, and the step chart
when no finding took it. The report's stylesheet comes along scoped to one ``div``, so it styles
nothing else in the notebook. No script runs: the zoomable timeline stays in the full report
(``tfadvisor analyze --html``).
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from tfadvisor.report import html as report_html
from tfadvisor.report import view

SCOPE = "tfadvisor-nb"
_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")


def scoped_css(css: str, scope: str = SCOPE) -> str:
    """``css`` with every selector under ``.scope`` (``body``, ``main`` and ``:root`` become the scope)."""
    out = []
    for selectors, body in _RULE.findall(css):
        parts = []
        for sel in selectors.split(","):
            sel = sel.strip()
            if sel == "*":
                parts.append(f".{scope}, .{scope} *")
            elif sel in ("body", "main", ":root"):
                parts.append(f".{scope}")
            elif sel:
                parts.append(f".{scope} {sel}")
        out.append(f"{', '.join(parts)} {{{body}}}")
    return "\n".join(out)


def result_html(result: Any) -> str:
    """Summary, findings (each with the plots its rule names) and the step chart, as one ``div``."""
    page = report_html.env().get_template("notebook.html.j2").render(
        v=view.build(result), css=Markup(scoped_css(report_html.CSS)), scope=SCOPE)
    return page.strip()


__all__ = ["result_html", "scoped_css"]
