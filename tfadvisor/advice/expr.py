"""A small, safe expression language for rule conditions, impacts and message templates.

Rules are data written by users, so their expressions are never handed to ``eval``,
``exec`` or ``ast``: this module tokenizes and parses them itself (precedence climbing)
into a tiny tree and evaluates that tree over a metrics mapping.

Grammar (lowest precedence first)::

    expr       := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | comparison
    comparison := sum ((("<" | "<=" | ">" | ">=" | "==" | "!=") sum)+     # chains: 5 <= x < 20
                       | "is" ["not"] "none")?
    sum        := term (("+" | "-") term)*
    term       := unary (("*" | "/" | "%") unary)*
    unary      := ("-" | "+") unary | primary
    primary    := NUMBER | STRING | true | false | none | NAME
                | FUNC "(" [expr ("," expr)*] ")" | "(" expr ")"

``FUNC`` is one of ``min``, ``max``, ``abs`` and ``known``; nothing else can be called,
and there is no attribute access, indexing or assignment.

Unknown values: a metric that is ``None`` (the trace lacks the data), or a name missing
from the mapping, is *unknown*. Arithmetic, ``min``/``max``/``abs`` and comparisons with an
unknown operand give unknown; ``and``/``or``/``not`` follow three-valued (Kleene) logic
(``unknown and false`` is false, ``unknown or true`` is true, ``not unknown`` is unknown).
A condition holds only when it evaluates to true, so a rule never fires on missing data
unless it asks for it explicitly with ``x is none`` or ``not known(x)``. Division by zero
is unknown too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tfadvisor.units import human_bytes

__all__ = ["ExprError", "Expr", "Template", "parse", "parse_template", "truth", "FUNCTIONS", "format_value",
           "pointer"]


class ExprError(Exception):
    """A bad expression: what is wrong and where (0-based character offset)."""

    def __init__(self, message: str, pos: int | None = None, source: str | None = None) -> None:
        self.message = message
        self.pos = pos
        self.source = source
        where = f" (at column {pos + 1})" if pos is not None else ""
        super().__init__(f"{message}{where}")

    def render(self) -> str:
        """The message, then the expression with a caret under the offending column."""
        text = str(self)
        if self.source is not None and self.pos is not None:
            text += "\n" + pointer(self.source, self.pos)
        return text


def pointer(source: str, pos: int, indent: str = "    ") -> str:
    """``source`` on one line and a caret under column ``pos``."""
    line = source.replace("\n", " ")
    pos = max(0, min(pos, len(line)))
    return f"{indent}{line}\n{indent}{' ' * pos}^"


# --------------------------------------------------------------------------- tokens

NUM, STR, NAME, OP, KW, END = "number", "string", "name", "op", "keyword", "end"
KEYWORDS = {"and", "or", "not", "is"}
LITERALS = {"true": True, "True": True, "false": False, "False": False, "none": None, "None": None,
            "null": None}
OPERATORS = ("<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "%", "(", ")", ",")
_HINTS = {
    "&&": "use 'and'", "||": "use 'or'", "!": "use 'not' (or '!=')", "=": "use '==' to compare",
    ".": "attribute access is not allowed", "[": "indexing is not allowed", "]": "indexing is not allowed",
    "**": "'**' is not supported", "&": "use 'and'", "|": "use 'or'", "^": "'^' is not supported",
    "~": "'~' is not supported", "@": "'@' is not supported", ";": "one expression only",
    ":": "':' is not allowed here", "{": "'{' is not allowed here", "}": "'}' is not allowed here",
    "`": "'`' is not allowed", "$": "'$' is not allowed", "#": "comments are not allowed",
    "\\": "'\\' is not allowed",
}


@dataclass(frozen=True)
class Token:
    kind: str
    value: Any
    pos: int
    text: str


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens; raise :class:`ExprError` with the position of a bad character."""
    tokens: list[Token] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c in " \t\r\n":
            i += 1
            continue
        start = i
        if c.isdigit() or (c == "." and i + 1 < n and source[i + 1].isdigit()):
            while i < n and (source[i].isdigit() or source[i] == "_"):
                i += 1
            if i < n and source[i] == ".":
                i += 1
                while i < n and (source[i].isdigit() or source[i] == "_"):
                    i += 1
            if i < n and source[i] in "eE":
                j = i + 1
                if j < n and source[j] in "+-":
                    j += 1
                if j < n and source[j].isdigit():
                    i = j
                    while i < n and source[i].isdigit():
                        i += 1
            text = source[start:i]
            if i < n and (source[i].isalpha() or source[i] == "_"):
                raise ExprError(f"bad number {source[start:i + 1]!r}", start, source)
            try:
                value: Any = int(text) if text.replace("_", "").isdigit() else float(text)
            except ValueError:
                raise ExprError(f"bad number {text!r}", start, source) from None
            tokens.append(Token(NUM, value, start, text))
            continue
        if c.isalpha() or c == "_":
            while i < n and (source[i].isalnum() or source[i] == "_"):
                i += 1
            word = source[start:i]
            if word in KEYWORDS:
                tokens.append(Token(KW, word, start, word))
            elif word in LITERALS:
                literal = LITERALS[word]
                if literal is None:
                    tokens.append(Token(KW, "none", start, word))
                else:
                    tokens.append(Token(NUM, literal, start, word))
            else:
                tokens.append(Token(NAME, word, start, word))
            continue
        if c in "'\"":
            quote = c
            i += 1
            chars: list[str] = []
            while True:
                if i >= n:
                    raise ExprError("unterminated string", start, source)
                ch = source[i]
                if ch == "\\" and i + 1 < n:
                    chars.append(source[i + 1])
                    i += 2
                    continue
                if ch == quote:
                    i += 1
                    break
                chars.append(ch)
                i += 1
            tokens.append(Token(STR, "".join(chars), start, source[start:i]))
            continue
        for op in ("&&", "||", "**"):
            if source.startswith(op, i):
                raise ExprError(f"unexpected {op!r}: {_HINTS[op]}", i, source)
        for op in OPERATORS:
            if source.startswith(op, i):
                tokens.append(Token(OP, op, i, op))
                i += len(op)
                break
        else:
            hint = _HINTS.get(c)
            raise ExprError(f"unexpected character {c!r}" + (f": {hint}" if hint else ""), i, source)
    tokens.append(Token(END, None, n, ""))
    return tokens


