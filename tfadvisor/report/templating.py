"""The Jinja2 environment of the HTML and Markdown reports (templates in ``report/templates/``).

Autoescape is on for ``*.html.j2``: every value is HTML-escaped unless it is a
:class:`markupsafe.Markup` our code built (the SVG plots, the timeline's script, the stylesheet);
the timeline's data goes in through ``|tojson``, which escapes ``<``, ``>``, ``&`` and ``'``. It is
off for ``*.md.j2``, whose values go through the Markdown report's own filters.
Only the HTML, Markdown and notebook renderers import this module: the terminal and JSON reports
never load jinja2.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

TEMPLATES = Path(__file__).with_name("templates")


def environment(filters: dict[str, Callable[..., Any]]) -> Environment:
    """An environment over ``templates/`` with ``filters`` added; block tags leave no blank lines."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(enabled_extensions=("html.j2", "html"), disabled_extensions=("md.j2", "md"),
                                     default_for_string=True, default=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=False,
    )
    env.policies["json.dumps_kwargs"] = {"separators": (",", ":")}  # |tojson: compact, keys in their order
    env.filters.update(filters)
    return env


__all__ = ["TEMPLATES", "environment"]
