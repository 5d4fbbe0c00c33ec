"""The one error users see for bad input: a file and what is wrong with it; and ``fail``, how a command (or the
capture it runs) stops with one line on stderr and an exit code. The analyses import this module for
:class:`TraceError` and never load typer."""

from __future__ import annotations

from typing import NoReturn


class TraceError(Exception):
    """Input that cannot be analysed; the CLI prints ``str(err)`` and exits with 2."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``tfadvisor: <message>`` as one line on stderr and exit with ``code`` (command lines only)."""
    import typer

    try:
        typer.echo(f"tfadvisor: {message}", err=True)
    except (OSError, ValueError):  # stderr on a full disk or a closed pipe: the exit code still says it
        pass
    raise typer.Exit(code)


def one_line(err: object) -> str:
    """The first line of an error's message (its type name when it has none)."""
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def close_options(typed: str, candidates: list[str]) -> list[str]:
    """The candidates whose names (dashes left out) are spelled much like ``typed``."""
    from difflib import SequenceMatcher  # only for a mistyped option: not on every run's path

    name = typed.lstrip("-").lower()
    return [c for c in candidates if SequenceMatcher(None, name, c.lstrip("-").lower()).ratio() >= 0.75
            or (len(name) >= 3 and c.lstrip("-").lower().startswith(name))]
