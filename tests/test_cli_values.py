"""Option values converted without pydantic (tfadvisor.cli.values) give what typer's own conversion gives: the same
value, or the same error, for every parameter of every command; `analyze` then imports no pydantic at all."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer._coercion import build_runtime_param  # typer's own conversion, to compare with (tests only)

from tfadvisor.cli.app import command as full_command
from tfadvisor.cli.common import Command, typer_app
from tfadvisor.cli.values import converter

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "input_bound_defaults_off"

#: Text a user may type: numbers as pydantic reads them and not, counts, choices, paths, empty, control characters.
WORDS = ["3", " 3 ", "+3", "-3", "1_0", "_10", "10_", "1__0", "2.0", "2.5", "2.", "1e3", "0x10", "007", "", "  ",
         "abc", "inf", "nan", "\u00a03", "\x1c3", "\u30003", "\u0663", "\uff11\uff12", "3\n", "9" * 30, "9" * 30 + ".0",
         "2.00", "1_000.5", "25M", "25e6", "1.2B", "0", "json", "text", "xml", "warning", "critical", "a\x1bb", "-",
         "some/dir", "/nonexistent/x.html", str(SAMPLE), "\x00"]


def _outcome(conv, value, param, ctx):
    try:
        got = conv.coerce(value, param=param, ctx=ctx)
    except typer.BadParameter as err:
        return ("error", err.message)
    if isinstance(got, float) and got != got:
        got = "NaN"  # equal to itself here
    return ("value", type(got).__name__ if got != "NaN" else "float", got if not isinstance(got, tuple) else list(got))


def _params(cmd, path=()):
    for p in cmd.params:
        yield path + (cmd.name or "tfadvisor",), cmd, p
    for sub in getattr(cmd, "commands", {}).values():
        yield from _params(sub, path + (cmd.name or "tfadvisor",))


def _values(param):
    if param.nargs == -1 or getattr(param, "multiple", False):
        return [None, (), ("a",), ("a", "b"), tuple(WORDS), ["x"]]
    return [None, param.default, *WORDS]


def test_every_parameter_converts_as_typer_does():
    """Each parameter given a converter here (every one of analyze's) agrees with typer's adapter on every word."""
    root = full_command()
    natively, left, seen = 0, [], set()
    for path, cmd, param in _params(root):
        conv = converter(param)
        if param.type_descriptor.annotation is bool:  # a flag: typer passes its bool through unconverted
            assert conv is None and param.is_flag, (path, param.name)
            continue
        if conv is None:
            left.append(" ".join(path[1:] + (param.name,)))
            continue
        natively += 1
        ctx = typer.Context(cmd)
        theirs = build_runtime_param(param.type_descriptor)
        for value in _values(param):
            mine, typers = _outcome(conv, value, param, ctx), _outcome(theirs, value, param, ctx)
            assert mine == typers, (path, param.name, value)
            seen.add(mine[0])
    assert seen == {"value", "error"}
    assert natively >= 60, natively
    # left to typer: what this module does not repeat (bounds, a path that must exist or be a directory)
    assert not any(x.startswith("analyze ") for x in left), left
    assert set(left) == {"capture vertex replica_count", "capture vertex script", "capture vertex out",
                         "capture vertex poll_seconds"}, left


def _both(one, name: str):
    """(this module's converter, typer's own, a context, the parameter) of option ``name`` of the command ``one``,
    made by typer with :class:`Command` beside a second command (so ``one`` is a subcommand, as tfadvisor's are)."""
    app = typer_app()
    app.command(cls=Command)(one)

    @app.command(cls=Command)
    def two() -> None:  # pragma: no cover - never run
        pass

    cmd = typer.main.get_command(app).commands["one"]
    param = next(p for p in cmd.params if p.name == name)
    return converter(param), build_runtime_param(param.type_descriptor), typer.Context(cmd), param


def _words(alphabet: str, longest: int) -> list[str]:
    """20,000 strings of up to ``longest`` characters drawn from ``alphabet`` (seed 54)."""
    rng = random.Random(54)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, longest))) for _ in range(20_000)]


