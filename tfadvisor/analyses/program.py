"""The program as the logdir describes it, and the ops' scopes named in its words (the analyses' input ``program``).

Two sources, both read when the profile is loaded: the run file's ``keras`` facts (``tfadvisor_run.json``, written by
tfadvisor's capture: layers with class, parameters, output shape; dtype policy; optimizer; compiled loss and metrics)
and the TensorBoard event files beside the profile (:class:`~tfadvisor.model.program.EventFacts`: the Keras model's
config, the graphs' function libraries, the scalars' tags). :class:`Names` joins an op's name scopes to them:

* Keras 3 under TensorFlow opens each scope again inside the traced step, so TensorFlow makes the name unique
  (``functional`` -> ``functional_1``, layer ``dense`` -> ``dense_1``, layer ``dense_1`` -> ``dense_1_2``). A scope
  names a layer of the config when it is that name, or that name with one ``_<n>`` more; the scopes under one model
  are matched to its layers one to one (each scope to a layer whose name it can be, no layer twice: the scope
  ``dense_1`` is layer ``dense`` when ``dense_1_2`` can only be layer ``dense_1``);
* a metric's scope (``compile_metrics/auc``, ``auc_1``), or a scope that is a compiled metric's name, names that
  metric;
* an op under a call (``StatefulPartitionedCall/...``) came from the function the graph's library says it calls.

Without either source the names are the scopes' own, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfadvisor.analyses.base import Context
from tfadvisor.io.runmeta import keras_facts
from tfadvisor.model.program import EventFacts
from tfadvisor.model.trace import Trace

#: Keras classes of models (a layer holding layers).
MODEL_CLASSES = ("Functional", "Sequential", "Model")
#: Scalar tags that name no compiled metric.
NOT_METRICS = re.compile(r"(?:^|_)loss$|^learning_rate$|^steps_per_second$")
RUN_FILE = "tfadvisor_run.json"


@dataclass(frozen=True)
class Layer:
    """One layer of the model: its class and what sizes it, where the sources say."""

    path: tuple[str, ...]  # its name and its enclosing models', below the top model
    cls: str = ""
    detail: str = ""  # "512 units", "32 filters 3x3", "10,000 x 64"
    params: int | None = None
    dtype_policy: str = ""
    source: str = ""  # where the facts came from


@dataclass
class Program:
    """What the logdir says of the program: the model's name, its layers, the compiled loss and metrics."""

    model: str = ""
    model_class: str = ""
    layers: dict[tuple[str, ...], Layer] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    events: EventFacts = field(default_factory=EventFacts)
    #: what -> where it was read (``layers``, ``metrics``, ``functions``)
    sources: dict[str, str] = field(default_factory=dict)

    def children(self, path: tuple[str, ...]) -> list[str]:
        return [p[-1] for p in self.layers if len(p) == len(path) + 1 and p[:-1] == path]


def _size(cfg: dict[str, Any]) -> str:
    """What sizes a layer, from its config (``units``, ``filters``, ``input_dim``/``output_dim``, ``num_heads``)."""
    def whole(k: str) -> int | None:
        v = cfg.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    if whole("units") is not None:
        return f"{whole('units'):,} units"
    if whole("filters") is not None:
        ks = cfg.get("kernel_size")
        kernel = "x".join(str(k) for k in ks) if isinstance(ks, (list, tuple)) and all(
            isinstance(k, int) for k in ks) else ""
        return f"{whole('filters'):,} filters" + (f" {kernel}" if kernel else "")
    if whole("output_dim") is not None:
        return (f"{whole('input_dim'):,} x " if whole("input_dim") is not None else "dim ") + f"{whole('output_dim')}"
    if whole("num_heads") is not None:
        return f"{whole('num_heads')} heads"
    return ""


def _dtype(cfg: dict[str, Any]) -> str:
    d = cfg.get("dtype")
    if isinstance(d, str):
        return d
    if isinstance(d, dict) and isinstance(d.get("config"), dict) and isinstance(d["config"].get("name"), str):
        return d["config"]["name"]
    return ""


