"""The one-way architecture, checked: every import inside the package (function-level ones included)
goes to the importer's own layer or a lower one, and there is no import cycle.

Layers, lowest first (README "Architecture"). A new module must be placed in one, or this test fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "tfadvisor"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("tfadvisor._version", "tfadvisor.errors", "tfadvisor.units", "tfadvisor._native",
                    "tfadvisor.proto", "tfadvisor.interconnects", "tfadvisor.runmeta")),
    ("model", ("tfadvisor.model",)),
    ("io", ("tfadvisor.io",)),
    ("analyses", ("tfadvisor.analyses", "tfadvisor.system_samples",
                  "tfadvisor.multihost_worker", "tfadvisor.runtime", "tfadvisor.multihost", "tfadvisor.scaling",
                  "tfadvisor.result")),
    ("advice", ("tfadvisor.advice",)),
    ("report", ("tfadvisor.report",)),
    ("facade", ("tfadvisor.api",)),
    ("entry points", ("tfadvisor.diff_cli", "tfadvisor.multihost_cli", "tfadvisor.profiling", "tfadvisor.keras",
                      "tfadvisor.vertex", "tfadvisor.system_sampler", "tfadvisor.capture", "tfadvisor.cli",
                      "tfadvisor.mcp_server",
                      "tfadvisor.__main__", "tfadvisor._sitecustomize")),
    ("package", ("tfadvisor",)),
]


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        if "__pycache__" in p.parts:
            continue
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    out["tfadvisor._native"] = PKG / "_native.c"  # the compiled kernels: imports nothing of ours
    return out


def _string_targets(node: ast.AST, known: dict[str, Path], names: set[str]) -> list[str]:
    """Modules named by a string, for ``importlib.import_module``/``__import__``: a constant that is a dotted
    module name of ours, or an f-string whose constant head is a package's and whose rest is one of the
    file's string constants (``f"tfadvisor.analyses.{name}"`` over ``ORDER``). A head of the root package
    alone (``f"tfadvisor.{name}"``, the package's lazy attributes) names no particular module."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "." in node.value and node.value in known:
        return [node.value]
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        head = str(node.values[0].value)
        if head.startswith("tfadvisor.") and head.endswith(".") and head.count(".") >= 2:
            return [head + n for n in names if head + n in known]
    return []


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every package module ``name`` imports, at any depth of the file (lazy imports count)."""
    if path.suffix != ".py":
        return set()
    found: set[str] = set()
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        targets += _string_targets(node, known, names)
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t.startswith("tfadvisor") and t != name:
                found.add(t)
    return found


def _layer(name: str) -> int:
    best = None
    for i, (_, prefixes) in enumerate(LAYERS):
        for pre in prefixes:
            inside = name == pre or (pre != "tfadvisor" and name.startswith(pre + "."))
            if inside and (best is None or len(pre) > best[1]):
                best = (i, len(pre))
    assert best is not None, f"{name} is in no layer: add it to LAYERS in tests/test_layers.py"
    return best[0]


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_every_import_goes_down_or_sideways():
    bad = []
    for a, deps in sorted(_graph().items()):
        for b in sorted(deps):
            if _layer(b) > _layer(a):
                bad.append(f"{a} ({LAYERS[_layer(a)][0]}) imports {b} ({LAYERS[_layer(b)][0]})")
    assert not bad, "imports against the flow:\n" + "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(_graph()) == []


def test_the_checker_sees_lazy_imports_and_cycles():
    """The checks above could fail: a function-level import is found, and a planted cycle is reported."""
    deps = _graph()
    assert "tfadvisor.report.json_report" in deps["tfadvisor.api"]  # imported inside Result.to_dict
    planted = {k: set(v) for k, v in deps.items()}
    planted["tfadvisor.io.wire"].add("tfadvisor.api")
    assert any("tfadvisor.io.wire" in c and "tfadvisor.api" in c for c in _cycles(planted))
    assert _layer("tfadvisor.io.wire") < _layer("tfadvisor.api")
    # modules named by strings count: the metric registry imports its producers by name
    assert {"tfadvisor.analyses.steps", "tfadvisor.analyses.hosts"} <= deps["tfadvisor.analyses"]


def test_loading_rules_imports_no_executor():
    """The metric registry is a leaf: validating the rules' metric names imports no multi-host executor, no
    Dask, no worker pool (the registry reads ``tfadvisor.analyses.hosts``, not ``tfadvisor.multihost``)."""
    import subprocess
    import sys

    code = ("import sys; from tfadvisor.advice.rules import load_rules; load_rules(); "
            "print(sorted(m for m in sys.modules if m.startswith(('tfadvisor.runtime', 'tfadvisor.multihost', "
            "'dask', 'distributed'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
