"""A small, safe expression language for rule conditions, impacts and message templates.

Expressions are parsed with :func:`ast.parse` (``mode="eval"``) and the tree is walked once
against a whitelist, turning each allowed node into a small Python closure; nothing is ever
handed to ``eval``/``exec`` and any other node (attributes, indexing, lambdas, comprehensions,
``if``/``else``, lists ...) is rejected. The language: numbers, strings, ``true``/``false``/``none``
(any case; ``null`` too), metric names, ``+ - * / %``, unary ``-``/``+``, comparisons
(chains such as ``5 <= x < 20``), ``x is none`` / ``x is not none``, ``and``/``or``/``not``, and the
functions ``min``, ``max``, ``abs`` and ``known``.

Unknown values: a metric that is ``None`` (the trace lacks the data), NaN, or a name missing
from the mapping, is *unknown*. Arithmetic, ``min``/``max``/``abs`` and comparisons with an
unknown operand give unknown; ``and``/``or``/``not`` follow three-valued (Kleene) logic
(``unknown and false`` is false, ``unknown or true`` is true, ``not unknown`` is unknown).
A condition holds only when it evaluates to true, so a rule never fires on missing data
unless it asks for it explicitly with ``x is none`` or ``not known(x)``. Division by zero
is unknown too. ``true == 1`` is false (a bool is not a number here).
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tfadvisor.units import human_bytes

__all__ = ["ExprError", "Expr", "Template", "parse", "parse_template", "truth", "FUNCTIONS", "format_value",
           "pointer"]


class ExprError(Exception):
    """A bad expression: what is wrong and where (0-based character offset)."""

    def __init__(self, message: str, pos: int | None = None, source: str | None = None) -> None:
        self.message, self.pos, self.source = message, pos, source
        super().__init__(message + (f" (at column {pos + 1})" if pos is not None else ""))

    def render(self) -> str:
        """The message, then the expression with a caret under the offending column."""
        extra = "\n" + pointer(self.source, self.pos) if self.source is not None and self.pos is not None else ""
        return str(self) + extra


def pointer(source: str, pos: int, indent: str = "    ") -> str:
    """``source`` on one line and a caret under column ``pos``."""
    line = source.replace("\n", " ")
    return f"{indent}{line}\n{indent}{' ' * max(0, min(pos, len(line)))}^"


def _num_args(*a):
    return None if any(x is None for x in a) else a


#: name -> (function, min args, max args or None, numeric args)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int | None, bool]] = {
    "min": (lambda *a: None if _num_args(*a) is None else min(a), 1, None, True),
    "max": (lambda *a: None if _num_args(*a) is None else max(a), 1, None, True),
    "abs": (lambda a: None if a is None else abs(a), 1, 1, True),
    "known": (lambda a: a is not None, 1, 1, False),
}
LITERALS = {"true": True, "false": False, "none": None, "null": None}
_HINTS = {
    "&&": "use 'and'", "||": "use 'or'", "!": "use 'not' (or '!=')", "=": "use '==' to compare",
    ".": "attribute access is not allowed", "[": "indexing is not allowed", "]": "indexing is not allowed",
    "**": "'**' is not supported", "//": "'//' is not supported", "&": "use 'and'", "|": "use 'or'",
    ";": "one expression only", "#": "comments are not allowed",
}
# one token at a time, so that hints never fire inside strings; any other character is a token of its own
_TOKEN = r"""(?P<str>'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")|(?P<open>['"])|(?P<name>[^\W\d]\w*)
    |(?P<num>(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)(?P<bad>\w*)
    |(?P<op><=|>=|==|!=|&&|\|\||\*\*|//|[<>()+\-*/%,])|(?P<other>\S)"""
_CMP = {ast.Lt: ("<", operator.lt), ast.LtE: ("<=", operator.le), ast.Gt: (">", operator.gt),
        ast.GtE: (">=", operator.ge), ast.Eq: ("==", None), ast.NotEq: ("!=", None)}
_ARITH = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
          ast.Div: ("/", operator.truediv), ast.Mod: ("%", operator.mod)}
_NOT_ALLOWED = {ast.Attribute: "attribute access", ast.Subscript: "indexing", ast.IfExp: "'if ... else'",
                ast.Lambda: "'lambda'", ast.List: "a list", ast.Tuple: "a tuple", ast.Dict: "a dict", ast.Set: "a set"}


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _kind(v: Any) -> str:
    return ("unknown" if v is None else "bool" if isinstance(v, bool) else "number" if _is_number(v)
            else "string" if isinstance(v, str) else type(v).__name__)


def _plain(v: Any) -> Any:
    """numpy scalars -> Python; NaN and pandas' NA -> unknown."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if hasattr(v, "item") and getattr(v, "shape", None) == ():
        return _plain(v.item())
    return None if type(v).__name__ in ("NAType", "NaTType") else v


def truth(v: Any) -> bool | None:
    """Three-valued truth of a value: None stays unknown."""
    return None if v is None else bool(v)


def _parses(text: str) -> bool:
    try:
        ast.parse(text, mode="eval")
        return bool(text.strip())
    except SyntaxError:
        return False


class Expr:
    """A parsed expression: ``names`` it reads, ``evaluate(env)`` and ``test(env)``."""

    def __init__(self, source: str) -> None:
        if not isinstance(source, str):
            raise ExprError(f"an expression must be a string, got {type(source).__name__}")
        self.source = source
        self._names: list[tuple[str, int]] = []
        text = re.sub(r"\s", " ", source)  # newlines are spaces; one line keeps offsets = columns
        body = text.lstrip()
        self._shift, self._ascii, self._body = len(text) - len(body), body.isascii(), body
        toks = list(re.finditer(_TOKEN, text, re.X))
        for m in toks:
            if m.group("open"):
                raise self.error("unterminated string", m.start())
            if m.group("bad"):
                raise self.error(f"bad number {m.group('num') + m.group('bad')[0]!r}", m.start())
            t = m.group("op") or m.group("other")
            if t in _HINTS or m.group("other"):
                raise self.error(f"unexpected {t!r}: {_HINTS.get(t, f'{t!r} is not allowed')}", m.start())
        if not toks:
            raise self.error("empty expression", 0)
        try:
            tree = ast.parse(body, mode="eval")
        except SyntaxError as e:
            raise self._syntax(e, text, toks) from None
        self._fn: Callable[[Mapping[str, Any]], Any] | None = self._build(tree.body)

    @classmethod
    def unchecked(cls, source: str) -> Expr:
        """An expression checked before (a rule read back from :mod:`tfadvisor.advice.cache`): parsed when first
        used."""
        expr = cls.__new__(cls)
        expr.source, expr._fn = source, None
        return expr

    def _parsed(self) -> Callable[[Mapping[str, Any]], Any]:
        if self._fn is None:
            self.__init__(self.source)  # type: ignore[misc]
        return self._fn  # type: ignore[return-value]

    # ------------------------------------------------------------------ errors and positions

    def error(self, message: str, pos: int) -> ExprError:
        return ExprError(message, pos, self.source)

    def _syntax(self, e: SyntaxError, text: str, toks: list[re.Match]) -> ExprError:
        end = len(text.rstrip())
        if "never closed" in (e.msg or ""):
            return self.error(f"expected ')' to close the '(' at column {self._shift + (e.offset or 1)}, found end "
                              "of expression", end)
        pos = self._shift + e.offset - 1 if e.offset else end
        if pos >= end:
            return self.error("unexpected end of expression", end)
        if "forgot a comma" in (e.msg or ""):  # two expressions side by side: report the second
            pos = max((m.start() for m in toks if _parses(text[:m.start()])), default=pos)
        tok = next((m.group() for m in toks if m.start() <= pos < m.end()), text[pos])
        after = " after a complete expression" if _parses(text[:pos]) else ""
        return self.error(f"unexpected {tok!r}{after}", pos)

    def _pos(self, node: ast.AST) -> int:
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:  # an operation is where its operator is
            return self._op_pos(node.left, node.right, _ARITH[type(node.op)][0])
        return self._col(node)

    def _col(self, node: ast.AST) -> int:
        col = node.col_offset if self._ascii else len(self._body.encode()[:node.col_offset].decode("utf-8", "ignore"))
        return self._shift + col

    def _op_pos(self, left: ast.AST, right: ast.AST, op: str) -> int:
        """Offset of operator ``op`` between two operands (the tree keeps none for operators)."""
        a, b = self._col(left) + len(ast.get_source_segment(self._body, left) or ""), self._col(right)
        i = self.source.find(op, a, b)
        return i if i >= 0 else a

    # ------------------------------------------------------------------ the whitelist walk

    def _build(self, n: ast.AST) -> Callable[[Mapping[str, Any]], Any]:
        if isinstance(n, ast.Constant) and (n.value is None or type(n.value) in (bool, int, float, str)):
            return lambda env, v=n.value: v
        if isinstance(n, ast.Name):
            if n.id.lower() in LITERALS:
                return lambda env, v=LITERALS[n.id.lower()]: v
            self._names.append((n.id, self._pos(n)))
            return lambda env, k=n.id: _plain(env.get(k))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            f = self._build(n.operand)
            return lambda env: (lambda t: None if t is None else not t)(truth(f(env)))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            return self._unary(n, self._build(n.operand), "-" if isinstance(n.op, ast.USub) else "+")
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
            return self._binary(n, *_ARITH[type(n.op)])
        if isinstance(n, ast.BoolOp):
            return self._boolop(isinstance(n.op, ast.And), [self._build(v) for v in n.values])
        if isinstance(n, ast.Compare):
            return self._compare(n)
        if isinstance(n, ast.Call):
            return self._call(n)
        what = _NOT_ALLOWED.get(type(n)) or (f"operator {type(n.op).__name__}" if isinstance(n, ast.BinOp)
                                             else type(n).__name__)
        raise self.error(f"{what} is not allowed in an expression", self._pos(n))

    def _unary(self, n: ast.UnaryOp, f, op: str):
        def run(env):
            v = f(env)
            if v is None or _is_number(v):
                return v if v is None or op == "+" else -v
            raise self.error(f"cannot apply unary {op!r} to a {_kind(v)}", self._pos(n))
        return run

    def _binary(self, n: ast.BinOp, op: str, fn):
        left, right = self._build(n.left), self._build(n.right)

        def run(env):
            a, b = left(env), right(env)
            if a is None or b is None:
                return None
            if op == "+" and isinstance(a, str) and isinstance(b, str):
                return a + b
            if not (_is_number(a) and _is_number(b)):
                raise self.error(f"cannot apply {op!r} to a {_kind(a)} and a {_kind(b)}", self._pos(n))
            return None if op in "/%" and b == 0 else fn(a, b)
        return run

    @staticmethod
    def _boolop(is_and: bool, fns):
        def run(env):
            unknown = False
            for f in fns:
                t = truth(f(env))
                if t is (not is_and):  # false decides an 'and', true decides an 'or'
                    return t
                unknown = unknown or t is None
            return None if unknown else is_and
        return run

    def _compare(self, n: ast.Compare):
        operands = [n.left, *n.comparators]
        if any(isinstance(o, (ast.Is, ast.IsNot)) for o in n.ops):
            if len(n.ops) > 1:
                raise self.error("cannot chain a comparison after 'is none'", self._pos(n.comparators[1]))
            r = n.comparators[0]
            if not (isinstance(r, ast.Constant) and r.value is None or isinstance(r, ast.Name)
                    and r.id.lower() in ("none", "null")):
                raise self.error("only 'is none' and 'is not none' are supported after 'is'", self._pos(r))
            f, neg = self._build(n.left), isinstance(n.ops[0], ast.IsNot)
            return lambda env: (f(env) is None) != neg
        for o in operands:
            if isinstance(o, ast.Constant) and o.value is None or isinstance(o, ast.Name) and o.id.lower() in (
                    "none", "null"):
                raise self.error("compare with none using 'is none' or 'is not none'", self._pos(o))
        bad = next((o for o in n.ops if type(o) not in _CMP), None)
        if bad is not None:
            raise self.error(f"{type(bad).__name__!r} is not supported: compare with < <= > >= == !=", self._pos(n))
        fns = [self._build(o) for o in operands]
        steps = [(*_CMP[type(o)], i) for i, o in enumerate(n.ops)]

        def run(env):
            result, a = True, fns[0](env)
            for op, fn, i in steps:
                b = fns[i + 1](env)
                if a is None or b is None:
                    step = None
                elif fn is None:  # == / != ; true == 1 is not a sensible rule
                    mixed = isinstance(a, bool) != isinstance(b, bool) and (_is_number(a) or _is_number(b))
                    eq = a == b and not mixed
                    step = eq if op == "==" else not eq
                elif _is_number(a) and _is_number(b) or isinstance(a, str) and isinstance(b, str):
                    step = fn(a, b)
                else:
                    raise self.error(f"cannot compare a {_kind(a)} with a {_kind(b)} using {op!r}",
                                     self._op_pos(operands[i], operands[i + 1], op))
                if step is False:
                    return False
                result = None if step is None else result
                a = b
            return result
        return run

    def _call(self, n: ast.Call):
        name = n.func.id if isinstance(n.func, ast.Name) else None
        if name not in FUNCTIONS or n.keywords or any(isinstance(a, ast.Starred) for a in n.args):
            raise self.error(f"calling {name or 'that'!r} is not allowed (functions: {', '.join(sorted(FUNCTIONS))})",
                             self._pos(n))
        fn, lo, hi, numeric = FUNCTIONS[name]
        if len(n.args) < lo or (hi is not None and len(n.args) > hi):
            want = f"{lo}" if hi == lo else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise self.error(f"{name}() takes {want} argument(s), got {len(n.args)}", self._pos(n))
        fns = [self._build(a) for a in n.args]

        def run(env):
            args = [f(env) for f in fns]
            for a, node in zip(args, n.args):
                if numeric and a is not None and not _is_number(a):
                    raise self.error(f"{name}() needs numbers, got a {_kind(a)}", self._pos(node))
            return fn(*args)
        return run

    # ------------------------------------------------------------------ the public interface

    def names(self) -> list[tuple[str, int]]:
        """Metric names used, with their offsets, in source order."""
        self._parsed()
        return list(self._names)

    def check_names(self, known: Iterable[str]) -> None:
        """Raise :class:`ExprError` at the first name not in ``known``."""
        known = known if isinstance(known, (set, frozenset)) else set(known)  # 770 calls per load of the rules
        for name, pos in self.names():
            if name not in known:
                import difflib  # only for a misspelt name: not on every run's path

                hit = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
                raise self.error(f"unknown metric {name!r}" + (f" (did you mean {hit[0]!r}?)" if hit else ""), pos)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The value, None when unknown. Raises :class:`ExprError` on a type error."""
        return (self._fn or self._parsed())(env)

    def test(self, env: Mapping[str, Any]) -> bool:
        """True only when the expression is definitely true."""
        return truth((self._fn or self._parsed())(env)) is True

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"


def parse(source: str) -> Expr:
    return Expr(source)


def format_value(value: Any, spec: str = "") -> str:
    """One value for a message: None -> 'unknown'; ``bytes`` spec -> '12.3 MiB'; floats rounded sensibly."""
    value = _plain(value)
    if value is None:
        return "unknown"
    if spec == "bytes":
        return human_bytes(value) if _is_number(value) else str(value)
    if spec:
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        a = abs(value)
        return "0" if a == 0 else f"{value:.0f}" if a >= 100 else f"{value:.1f}" if a >= 1 else f"{value:.2g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


# an optional part of a template: "[[" ... "]]", left out when one of its fields is unknown
_OPTIONAL = r"\[\[(.*?)\]\]"
# a field: "{" then quoted strings or anything but quotes and braces, then "}"
_FIELD = r"""\{\{|\}\}|\{((?:'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|[^'"{}])*)\}|[{}]"""


class Template:
    """A message template: text with ``{expression}`` or ``{expression:spec}`` fields, ``{{``/``}}`` escapes.

    Fields are expressions of this module (so ``{a / b:.1f}`` works), formatted with Python's
    format-spec mini-language (``.1f``, ``,d``, ``>8`` ...) or ``bytes`` (human-readable size).
    Unknown values print as ``unknown``; an optional part ``[[; about {x:.1f} ms to gain]]`` is
    left out whole when a field in it is unknown, so a message need not print a number it lacks.
    """

    def __init__(self, source: str) -> None:
        if not isinstance(source, str):
            raise ExprError(f"a template must be a string, got {type(source).__name__}")
        self.source = source
        # text, fields (expr, spec, position) and optional parts (lists of text and fields)
        parts: list[Any] = []
        last = 0
        for m in re.finditer(_OPTIONAL, source, re.S):
            parts += self._parse(source, last, m.start())
            parts.append(self._parse(source, m.start(1), m.end(1)))
            last = m.end()
        parts += self._parse(source, last, len(source))
        self._parts: list[Any] | None = [p for p in parts if p != "" and p != []]

    @classmethod
    def unchecked(cls, source: str) -> Template:
        """A template checked before (a rule read back from :mod:`tfadvisor.advice.cache`): parsed when first used."""
        template = cls.__new__(cls)
        template.source, template._parts = source, None
        return template

    @property
    def parts(self) -> list[Any]:
        if self._parts is None:
            self.__init__(self.source)  # type: ignore[misc]
        return self._parts  # type: ignore[return-value]

    @staticmethod
    def _parse(source: str, lo: int, hi: int) -> list[Any]:
        """The text and fields of ``source[lo:hi]`` (positions are in ``source``)."""
        parts: list[Any] = []
        last = lo
        for m in re.finditer(_FIELD, source[lo:hi]):
            start = lo + m.start()
            parts.append(source[last:start])
            last, tok = lo + m.end(), m.group()
            if tok in ("{{", "}}"):
                parts.append(tok[0])
            elif tok == "{":
                raise ExprError("'{' without a closing '}'", start, source)
            elif tok == "}":
                raise ExprError("single '}' (write '}}' for a literal brace)", start, source)
            else:
                body, at = m.group(1), start + 1
                colon = next((t.start() for t in re.finditer(_TOKEN, body, re.X) if t.group() == ":"), -1)
                src, spec = (body, "") if colon < 0 else (body[:colon], body[colon + 1:])
                try:
                    expr = Expr(src)
                except ExprError as err:
                    raise ExprError(err.message, at + (err.pos or 0), source) from None
                if spec and spec != "bytes" and not any(_fits(x, spec) for x in (1.5, 1, "x")):
                    raise ExprError(f"bad format spec {spec!r}", at + colon, source)
                parts.append((expr, spec, at))
        parts.append(source[last:hi])
        return [p for p in parts if p != ""]

    def _fields(self):
        flat = [q for p in self.parts for q in (p if isinstance(p, list) else [p])]
        return [p for p in flat if isinstance(p, tuple)]

    def names(self) -> list[tuple[str, int]]:
        return [(name, at + pos) for expr, _, at in self._fields() for name, pos in expr.names()]

    def check_names(self, known: Iterable[str]) -> None:
        known = known if isinstance(known, (set, frozenset)) else set(known)
        for expr, _, at in self._fields():
            try:
                expr.check_names(known)
            except ExprError as err:
                raise ExprError(err.message, at + (err.pos or 0), self.source) from None

    def render(self, env: Mapping[str, Any]) -> str:
        out = []
        for p in self.parts:
            if isinstance(p, list):  # optional: all of it, or nothing when one of its fields is unknown
                got = self._render(p, env)
                out.append("" if None in got else "".join(got))
            else:
                got = self._render([p], env)[0]
                out.append("unknown" if got is None else got)
        return "".join(out)

    def _render(self, parts: list, env: Mapping[str, Any]) -> list[str | None]:
        """Each part as text; None for a field whose value is unknown."""
        out: list[str | None] = []
        for p in parts:
            if isinstance(p, str):
                out.append(p)
                continue
            try:
                v = p[0].evaluate(env)
            except ExprError as err:
                raise ExprError(err.message, p[2] + (err.pos or 0), self.source) from None
            out.append(None if _plain(v) is None else format_value(v, p[1]))
        return out


def _fits(sample: Any, spec: str) -> bool:
    try:
        format(sample, spec)
        return True
    except (ValueError, TypeError):
        return False


def parse_template(source: str) -> Template:
    return Template(source)
