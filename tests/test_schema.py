"""The JSON contract (issue 29): the shipped schemas are what the declarations give, are valid draft
2020-12 schemas, close every object, and every output of every sample and real trace validates."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES, analysed, sample_dirs
from jsonschema import Draft202012Validator

import tfadvisor
from tfadvisor.report import schema as schema_mod
from tfadvisor.report.json_report import rules_to_dict, runs_to_dict, tables_to_dict

REAL = ROOT.parent / "shared" / "real_traces"


def _validator(kind: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_mod.shipped(kind)))


def _errors(kind: str, doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300]
            for e in _validator(kind).iter_errors(doc)]


@pytest.mark.parametrize("kind", schema_mod.KINDS)
def test_shipped_schema_is_generated_and_valid(kind):
    assert schema_mod.shipped(kind) == schema_mod.render(kind), (
        f"tfadvisor/schemas/{kind}.schema.json is stale: python -m tfadvisor.report.schema --write")
    Draft202012Validator.check_schema(json.loads(schema_mod.shipped(kind)))


def _walk(node, path="#"):
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from _walk(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, f"{path}/{i}")


@pytest.mark.parametrize("kind", schema_mod.KINDS)
def test_every_object_with_named_keys_is_closed(kind):
    """An object schema that names its keys refuses others: a key added to the output without the schema fails."""
    open_ = [p for p, n in _walk(schema_mod.schema(kind))
             if isinstance(n, dict) and n.get("type") == "object" and "properties" in n
             and n.get("additionalProperties") is not False and not p.endswith("/properties")]
    assert not open_, open_


def _analysis_docs():
    paths = [(p.name, p) for p in sample_dirs()]
    if REAL.is_dir():
        paths += [(f"real:{p.name}", p) for p in sorted(REAL.iterdir()) if p.is_dir() and p.name != "bad_input"]
    return paths


@pytest.mark.parametrize("name,path", _analysis_docs(), ids=[n for n, _ in _analysis_docs()])
def test_analyze_output_validates(name, path):
    result = analysed(path)
    doc = result.to_dict()
    assert doc["schema_version"] == schema_mod.SCHEMA_VERSION and doc["schema_minor"] == schema_mod.SCHEMA_MINOR
    assert not _errors("analyze", doc)
    doc["tables"] = tables_to_dict(result.tables)
    doc = json.loads(json.dumps(doc, default=str))  # as the CLI writes it
    assert not _errors("analyze", doc), _errors("analyze", doc)[:5]


def test_a_new_key_without_the_schema_fails():
    doc = json.loads(json.dumps(tfadvisor.analyze(SAMPLES / "tfdata_seq_map").to_dict(), default=str))
    for where in ([], ["summary"], ["run"], ["options"], ["summary", "step_time_ms"]):
        bad = copy.deepcopy(doc)
        target = bad
        for k in where:
            target = target[k]
        target["new_key"] = 1
        assert _errors("analyze", bad), f"a new key under /{'/'.join(where)} passed the schema"
    bad = copy.deepcopy(doc)
    bad["metrics"]["undeclared_metric_ms"] = 1.0
    assert _errors("analyze", bad)
    bad = copy.deepcopy(doc)
    bad["findings"][0]["severity"] = "fatal"
    assert _errors("analyze", bad)


def _cli(*args: str) -> dict:
    p = subprocess.run([sys.executable, "-m", "tfadvisor", *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_diff_output_validates():
    for before, after in (("tfdata_seq_map", "tfdata_seq_map_tuned"), ("keras_fit_spe1", "keras_fit_spe4"),
                          ("synthetic_gpu_fp32", "synthetic_gpu_mixed")):
        doc = _cli("diff", str(SAMPLES / before), str(SAMPLES / after), "--format", "json")
        assert not _errors("diff", doc), _errors("diff", doc)[:5]


def test_rules_and_runs_output_validate(tmp_path: Path):
    from tfadvisor.advice import load_rules
    from tfadvisor.io.discovery import find_runs

    rules = load_rules()
    assert not _errors("rules", rules_to_dict(rules))
    doc = _cli("rules", "--format", "json")
    assert [r["id"] for r in doc["rules"]] == [r.id for r in rules] and not _errors("rules", doc)
    one = _cli("rules", "explain", "input_bound", "--format", "json")
    assert [r["id"] for r in one["rules"]] == ["input_bound"] and not _errors("rules", one)
    for d in sample_dirs()[:5]:
        assert not _errors("runs", runs_to_dict(str(d), find_runs(str(d))))
    doc = _cli("runs", str(SAMPLES), "--format", "json")
    assert len(doc["runs"]) >= len(sample_dirs()) and not _errors("runs", doc)


def test_schema_command_prints_the_shipped_schema():
    for kind in schema_mod.KINDS:
        p = subprocess.run([sys.executable, "-m", "tfadvisor", "schema", kind], capture_output=True, text=True)
        assert p.returncode == 0 and json.loads(p.stdout) == json.loads(schema_mod.shipped(kind))
    p = subprocess.run([sys.executable, "-m", "tfadvisor", "schema", "nope"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "analyze, diff, scaling, rules, runs" in p.stderr
