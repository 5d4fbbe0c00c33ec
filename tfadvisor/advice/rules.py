"""Rules are data: TOML files, one ``[[rule]]`` table per rule, loaded and checked here.

A rule file looks like::

    [[rule]]
    id = "input_bound"
    title = "Training waits for input"
    severity = "warning"                  # critical | warning | info
    when = "input_pct >= 5"               # condition over metric names (tfadvisor.advice.expr)
    impact = "input_pct"                  # share of step/wall time at stake, % (orders findings)
    message = "{input_pct:.1f} % of step time waits for input"
    evidence = ["input_pct", "tfdata_pipeline"]
    fix = '''...the change to make, with a code example...'''
    why = "..."
    example = "..."
    docs = ["https://www.tensorflow.org/guide/data_performance"]   # or {title = "...", url = "..."}

    [[rule.case]]                         # optional refinements: the first case whose `when`
    when = "input_pct >= 20"              # holds overrides severity / title / message /
    severity = "critical"                 # impact / fix / evidence of the finding

Built-in rules live in ``rules/`` at the top of a source checkout and ship in the wheel
as ``tfadvisor/_rules``. ``--rules DIR`` adds a directory (or one ``.toml`` file); a rule
there with the id of an earlier one replaces it, and ``enabled = false`` with just an
``id`` switches a rule off. Every problem is a :class:`RuleError` naming the file and line.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfadvisor.advice import cache
from tfadvisor.advice.caveats import CAVEATS
from tfadvisor.advice.expr import Expr, ExprError, Template, pointer
from tfadvisor.analyses.marks import LANES, MARKS, PLOTS, scope_problem
from tfadvisor.errors import TraceError

SEVERITIES = ("critical", "warning", "info")
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}

_RULE_KEYS_REQUIRED = ("id", "title", "severity", "when", "message", "fix")
_RULE_KEYS = set(_RULE_KEYS_REQUIRED) | {"impact", "evidence", "why", "example", "docs", "case", "enabled", "marks",
                                         "scope", "plots", "lanes", "explains", "generic", "reports", "recovers"}
#: What a rule explains: a part of the run's wall time (``part.<part>``, a part of the attribution), or a cause
#: within one, more specific the deeper it goes (``part.input.tfdata.cause``).
_EXPLAINS = re.compile(r"^part\.([a-z_]+|\{[a-z_][a-z0-9_]*\})(\.[a-z_]+)*$")
#: ``{{metric}}`` in a fix is replaced by that metric's value in the finding.
FIX_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
#: A part of a fix shown only when a metric is known (``[[if name: ...]]``) or unknown
#: (``[[unless name: ...]]``): generated code where the trace gives it, general code where not.
FIX_SECTION = re.compile(r"\[\[(if|unless) ([A-Za-z_][A-Za-z0-9_]*):\s(.*?)\]\]", re.S)
_CASE_KEYS = {"when", "severity", "title", "message", "impact", "fix", "evidence"}
_ID = re.compile(r"^[a-z][a-z0-9_]*$")


class RuleError(TraceError):
    """A rule file that cannot be used: ``path:line: problem`` (one line; ``detail`` adds a caret display).

    A :class:`~tfadvisor.errors.TraceError`, so the command line reports it as bad input (exit code 2).
    """

    def __init__(self, path: object, line: int | None, problem: str, rule: str | None = None,
                 detail: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        self.rule = rule
        where = f"{self.path}:{line}" if line else self.path
        self.detail = f"{where}: {problem}" + (f"\n{detail}" if detail else "")
        Exception.__init__(self, f"{where}: {problem}")


def expr_problem(err: ExprError) -> tuple[str, str | None]:
    """One-line text for a bad expression (message, column, the expression) and the caret display."""
    if err.source is None:
        return err.message, None
    col = f" at column {err.pos + 1}" if err.pos is not None else ""
    return f"{err.message}{col} of {err.source.strip()!r}", (pointer(err.source, err.pos) if err.pos is not None
                                                             else None)


@dataclass(frozen=True)
class Doc:
    title: str
    url: str


@dataclass
class Case:
    """A refinement of a rule, chosen when its ``when`` holds (first match wins)."""

    when: Expr
    line: int | None = None
    severity: str | None = None
    title: str | None = None
    message: Template | None = None
    impact: Expr | None = None
    fix: str | None = None
    evidence: list[str] | None = None


@dataclass
class Rule:
    """One rule as loaded from a file."""

    id: str
    title: str
    severity: str
    when: Expr
    message: Template
    fix: str
    impact: Expr | None = None
    evidence: list[str] = field(default_factory=list)
    why: str = ""
    example: str = ""
    docs: list[Doc] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)  # what its findings mark (tfadvisor.analyses.marks)
    plots: list[str] = field(default_factory=list)  # the plots that show its evidence (marks.PLOTS)
    lanes: list[str] = field(default_factory=list)  # the timeline lanes its findings light up (marks.LANES)
    scope: str = "run"  # whose spans: run, none, host:<metric>
    explains: str = ""  # the node of the cost tree it explains (part.<part>[.<cause>...]); "" for none
    generic: bool = False  # the explanation of its node when no specific one holds
    recovers: float | None = None  # the share of its impact its fix is expected to recover (None: the engine's default)
    reports: tuple[str, ...] = ()  # the caveats (advice.explain.CAVEATS) it reports itself: not said on its findings
    path: str = ""
    line: int | None = None

    def part(self, metrics: Any = None) -> str:
        """The part of the wall time it explains (``input`` of ``part.input.tfdata``; ``part.{op_top_category}``
        names it by a metric's value, read from ``metrics``), "" for none."""
        if not self.explains:
            return ""
        name = self.explains.split(".")[1]
        if name.startswith("{"):
            v = (metrics or {}).get(name[1:-1])
            return str(v) if isinstance(v, str) else ""
        return name

    @property
    def depth(self) -> int:
        """How specific its explanation is: the generic one 0, ``part.input`` 1, ``part.input.tfdata`` 2."""
        return 0 if self.generic or not self.explains else self.explains.count(".")

    @property
    def severities(self) -> list[str]:
        """Every severity the rule can report, most severe first."""
        sev = {self.severity} | {c.severity for c in self.cases if c.severity}
        return sorted(sev, key=lambda s: -SEVERITY_RANK[s])

    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


# --------------------------------------------------------------------------- where the rules are


def builtin_rules_dir() -> Path:
    """``rules/`` in a source checkout, else ``tfadvisor/_rules`` in an installed wheel."""
    installed = Path(__file__).resolve().parents[1] / "_rules"  # .../tfadvisor/_rules (wheel)
    source = Path(__file__).resolve().parents[2] / "rules"  # <checkout>/rules
    if installed.is_dir() and any(installed.glob("*.toml")):
        return installed
    return source


def load_rules(extra_dirs: Iterable[str | Path] = (), *, builtin: bool = True,
               known_metrics: Iterable[str] | None = None) -> list[Rule]:
    """Built-in rules, then each extra directory (or file) in order; later ids replace earlier ones."""
    known = set(_known() if known_metrics is None else known_metrics)
    ordered: dict[str, Rule] = {}
    sources: list[tuple[Path, bool]] = []
    if builtin:
        d = builtin_rules_dir()
        if not d.is_dir():
            raise RuleError(d, None, "built-in rules directory not found (broken install?)")
        sources.append((d, True))
    for extra in extra_dirs or ():
        sources.append((Path(extra), False))
    for src, _is_builtin in sources:
        files = _rule_files(src)
        seen: dict[str, Rule] = {}
        for f in files:
            for rule_id, rule in load_file(f, known):
                if rule_id in seen:
                    prev = seen[rule_id]
                    line = rule.line if isinstance(rule, Rule) else rule
                    raise RuleError(f, line, f"duplicate rule id {rule_id!r} (first defined at {prev.location()})",
                                    rule_id)
                if isinstance(rule, Rule):
                    seen[rule_id] = rule
                    ordered[rule_id] = rule  # a later directory replaces an earlier rule of the same id
                else:  # enabled = false
                    ordered.pop(rule_id, None)
    return list(ordered.values())


def _known() -> frozenset[str]:
    """The metric names the analyses declare (their registry): the only names a rule may use."""
    from tfadvisor.analyses import known_metrics

    return known_metrics()


def _rule_files(src: Path) -> list[Path]:
    if src.is_file():
        if src.suffix != ".toml":
            raise RuleError(src, None, "a rules file must end in .toml")
        return [src]
    if not src.exists():
        raise RuleError(src, None, "no such rules directory")
    if not src.is_dir():
        raise RuleError(src, None, "not a directory")
    files = sorted(p for p in src.glob("*.toml") if p.is_file())
    if not files:
        raise RuleError(src, None, "no .toml rule files in this directory")
    return files


# --------------------------------------------------------------------------- one file


def load_file(path: str | Path, known_metrics: Iterable[str] | None = None) -> list[tuple[str, Any]]:
    """Parse one file: ``[(id, Rule)]``, or ``(id, line)`` for a rule switched off with ``enabled = false``; read back
    from the cache (:mod:`tfadvisor.advice.cache`) when the same file was checked against the same names before."""
    path = Path(path)
    known = set(_known() if known_metrics is None else known_metrics)
    try:
        data = path.read_bytes()
    except OSError as err:
        raise RuleError(path, None, f"cannot read: {err.strerror or err}") from None
    memo = (str(path), hashlib.sha256(data).digest(), frozenset(known))
    if memo in _LOADED:  # read in this process before: the same rules (their expressions parsed once)
        return list(_LOADED[memo])
    key = _cache_key(path, data, known) if cache.cache_dir() is not None else None
    kept = cache.read(path, key) if key else None
    out = None
    if kept is not None:
        try:
            out = [_from_json(x) for x in kept]
        except (KeyError, TypeError, ValueError, IndexError):  # an entry this did not write: parse, write it again
            out = None
    if out is None:
        out = _parse_file(path, data, known)
        if key:
            cache.write(path, key, [_to_json(r) for r in out])
    _LOADED[memo] = out
    return list(out)


#: The rule files read in this process, by path, bytes and the metric names they were checked against: a second
#: analysis in one process (the API, a notebook, the suite) neither reads the cache nor parses again.
_LOADED: dict[tuple[str, bytes, frozenset[str]], list[tuple[str, Any]]] = {}


def _parse_file(path: Path, raw: bytes, known: set[str]) -> list[tuple[str, Any]]:
    try:  # as Path.read_text reads it: universal newlines
        text = raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as err:
        raise RuleError(path, None, f"not UTF-8 text: {err}") from None
    if sys.version_info >= (3, 11):  # imported here: a run whose rules come from the cache parses no TOML
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise RuleError(path, _toml_error_line(str(err), text), f"TOML syntax error: {_toml_message(str(err))}") \
            from None
    lines = _Lines(text)
    for key in data:
        if key != "rule":
            raise RuleError(path, lines.key_line(key), f"unexpected top-level key {key!r}: rules are [[rule]] tables")
    tables = data.get("rule", [])
    if not isinstance(tables, list) or any(not isinstance(t, dict) for t in tables):
        raise RuleError(path, lines.key_line("rule"), "'rule' must be an array of tables: write [[rule]]")
    headers = lines.headers("rule")
    case_headers = lines.headers("rule.case")
    out: list[tuple[str, Any]] = []
    for i, table in enumerate(tables):
        start = headers[i] if i < len(headers) and len(headers) == len(tables) else None
        end = headers[i + 1] if start is not None and i + 1 < len(headers) else None
        if start is None:  # inline or unusual layout: find the id line instead
            start = lines.value_line("id", table.get("id"))
        my_cases = [h for h in case_headers if start is not None and h > start and (end is None or h < end)]
        out.append(_build_rule(path, table, start, end, my_cases, lines, known))
    return out


def _build_rule(path: Path, t: dict, line: int | None, end: int | None, case_lines: list[int], lines: _Lines,
                known: set[str]) -> tuple[str, Any]:
    def key_line(key: str) -> int | None:
        return lines.key_line(key, line, end) or line

    def err(problem: str, key: str | None = None, rule_id: str | None = None) -> RuleError:
        where = key_line(key) if key else line
        label = f"rule {rule_id!r}" if rule_id else "rule"
        return RuleError(path, where, f"{label}: {problem}", rule_id)

    rule_id = t.get("id")
    if not isinstance(rule_id, str) or not rule_id:
        raise err("missing 'id' (a string such as \"input_bound\")")
    if not _ID.match(rule_id):
        raise err("id must be lower-case letters, digits and '_', starting with a letter", "id", rule_id)
    for key in t:
        if key not in _RULE_KEYS:
            raise err(f"unknown key {key!r}{_did_you_mean(key, _RULE_KEYS)}", key, rule_id)
    enabled = t.get("enabled", True)
    if not isinstance(enabled, bool):
        raise err("'enabled' must be true or false", "enabled", rule_id)
    if not enabled:
        return rule_id, line
    for key in _RULE_KEYS_REQUIRED:
        if key not in t:
            raise err(f"missing required key {key!r}", None, rule_id)

    def string(key: str, required: bool = True) -> str:
        v = t.get(key, "")
        if not isinstance(v, str) or (required and not v.strip()):
            raise err(f"{key!r} must be a non-empty string", key, rule_id)
        return v.strip("\n")

    def severity(v: Any, key_where: int | None) -> str:
        if v not in SEVERITIES:
            raise RuleError(path, key_where, f"rule {rule_id!r}: severity must be one of {', '.join(SEVERITIES)}; "
                            f"got {v!r}", rule_id)
        return v

    def compiled(kind: type[Expr] | type[Template], source: str, where: int | None, what: str):
        try:
            out = kind(source)
            out.check_names(known)
        except ExprError as e2:
            problem, detail = expr_problem(e2)
            raise RuleError(path, where, f"rule {rule_id!r} (table at line {line}): {what}: {problem}", rule_id,
                            detail) from None
        return out

    def expr(source: Any, key: str, where: int | None, what: str) -> Expr:
        if isinstance(source, (int, float)) and not isinstance(source, bool) and key == "impact":
            source = repr(source)
        if not isinstance(source, str):
            raise RuleError(path, where, f"rule {rule_id!r}: {what} must be a string expression", rule_id)
        return compiled(Expr, source, where, what)

    def template(source: Any, where: int | None, what: str) -> Template:
        if not isinstance(source, str):
            raise RuleError(path, where, f"rule {rule_id!r}: {what} must be a string", rule_id)
        return compiled(Template, source, where, what)

    def fix_names(text: str, where: int | None) -> str:
        """A fix may name metrics as ``{{name}}`` (filled in when the finding is made), and show a part
        only when a metric is known or unknown (``[[if name: ...]]``, ``[[unless name: ...]]``)."""
        for name in FIX_PLACEHOLDER.findall(text) + [m.group(2) for m in FIX_SECTION.finditer(text)]:
            if name not in known:
                raise RuleError(path, where, f"rule {rule_id!r}: fix: unknown metric {name!r}"
                                f"{_did_you_mean(name, known)}", rule_id)
        return text

    def names(key: str, what: str, vocabulary: Any, v: Any, where: int | None) -> list[str]:
        """A list of ``what`` names from ``vocabulary`` (the metrics, or a vocabulary of marks.py, listed)."""
        if not isinstance(v, list) or any(not isinstance(x, str) for x in v):
            raise RuleError(path, where, f"rule {rule_id!r}: {key} must be a list of {what} names", rule_id)
        for name in v:
            if name not in vocabulary:
                listed = f" (one of {', '.join(vocabulary)})" if isinstance(vocabulary, dict) else ""
                raise RuleError(path, where, f"rule {rule_id!r}: {key}: unknown {what} {name!r}"
                                f"{_did_you_mean(name, vocabulary)}{listed}", rule_id)
        return list(v)

    def scope(v: Any, where: int | None) -> str:
        problem = scope_problem(v, known) if isinstance(v, str) else "scope must be a string"
        if problem:
            raise RuleError(path, where, f"rule {rule_id!r}: {problem}", rule_id)
        return v

    def explains(v: Any, where: int | None) -> str:
        from tfadvisor.analyses.attribution import PARTS

        m = _EXPLAINS.match(v) if isinstance(v, str) else None
        if v == "":
            return ""
        part = m.group(1) if m else ""
        if part.startswith("{") and part[1:-1] in known:
            return v
        if m is None or part not in PARTS:
            raise RuleError(path, where, f"rule {rule_id!r}: explains must be part.<part>[.<cause>...] with <part> one "
                            f"of {', '.join(PARTS)} or {{a metric}} naming one; got {v!r}", rule_id)
        return v

    generic = t.get("generic", False)
    if not isinstance(generic, bool):
        raise err("'generic' must be true or false", "generic", rule_id)
    if generic and "explains" not in t:
        raise err("a generic rule explains a part: give explains = \"part.<part>\"", "generic", rule_id)
    recovers = t.get("recovers")
    if recovers is not None and (isinstance(recovers, bool) or not isinstance(recovers, (int, float))
                                 or not 0 < recovers <= 1):
        raise err(f"'recovers' must be a number above 0 and at most 1 (the share of the impact its fix recovers); got "
                  f"{recovers!r}", "recovers", rule_id)
    reports = names("reports", "caveat", [c.id for c in CAVEATS], t.get("reports", []), key_line("reports"))
    rule = Rule(
        id=rule_id,
        title=string("title"),
        severity=severity(t["severity"], key_line("severity")),
        when=expr(t["when"], "when", key_line("when"), "when"),
        message=template(t["message"], key_line("message"), "message"),
        fix=fix_names(string("fix"), key_line("fix")),
        impact=expr(t["impact"], "impact", key_line("impact"), "impact") if "impact" in t else None,
        evidence=names("evidence", "metric", known, t.get("evidence", []), key_line("evidence")),
        why=string("why", required=False),
        example=string("example", required=False),
        docs=_docs(t.get("docs", []), lambda p: RuleError(path, key_line("docs"), f"rule {rule_id!r}: {p}", rule_id)),
        marks=names("marks", "mark", MARKS, t.get("marks", []), key_line("marks")),
        plots=names("plots", "plot", PLOTS, t.get("plots", []), key_line("plots")),
        lanes=names("lanes", "lane", LANES, t.get("lanes", []), key_line("lanes")),
        scope=scope(t.get("scope", "run"), key_line("scope")),
        explains=explains(t.get("explains", ""), key_line("explains")),
        generic=generic,
        recovers=float(recovers) if recovers is not None else None,
        reports=tuple(reports),
        path=str(path),
        line=line,
    )
    cases = t.get("case", [])
    if not isinstance(cases, list) or any(not isinstance(c, dict) for c in cases):
        raise err("'case' must be an array of tables: write [[rule.case]]", "case", rule_id)
    for j, c in enumerate(cases):
        cline = case_lines[j] if j < len(case_lines) and len(case_lines) == len(cases) else line
        cend = case_lines[j + 1] if j + 1 < len(case_lines) else end

        def cline_of(key: str, _cline=cline, _cend=cend) -> int | None:
            return lines.key_line(key, _cline, _cend) or _cline

        for key in c:
            if key not in _CASE_KEYS:
                raise RuleError(path, cline_of(key), f"rule {rule_id!r}: case {j + 1}: unknown key {key!r}"
                                f"{_did_you_mean(key, _CASE_KEYS)}", rule_id)
        if "when" not in c:
            raise RuleError(path, cline, f"rule {rule_id!r}: case {j + 1}: missing 'when'", rule_id)
        case = Case(when=expr(c["when"], "when", cline_of("when"), f"case {j + 1}: when"), line=cline)
        if "severity" in c:
            case.severity = severity(c["severity"], cline_of("severity"))
        if "title" in c:
            if not isinstance(c["title"], str) or not c["title"].strip():
                raise RuleError(path, cline_of("title"), f"rule {rule_id!r}: case {j + 1}: title must be a string",
                                rule_id)
            case.title = c["title"]
        if "message" in c:
            case.message = template(c["message"], cline_of("message"), f"case {j + 1}: message")
        if "impact" in c:
            case.impact = expr(c["impact"], "impact", cline_of("impact"), f"case {j + 1}: impact")
        if "fix" in c:
            if not isinstance(c["fix"], str) or not c["fix"].strip():
                raise RuleError(path, cline_of("fix"), f"rule {rule_id!r}: case {j + 1}: fix must be a string",
                                rule_id)
            case.fix = fix_names(c["fix"].strip("\n"), cline_of("fix"))
        if "evidence" in c:
            case.evidence = names("evidence", "metric", known, c["evidence"], cline_of("evidence"))
        rule.cases.append(case)
    return rule_id, rule


def _docs(v: Any, error) -> list[Doc]:
    if not isinstance(v, list):
        raise error("docs must be a list of URLs or {title, url} tables")
    out = []
    for d in v:
        if isinstance(d, str):
            m = re.match(r"^(.*?)\s*<(\S+)>\s*$", d)
            title, url = (m.group(1), m.group(2)) if m else ("", d.strip())
        elif isinstance(d, dict) and isinstance(d.get("url"), str) and set(d) <= {"title", "url"}:
            title, url = str(d.get("title", "")), d["url"]
        else:
            raise error(f"bad docs entry {d!r}: give a URL or {{title = \"...\", url = \"...\"}}")
        if not re.match(r"^https?://\S+$", url):
            raise error(f"docs entry {url!r} is not an http(s) URL")
        out.append(Doc(title or url, url))
    return out


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    import difflib

    hits = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.7)
    return f" (did you mean {hits[0]!r}?)" if hits else ""


