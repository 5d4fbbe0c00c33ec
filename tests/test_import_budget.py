"""What `tfadvisor analyze` imports: the analysis path stays off pandas, jinja2, the MCP SDK and jsonschema (those
two are for `tfadvisor mcp` and the tests only); `--help` stays off rich, pydantic and numpy.

typer (0.29) converts every option value but a flag's with pydantic (~55 ms of import, ~10 ms of adapters for
`analyze`); tfadvisor's commands convert the values of theirs without it (tfadvisor.cli.values), so `analyze` imports
no pydantic either (tests/test_cli_values.py).

Importing pandas costs about a quarter of a second, more than the whole analysis of a typical small
profile (benchmarks/compare.py); it is imported only where a table becomes a DataFrame (notebooks,
``--tables``, HTML/Markdown reports, multi-host tables).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
HEAVY = ("pandas", "jinja2", "pydantic", "mcp", "mcp_types", "jsonschema", "starlette", "uvicorn")

PROBE = r"""
import atexit, json, sys
WATCH = set(json.loads(sys.argv[1]))
def report():
    heavy = sorted({m.split(".")[0] for m in sys.modules} & WATCH)
    sys.__stderr__.write("HEAVY=" + json.dumps(heavy) + "\n")
atexit.register(report)
from tfadvisor.cli.app import main
sys.argv = ["tfadvisor"] + sys.argv[2:]
main()
"""


def _heavy(args: list[str]) -> tuple[list[str], subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), *args], capture_output=True, text=True,
                          timeout=120)
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line, proc.stderr[-2000:]
    return json.loads(line[-1][len("HEAVY="):]), proc


@pytest.mark.parametrize("sample,fmt", [("input_bound_defaults_off", "json"), ("input_bound_defaults_off", "text"),
                                        ("synthetic_gpu_mixed", "json"), ("memory_heavy", "text")])
def test_analyze_imports_no_pandas(sample, fmt):
    heavy, proc = _heavy(["analyze", str(SAMPLES / sample), "--format", fmt])
    assert proc.returncode == 0, proc.stderr[-2000:]
    if sample == "memory_heavy":  # memory events are grouped with pandas: the one analysis that needs it
        heavy = [m for m in heavy if m != "pandas"]
    assert heavy == [], f"{sample} --format {fmt} imported {heavy}"


@pytest.mark.parametrize("command", [[], ["analyze"], ["capture", "run"], ["diff"], ["export"]])
def test_help_imports_no_rich_pydantic_or_numpy(command):
    """`--help` renders plain text (typer's rich help off): it imports neither rich nor pydantic nor numpy."""
    code = PROBE.replace("WATCH = set(json.loads(sys.argv[1]))", "WATCH = {'rich', 'pydantic', 'numpy', 'pandas'}")
    proc = subprocess.run([sys.executable, "-c", code, "[]", *command, "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Usage:" in proc.stdout, proc.stderr[-2000:]
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line and json.loads(line[-1][len("HEAVY="):]) == [], (command, line)


def test_tables_are_dataframes_when_asked_for():
    heavy, proc = _heavy(["analyze", str(SAMPLES / "input_bound_defaults_off"), "--format", "json", "--tables"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pandas" in heavy  # the probe can see pandas: the test above would notice it
    tables = json.loads(proc.stdout)["tables"]
    assert len(tables["steps"]) >= 10 and "tfdata_stages" in tables


def test_the_mcp_command_imports_the_sdk():
    """The probe sees the MCP SDK when `tfadvisor mcp` runs (stdin closed: the server starts and ends)."""
    pytest.importorskip("mcp")
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(HEAVY), "mcp"], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")]
    assert line and "mcp" in json.loads(line[-1][len("HEAVY="):]), proc.stderr[-2000:]


#: Off the small sample's path too (issue 54: the whole process against xprof's): markdown-it (a rule text of prose
#: and closed fences is split without it), zipfile (a samples file's reader) and difflib (a misspelt name's hint).
LIGHT = ("markdown_it", "zipfile", "difflib")


def _probe(args: list[str], watch) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(watch), *args], capture_output=True, text=True,
                          timeout=120)
    line = [x for x in proc.stderr.splitlines() if x.startswith("HEAVY=")]
    assert proc.returncode == 0 and line, proc.stderr[-2000:]
    return json.loads(line[-1][len("HEAVY="):])


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_small_sample_imports_no_markdown_parser_zip_or_difflib(fmt):
    """Nothing of LIGHT beyond what the command line itself loads: typer 0.29 imports difflib (typer.core);
    ``tfadvisor schema runs`` (typer, one value, no analysis) is that baseline, and the analysis adds nothing to it."""
    cli_alone = _probe(["schema", "runs"], LIGHT)
    assert "markdown_it" not in cli_alone
    analysed = _probe(["analyze", str(SAMPLES / "input_bound_defaults_off"), "--format", fmt], LIGHT)
    assert set(analysed) <= set(cli_alone), (analysed, cli_alone)
