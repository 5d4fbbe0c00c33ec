"""``tfadvisor mcp`` (issue 29), started as a subprocess and driven by the official MCP SDK's own client over
stdio: the tools are listed, a sample is analysed and a pair diffed (each result validates against the
JSON contract), sizes are bounded, and a corrupt file is a clean tool error, not a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SAMPLES
from jsonschema import Draft202012Validator

from tfadvisor.report.schema import shipped

mcp = pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'tfadvisor[mcp]')")
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

TOOLS = {"list_runs", "analyze", "diff", "explain_rule", "list_rules", "export_timeline", "get_schema"}


def _params() -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env["PYTHONPATH"] = str(ROOT)
    return StdioServerParameters(command=sys.executable, args=["-m", "tfadvisor", "mcp"], env=env)


def _doc(result) -> dict:
    assert not result.is_error, result.content[0].text if result.content else result
    text = json.loads(result.content[0].text)
    if result.structured_content is not None:
        assert result.structured_content == text  # the structured and the text forms agree
    return text


def _valid(kind: str, doc: dict) -> list[str]:
    v = Draft202012Validator(json.loads(shipped(kind)))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:200] for e in v.iter_errors(doc)]


async def _session(tmp: Path) -> dict:
    out: dict = {}
    corrupt = tmp / "bad" / "plugins" / "profile" / "run1"
    corrupt.mkdir(parents=True)
    (corrupt / "host.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f" + b"\x00" * 64)  # a plane of 4 GB claimed
    async with Client(_params(), read_timeout_seconds=120) as client:
        out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
        out["analyze"] = _doc(await client.call_tool("analyze", {"path": str(SAMPLES / "tfdata_seq_map")}))
        out["analyze_tables"] = _doc(await client.call_tool(
            "analyze", {"path": str(SAMPLES / "tfdata_seq_map"), "tables": ["steps", "host_ops"], "max_rows": 3,
                        "max_findings": 1}))
        out["diff"] = _doc(await client.call_tool(
            "diff", {"before": str(SAMPLES / "tfdata_seq_map"), "after": str(SAMPLES / "tfdata_seq_map_tuned")}))
        out["runs"] = _doc(await client.call_tool("list_runs", {"logdir": str(SAMPLES / "keras_fit_spe1")}))
        out["rule"] = _doc(await client.call_tool("explain_rule", {"rule_id": "input_bound"}))
        out["schema"] = _doc(await client.call_tool("get_schema", {"kind": "diff"}))
        out["export"] = _doc(await client.call_tool(
            "export_timeline", {"path": str(SAMPLES / "tfdata_seq_map"), "out": str(tmp / "t.json"),
                                "max_events": 1000}))
        out["corrupt"] = await client.call_tool("analyze", {"path": str(tmp / "bad")})
        out["missing"] = await client.call_tool("analyze", {"path": str(tmp / "nothing_here")})
        out["bad_rule"] = await client.call_tool("explain_rule", {"rule_id": "no_such_rule"})
        out["bad_table"] = await client.call_tool("analyze", {"path": str(SAMPLES / "tfdata_seq_map"),
                                                              "tables": ["nope"]})
    return out


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return asyncio.run(_session(tmp_path_factory.mktemp("mcp")))


def test_tools_are_listed_with_their_arguments(session):
    tools = session["tools"]
    assert set(tools) == TOOLS
    props = tools["analyze"].input_schema["properties"]
    assert {"path", "run", "tables", "max_rows", "max_findings"} <= set(props)
    assert tools["analyze"].input_schema["required"] == ["path"]
    assert all(t.description for t in tools.values())


def test_analyze_returns_the_contract_and_the_cli_findings(session):
    doc = session["analyze"]
    assert not _valid("analyze", doc), _valid("analyze", doc)[:5]
    import tfadvisor

    want = [f.rule for f in tfadvisor.analyze(SAMPLES / "tfdata_seq_map").findings]
    assert [f["rule"] for f in doc["findings"]] == want[:len(doc["findings"])] and doc["findings"]
    assert "tables" not in doc  # tables only when asked for


def test_analyze_output_is_bounded(session):
    doc = session["analyze_tables"]
    assert not _valid("analyze", doc), _valid("analyze", doc)[:5]
    assert set(doc["tables"]) == {"steps", "host_ops"}
    assert len(doc["tables"]["steps"]) == 3 and doc["truncated"]["tables.steps"] == 12  # the sample's 12 steps
    assert len(doc["findings"]) == 1 and doc["truncated"]["findings"] == len(session["analyze"]["findings"])
    assert len(json.dumps(doc)) < 60_000


def test_diff_and_the_other_tools(session):
    assert not _valid("diff", session["diff"]) and session["diff"]["verdict"] == "faster"
    assert not _valid("runs", session["runs"]) and len(session["runs"]["runs"]) == 1
    assert not _valid("rules", session["rule"]) and session["rule"]["rules"][0]["id"] == "input_bound"
    assert session["schema"] == json.loads(shipped("diff"))
    exp = session["export"]
    assert exp["written"] <= 1000 + exp["tracks"] and Path(exp["out"]).is_file()
    json.loads(Path(exp["out"]).read_text())


@pytest.mark.parametrize("case,words", [("corrupt", "corrupt"), ("missing", "no such file or directory"),
                                        ("bad_rule", "no rule 'no_such_rule'"), ("bad_table", "no table 'nope'")])
def test_bad_input_is_a_clean_tool_error(session, case, words):
    r = session[case]
    assert r.is_error
    text = r.content[0].text
    assert words in text and "Traceback" not in text and "\n" not in text.strip(), text
