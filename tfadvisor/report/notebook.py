"""The notebook view of a :class:`~tfadvisor.api.Result` (``Result._repr_html_``).

The HTML report's own parts, by import: its summary cards, its findings with the plots that
answer them placed beside each, and the step chart when no finding took it. The report's
stylesheet comes along scoped to one ``div``, so it styles nothing else in the notebook. No
script runs: the zoomable timeline stays in the full report (``tfadvisor analyze --html``).
"""

from __future__ import annotations

import re
from typing import Any

from tfadvisor.report import html as report_html
from tfadvisor.report import run_label
from tfadvisor.report.plots import esc

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
    """Summary, findings (each with the plots its evidence names) and the step chart, as one ``div``."""
    metrics = getattr(result, "metrics", None) or {}
    tables = getattr(result, "tables", None) or {}
    notes = list(getattr(result, "notes", None) or [])
    findings = list(getattr(result, "findings", None) or [])
    plots = report_html._plots(result, metrics, tables, notes)
    placed = report_html._place(findings, plots)
    parts = [f"<h2>tfadvisor: {esc(run_label(result))}</h2>",
             report_html._summary(result, metrics),
             report_html._findings(findings, metrics, plots, placed)]
    if "plot-steps" in plots and "plot-steps" not in placed:
        anchor, title, content, caption = plots["plot-steps"]
        parts.append(report_html._section(anchor, title, content, caption))
    parts.append('<p class="sub">The full report, with the zoomable timeline: '
                 "<code>tfadvisor analyze LOGDIR --html report.html</code>.</p>")
    return (f'<div class="{SCOPE}"><style>{scoped_css(report_html.CSS)}</style>' + "\n".join(parts) + "</div>")


__all__ = ["result_html", "scoped_css"]
