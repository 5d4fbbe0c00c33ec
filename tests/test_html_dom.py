"""The HTML report read in real headless Chromium as a person sees it, at 1280 px.

A probe script is appended to a copy of the report; after the page (and its own script) has run,
the probe measures the laid-out page (getBoundingClientRect: bar heights and positions, widths,
scroll widths) and writes the figures into the DOM, which ``--dump-dom`` returns. The figures are
checked against the analysis' own tables and metrics from the Python API.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from test_report_html import _chromium, _console_errors, _run_chromium

import tfadvisor
from tfadvisor.report.html import write_html

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
WIDTH = 1280

PROBE = """<script>(function () {
  var out;
  try { out = (function () { %s })(); } catch (e) { out = {error: String(e && e.stack || e)}; }
  var pre = document.createElement("pre"); pre.id = "probe-out"; pre.style.display = "none";
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
})();</script>"""


def probe(chromium: str, page: Path, js: str, tmp: Path, width: int = WIDTH) -> tuple[dict, str]:
    """Run ``js`` (a function body returning a JSON-able value) in ``page`` after it loaded."""
    text = page.read_text(encoding="utf-8")
    probed = tmp / f"probe-{page.name}"
    probed.write_text(text.replace("</body>", PROBE % js + "</body>"), encoding="utf-8")
    r = _run_chromium(chromium, f"--window-size={width},1000", "--dump-dom", probed.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    m = re.search(r'<pre id="probe-out"[^>]*>(.*?)</pre>', r.stdout, re.S)
    assert m, r.stdout[-2000:]
    out = json.loads(html.unescape(m.group(1)))
    assert not (isinstance(out, dict) and "error" in out), out
    return out, r.stderr


@pytest.fixture(scope="module")
def chromium() -> str:
    return _chromium()


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """name -> (Result, report path) for the samples the checks read, analysed through the Python API."""
    out = {}
    tmp = tmp_path_factory.mktemp("reports")
    for name in ("input_bound_defaults_off", "synthetic_gpu_idle_gaps", "synthetic_multihost_straggler"):
        res = tfadvisor.analyze(SAMPLES / name)
        out[name] = (res, write_html(res, tmp / f"{name}.html"))
    return out


@pytest.fixture(scope="module")
def many_steps(tmp_path_factory):
    """A SYNTHETIC run (tfadvisor_dev.synthetic, not a capture): 1000 short steps with ~17 % idle between them
    in ~1000 gaps, the case whose old busy/idle row was 86 % red."""
    from tfadvisor_dev.synthetic import SyntheticSpec, write_run

    tmp = tmp_path_factory.mktemp("synthetic_many_steps")
    write_run(str(tmp / "logs"), SyntheticSpec(steps=1000, step_time_ms=2.0, idle_gap_frac=0.147, ops_per_step=6,
                                               host="synthetic-many"))
    res = tfadvisor.analyze(tmp / "logs")
    return res, write_html(res, tmp / "many.html")


STEPS_JS = """
var svg = document.getElementById("plot-steps"), ticks = [];
svg.querySelectorAll("text[text-anchor=end]").forEach(function (t) {
  var s = t.textContent.trim();
  if (/^[0-9][0-9.,]*$/.test(s)) { var r = t.getBoundingClientRect(); ticks.push([parseFloat(s.replace(/,/g, "")),
                                                                               r.top + r.height / 2]); }
});
var bars = [];
svg.querySelectorAll("g.step").forEach(function (g) {
  var cats = {}, top = 1e9, bottom = -1e9, left = 1e9;
  g.querySelectorAll("rect.seg").forEach(function (r) {
    var b = r.getBoundingClientRect();
    cats[r.getAttribute("data-cat")] = (cats[r.getAttribute("data-cat")] || 0) + b.height;
    top = Math.min(top, b.top); bottom = Math.max(bottom, b.bottom); left = Math.min(left, b.left);
  });
  var mx = g.querySelector("line.bin-max");
  bars.push({first: g.getAttribute("data-first"), last: g.getAttribute("data-last"), top: top, bottom: bottom,
             left: left, cats: cats, maxY: mx ? mx.getBoundingClientRect().top + mx.getBoundingClientRect().height / 2
                                               : null});
});
var outl = [];
svg.querySelectorAll("path.outlier").forEach(function (p) {
  outl.push({step: p.getAttribute("data-step"), tip: p.getBoundingClientRect().bottom});
});
return {ticks: ticks, bars: bars, outliers: outl, caption: svg.textContent};
"""


def _scale(ticks: list) -> tuple[float, float, float]:
    """(px per ms, y of 0 ms, highest tick) from the y axis' tick labels as laid out."""
    v = np.array([t[0] for t in ticks])
    y = np.array([t[1] for t in ticks])
    slope, icpt = np.polyfit(v, y, 1)
    return -slope, icpt, float(v.max())


