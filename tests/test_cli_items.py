"""Command-line details: counts with SI suffixes, --params without --bandwidth, unknown options,
--help at 80 columns, ``rules explain step_gaps``, and ``tfadvisor.profile()`` analysing on exit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from conftest import capture_env
from typer.testing import CliRunner

from tfadvisor.cli.app import app, parse_count
from tfadvisor.cli.app import command as full_command

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
runner = CliRunner()


def cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tfadvisor", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("text, value", [("25000000", 25_000_000), ("25e6", 25_000_000), ("25M", 25_000_000),
                                         ("25.6M", 25_600_000), ("1.2B", 1_200_000_000), ("3k", 3000),
                                         ("25,000,000", 25_000_000), ("2.5e7", 25_000_000)])
def test_parse_count(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["12x", "", "0", "1.5", "M", "-3"])
def test_parse_count_rejects(text):
    with pytest.raises(typer.BadParameter):
        parse_count(text)


@pytest.mark.parametrize("params", ["25e6", "25M"])
def test_params_without_bandwidth_uses_the_value(params):
    res = runner.invoke(app, ["analyze", str(SAMPLES / "multiworker_allreduce"), "--params", params,
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["options"]["param_count"] == 25_000_000
    f = next(x for f in doc["findings"] for x in [f, *f["also"]] if x["rule"] == "allreduce_overhead")  # or folded
    text = f["message"] + f["fix"]
    assert "unknown" not in f["message"].replace("bandwidth unknown", "")
    assert "known: " not in text and "25557032" not in text
    assert "25,000,000" in f["message"] and "--params 25000000 \\\n    --bandwidth 25" in f["fix"]
    assert "link bandwidth" in f["title"]


def test_bad_params_is_a_usage_error():
    res = cli("analyze", str(SAMPLES / "step_gaps"), "--params", "12x")
    assert res.returncode == 2 and "--params" in res.stderr and "Traceback" not in res.stderr


def test_unknown_option_suggests_nothing_unrelated():
    res = cli("analyze", str(SAMPLES / "step_gaps"), "--bogus")
    assert res.returncode == 2
    assert "No such option: --bogus" in res.stderr and "--jobs" not in res.stderr
    near = cli("analyze", str(SAMPLES / "step_gaps"), "--quite")
    assert near.returncode == 2 and "--quiet" in near.stderr  # a real typo still gets its hint


@pytest.mark.parametrize("command", [["analyze"], ["export"], ["runs"], ["rules", "explain"]])
def test_help_at_80_columns(command):
    res = cli(*command, "--help")
    assert res.returncode == 0, res.stderr
    assert "<bool>" not in res.stdout and "…" not in res.stdout
    assert all(len(line) <= 80 for line in res.stdout.splitlines()), res.stdout
    cmd = typer.main.get_command(app).commands[command[0]]
    if len(command) > 1:
        cmd = cmd.commands[command[1]]
    for p in cmd.params:
        for opt in getattr(p, "opts", []):
            if opt.startswith("--") and p.param_type_name == "option":
                assert re.search(rf"(^|[\s,]){re.escape(opt)}([\s,=]|$)", res.stdout, re.M), (opt, res.stdout)


def _all_commands():
    """Every command and subcommand of the full app (the optional ones too), as argument paths."""
    out = []

    def walk(cmd, path):
        out.append(path)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():  # a group
            walk(sub, [*path, name])

    walk(full_command(), [])
    return out


#: type tags (``<list[str]>``, ``<int>``, ``<text|json>``) and usage braces (``{PATH}``), as typer wrote them.
TYPE_TAG = re.compile(r"<[^<>\s]+>|\{[A-Z_.]+\}")


def test_every_help_is_plain_and_fits_80_columns():
    paths = _all_commands()
    assert ["capture", "run"] in paths and ["rules", "explain"] in paths and ["diff"] in paths
    for path in paths:
        res = runner.invoke(app, [*path, "--help"], terminal_width=80)
        assert res.exit_code == 0, (path, res.output)
        out = res.output
        long = [ln for ln in out.splitlines() if len(ln) > 80]
        assert not long, (path, long)
        usage = out.splitlines()[0]
        assert not TYPE_TAG.search(usage) and "......" not in usage, (path, usage)
        for ln in out.splitlines():
            # an option/argument row: its name column is what comes before the gap to the help text
            if ln.startswith("  ") and not ln.startswith("   "):
                name = re.split(r"\s{2,}", ln.strip())[0]
                assert not TYPE_TAG.search(name), (path, ln)
        # a command list shows each summary whole (click cuts a long one with "...")
        if "\nCommands:\n" in out:
            rows = out.split("\nCommands:\n", 1)[1].splitlines()
            assert rows and not any(r.rstrip().endswith("...") for r in rows if r.strip()), (path, rows)


def test_tables_without_json_is_an_error():
    res = runner.invoke(app, ["analyze", str(SAMPLES / "step_gaps"), "--tables"])
    assert res.exit_code == 2
    assert "--tables needs --format json" in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(app, ["analyze", str(SAMPLES / "step_gaps"), "--tables", "--format", "markdown"])
    assert res.exit_code == 2


def test_rules_explain_step_gaps_once_and_fetch_inside_the_step():
    res = runner.invoke(app, ["rules", "explain", "step_gaps"])
    assert res.exit_code == 0
    out = res.output
    assert out.count("The gaps are input time taken outside the measured step") == 1
    assert "(case 1) or" in out
    code = out[out.index("The gaps are input time"):]
    code = code[code.index("```python"): code.index("```", code.index("```python") + 3)]
    lines = code.splitlines()
    marker = next(i for i, ln in enumerate(lines) if "tf.profiler.experimental.Trace" in ln)
    fetch = next(i for i, ln in enumerate(lines) if "next(it)" in ln)
    indent = len(lines[marker]) - len(lines[marker].lstrip())
    assert fetch > marker and len(lines[fetch]) - len(lines[fetch].lstrip()) > indent
    assert not any(ln.lstrip().startswith("for") and "ds" in ln for ln in lines)  # not fetched by the for header


PROFILE_SCRIPT = r'''
import contextlib, io, json, sys
import tensorflow as tf
import tfadvisor

out_dir = sys.argv[1]
w = tf.Variable(tf.ones((64, 64)))

@tf.function
def train_step(x):
    w.assign_add(tf.matmul(x, w) * 1e-6)
    return tf.reduce_sum(w)

x = tf.ones((64, 64))
train_step(x)
res = {}
for name, kw in (("default", {}), ("off", {"analyze": False})):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        with tfadvisor.profile(f"{out_dir}/{name}", system=False, **kw) as p:
            for i in range(6):
                with tfadvisor.step(i):
                    train_step(x)
    res[name] = {"printed": buf.getvalue(), "result": p.result is not None, "run_dir": p.run_dir,
                 "steps": p.result.metrics.get("steps_count") if p.result is not None else None}
print("RESULT " + json.dumps(res))
'''


@pytest.mark.serial  # a TensorFlow capture (conftest)
def test_profile_analyses_on_exit(tmp_path):
    script = tmp_path / "prof.py"
    script.write_text(PROFILE_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], env=capture_env(), capture_output=True,
                          text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    res = json.loads(lines[-1][len("RESULT "):])
    on, off = res["default"], res["off"]
    assert on["result"] and on["steps"] == 6
    assert "tfadvisor: 6 step(s) found" in on["printed"]
    assert f"full report: tfadvisor analyze {on['run_dir']}" in on["printed"]
    assert not off["result"] and off["run_dir"]
    assert "step(s) found" not in off["printed"] and "analyse it with: tfadvisor analyze" in off["printed"]
