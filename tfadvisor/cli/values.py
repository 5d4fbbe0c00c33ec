"""Option and argument values converted without pydantic, as typer converts them.

typer 0.29 converts every value but a flag's bool with a pydantic ``TypeAdapter``, built the first time a parameter
is processed, an unset option's None included (``typer.core._TyperParameter.get_runtime_param``): the first
``analyze`` imported pydantic (~55 ms here) and built 13 adapters (~10 ms) to read ``--format text``. typer offers
no other converter (a ``parser=`` or a ``Path`` goes through pydantic too), so :class:`~tfadvisor.cli.common.Command`
gives each parameter of a type listed here its converter up front, where typer keeps the one it would build
(``param._runtime_param``); any other type (a bounded number, a path that must exist, a date) is left to typer.

Same values and the same errors as typer's adapters (``tests/test_cli_values.py`` checks every parameter of every
command against typer's own conversion, integers and floats on 20,000 generated strings each), but for one reading
of pydantic-core 2.50 not repeated: leading zeros and underscores dropped before a sign in an integer (``--jobs 0-27``
is -27 there, an error here).
This relies on typer's parameters keeping their converter in ``_runtime_param`` and calling its ``coerce``: were
typer to change that, the converters given here would go unused and typer's own would run (the same values, slower);
the tests above fail then.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import typer

#: Surrounding whitespace pydantic strips from a number (Unicode White_Space, as Rust's ``trim``; not str.strip's
#: \x1c-\x1f).
_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
         "\u2028\u2029\u202f\u205f\u3000"
#: An integer as pydantic reads one from text: ASCII digits, single underscores between them, ``.0`` allowed.
_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NOT_INT = "Input should be a valid integer, unable to parse string as an integer"
_NOT_FLOAT = "Input should be a valid number, unable to parse string as a number"
#: typer's path checks this converter repeats (the defaults: anything, existing or not, readable if it exists).
_PLAIN_PATH = {"exists": False, "file_okay": True, "dir_okay": True, "writable": False, "readable": True,
               "resolve_path": False, "allow_dash": False, "path_type": None}


def _text(value: Any) -> str:
    return str(value)


def _int(value: Any) -> int:
    if isinstance(value, int):  # a default (a bool is 1 or 0, as pydantic's lax mode has it)
        return int(value)
    if not isinstance(value, str):
        raise ValueError("Input should be a valid integer")
    text = value.strip(_SPACE)
    if not _INT.fullmatch(text):
        raise ValueError(_NOT_INT)
    return int(text.split(".")[0])


def _float(value: Any) -> float:
    if isinstance(value, (int, float)):  # a default
        return float(value)
    if not isinstance(value, str):
        raise ValueError("Input should be a valid number")
    text = value.strip(_SPACE)
    if "_" in text:  # pydantic-core drops underscores between characters, but not beside whitespace
        if text != value or text.startswith("_") or text.endswith("_") or "__" in text:
            raise ValueError(_NOT_FLOAT)
        text = text.replace("_", "")
    try:
        if not text.isascii():
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise ValueError(_NOT_FLOAT) from None


def _path(value: Any) -> Path:
    path = value if isinstance(value, Path) else Path(value)
    try:
        os.stat(path)
    except OSError:
        return path
    if not os.access(path, os.R_OK):  # typer's own check, said as typer says it
        shown = os.fspath(value).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise typer.BadParameter(f"path {shown!r} is not readable.")
    return path


def _validator(parser):
    """``parser`` run as typer runs a parser or its path checks: inside a pydantic validator."""

    def convert(value: Any) -> Any:
        try:
            return parser(value)
        except ValueError as err:  # what pydantic's validator says of it
            raise ValueError(f"Value error, {err}") from None
        except AssertionError as err:
            raise ValueError(f"Assertion failed, {err}") from None

    return convert


_PATH = _validator(_path)


def _leaf(annotation: Any, info: Any):
    """The converter of one value, or None for a type left to typer."""
    if info.parser is not None:
        return _validator(info.parser)
    if info.min is not None or info.max is not None or getattr(info, "clamp", False):
        return None
    if annotation is str:
        return _text
    if annotation is int:
        return _int
    if annotation is float:
        return _float
    if annotation is Path and all(getattr(info, k, None) == v for k, v in _PLAIN_PATH.items()):
        return _PATH
    return None


class Converter:
    """What typer asks of a parameter's converter: ``coerce(value, param, ctx)``."""

    def __init__(self, convert, many: bool) -> None:
        self._convert, self._many = convert, many

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = getattr(param, "multiple", False) or param.nargs == -1
        if value is None:
            return () if multi else None
        if multi and isinstance(value, str):
            raise typer.BadParameter("Value must be an iterable.", ctx=ctx, param=param)
        try:
            if self._many:
                return [self._convert(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
            return self._convert(value)
        except ValueError as err:
            raise typer.BadParameter(_printable(str(err)), ctx=ctx, param=param) from None


def _printable(text: str) -> str:
    """Control characters escaped, as typer shows a pydantic error."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def converter(param: Any) -> Converter | None:
    """A converter for ``param`` (a parameter typer made), or None when its type is left to typer."""
    desc = getattr(param, "type_descriptor", None)
    if desc is None or desc.file_annotation is not None:
        return None
    annotation, info = desc.annotation, desc.parameter_info
    many = get_origin(annotation) is list
    if many:
        args = get_args(annotation)
        if len(args) != 1:
            return None
        annotation = args[0]
    elif get_origin(annotation) is not None:
        return None
    convert = _leaf(annotation, info)
    if convert is None or (many and convert is not _text):  # a list of anything but text: typer's (its errors)
        return None
    return Converter(convert, many)


def convert_natively(params: list[Any]) -> None:
    """Give each of ``params`` of a type listed here its converter, where typer keeps the one it builds."""
    for param in params:
        if getattr(param, "_runtime_param", False) is None and (conv := converter(param)) is not None:
            param._runtime_param = conv
