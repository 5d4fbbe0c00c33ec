"""The Markdown report: same content as the HTML one, fenced fixes, names that render literally."""

from __future__ import annotations

import re

import pandas as pd
from markdown_it import MarkdownIt  # rich's dependency, so always present
from test_report_html import NASTY, make_bare_result, make_result

from tfadvisor.analyses import Metric
from tfadvisor.report.markdown import code, render_markdown, text


def _render(md: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(md)


def test_markdown_has_all_sections_and_findings():
    md = render_markdown(make_result())
    for head in ("## Summary", "## Findings", "## Step time", "## Busy vs idle", "## Input pipeline (tf.data)",
                 "## Precision mix", "## Memory", "## AllReduce", "## Hosts", "## Training data files", "## Notes"):
        assert head in md, head
    assert "### 1. [CRITICAL] Training is input-bound (`input_bound`)" in md
    assert "### 2. [WARNING]" in md and "### 3. [INFO]" in md
    # fixes as fenced code: the one with a fence and the one with an indented block
    assert "```python\nds = ds.map(f, num_parallel_calls=tf.data.AUTOTUNE)" in md
    assert "```\nkeras.mixed_precision.set_global_policy('mixed_float16')\n```" in md
    assert "Impact: about 55 % of step time." in md
    assert "| `input_pct` | 63.9 % |" in md
    # breakdown table and the measured-vs-expected AllReduce
    assert re.search(r"\| input \| [\d.]+ \| [\d.]+ \|", md)
    assert "| measured per step | 12.5 ms |" in md and "| expected (params x 4 B / bandwidth) | 4 ms |" in md
    assert "| peak in use | 3.3 GiB |" in md
    assert "`worker1<&>`" in md


def test_markdown_renders_trace_names_literally():
    md = render_markdown(make_result())
    html = _render(md)
    # the op name with < > & shows up escaped once in HTML, i.e. literally on screen
    assert "model/dense&lt;1&gt;/MatMul&amp;Add:Fused&lt;float&gt;" in html
    assert "<1>" not in html and "<float>" not in html
    # tables stay tables (a | in a name would break a row)
    assert html.count("<table>") >= 8
    res = make_result()
    res.tables["memory_live_at_peak"].loc[0, "tf_op"] = "a|b`c"
    html = _render(render_markdown(res))
    assert "a|b`c" in html


def test_markdown_bare_result_says_why():
    md = render_markdown(make_bare_result())
    assert "No findings" in md
    assert "not in this trace: no step markers & no \\<TraceContext\\> events" in md
    assert "TF_CPU_ALLOCATOR_USE_BFC" in md
    assert "Not checked: pass `--data DIR_OR_GLOB`" in md
    html = _render(md)
    assert "&lt;TraceContext&gt;" in html


def test_markdown_datafiles_section():
    res = make_result()
    res.metrics.put("datafiles", "data_files_count", Metric(2_000_000, "files"))
    res.tables["data_files_sizes"] = pd.DataFrame(dict(bucket=["< 1 MiB", "1-128 MiB"], files=[2_000_000, 0],
                                                       bytes=[10_000_000_000, 0]))
    md = render_markdown(res)
    assert "| files | 2,000,000 files |" in md
    assert "| `< 1 MiB` | 2,000,000 | 9.3 GiB |" in md


def test_escaping_helpers():
    assert code("a`b") == "``a`b``"
    assert code("x|y") == "`x\\|y`"
    assert text("<b>") == "\\<b\\>"
    assert NASTY not in text(NASTY)
