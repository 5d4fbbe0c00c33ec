"""What the commands share: typer's command and group classes with plain help, and the options' parsers.

:class:`Command` and :class:`Group` are typer's (``cls=`` of ``app.command`` and ``typer.Typer``), subclassed, never
patched: help rows without type tags (each option states its metavar; an argument is shown by its metavar) and
a usage line without braces; a "no such option" error that suggests only options spelled much like the one typed;
Ctrl-C ends a command with exit code 130, no "Aborted!"; option values converted without pydantic
(:mod:`tfadvisor.cli.values`). Nothing here imports rich: ``--help`` stays fast.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from tfadvisor.cli.values import convert_natively
from tfadvisor.errors import close_options


def _argument_row(param: Any, ctx: Any) -> tuple[str, str]:
    """An argument's help row: its metavar, its help, ``[default: ...]`` or ``[required]``."""
    extra = []
    default = param.get_default(ctx, call=False)
    if not param.required and isinstance(default, (str, int, float)) and default != "":
        extra.append(f"default: {default}")
    if param.required:
        extra.append("required")
    text = param.help or ""
    if extra:
        text = f"{text}  [{'; '.join(extra)}]" if text else f"[{'; '.join(extra)}]"
    return param.metavar or param.name.upper(), text


def _usage_piece(param: Any) -> str:
    name = param.metavar or param.name.upper()
    if param.metavar and param.metavar.startswith(("[", "-")):  # written whole: [analyze|diff], -- COMMAND
        return name
    name += "..." if param.nargs != 1 else ""
    return name if param.required else f"[{name}]"


class _CloseOptions:
    """A "no such option" error naming only the options spelled much like the one typed (typer's own hint is any
    close match: ``--bogus`` would suggest ``--jobs``); and a ``--help`` flag whose default is False, not None: typer
    passes every value but a flag's bool through pydantic (imported on first use, ~40 ms), so ``tfadvisor analyze
    --help`` would load it for the root's unset ``--help`` alone. Its parameters' values are converted without pydantic
    (:func:`~tfadvisor.cli.values.convert_natively`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        convert_natively(self.params)  # type: ignore[attr-defined]

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None and option.default is None:
            option.default = False
        return option

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]
        except typer.TyperException as err:
            if getattr(err, "option_name", None) is not None and hasattr(err, "possibilities"):
                hints = close_options(err.option_name, list(err.possibilities or []))
                err.message = f"No such option: {err.option_name}"
                if hints:
                    err.message += f" (Possible options: {', '.join(sorted(hints))})"
                err.possibilities = None
            raise


class Command(_CloseOptions, TyperCommand):
    """A command whose help has no type tags: arguments by their metavars under "Arguments:", options as they state
    their metavars."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                pieces.append(_usage_piece(param))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        rows: dict[str, list[tuple[str, str]]] = {"argument": [], "option": []}
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                if not param.hidden:
                    rows["argument"].append(_argument_row(param, ctx))
                continue
            record = param.get_help_record(ctx)
            if record is not None and param.param_type_name in rows:
                rows[param.param_type_name].append(record)
        for title, kind in (("Arguments", "argument"), ("Options", "option")):
            if rows[kind]:
                with formatter.section(title):
                    formatter.write_dl(rows[kind])


class Group(_CloseOptions, TyperGroup):
    """A group as typer makes it (commands first, then groups, in the order they were added; "no such command"
    with the close names), "no such option" as :class:`Command` says it, and Ctrl-C exit code 130."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None


def typer_app(help: str | None = None, **kwargs: Any) -> typer.Typer:
    """A typer app of :class:`Group`: plain help (no rich), no completion options, typer's tracebacks left alone
    (``tfadvisor.cli.app.main`` turns errors into one line)."""
    return typer.Typer(cls=Group, help=help, rich_markup_mode=None, add_completion=False,
                       pretty_exceptions_enable=False, **kwargs)


_SI = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9, "t": 10**12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGbBtT]?)\s*$")


def parse_count(text: str | int) -> int:
    """A positive whole number: ``25000000``, ``25e6``, ``25M``, ``25.6M``, ``1.2B`` (K, M, G/B, T)."""
    if isinstance(text, int):
        return text
    m = _COUNT.match(str(text).replace(",", "").replace("_", ""))
    if m is None:
        raise typer.BadParameter(f"{text!r} is not a number (e.g. 25000000, 25e6, 25M, 1.2B)")
    value = float(m.group(1)) * _SI[m.group(2).lower()]
    if value < 1 or value != int(value):
        raise typer.BadParameter(f"{text!r} is not a positive whole number")
    return int(value)


def choice(*values: str) -> str:
    """The metavar of an option that takes one of ``values``: ``[text|json]``."""
    return "[" + "|".join(values) + "]"


def one_of(name: str, values: tuple[str, ...]):
    """A parser that accepts one of ``values`` (a usage error, exit 2, names the option otherwise)."""

    def parse(text: str) -> str:
        if text not in values:
            raise typer.BadParameter(f"{text!r} is not one of {', '.join(repr(v) for v in values)}.")
        return text

    parse.__name__ = name
    return parse