def _toml_error_line(message: str, text: str) -> int | None:
    m = re.search(r"at line (\d+)", message)
    if m:
        return int(m.group(1))
    if "end of document" in message:
        return max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    return None


def _toml_message(message: str) -> str:
    return re.sub(r"\s*\((at line \d+, column \d+|at end of document)\)\s*$", "", message)


#: What can open a multi-line string, hide one (a single-line string, a comment), or end a line.
_TOKEN = re.compile(r'"""|\'\'\'|"(?:\\.|[^"\\\n])*"?|\'[^\'\n]*\'?|#[^\n]*')


#: A TOML key of letters, digits, '_' and '-' (bare), and a line setting one, bare or quoted (key_line's index).
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_KEY_AT = re.compile(r"\s*(?:([A-Za-z0-9_-]+)|\"([A-Za-z0-9_-]+)\")\s*=")


class _Lines:
    """Line numbers of table headers and keys in a TOML text (outside multi-line strings)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        # Multi-line strings as (first offset inside, offset of the closing quotes); found by a regex
        # scan over the tokens that matter (quotes, comments), not character by character.
        regions: list[tuple[int, int]] = []
        pos = 0
        while (m := _TOKEN.search(text, pos)) is not None:
            tok = m.group()
            if tok in ('"""', "'''"):
                close = text.find(tok, m.end())
                close = len(text) if close < 0 else close
                regions.append((m.end(), close))
                pos = close + 3
            else:
                pos = m.end()
        self._keys: dict[str, list[int]] | None = None  # bare key -> the 0-based lines it is set on (key_line)
        self.code: list[bool] = []  # True where the line starts outside a multi-line string
        start, r = 0, 0
        for raw in text.splitlines(keepends=True):
            while r < len(regions) and regions[r][1] < start:
                r += 1
            self.code.append(not (r < len(regions) and regions[r][0] <= start <= regions[r][1]))
            start += len(raw)

    def headers(self, name: str) -> list[int]:
        pat = re.compile(r"^\s*\[\[\s*" + re.escape(name).replace(r"\.", r"\s*\.\s*") + r"\s*\]\]")
        return [i + 1 for i, raw in enumerate(self.lines) if self.code[i] and pat.match(raw)]

    def key_line(self, key: str, start: int | None = None, end: int | None = None) -> int | None:
        lo = (start or 1) - 1
        hi = (end - 1) if end else len(self.lines)
        if _BARE_KEY.fullmatch(key):  # every key a rule has: the lines of each found in one pass, not one per key
            if self._keys is None:
                self._keys = {}
                for i, raw in enumerate(self.lines):
                    if self.code[i] and (m := _KEY_AT.match(raw)):
                        self._keys.setdefault(m.group(1) or m.group(2), []).append(i)
            at = self._keys.get(key, [])
            j = bisect.bisect_left(at, lo)
            return at[j] + 1 if j < len(at) and at[j] < min(hi, len(self.lines)) else None
        pat = re.compile(r"^\s*(" + re.escape(key) + r"|\"" + re.escape(key) + r"\")\s*=")
        for i in range(lo, min(hi, len(self.lines))):
            if self.code[i] and pat.match(self.lines[i]):
                return i + 1
        return None

    def value_line(self, key: str, value: Any) -> int | None:
        if not isinstance(value, str):
            return None
        pat = re.compile(r"^\s*" + re.escape(key) + r"\s*=\s*[\"']" + re.escape(value) + r"[\"']")
        for i, raw in enumerate(self.lines):
            if self.code[i] and pat.match(raw):
                return i + 1
        return None