def _read_steps(chromium, page, tmp) -> tuple[dict, float, float, float]:
    out, err = probe(chromium, page, STEPS_JS, tmp)
    assert not _console_errors(err), _console_errors(err)
    px, y0, top_tick = _scale(out["ticks"])
    assert px > 0.1
    return out, px, y0, top_tick


def test_step_bars_match_the_steps_table(chromium, reports, tmp_path):
    res, page = reports["input_bound_defaults_off"]
    steps = res.tables["steps"]
    out, px, y0, top_tick = _read_steps(chromium, page, tmp_path)
    assert len(out["bars"]) == len(steps)  # every step is a bar
    assert top_tick >= steps.duration_ms.max()  # the axis reaches the slowest step
    lefts = [b["left"] for b in out["bars"]]
    assert lefts == sorted(lefts)
    tol = max(0.01 * top_tick, 1.0 / px)
    for bar, row in zip(out["bars"], steps.itertuples(), strict=True):
        assert bar["first"] == str(row.step)
        assert abs(bar["bottom"] - y0) < 2.0  # bars stand on the 0 ms line
        assert abs((bar["bottom"] - bar["top"]) / px - row.duration_ms) < tol, (row.step, bar)
        for cat, hpx in bar["cats"].items():
            want = getattr(row, f"{cat}_ms") if cat != "unattributed" else None
            if want is not None:
                assert abs(hpx / px - want) < tol, (row.step, cat, hpx / px, want)
        assert abs(bar["cats"].get("input", 0) / px - row.input_ms) < tol  # the finding's category is drawn


def test_binned_step_bars_show_means_maxima_and_outliers(chromium, many_steps, tmp_path):
    res, page = many_steps
    steps = res.tables["steps"].reset_index(drop=True)  # bars: each step's wall time, start to next start
    out, px, y0, top_tick = _read_steps(chromium, page, tmp_path)
    assert "each bar the mean of 3 consecutive steps" in out["caption"]
    assert top_tick >= steps.wall_ms.max()
    pos = {str(s): i for i, s in enumerate(steps.step)}
    tol = max(0.01 * top_tick, 1.0 / px)
    seen = 0
    for bar in out["bars"]:
        part = steps.iloc[pos[bar["first"]]:pos[bar["last"]] + 1]
        seen += len(part)
        assert abs((bar["bottom"] - bar["top"]) / px - part.wall_ms.mean()) < tol
        if len(part) > 1:  # the slowest step of the bin, as a tick
            assert abs((y0 - bar["maxY"]) / px - part.wall_ms.max()) < tol
    assert seen == len(steps)
    drawn = {o["step"]: o for o in out["outliers"]}
    for row in steps[steps.outlier].itertuples():
        assert str(row.step) in drawn
        assert abs((y0 - drawn[str(row.step)]["tip"]) / px - row.wall_ms) < tol + 3 / px


BUSY_JS = """
var svg = document.getElementById("plot-busy"), row = svg.querySelector("rect.busy-row").getBoundingClientRect();
function area(sel) { var a = 0; svg.querySelectorAll(sel).forEach(function (r) {
  var b = r.getBoundingClientRect(); a += b.width * b.height; }); return a; }
function width(sel) { var w = 0; svg.querySelectorAll(sel).forEach(function (r) {
  w += r.getBoundingClientRect().width; }); return w; }
var total = width("rect.share");
return {between: area("rect.idle-between") / (row.width * row.height),
        within: area("rect.idle-within") / (row.width * row.height),
        shareBetween: width("rect.share-between") / total, shareWithin: width("rect.share-within") / total,
        text: svg.textContent, marks: svg.querySelectorAll("path.gap-mark").length};
"""


