"""The one error users see for bad input: a file and what is wrong with it.

The command lines' click classes live here too (``Argument``, ``Command``, ``Group``: plain click help with
an "Arguments:" section, and "no such option" hints of close spellings only), so that ``tfadvisor.cli.app`` and
the commands it gathers from other modules share them without importing each other. They are made on first
use: the analyses import this module for :class:`TraceError` and never load click.
"""

from __future__ import annotations

from typing import Any, NoReturn


class TraceError(Exception):
    """Input that cannot be analysed; the CLI prints ``str(err)`` and exits with 2."""

    def __init__(self, path: object, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``tfadvisor: <message>`` as one line on stderr and exit with ``code`` (command lines only)."""
    import click

    try:
        click.echo(f"tfadvisor: {message}", err=True)
    except (OSError, ValueError):  # stderr on a full disk or a closed pipe: the exit code still says it
        pass
    raise click.exceptions.Exit(code)


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


_CLICK_CLASSES = ("Argument", "Command", "Group")


def __getattr__(name: str) -> Any:
    """``Argument``, ``Command`` and ``Group``, made (and click imported) when a command line first asks."""
    if name not in _CLICK_CLASSES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals().update(_click_classes())
    return globals()[name]


def _click_classes() -> dict[str, type]:
    import click

    def _only_close_options(err: click.NoSuchOption) -> None:
        """``No such option: --formt (Possible options: --format)``, naming only options spelled much like the
        one typed (click's own hint is any close match, and its wording changes between versions)."""
        hints = close_options(err.option_name, list(err.possibilities or []))
        err.message = f"No such option: {err.option_name}"
        if hints:
            err.message += f" (Possible options: {', '.join(sorted(hints))})"
        err.possibilities = None

    class Argument(click.Argument):
        """A positional argument with a help text: its command's help lists it under "Arguments:", with
        ``[default: ...]`` and ``[required]`` as click writes them for options."""

        def __init__(self, param_decls: Any, required: bool | None = None, help: str | None = None,
                     **attrs: Any) -> None:
            super().__init__(param_decls, required=required, **attrs)
            self.help = help

        def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
            extra = []
            default = self.get_default(ctx, call=False)
            if not self.required and isinstance(default, (str, int, float)) and default != "":
                extra.append(f"default: {default}")
            if self.required:
                extra.append("required")
            text = self.help or ""
            if extra:
                text = f"{text}  [{'; '.join(extra)}]" if text else f"[{'; '.join(extra)}]"
            return self.make_metavar(ctx), text

    class CloseOptions:
        """A "no such option" error that suggests only the options spelled much like the one typed."""

        def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
            try:
                return super().parse_args(ctx, args)  # type: ignore[misc]
            except click.NoSuchOption as err:
                _only_close_options(err)
                raise

    class Command(CloseOptions, click.Command):
        """Plain click help with the arguments' help under "Arguments:" (click has no help for arguments),
        and a "no such option" error that suggests only the options spelled much like the one typed."""

        def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            rows: dict[str, list[tuple[str, str]]] = {"argument": [], "option": []}
            for param in self.get_params(ctx):
                record = param.get_help_record(ctx)
                if record is not None and param.param_type_name in rows:
                    rows[param.param_type_name].append(record)
            for title, kind in (("Arguments", "argument"), ("Options", "option")):
                if rows[kind]:
                    with formatter.section(title):
                        formatter.write_dl(rows[kind])

    class Group(CloseOptions, click.Group):
        """A group whose commands are :class:`Command` (its subgroups this class), listed commands first,
        then groups, each in the order they were added; "no such option" as :class:`Command` says it, "no such
        command" with the close names (whatever click's version); Ctrl-C ends it with exit code 130, no
        "Aborted!"."""

        command_class = Command
        group_class = type

        def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
            name = str(args[0]) if args else ""
            if (name[:1].isalnum() and self.get_command(ctx, name) is None and not ctx.resilient_parsing
                    and ctx.token_normalize_func is None):  # a name, not an option: say which commands are close
                from difflib import get_close_matches

                close = ", ".join(repr(c) for c in get_close_matches(name, list(self.commands)))
                ctx.fail(f"No such command {name!r}." + (f" Did you mean {close}?" if close else ""))
            return super().resolve_command(ctx, args)

        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(self.commands, key=lambda name: isinstance(self.commands[name], click.Group))

        def invoke(self, ctx: click.Context) -> Any:
            try:
                return super().invoke(ctx)
            except KeyboardInterrupt:
                raise click.exceptions.Exit(130) from None

    return {"Argument": Argument, "Command": Command, "Group": Group}
