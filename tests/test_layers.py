"""The one-way architecture, checked: every import inside the package (function-level ones included)
goes to the importer's own layer or a lower one, and there is no import cycle; so do the modules named outside
the code (the console script, ``python -m`` commands, the docs' dotted names); and the written map of the layers
(``tfadvisor/README.md``) is current.

Layers, lowest first: ``tfadvisor_dev/layers.py`` (README "Architecture"). A new module must be placed in one, or
this test fails.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from pathlib import Path

from tfadvisor_dev.layers import LAYERS, layer_of
from tfadvisor_dev.layers import modules as _modules

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "tfadvisor"


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
    # a logger's name is no import: ``logging.getLogger("tfadvisor.vertex")`` keeps the name users configure
    loggers = {id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "getLogger"
               for a in n.args}
    for node in ast.walk(tree):
        if id(node) in loggers:
            continue
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
    found = layer_of(name)
    assert found is not None, f"{name} is in no layer: add it to LAYERS in tfadvisor_dev/layers.py"
    return found


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
    Dask, no worker pool (the registry reads ``tfadvisor.analyses.hosts``, not ``tfadvisor.multihost.analysis``)."""
    code = ("import sys; from tfadvisor.advice.rules import load_rules; load_rules(); "
            "print(sorted(m for m in sys.modules if m.startswith(('tfadvisor.multihost', "
            "'dask', 'distributed'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_map_of_the_layers_is_current():
    """``tfadvisor/README.md`` is what ``python -m tfadvisor_dev.layers`` writes from the layers and the modules."""
    from tfadvisor_dev.layers import MAP_FILE, render

    assert MAP_FILE.read_text() == render(), "tfadvisor/README.md is stale: run python -m tfadvisor_dev.layers"


#: The root package: the public names, the facade, the foundation's modules, and the two public paths README
#: shows (``from tfadvisor.keras import AdvisorCallback``, ``tfadvisor.vertex.init()``), each a re-export.
ROOT_MODULES = {"tfadvisor", "tfadvisor.__main__", "tfadvisor._version", "tfadvisor.api", "tfadvisor.errors",
                "tfadvisor.units", "tfadvisor.keras", "tfadvisor.vertex", "tfadvisor._native"}


def test_the_root_package_holds_few_modules():
    root = {m for m in _modules() if m.count(".") <= 1 and not (PKG / m.split(".")[-1]).is_dir()}
    assert root == ROOT_MODULES


def test_the_public_paths_are_the_capture_modules_names():
    from tfadvisor.capture import keras, vertex

    code = ("import tfadvisor.vertex, tfadvisor.capture.vertex as v; from tfadvisor.keras import AdvisorCallback; "
            "from tfadvisor.capture.keras import AdvisorCallback as A; print(AdvisorCallback is A, "
            "tfadvisor.vertex.init is v.init)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "True"]
    assert keras.SOURCE == "tfadvisor.keras.AdvisorCallback"  # what tfadvisor_run.json says made the profile
    assert vertex.logger.name == "tfadvisor.vertex"  # the logger users configure


@functools.cache
def _top_names(path: Path) -> set[str]:
    """Names a module defines or imports at its top level (an ``if`` block's imports included)."""
    if path.suffix != ".py":
        return set()
    out: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        for n in [node, *(getattr(node, "body", []) if isinstance(node, ast.If) else [])]:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                out |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
                if any(getattr(t, "id", None) == "__all__" for t in targets) and isinstance(n.value, ast.List):
                    # names made on first access (a module __getattr__)
                    out |= {e.value for e in n.value.elts if isinstance(e, ast.Constant)}
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                out |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return out


#: Dotted ``tfadvisor.`` names that are data, not modules: Perfetto args, protobuf packages, attributes.
DATA_NAMES = {"_rules", "rule", "run", "findings", "dropped_events", "max_events", "xplane", "events", "out",
              "__file__"}
PUBLIC = {"Result", "analyze", "load", "profile", "step", "Trace", "Plane", "TraceError", "__version__"}


def _named_modules(text: str, mods: dict[str, Path]) -> list[str]:
    """The dotted ``tfadvisor.`` names in a text that name no module or no name of a module."""
    bad = []
    for m in re.finditer(r"(?<![\w./-])tfadvisor(?:\.[A-Za-z_]\w*)+", text):
        parts = m.group(0).split(".")
        k = len(parts)
        while k > 1 and ".".join(parts[:k]) not in mods:
            k -= 1
        if k == len(parts) or (k == 1 and parts[1] in PUBLIC | DATA_NAMES):
            continue
        if parts[k] not in _top_names(mods[".".join(parts[:k])]):
            bad.append(m.group(0))
    return bad


def test_modules_named_outside_the_code_exist():
    """By string too: the console script, every ``python -m`` in the tests, docs and scripts, and every dotted
    ``tfadvisor.`` name in the docs, docstrings and tests names a module (and a name in it) that exists."""
    mods = _modules()
    scripts = re.search(r"\[project\.scripts\]\n(.*?)\n\n", (ROOT / "pyproject.toml").read_text(), re.S).group(1)
    for line in scripts.splitlines():
        module, _, func = line.split("=", 1)[1].strip().strip('"').partition(":")
        assert module in mods and func in _top_names(mods[module]), line
        assert _layer(module) == len(LAYERS) - 2, f"{module}: the console script is the command line's"
    texts = {p: p.read_text() for p in [ROOT / "README.md", ROOT / "sample_traces" / "README.md", ROOT / "setup.py",
                                        *PKG.rglob("*.md"), *PKG.rglob("*.py"), *(ROOT / "tests").glob("*.py"),
                                        *(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "tfadvisor_dev").glob("*.py"),
                                        ROOT / ".ci" / "run"] if "__pycache__" not in p.parts}
    bad = []
    for path, text in texts.items():
        for m in re.finditer(r"""-m"?,? "?(tfadvisor(?!\w)(?:\.\w+)*)""", text):
            name = m.group(1).rstrip(".")
            target = mods.get(name + ".__main__") or mods.get(name)
            if target is None or (name + ".__main__" not in mods and "__main__" not in target.read_text()):
                bad.append(f"{path.relative_to(ROOT)}: python -m {name}")
        bad += [f"{path.relative_to(ROOT)}: {name}" for name in _named_modules(text, mods)]
    assert not bad, "names of no module:\n" + "\n".join(sorted(set(bad)))
