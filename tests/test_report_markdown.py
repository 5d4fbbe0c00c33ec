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


def _live_at_peak_result(framework: str, rows: list[dict]):
    r = make_result()
    r.tables["memory_live_at_peak"] = pd.DataFrame(rows)
    r.metrics.put("precision", "framework", Metric(framework, "", "framework"))
    return r


UNNAMED = {"tf_op": "", "shape": "", "region_type": "", "data_type": "invalid", "count": 5, "bytes": 482345216.0}
NAMED = {"tf_op": "model/dense/MatMul", "shape": "[64,64]", "region_type": "output", "data_type": "float32",
         "count": 1, "bytes": 16384.0}


def test_markdown_memory_leaves_out_unnamed_rows_as_html_does():
    """The HTML report's rule (one shared helper): no row without op or shape, a sentence instead."""
    from tfadvisor.report.html import render_html

    r = _live_at_peak_result("jax", [UNNAMED, NAMED])
    md = render_markdown(r)
    memory = md.split("## Memory")[1].split("\n## ")[0]
    assert "| invalid |" not in memory and "|  |  |" not in memory
    assert "model/dense/MatMul" in md
    sentence = "5 live allocations (460.0 MiB) carry no op, shape or data type in the trace"
    assert sentence in md.replace("\\", "") and "XLA/JAX runtime" in md
    page = render_html(r)
    assert sentence in page and "invalid" not in page.split('id="memory-live-at-peak"')[1].split("</table>")[0]


def test_memory_sentence_true_to_a_tensorflow_trace():
    one = dict(UNNAMED, count=1, bytes=1048576.0)
    md = render_markdown(_live_at_peak_result("tensorflow", [one, NAMED])).replace("\\", "")
    assert "XLA" not in md and "JAX" not in md
    assert "1 live allocation (1.0 MiB) carries no op" in md and "so it is not listed by name" in md
    assert "1 live allocations" not in md and "allocation (1.0 MiB) carry " not in md


def test_fraction_metric_reads_as_a_percentage():
    r = make_result()
    r.metrics.put("memory", "memory_fragmentation", Metric(0.23, "fraction", "fragmentation at the peak"))
    md = render_markdown(r)
    assert "| fragmentation | 23 % |" in md and "fraction" not in md.split("## Memory")[1].split("##")[0]