def _config_layers(cfg: Any, path: tuple[str, ...], out: dict, source: str, depth: int = 0) -> None:
    """The layers of a Keras model config (``model.to_json()``), nested models' too."""
    inner = cfg.get("config") if isinstance(cfg, dict) else None
    rows = inner.get("layers") if isinstance(inner, dict) else None
    if not isinstance(rows, list) or depth > 8:
        return
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("config"), dict):
            continue
        c = row["config"]
        name = c.get("name") if isinstance(c.get("name"), str) else row.get("name")
        cls = row.get("class_name")
        if not isinstance(name, str) or not name or cls == "InputLayer":
            continue
        p = (*path, name)
        out[p] = Layer(p, cls if isinstance(cls, str) else "", _size(c), None, _dtype(c), source)
        if len(out) < 20_000:
            _config_layers(row, p, out, source, depth + 1)


def program(trace: Trace, ctx: Context) -> Program:
    """The program's facts from the run file and the event files (the input ``program``)."""
    ev = trace.events if isinstance(trace.events, EventFacts) else EventFacts()
    k, _ = keras_facts(trace.run_metadata if isinstance(trace.run_metadata, dict) else {})
    prog = Program(events=ev)
    cfg = ev.model_config
    if cfg is not None:
        inner = cfg.get("config")
        prog.model = inner.get("name", "") if isinstance(inner, dict) and isinstance(inner.get("name"), str) else ""
        prog.model_class = cfg.get("class_name", "") if isinstance(cfg.get("class_name"), str) else ""
        _config_layers(cfg, (), prog.layers, f"the model config in {ev.model_config_file}")
        if prog.layers:
            prog.sources["layers"] = f"the model config in {ev.model_config_file}"
    if k:
        prog.model = prog.model or k.get("model", "")
        prog.model_class = prog.model_class or k.get("class", "")
        for row in k.get("layers", []):
            p = tuple(row["path"])
            had = prog.layers.get(p)
            prog.layers[p] = Layer(p, row.get("class") or (had.cls if had else ""),
                                   _size(row) or (had.detail if had else ""), row.get("params"),
                                   row.get("dtype_policy") or (had.dtype_policy if had else ""),
                                   had.source if had else RUN_FILE)
        if k.get("layers") and "layers" not in prog.sources:
            prog.sources["layers"] = RUN_FILE
        prog.metrics = list(k.get("metrics", []))
        prog.losses = list(k.get("loss", []))
        if prog.metrics:
            prog.sources["metrics"] = f"the compiled metrics in {RUN_FILE}"
    if not prog.metrics:
        for where, tags in sorted(ev.scalar_tags.items(), key=lambda x: x[0] != "train"):
            for t in tags:
                m = re.match(r"^(?:epoch|batch)_(.+)$", t)
                if m and not NOT_METRICS.search(m.group(1)) and m.group(1) not in prog.metrics:
                    prog.metrics.append(m.group(1))
                    prog.sources["metrics"] = f"the scalars' tags in {where}/"
    if ev.calls:
        prog.sources["functions"] = "the graph's function library in " + ", ".join(ev.files)
    return prog


def _can_be(scope: str, name: str) -> bool:
    """Whether TensorFlow may have written layer ``name``'s scope as ``scope`` (itself, or with one ``_<n>``)."""
    return scope == name or (scope.startswith(name + "_") and scope[len(name) + 1:].isdigit())


def match(scopes: list[str], names: list[str], suffixed: bool) -> dict[str, str]:
    """Each scope to a name it can be (:func:`_can_be`), no name twice, as many scopes matched as can be (augmenting
    paths). ``suffixed``: the enclosing scope was made unique (``functional_1``), so a scope's own name made unique
    is tried before the same text as a name of its own."""
    cand = {}
    for s in scopes:
        c = [n for n in names if _can_be(s, n)]
        c.sort(key=lambda n: ((n == s) == suffixed, n))
        cand[s] = c
    owner: dict[str, str] = {}

    def place(s: str, seen: set[str]) -> bool:
        for n in cand[s]:
            if n in seen:
                continue
            seen.add(n)
            if n not in owner or place(owner[n], seen):
                owner[n] = s
                return True
        return False

    for s in sorted(scopes, key=lambda s: (len(cand[s]), s)):
        place(s, set())
    return {s: n for n, s in owner.items()}


Key = tuple[str, str, str]


