"""The JSON contract: a JSON Schema (draft 2020-12) for each ``--format json`` output, built from the code's
own declarations: the metrics every analysis declares (``DECLARED = declare(...)``), the step-time and
breakdown keys the reports use, the options dataclass, the system figures and the rule fields.

    python -m tfadvisor.report.schema --write   # regenerate tfadvisor/schemas/*.schema.json
    tfadvisor schema analyze                    # print one (diff, scaling, rules, runs)

Versioning: every document carries ``schema_version`` (the major version, an integer) and
``schema_minor``. Adding a key bumps the minor version; renaming or removing one bumps the major
version, and the old key is kept, marked deprecated, for one minor release before that. The shipped
files are checked against this module by ``tests/test_schema.py`` (a stale file fails), and every
output of the test samples is validated against them with every object closed
(``additionalProperties: false``): a key added to the output without the schema fails.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

from tfadvisor._version import SCHEMA_MINOR, SCHEMA_VERSION

DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
KINDS = ("analyze", "diff", "scaling", "rules", "runs")

NUMBER = {"type": ["number", "null"]}
STRING = {"type": "string"}
STRING_OR_NULL = {"type": ["string", "null"]}
STRINGS = {"type": "array", "items": STRING}
SCALAR = {"type": ["string", "number", "boolean", "null"]}


def _obj(properties: dict[str, Any], *, required: list[str] | tuple[str, ...] | None = None, doc: str = "",
         closed: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": properties,
                           "required": list(properties if required is None else required)}
    if closed:
        out["additionalProperties"] = False
    if doc:
        out["description"] = doc
    return out


def _doc(kind: str, title: str, body: dict[str, Any]) -> dict[str, Any]:
    top = {"$schema": DIALECT, "$id": f"urn:tfadvisor:schema:{kind}:{SCHEMA_VERSION}.{SCHEMA_MINOR}",
           "title": title}
    body = dict(body)
    body["properties"] = {
        "schema_version": {"const": SCHEMA_VERSION, "description": "major version: renames and removals bump it"},
        "schema_minor": {"type": "integer", "minimum": 0, "description": "minor version: additions bump it"},
        **body["properties"],
    }
    body["required"] = ["schema_version", "schema_minor", *body["required"]]
    return top | body


# ----------------------------------------------------------------------------------------------- analyze


def _metric_defs() -> tuple[dict[str, Any], list[str]]:
    from tfadvisor.analyses import metric_registry

    props: dict[str, Any] = {}
    for source, decl in metric_registry().items():
        for m in decl.metrics:
            kind = SCALAR if m.unit == "" else NUMBER  # a unit means a number; no unit: text, flag or count
            unit = f" [{m.unit}]" if m.unit else ""
            props[m.name] = dict(kind, description=f"{m.doc}{unit} (analysis: {source})")
    return props, sorted(props)


def _options() -> dict[str, Any]:
    from tfadvisor.analyses.base import Options

    hints = typing.get_type_hints(Options)
    props = {}
    for f in dataclasses.fields(Options):
        hint = str(hints[f.name])
        kind = "integer" if "int" in hint else "number" if "float" in hint else "string"
        props[f.name] = {"type": [kind, "null"]} if "None" in hint else {"type": kind}
    return _obj(props, doc="facts the trace cannot tell: from the command line or tfadvisor_run.json")


def _finding(metric_names: list[str]) -> dict[str, Any]:
    from tfadvisor.advice.rules import SEVERITIES

    return _obj({
        "rule": dict(STRING, description="rule id (`tfadvisor rules`; extra rules with --rules DIR)"),
        "severity": {"enum": list(SEVERITIES)},
        "title": STRING,
        "message": STRING,
        "impact_pct": dict(NUMBER, description="share of step or wall time at stake, %"),
        "evidence": {"type": "object", "propertyNames": {"enum": metric_names}, "additionalProperties": SCALAR,
                     "description": "metric -> value"},
        "fix": dict(STRING, description="Markdown, code in ``` fences"),
        "why": STRING,
        "docs": STRINGS,
        "marks": dict(STRINGS, description="what the finding marks in the trace (its rule's `marks`: "
                                           "tfadvisor.analyses.marks)"),
        "scope": dict(STRING, description="whose spans: run, none, or host:<metric>"),
        "plots": dict(STRINGS, description="the plots that show its evidence (its rule's `plots`: "
                                           "tfadvisor.analyses.marks.PLOTS)"),
        "lanes": dict(STRINGS, description="the timeline lanes it lights up (its rule's `lanes`: "
                                           "tfadvisor.analyses.marks.LANES)"),
        "node": dict(STRING, description="the part of the wall time it explains (an `attribution` part), \"\" for "
                                         "none (tfadvisor.advice.explain)"),
        "node_pct": dict(NUMBER, description="that part's share of the wall time, %"),
        "also": {"type": "array", "description": "other explanations of the same part, folded into this finding",
                 "items": _obj({"rule": STRING, "severity": {"enum": list(SEVERITIES)}, "title": STRING,
                                "message": STRING, "impact_pct": NUMBER,
                                "evidence": {"type": "object", "propertyNames": {"enum": metric_names},
                                             "additionalProperties": SCALAR},
                                "fix": STRING})},
        "caveats": {"type": "array", "description": "conditions that make it uncertain (never a reason to drop it)",
                    "items": _obj({"id": STRING, "label": STRING, "text": STRING})},
    })


def _summary() -> dict[str, Any]:
    from tfadvisor.report import BREAKDOWN, STEP_TIME_KEYS

    plane = _obj({"host": STRING, "name": STRING, "lines": {"type": "integer"}, "events": {"type": "integer"},
                  "stats": {"type": "integer"}, "line_names": STRINGS})
    loaded = _obj({
        "run": STRING_OR_NULL, "run_dir": STRING_OR_NULL, "files": STRINGS, "file_bytes": {"type": "integer"},
        "hosts": STRINGS, "events": {"type": "integer"}, "time_span_ms": NUMBER,
        "planes": {"type": "array", "items": plane},
        "executor": dict(STRING, description="multi-host: how the hosts were read"),
        "jobs": {"type": ["integer", "null"], "description": "multi-host: worker processes"},
    }, required=["run", "run_dir", "files", "file_bytes", "hosts", "events", "time_span_ms", "planes"],
        doc="what was read")
    return _obj({
        "steps": {"type": "integer", "minimum": 0, "description": "0 when no steps were found"},
        "steps_source": STRING_OR_NULL,
        "step_time_ms": _obj({k: NUMBER for k in STEP_TIME_KEYS}),
        "throughput_ms_per_step": dict(NUMBER, description="wall time per training step over the window, evaluation, "
                                                           "epoch ends, checkpoints and callbacks included"),
        "profiler_inflation": dict(NUMBER, description="profiled steps' time / unprofiled (clock) or estimated"),
        "profiler_inflation_source": dict(STRING_OR_NULL, description="clock or estimate"),
        "breakdown_pct": _obj({k: dict(NUMBER, description=label) for k, label in BREAKDOWN}, required=[],
                              doc="known step-time categories, % of step time"),
        "loaded": loaded,
    })


def _attribution() -> dict[str, Any]:
    from tfadvisor.analyses.attribution import PARTS

    item = _obj({"item": STRING, "kind": dict(STRING, enum=["kernel", "xla_op", "tf_op", "python", "event", ""]),
                 "ms": NUMBER, "pct": dict(NUMBER, description="share of the part's busy time"),
                 "count": {"type": "integer"}, "mean_ms": NUMBER})
    part = _obj({"part": dict(STRING, enum=list(PARTS)), "label": STRING,
                 "pct": dict(NUMBER, description="share of the lane's wall time"), "ms": NUMBER,
                 "items": {"type": "array", "items": item}})
    lane = _obj({"lane": dict(STRING, description="`all` (the run) or a device (GPU:0, TPU:1)"),
                 "parts": {"type": "array", "items": part}})
    host = _obj({"host": STRING, "parts": {"type": "array", "items": _obj({"part": dict(STRING, enum=list(PARTS)),
                                                                           "pct": NUMBER})},
                 "distance_pts": NUMBER})
    att = _obj({"basis": dict(STRING, enum=["steps", "window"]), "wall_ms": NUMBER,
                "devices": {"type": "integer"}, "devices_shown": {"type": "integer"},
                "lanes": {"type": "array", "items": lane},
                "host": dict(STRING_OR_NULL, description="several hosts: the median host, whose lanes these are"),
                "hosts": {"type": "array", "items": host, "description": "several hosts: each host's split"}},
               doc="where the time goes (tfadvisor/report/attribution.py): the run's parts, then each device's")
    return {"anyOf": [att, {"type": "null"}]}


def analyze_schema() -> dict[str, Any]:
    """``tfadvisor analyze --format json [--tables]`` (and ``Result.to_dict()``)."""
    from tfadvisor.report.system import TABLE as SYSTEM_TABLE

    metric_props, names = _metric_defs()
    host = _obj({"host": STRING, "metrics": {"$ref": "#/$defs/metrics"}, "notes": STRINGS})
    table = {"type": "array", "items": {"type": "object", "additionalProperties": SCALAR},
             "description": "one object per row: {column: value}"}
    body = _obj({
        "version": dict(STRING, description="tfadvisor version"),
        "run": _obj({"name": STRING_OR_NULL, "directory": STRING_OR_NULL, "label": STRING, "hosts": STRINGS,
                     "files": STRINGS, "other_runs": STRINGS}),
        "summary": _summary(),
        "metrics": {"$ref": "#/$defs/metrics"},
        "units": {"type": "object", "propertyNames": {"enum": names}, "additionalProperties": STRING},
        "findings": {"type": "array", "items": {"$ref": "#/$defs/finding"},
                     "description": "most important first: severity, then impact"},
        "notes": dict(STRINGS, description="what could not be measured, and why"),
        "hosts": {"type": "array", "items": host, "description": "per host when several were analysed, else []"},
        "options": _options(),
        "system": _obj({
            "figures": {"type": "object", "propertyNames": {"enum": sorted({n for _, n in SYSTEM_TABLE})},
                        "additionalProperties": SCALAR},
            "samples": {"type": "integer", "minimum": 0},
        }, doc="system samples and start-up, when captured"),
        "attribution": _attribution(),
        "tables": {"type": "object", "additionalProperties": table,
                   "description": "--tables: every table of the result (analyses/README.md says their columns)"},
        "truncated": {"type": "object", "additionalProperties": {"type": "integer"},
                      "description": "tfadvisor mcp: lists cut to their first items to bound the size: where "
                                     "(a dotted path, e.g. tables.steps) -> how many items it had"},
    }, required=["version", "run", "summary", "metrics", "units", "findings", "notes", "hosts", "options",
                 "system", "attribution"])
    out = _doc("analyze", "tfadvisor analyze --format json", body)
    out["$defs"] = {"metrics": _obj(metric_props, required=[], doc="every declared metric; null = not in the "
                                                                   "trace"),
                    "finding": _finding(names)}
    return out


# ----------------------------------------------------------------------------------------------- diff


def diff_schema() -> dict[str, Any]:
    """``tfadvisor diff --format json``."""
    side = _obj({"run": STRING, "directory": STRING_OR_NULL, "hosts": {"type": ["integer", "null"]}})
    verdict = {"enum": ["faster", "slower", "unchanged", "unknown"]}
    brief = {"rule": STRING, "severity": STRING_OR_NULL, "title": STRING_OR_NULL, "impact_pct": NUMBER}
    figure = _obj({"metric": STRING, "label": STRING, "section": STRING, "unit": STRING_OR_NULL,
                   "before": SCALAR, "after": SCALAR, "change": NUMBER, "change_pct": NUMBER,
                   "better": {"enum": ["lower", "higher", None]},
                   "judgement": {"enum": ["better", "worse", "same", None]}})
    whole = {"type": ["object", "null"], "additionalProperties": False,
             "required": ["before_ms", "after_ms", "change_ms", "change_pct", "speedup", "verdict"],
             "properties": {"before_ms": NUMBER, "after_ms": NUMBER, "change_ms": NUMBER, "change_pct": NUMBER,
                            "speedup": NUMBER, "verdict": verdict,
                            "interval_pct": {"type": ["array", "null"], "items": {"type": "number"}, "minItems": 2,
                                             "maxItems": 2, "description": "unprofiled: 95 % interval of the change "
                                                                           "from the clock's intervals"}},
             "description": "a whole-run figure in ms per training step, before and after"}
    body = _obj({
        "before": side,
        "after": side,
        "step_time": _obj({"before_ms": NUMBER, "after_ms": NUMBER, "change_ms": NUMBER, "change_pct": NUMBER,
                           "speedup": NUMBER, "verdict": verdict,
                           "interval_pct": {"type": ["array", "null"], "items": {"type": "number"},
                                            "minItems": 2, "maxItems": 2,
                                            "description": "95 % interval of the change from the steps' noise"},
                           "per": {"enum": ["step", "example"],
                                   "description": "the verdict's unit: per step, or per example when the batch "
                                                  "sizes differ"},
                           "before_examples_per_s": NUMBER, "after_examples_per_s": NUMBER,
                           "text": STRING},
                          required=["before_ms", "after_ms", "change_ms", "change_pct", "speedup", "verdict",
                                    "text"]),
        "throughput": whole,
        "unprofiled": whole,
        "verdict": verdict,
        "verdict_on": {"enum": ["step_time", "throughput", "unprofiled"],
                       "description": "the figure the verdict is on: the step time; throughput (evaluation and epoch "
                                      "ends included) where it moved and step time says otherwise; the unprofiled "
                                      "clock where both captures have it"},
        "verdict_change_pct": NUMBER,
        "verdict_speedup": NUMBER,
        "verdict_text": STRING,
        "conditions": _obj({
            "items": {"type": "array", "items": _obj({"name": STRING, "before": SCALAR, "after": SCALAR,
                                                      "differs": {"type": "boolean"}})},
            "differ": dict(STRINGS, description="why the verdict cannot be trusted as a measure of the change alone"),
            "comparable": {"type": "boolean"},
            "batch_size": {"type": "array", "items": {"type": ["integer", "null"]}, "minItems": 2, "maxItems": 2},
        }, doc="what each capture ran under: other processes' CPU, cores, batch size, steps_per_execution, TF"),
        "figures": {"type": "array", "items": figure},
        "findings": _obj({"fixed": {"type": "array", "items": _obj(brief)},
                          "new": {"type": "array", "items": _obj(brief)},
                          "remaining": {"type": "array", "items": _obj(dict(brief, impact_before_pct=NUMBER))}}),
    })
    return _doc("diff", "tfadvisor diff --format json", body)


# ----------------------------------------------------------------------------------------------- scaling


def scaling_schema() -> dict[str, Any]:
    """``tfadvisor scaling --format json``."""
    parts = _obj({"allreduce": NUMBER, "input": NUMBER, "other": NUMBER})
    row = _obj({
        "run": STRING, "run_dir": STRING, "hosts": {"type": "integer"}, "replicas": {"type": "integer"},
        "global_batch": {"type": "integer"}, "per_replica_batch": NUMBER, "step_time_ms": NUMBER,
        "allreduce_ms_per_step": NUMBER, "input_ms_per_step": NUMBER, "other_ms_per_step": NUMBER,
        "examples_per_s": NUMBER, "examples_per_s_per_replica": NUMBER, "baseline": {"type": "boolean"},
        "ideal_step_time_ms": NUMBER, "scaling_efficiency_pct": NUMBER, "loss_ms_per_step": NUMBER,
        "loss_ms": parts, "loss_pct": parts,
    })
    body = _obj({"baseline": STRING, "baseline_replicas": {"type": "integer"}, "definition": STRING,
                 "runs": {"type": "array", "items": row}})
    return _doc("scaling", "tfadvisor scaling --format json", body)


# ----------------------------------------------------------------------------------------------- rules, runs


def rules_schema() -> dict[str, Any]:
    """``tfadvisor rules --format json`` and ``tfadvisor rules explain ID --format json``."""
    from tfadvisor.advice.rules import SEVERITIES

    rule = _obj({
        "id": STRING, "title": STRING, "severity": {"enum": list(SEVERITIES)},
        "severities": {"type": "array", "items": {"enum": list(SEVERITIES)}},
        "when": dict(STRING, description="condition over metric names"),
        "impact": STRING_OR_NULL, "message": STRING, "evidence": STRINGS, "fix": STRING, "why": STRING,
        "example": STRING, "docs": {"type": "array", "items": _obj({"title": STRING, "url": STRING})},
        "marks": STRINGS, "scope": STRING, "plots": STRINGS, "lanes": STRINGS,
        "cases": {"type": "array", "items": _obj({"when": STRING, "severity": STRING_OR_NULL,
                                                  "title": STRING_OR_NULL, "message": STRING_OR_NULL,
                                                  "impact": STRING_OR_NULL})},
        "source": dict(STRING, description="file:line"),
    })
    body = _obj({"rules": {"type": "array", "items": rule}})
    return _doc("rules", "tfadvisor rules --format json", body)


def runs_schema() -> dict[str, Any]:
    """``tfadvisor runs LOGDIR --format json``."""
    run = _obj({"name": STRING, "directory": STRING, "label": STRING, "hosts": STRINGS, "files": STRINGS})
    body = _obj({"logdir": STRING, "runs": {"type": "array", "items": run, "description": "newest last"}})
    return _doc("runs", "tfadvisor runs --format json", body)


BUILDERS = {"analyze": analyze_schema, "diff": diff_schema, "scaling": scaling_schema, "rules": rules_schema,
            "runs": runs_schema}


def schema(kind: str) -> dict[str, Any]:
    """The schema of one output, built now from the declarations."""
    return BUILDERS[kind]()


def render(kind: str) -> str:
    """The text of ``tfadvisor/schemas/<kind>.schema.json``."""
    return json.dumps(schema(kind), indent=2, sort_keys=False) + "\n"


def shipped(kind: str) -> str:
    """The shipped schema file's text (what ``tfadvisor schema KIND`` prints)."""
    return (SCHEMA_DIR / f"{kind}.schema.json").read_text(encoding="utf-8")


def write_all() -> list[Path]:
    SCHEMA_DIR.mkdir(exist_ok=True)
    out = []
    for kind in KINDS:
        path = SCHEMA_DIR / f"{kind}.schema.json"
        path.write_text(render(kind), encoding="utf-8")
        out.append(path)
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        for p in write_all():
            print(p)
    else:
        sys.stdout.write(render(sys.argv[1] if len(sys.argv) > 1 else "analyze"))


__all__ = ["KINDS", "SCHEMA_MINOR", "SCHEMA_VERSION", "render", "schema", "shipped"]