# --------------------------------------------------------------------------- tree


class Node:
    pos: int = 0

    def names(self) -> Iterable[tuple[str, int]]:
        return ()


@dataclass
class Const(Node):
    value: Any
    pos: int = 0


@dataclass
class Name(Node):
    name: str
    pos: int = 0

    def names(self):
        yield (self.name, self.pos)


@dataclass
class Unary(Node):
    op: str
    operand: Node
    pos: int = 0

    def names(self):
        yield from self.operand.names()


@dataclass
class Binary(Node):
    op: str
    left: Node
    right: Node
    pos: int = 0

    def names(self):
        yield from self.left.names()
        yield from self.right.names()


@dataclass
class Compare(Node):
    ops: list[tuple[str, int]]
    operands: list[Node]
    pos: int = 0

    def names(self):
        for o in self.operands:
            yield from o.names()


@dataclass
class BoolOp(Node):
    op: str  # "and" / "or"
    values: list[Node]
    pos: int = 0

    def names(self):
        for v in self.values:
            yield from v.names()


@dataclass
class Not(Node):
    operand: Node
    pos: int = 0

    def names(self):
        yield from self.operand.names()


@dataclass
class IsNone(Node):
    operand: Node
    negate: bool
    pos: int = 0

    def names(self):
        yield from self.operand.names()


