"""The notebook view: ``Result._repr_html_``, concise reprs, and ``--format json --tables``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tfadvisor
from tfadvisor.cli.app import app

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
runner = CliRunner()


@pytest.fixture(scope="module")
def gaps_result():
    return tfadvisor.analyze(SAMPLES / "step_gaps")


def test_result_repr_is_one_short_line(gaps_result):
    text = repr(gaps_result)
    assert "\n" not in text and len(text) < 400
    assert "10 steps" in text and "critical step_gaps" in text and "tables: steps, gaps" in text
    assert "start_ps" not in text  # no DataFrame dump


def test_trace_and_plane_reprs_are_short():
    trace = tfadvisor.load(SAMPLES / "step_gaps")
    text = repr(trace)
    assert "\n" not in text and len(text) < 200
    assert f"{trace.n_events:,} events" in text and f"{len(trace.planes)} planes" in text
    plane = repr(trace.planes[0])
    assert "\n" not in plane and f"{trace.planes[0].n_events:,} events" in plane


def test_repr_html_summary_findings_and_plots(gaps_result):
    html = gaps_result._repr_html_()
    assert html.startswith('<div class="tfadvisor-nb">') and html.endswith("</div>")
    assert "<script" not in html
    # the finding, with its rule, message and fix
    f = gaps_result.findings[0]
    assert f.rule == "step_gaps" and f.title in html and "step_gaps" in html
    assert "steps_per_execution" in html  # from the fix's example
    # the plots the finding's evidence names sit in the findings list, after the finding's title
    busy = html.find('<svg id="plot-busy"')
    steps_svg = re.search(r'<svg id="plot-steps"[^>]*data-steps="(\d+)"', html)
    assert busy > html.find(f.title) > 0
    assert steps_svg and int(steps_svg.group(1)) == len(gaps_result.tables["steps"])
    # the report's stylesheet, scoped: nothing styles the notebook's own body
    css = html[html.find("<style>") + 7: html.find("</style>")]
    rules = [r.strip() for r in re.findall(r"([^{}]+)\{", css)]
    assert rules and all(sel.strip().startswith(".tfadvisor-nb") for r in rules for sel in r.split(","))


def test_repr_html_without_findings():
    result = tfadvisor.analyze(SAMPLES / "tfdata_repeat_map_tuned")
    html = result._repr_html_()
    assert '<svg id="plot-steps"' in html  # the step chart is shown on its own


def test_json_tables_key(tmp_path):
    plain = runner.invoke(app, ["analyze", str(SAMPLES / "no_markers"), "--format", "json"])
    assert plain.exit_code == 0 and "tables" not in json.loads(plain.output)
    res = runner.invoke(app, ["analyze", str(SAMPLES / "no_markers"), "--format", "json", "--tables"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    result = tfadvisor.analyze(SAMPLES / "no_markers")
    assert set(doc["tables"]) == set(result.tables)
    steps = doc["tables"]["steps"]
    assert len(steps) == len(result.tables["steps"]) == doc["summary"]["steps"]
    assert [r["duration_ms"] for r in steps] == pytest.approx(result.tables["steps"]["duration_ms"].tolist())


def test_step_outliers_fix_points_at_data_that_exists():
    res = runner.invoke(app, ["analyze", str(SAMPLES / "no_markers"), "--format", "json", "--tables"])
    doc = json.loads(res.output)
    finding = next(f for f in doc["findings"] if f["rule"] == "step_outliers")
    assert "--format json --tables" in finding["fix"] and "tables.steps" in finding["fix"]
    assert '"outlier": true' in finding["fix"]
    outliers = [r for r in doc["tables"]["steps"] if r["outlier"] is True]
    assert len(outliers) == doc["metrics"]["step_outliers_count"] >= 1