class Names:
    """The program's own names for the parts :func:`component` finds by scopes (``component(op_name, op_type) ->
    (name, kind, role)``), given every op name first (the scopes of one model are matched together)."""

    def __init__(self, prog: Program | None, op_names: list[str], component: Callable[[str, str], Key]) -> None:
        self.prog = prog if prog is not None else Program()
        self.component = component
        self.functions: dict[Key, dict[str, int]] = {}
        self.what: dict[Key, Layer] = {}
        self.origin: dict[Key, str] = {}
        self._layer: dict[str, tuple[str, Layer | None]] = {}  # scope path -> (the program's name, its layer)
        if self.prog.layers and self.prog.model:
            keys = {component(*_split(n)) for n in op_names}
            self._resolve(sorted({name for name, kind, _ in keys if kind == "layer"}))

    def _resolve(self, paths: list[str]) -> None:
        prog = self.prog
        tops = [p.split("/") for p in paths]
        mine = [t for t in tops if _can_be(t[0], prog.model)]

        def level(group: list[list[str]], depth: int, at: tuple[str, ...], suffixed: bool) -> None:
            names = prog.children(at)
            scopes = sorted({t[depth] for t in group if len(t) > depth})
            if not names or not scopes:
                return
            got = match(scopes, names, suffixed)
            for s, n in got.items():
                below = [t for t in group if len(t) > depth and t[depth] == s]
                level(below, depth + 1, (*at, n), s != n)
                for t in below:
                    key = "/".join(t[:depth + 1])
                    self._layer[key] = ("/".join((*at, n)), prog.layers.get((*at, n)))

        level(mine, 1, (), bool(mine) and mine[0][0] != prog.model)

    def __call__(self, op_name: str, op_type: str) -> Key:
        """The part of the program ``op_name`` (``scope/.../name``, without ``:Type``) belongs to, in its names."""
        key = self.component(op_name, op_type)
        name, kind, role = key
        if kind == "layer":
            parts = name.split("/")
            for n in range(len(parts), 1, -1):
                hit = self._layer.get("/".join(parts[:n]))
                if hit is not None:
                    key = ("/".join([hit[0], *parts[n:]]), kind, role)
                    if hit[1] is not None:
                        self.what[key] = hit[1]
                        self.origin[key] = self.prog.sources.get("layers", "")
                    break
        elif self.prog.metrics and kind in ("metric", "step", "layer") and name:
            key = self._metric(key)
        f = self.prog.events.function_of(op_name) if self.prog.events.calls else None
        if f is not None:
            by = self.functions.setdefault(key, {})
            by[f] = by.get(f, 0) + 1
        return key

    def _metric(self, key: Key) -> Key:
        name, kind, role = key
        parts = name.split("/")
        scope = parts[-1] if kind == "metric" else parts[0]
        for m in self.prog.metrics:
            if _can_be(scope, m) or (kind == "metric" and scope == m):
                new = (m, "metric", role)
                self.origin[new] = self.prog.sources.get("metrics", "")
                return new
        return key

    def function(self, key: Key) -> str:
        """The function whose calls made most of the part's ops, "" where no library says."""
        by = self.functions.get(key)
        return max(by, key=lambda f: (by[f], f)) if by else ""

    def about(self, key: Key) -> str:
        """What the program says the part is: ``Dense, 512 units``; "" where it says nothing."""
        layer = self.what.get(key)
        if layer is None:
            return ""
        return ", ".join(x for x in (layer.cls, layer.detail) if x)

    def layer_class(self, key: Key) -> str:
        layer = self.what.get(key)
        return layer.cls if layer is not None else ""

    def params(self, key: Key) -> int:
        layer = self.what.get(key)
        return layer.params if layer is not None and layer.params is not None else -1

    def names_from(self, key: Key) -> str:
        """Where the part's name came from: the model config, the run file, the compiled metrics, or its scope."""
        return self.origin.get(key) or "its name scope"

    def notes(self) -> list[str]:
        """One line per source the names came from."""
        used = sorted({v for v in self.origin.values() if v})
        out = [f"names of the program's parts from {u}" for u in used]
        if any(self.functions.values()):
            out.append(f"the functions that made the ops from {self.prog.sources.get('functions', '')}")
        return out


def _split(full: str) -> tuple[str, str]:
    """(op name, op type) of a ``name:Type`` event name."""
    name, _, typ = full.partition(":")
    return name, typ


__all__ = ["Layer", "Names", "Program", "match", "program"]