# --------------------------------------------------------------------------- the cache's form (advice.cache)

#: Bumped when the form of a cached rule changes.
CACHE_FORMAT = 1


@functools.cache
def _checkers() -> bytes | None:
    """What checking a rule file reads besides the file and the metric names: the source of the modules that parse
    and check it, the vocabularies of marks.py, caveats.py and the attribution's parts, and Python's version. None
    when a module's source cannot be read (a frozen application): then nothing is cached."""
    from tfadvisor.advice import caveats, expr
    from tfadvisor.analyses import marks
    from tfadvisor.analyses.attribution import PARTS

    h = hashlib.sha256(f"{CACHE_FORMAT} {sys.version_info[:2]}".encode())
    try:
        for module in (sys.modules[__name__], expr, marks, caveats):
            h.update(Path(module.__file__).read_bytes() + b"\1")
    except (OSError, TypeError):
        return None
    for words in (sorted(MARKS), sorted(PLOTS), sorted(LANES), [c.id for c in CAVEATS], list(PARTS)):
        h.update("\0".join(words).encode() + b"\1")
    return h.digest()


def _cache_key(path: Path, data: bytes, known: set[str]) -> str | None:
    """The key of rule file ``path`` holding ``data``, checked against the metric names ``known``; None when there
    is none (:func:`_checkers`)."""
    checkers = _checkers()
    if checkers is None:
        return None
    h = hashlib.sha256(checkers)
    h.update("\0".join(sorted(known)).encode() + b"\1" + str(path).encode() + b"\1")
    h.update(data)
    return h.hexdigest()