@dataclass
class Call(Node):
    func: str
    args: list[Node]
    pos: int = 0

    def names(self):
        for a in self.args:
            yield from a.names()


# --------------------------------------------------------------------------- functions


def _f_min(*args):
    if any(a is None for a in args):
        return None
    return min(args)


def _f_max(*args):
    if any(a is None for a in args):
        return None
    return max(args)


def _f_abs(a):
    return None if a is None else abs(a)


def _f_known(a):
    return a is not None


#: name -> (function, min args, max args or None, numeric args)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int | None, bool]] = {
    "min": (_f_min, 1, None, True),
    "max": (_f_max, 1, None, True),
    "abs": (_f_abs, 1, 1, True),
    "known": (_f_known, 1, 1, False),
}


# --------------------------------------------------------------------------- parser

_COMPARE = {"<", "<=", ">", ">=", "==", "!="}


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def error(self, message: str, tok: Token | None = None) -> ExprError:
        tok = tok or self.tok
        return ExprError(message, tok.pos, self.source)

    def advance(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at(self, kind: str, value: Any = None) -> bool:
        t = self.tok
        return t.kind == kind and (value is None or t.value == value)

    def expect_op(self, op: str, what: str) -> Token:
        if not self.at(OP, op):
            raise self.error(f"expected {op!r} {what}, found {_describe(self.tok)}")
        return self.advance()

    def parse(self) -> Node:
        if self.at(END):
            raise self.error("empty expression")
        node = self.parse_or()
        if not self.at(END):
            raise self.error(f"unexpected {_describe(self.tok)} after a complete expression")
        return node

    def parse_or(self) -> Node:
        first = self.tok
        values = [self.parse_and()]
        while self.at(KW, "or"):
            self.advance()
            values.append(self.parse_and())
        return values[0] if len(values) == 1 else BoolOp("or", values, first.pos)

    def parse_and(self) -> Node:
        first = self.tok
        values = [self.parse_not()]
        while self.at(KW, "and"):
            self.advance()
            values.append(self.parse_not())
        return values[0] if len(values) == 1 else BoolOp("and", values, first.pos)

    def parse_not(self) -> Node:
        if self.at(KW, "not"):
            tok = self.advance()
            return Not(self.parse_not(), tok.pos)
        return self.parse_comparison()

    def parse_comparison(self) -> Node:
        first = self.tok
        left = self.parse_sum()
        if self.at(KW, "is"):
            is_tok = self.advance()
            negate = False
            if self.at(KW, "not"):
                self.advance()
                negate = True
            if not self.at(KW, "none"):
                raise self.error("only 'is none' and 'is not none' are supported after 'is'")
            self.advance()
            if self.at(OP) and self.tok.value in _COMPARE or self.at(KW, "is"):
                raise self.error("cannot chain a comparison after 'is none'")
            return IsNone(left, negate, is_tok.pos)
        ops: list[tuple[str, int]] = []
        operands = [left]
        while self.at(OP) and self.tok.value in _COMPARE:
            op_tok = self.advance()
            ops.append((op_tok.value, op_tok.pos))
            operands.append(self.parse_sum())
        if not ops:
            return left
        for node in operands:
            if isinstance(node, Const) and node.value is None:
                raise ExprError("compare with none using 'is none' or 'is not none'", node.pos, self.source)
        return Compare(ops, operands, first.pos)

    def parse_sum(self) -> Node:
        left = self.parse_term()
        while self.at(OP) and self.tok.value in ("+", "-"):
            op = self.advance()
            left = Binary(op.value, left, self.parse_term(), op.pos)
        return left

    def parse_term(self) -> Node:
        left = self.parse_unary()
        while self.at(OP) and self.tok.value in ("*", "/", "%"):
            op = self.advance()
            left = Binary(op.value, left, self.parse_unary(), op.pos)
        return left

    def parse_unary(self) -> Node:
        if self.at(OP) and self.tok.value in ("-", "+"):
            op = self.advance()
            return Unary(op.value, self.parse_unary(), op.pos)
        return self.parse_primary()

    def parse_primary(self) -> Node:
        tok = self.tok
        if tok.kind in (NUM, STR):
            self.advance()
            return Const(tok.value, tok.pos)
        if tok.kind == KW and tok.value == "none":
            self.advance()
            return Const(None, tok.pos)
        if tok.kind == NAME:
            self.advance()
            if self.at(OP, "("):
                return self.parse_call(tok)
            return Name(tok.value, tok.pos)
        if tok.kind == OP and tok.value == "(":
            self.advance()
            if self.at(OP, ")"):
                raise self.error("empty parentheses")
            node = self.parse_or()
            self.expect_op(")", "to close the '(' at column " + str(tok.pos + 1))
            return node
        if tok.kind == END:
            raise self.error("unexpected end of expression")
        raise self.error(f"unexpected {_describe(tok)}")

    def parse_call(self, name_tok: Token) -> Node:
        fname = name_tok.value
        if fname not in FUNCTIONS:
            allowed = ", ".join(sorted(FUNCTIONS))
            raise self.error(f"calling {fname!r} is not allowed (functions: {allowed})", name_tok)
        self.expect_op("(", "")
        args: list[Node] = []
        if not self.at(OP, ")"):
            while True:
                args.append(self.parse_or())
                if self.at(OP, ","):
                    self.advance()
                    continue
                break
        self.expect_op(")", f"to close the call to {fname}()")
        _, lo, hi, _ = FUNCTIONS[fname]
        if len(args) < lo or (hi is not None and len(args) > hi):
            want = f"{lo}" if hi == lo else (f"at least {lo}" if hi is None else f"{lo} to {hi}")
            raise self.error(f"{fname}() takes {want} argument(s), got {len(args)}", name_tok)
        return Call(fname, args, name_tok.pos)


def _describe(tok: Token) -> str:
    if tok.kind == END:
        return "end of expression"
    if tok.kind == STR:
        return f"string {tok.text}"
    if tok.kind == NUM:
        return f"{tok.text!r}"
    return f"{tok.text!r}"


# --------------------------------------------------------------------------- evaluation

_NUMBER = (int, float)


def _is_number(v: Any) -> bool:
    return isinstance(v, _NUMBER) and not isinstance(v, bool)


def _plain(v: Any) -> Any:
    """numpy scalars -> Python; NaN -> unknown."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return None if math.isnan(v) else v
    if hasattr(v, "item") and getattr(v, "shape", None) == ():
        return _plain(v.item())
    if type(v).__name__ in ("NAType", "NaTType"):  # pandas' missing values
        return None
    return v


def truth(v: Any) -> bool | None:
    """Three-valued truth of a value: None stays unknown."""
    if v is None:
        return None
    return bool(v)


def _kind(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        return "bool"
    if _is_number(v):
        return "number"
    if isinstance(v, str):
        return "string"
    return type(v).__name__


class _Eval:
    def __init__(self, source: str, env: Mapping[str, Any]) -> None:
        self.source = source
        self.env = env

    def error(self, message: str, node: Node) -> ExprError:
        return ExprError(message, node.pos, self.source)

    def run(self, node: Node) -> Any:
        if isinstance(node, Const):
            return node.value
        if isinstance(node, Name):
            return _plain(self.env.get(node.name))
        if isinstance(node, Unary):
            v = self.run(node.operand)
            if v is None:
                return None
            if not _is_number(v):
                raise self.error(f"cannot apply unary {node.op!r} to a {_kind(v)}", node)
            return -v if node.op == "-" else v
        if isinstance(node, Binary):
            return self.binary(node)
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, BoolOp):
            return self.boolop(node)
        if isinstance(node, Not):
            t = truth(self.run(node.operand))
            return None if t is None else (not t)
        if isinstance(node, IsNone):
            v = self.run(node.operand)
            return (v is not None) if node.negate else (v is None)
        if isinstance(node, Call):
            func, _, _, numeric = FUNCTIONS[node.func]
            args = [self.run(a) for a in node.args]
            if numeric:
                for a, arg_node in zip(args, node.args):
                    if a is not None and not _is_number(a):
                        raise self.error(f"{node.func}() needs numbers, got a {_kind(a)}", arg_node)
            return func(*args)
        raise self.error(f"unknown node {type(node).__name__}", node)  # pragma: no cover

    def binary(self, node: Binary) -> Any:
        a = self.run(node.left)
        b = self.run(node.right)
        if a is None or b is None:
            return None
        op = node.op
        if op == "+" and isinstance(a, str) and isinstance(b, str):
            return a + b
        if not (_is_number(a) and _is_number(b)):
            raise self.error(f"cannot apply {op!r} to a {_kind(a)} and a {_kind(b)}", node)
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            return None  # x / 0 is unknown, not an exception
        if op == "/":
            return a / b
        return a % b

    def compare(self, node: Compare) -> bool | None:
        values = [self.run(node.operands[0])]
        result: bool | None = True
        for (op, pos), right_node in zip(node.ops, node.operands[1:]):
            a = values[-1]
            b = self.run(right_node)
            values.append(b)
            if a is None or b is None:
                step: bool | None = None
            elif op in ("==", "!="):
                if isinstance(a, bool) != isinstance(b, bool) and (_is_number(a) or _is_number(b)):
                    eq = False  # true == 1 is not a sensible rule
                else:
                    eq = a == b
                step = eq if op == "==" else not eq
            else:
                if _is_number(a) and _is_number(b) or isinstance(a, str) and isinstance(b, str):
                    step = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
                else:
                    raise ExprError(f"cannot compare a {_kind(a)} with a {_kind(b)} using {op!r}", pos,
                                    self.source)
            if step is False:
                return False
            if step is None:
                result = None
        return result

    def boolop(self, node: BoolOp) -> bool | None:
        unknown = False
        if node.op == "and":
            for v in node.values:
                t = truth(self.run(v))
                if t is False:
                    return False
                if t is None:
                    unknown = True
            return None if unknown else True
        for v in node.values:
            t = truth(self.run(v))
            if t is True:
                return True
            if t is None:
                unknown = True
        return None if unknown else False


class Expr:
    """A parsed expression: ``names`` it reads, ``evaluate(env)`` and ``test(env)``."""

    def __init__(self, source: str) -> None:
        if not isinstance(source, str):
            raise ExprError(f"an expression must be a string, got {type(source).__name__}")
        self.source = source
        self.tree = _Parser(source).parse()

    def names(self) -> list[tuple[str, int]]:
        """Metric names used, with their offsets."""
        return list(self.tree.names())

    def check_names(self, known: Iterable[str]) -> None:
        """Raise :class:`ExprError` at the first name not in ``known``."""
        known = set(known)
        for name, pos in self.names():
            if name not in known:
                hint = _closest(name, known)
                raise ExprError(f"unknown metric {name!r}" + (f" (did you mean {hint!r}?)" if hint else ""), pos,
                                self.source)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The value, None when unknown. Raises :class:`ExprError` on a type error."""
        return _Eval(self.source, env).run(self.tree)

    def test(self, env: Mapping[str, Any]) -> bool:
        """True only when the expression is definitely true."""
        return truth(self.evaluate(env)) is True

    def __repr__(self) -> str:
        return f"Expr({self.source!r})"


def parse(source: str) -> Expr:
    return Expr(source)


def _closest(name: str, known: set[str]) -> str | None:
    import difflib

    hits = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return hits[0] if hits else None


# --------------------------------------------------------------------------- templates


def format_value(value: Any, spec: str = "") -> str:
    """One value for a message: None -> 'unknown'; ``bytes`` spec -> '12.3 MiB'; floats rounded sensibly."""
    value = _plain(value)
    if value is None:
        return "unknown"
    if spec == "bytes":
        if not _is_number(value):
            return str(value)
        return human_bytes(value)
    if spec:
        try:
            return format(value, spec)
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value == 0:
            return "0"
        a = abs(value)
        if a >= 100:
            return f"{value:.0f}"
        if a >= 1:
            return f"{value:.1f}"
        return f"{value:.2g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


@dataclass
class _Field:
    expr: Expr
    spec: str
    offset: int  # where the expression starts in the template


class Template:
    """A message template: text with ``{expression}`` or ``{expression:spec}`` fields, ``{{``/``}}`` escapes.

    Fields are expressions of this module (so ``{a / b:.1f}`` works), formatted with Python's
    format-spec mini-language (``.1f``, ``,d``, ``>8`` ...) or ``bytes`` (human-readable size).
    Unknown values print as ``unknown``.
    """

    def __init__(self, source: str) -> None:
        if not isinstance(source, str):
            raise ExprError(f"a template must be a string, got {type(source).__name__}")
        self.source = source
        self.parts: list[str | _Field] = []
        i, n = 0, len(source)
        text: list[str] = []
        while i < n:
            c = source[i]
            if c == "{":
                if source.startswith("{{", i):
                    text.append("{")
                    i += 2
                    continue
                end = _field_end(source, i + 1)
                if end < 0:
                    raise ExprError("'{' without a closing '}'", i, source)
                body = source[i + 1 : end]
                colon = _top_level_colon(body)
                expr_src, spec = (body, "") if colon < 0 else (body[:colon], body[colon + 1 :])
                try:
                    expr = Expr(expr_src)
                except ExprError as err:
                    raise ExprError(err.message, i + 1 + (err.pos or 0), source) from None
                _check_spec(spec, i + 1 + (colon if colon >= 0 else 0), source)
                if text:
                    self.parts.append("".join(text))
                    text = []
                self.parts.append(_Field(expr, spec, i + 1))
                i = end + 1
                continue
            if c == "}":
                if source.startswith("}}", i):
                    text.append("}")
                    i += 2
                    continue
                raise ExprError("single '}' (write '}}' for a literal brace)", i, source)
            text.append(c)
            i += 1
        if text:
            self.parts.append("".join(text))

    def names(self) -> list[tuple[str, int]]:
        out = []
        for p in self.parts:
            if isinstance(p, _Field):
                out.extend((name, p.offset + pos) for name, pos in p.expr.names())
        return out

    def check_names(self, known: Iterable[str]) -> None:
        known = set(known)
        for p in self.parts:
            if isinstance(p, _Field):
                try:
                    p.expr.check_names(known)
                except ExprError as err:
                    raise ExprError(err.message, p.offset + (err.pos or 0), self.source) from None

    def render(self, env: Mapping[str, Any]) -> str:
        out = []
        for p in self.parts:
            if isinstance(p, str):
                out.append(p)
            else:
                try:
                    value = p.expr.evaluate(env)
                except ExprError as err:
                    raise ExprError(err.message, p.offset + (err.pos or 0), self.source) from None
                out.append(format_value(value, p.spec))
        return "".join(out)


def parse_template(source: str) -> Template:
    return Template(source)


def _field_end(s: str, i: int) -> int:
    """Index of the '}' closing a field that starts at ``i`` (quotes respected), or -1."""
    quote = None
    while i < len(s):
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "}":
            return i
        elif c == "{":
            return -1
        i += 1
    return -1


def _top_level_colon(body: str) -> int:
    quote = None
    for i, c in enumerate(body):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == ":":
            return i
    return -1


def _check_spec(spec: str, pos: int, source: str) -> None:
    if not spec or spec == "bytes":
        return
    for sample in (1.5, 1, "x"):
        try:
            format(sample, spec)
            return
        except (ValueError, TypeError):
            continue
    raise ExprError(f"bad format spec {spec!r}", pos, source)