@pytest.mark.parametrize("which", ["synthetic_gpu_idle_gaps", "many"])
def test_busy_idle_is_drawn_from_time(chromium, reports, many_steps, tmp_path, which):
    res, page = many_steps if which == "many" else reports[which]
    m = res.metrics
    out, err = probe(chromium, page, BUSY_JS, tmp_path)
    assert not _console_errors(err)
    # red + orange area and the proportion bar are the idle shares, however many gaps there are
    assert abs(100 * out["between"] - m["idle_between_steps_pct"]) < 0.5, out
    assert abs(100 * out["within"] - m["idle_within_steps_pct"]) < 0.5, out
    assert abs(100 * (out["between"] + out["within"]) - m["idle_pct"]) < 0.5
    assert abs(100 * out["shareBetween"] - m["idle_between_steps_pct"]) < 0.3
    assert abs(100 * out["shareWithin"] - m["idle_within_steps_pct"]) < 0.3
    assert out["marks"] == min(m["gaps_count"], 300)


LAYOUT_JS = """
var doc = document.documentElement, main = document.querySelector("main").getBoundingClientRect(), bad = [];
if (doc.scrollWidth > doc.clientWidth) bad.push("page " + doc.scrollWidth + " > " + doc.clientWidth);
if (document.body.scrollWidth > document.body.clientWidth) bad.push("body " + document.body.scrollWidth);
document.querySelectorAll("table, svg.plot, pre, figure, .finding").forEach(function (el) {
  var r = el.getBoundingClientRect(), name = el.tagName + "#" + (el.id || el.className && el.className.baseVal ||
                                                                 el.className);
  if (r.width === 0) return;  // closed <details>
  if (r.right > main.right + 0.5 || r.left < main.left - 0.5) {
    bad.push(name + " sticks out: " + r.left + ".." + r.right);
  }
  if (el.scrollWidth > el.clientWidth + 1) bad.push(name + " scrolls: " + el.scrollWidth + " > " + el.clientWidth);
  if (el.parentElement.scrollWidth > el.parentElement.clientWidth + 1) bad.push(name + " parent scrolls");
});
return {bad: bad, width: window.innerWidth, tables: document.querySelectorAll("table").length,
        height: doc.scrollHeight};
"""


@pytest.mark.parametrize("name", ["input_bound_defaults_off", "synthetic_gpu_idle_gaps",
                                  "synthetic_multihost_straggler"])
def test_nothing_is_cut_off_at_1280px(chromium, reports, tmp_path, name):
    res, page = reports[name]
    out, err = probe(chromium, page, LAYOUT_JS, tmp_path)
    assert out["width"] == WIDTH and out["tables"] >= 3
    assert out["bad"] == [], out["bad"]
    assert not _console_errors(err), _console_errors(err)
    shots = Path(os.environ.get("TFADVISOR_SHOTS", ROOT / "artifacts"))  # to look at; artifacts/ is git-ignored
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"{name}.png"
    r = _run_chromium(chromium, f"--screenshot={shot}", f"--window-size={WIDTH},{out['height'] + 20}",
                      "--hide-scrollbars", page.as_uri())
    assert r.returncode == 0 and shot.stat().st_size > 20_000


def test_layout_probe_sees_a_cut_off_table(chromium, tmp_path):
    """The check above is not vacuous: a table wider than the page is reported."""
    page = tmp_path / "wide.html"
    page.write_text("<html><body><main style='max-width:600px'><div style='overflow-x:auto'><table><tr><td>"
                    + "x" * 400 + "</td></tr></table></div></main></body></html>")
    out, _ = probe(chromium, page, LAYOUT_JS, tmp_path)
    assert any("TABLE" in b for b in out["bad"]), out


def test_each_plot_sits_beside_its_finding(reports):
    res, page = reports["synthetic_gpu_idle_gaps"]
    text = page.read_text()
    art = re.search(r'<article class="finding[^"]*" id="finding-step_gaps">.*?</article>', text, re.S).group(0)
    assert 'id="plot-busy"' in art  # the idle-gap finding carries the busy/idle plot
    res, page = reports["synthetic_multihost_straggler"]
    text = page.read_text()
    art = re.search(r'<article class="finding[^"]*" id="finding-straggler_host">.*?</article>', text, re.S).group(0)
    assert 'id="plot-hosts"' in art