def _source(x: Expr | Template | None) -> str | None:
    return None if x is None else x.source


def _to_json(item: tuple[str, Any]) -> dict[str, Any]:
    rule_id, r = item
    if not isinstance(r, Rule):  # switched off: its line
        return {"off": rule_id, "line": r}
    cases = [{"when": c.when.source, "line": c.line, "severity": c.severity, "title": c.title,
              "message": _source(c.message), "impact": _source(c.impact), "fix": c.fix, "evidence": c.evidence}
             for c in r.cases]
    return {"id": r.id, "title": r.title, "severity": r.severity, "when": r.when.source, "message": r.message.source,
            "fix": r.fix, "impact": _source(r.impact), "evidence": r.evidence, "why": r.why, "example": r.example,
            "docs": [[d.title, d.url] for d in r.docs], "cases": cases, "marks": r.marks, "plots": r.plots,
            "lanes": r.lanes, "scope": r.scope, "explains": r.explains, "generic": r.generic,
            "recovers": r.recovers, "reports": list(r.reports), "path": r.path, "line": r.line}


def _from_json(x: dict[str, Any]) -> tuple[str, Any]:
    """A rule as :func:`_to_json` wrote it, its expressions parsed when first used (checked when it was written)."""
    if "off" in x:
        return x["off"], x["line"]

    def expr(s: str | None) -> Expr | None:
        return None if s is None else Expr.unchecked(s)

    def template(s: str | None) -> Template | None:
        return None if s is None else Template.unchecked(s)

    cases = [Case(when=Expr.unchecked(c["when"]), line=c["line"], severity=c["severity"], title=c["title"],
                  message=template(c["message"]), impact=expr(c["impact"]), fix=c["fix"], evidence=c["evidence"])
             for c in x["cases"]]
    rule = Rule(id=x["id"], title=x["title"], severity=x["severity"], when=Expr.unchecked(x["when"]),
                message=Template.unchecked(x["message"]), fix=x["fix"], impact=expr(x["impact"]),
                evidence=x["evidence"], why=x["why"], example=x["example"], docs=[Doc(t, u) for t, u in x["docs"]],
                cases=cases, marks=x["marks"], plots=x["plots"], lanes=x["lanes"], scope=x["scope"],
                explains=x["explains"], generic=x["generic"], recovers=x.get("recovers"), reports=tuple(x["reports"]),
                path=x["path"], line=x["line"])
    return rule.id, rule


__all__ = ["Case", "Doc", "Rule", "RuleError", "SEVERITIES", "SEVERITY_RANK", "builtin_rules_dir", "load_file",
           "load_rules"]
