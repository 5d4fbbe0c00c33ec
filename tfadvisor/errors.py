"""The one error users see for bad input: a file and what is wrong with it."""

from __future__ import annotations


class TraceError(Exception):
    """Input that cannot be analysed; the CLI prints ``str(err)`` and exits with 2."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def fail(message: str, code: int = 2) -> None:
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