def test_integers_as_pydantic_reads_them():
    """20,000 generated strings of digits, signs, points, underscores, exponents and spaces (seed 54): the same
    integer or the same error as typer's own conversion of an int option, but for pydantic-core's (2.50) reading of
    leading zeros and underscores before a sign or an underscore ('0-27' is -27, '0__5' is 5 there): an error here."""
    def one(n: Annotated[int, typer.Option()] = 0) -> None:  # pragma: no cover - never run
        pass

    mine, theirs, ctx, param = _both(one, "n")
    words = _words("0123456789" * 3 + "__..+-eE \t\u00a0\x1c", 7)
    values, quirks = 0, []
    for w in words:
        a, b = _outcome(mine, w, param, ctx), _outcome(theirs, w, param, ctx)
        if a != b and a[0] == "error" and b[0] == "value" and LEADING_ZEROS.match(w.strip(" \t\u00a0")):
            quirks.append(w)
            continue
        assert a == b, w
        values += a[0] == "value"
    assert 2_000 < values < 18_000, values  # both kinds of outcome are well represented
    assert len(quirks) < 100, quirks  # 15 of the 20,000 (2026-12-02)


def test_floats_as_pydantic_reads_them():
    """20,000 generated strings of digits, signs, points, underscores, exponents, inf/nan letters and spaces (seed
    54): the same number (NaN for NaN) or the same error as typer's own conversion of a float option, every one."""
    def one(x: Annotated[float, typer.Option()] = 0.5) -> None:  # pragma: no cover - never run
        pass

    mine, theirs, ctx, param = _both(one, "x")
    words = _words("0123456789" * 2 + "__..+-eEinfatyINFATY \t\u00a0\x1c", 8)
    values = 0
    for w in words + ["1_e3", "1e_3", " 1_0", "nan", "-Infinity", "1e400", ".5", "5.", "\u0663"]:
        a, b = _outcome(mine, w, param, ctx), _outcome(theirs, w, param, ctx)
        assert a == b, w
        values += a[0] == "value"
    assert 1_000 < values < 19_000, values


#: Text whose leading zeros (and underscores) pydantic-core drops before reading a sign or an underscore after them.
LEADING_ZEROS = re.compile(r"[+-]?[0_]*0[0_]*[-+_]")


def _parse(text: str) -> str:
    if text == "value":
        raise ValueError("no \x07 good")
    if text == "assert":
        raise AssertionError("nope")
    if text == "bad":
        raise typer.BadParameter("bad one")
    return text.upper()


def test_a_parser_that_raises_says_what_typer_says():
    """A parser's ValueError and AssertionError read as pydantic words them; its BadParameter as it is."""
    def one(x: Annotated[str, typer.Option(parser=_parse)] = "a") -> None:  # pragma: no cover - never run
        pass

    mine, theirs, ctx, param = _both(one, "x")
    for text in ("ok", "value", "assert"):
        assert _outcome(mine, text, param, ctx) == _outcome(theirs, text, param, ctx), text
    with pytest.raises(typer.BadParameter, match="bad one"):
        mine.coerce("bad", param=param, ctx=ctx)
    with pytest.raises(typer.BadParameter, match="bad one"):
        theirs.coerce("bad", param=param, ctx=ctx)


def test_commands_hand_their_parameters_the_converters():
    """typer keeps the converter given (it builds none of its own): analyze's parameters all convert here."""
    cmd = full_command().commands["analyze"]
    for param in cmd.params:
        if param.type_descriptor.annotation is bool:  # a flag's bool needs no conversion (typer's own skip)
            continue
        assert type(param.get_runtime_param()).__module__ == "tfadvisor.cli.values", param.name


PROBE = r"""
import atexit, sys
atexit.register(lambda: sys.__stderr__.write("PYDANTIC=%d\n" % ("pydantic" in sys.modules)))
from tfadvisor.cli.app import main
sys.argv = ["tfadvisor"] + sys.argv[1:]
main()
"""


@pytest.mark.parametrize("args, code", [
    (["analyze", str(SAMPLE), "--params", "25M", "--jobs", "1", "--format", "json", "--rules", "/nonexistent"], 2),
    (["analyze", str(SAMPLE), "--jobs", "x"], 2),
    (["analyze", str(SAMPLE), "-q"], 0),
    (["runs", str(SAMPLE), "-f", "json"], 0),
    (["schema", "runs"], 0),
    (["diff", str(SAMPLE), str(SAMPLE), "--fail-on-regression", "1e9"], 0),
])
def test_commands_import_no_pydantic(args, code):
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="200"))
    assert proc.returncode == code, proc.stderr[-2000:]
    assert "PYDANTIC=0" in proc.stderr, proc.stderr[-2000:]
    if args[-1] == "x":
        assert "Invalid value for '--jobs' / '-j': Input should be a valid integer, unable to parse string as an " \
               "integer" in proc.stderr
    if args[0] == "runs":
        assert json.loads(proc.stdout)
