"""The report's zoomable timeline in real headless Chromium: what it draws matches the analysis'
tables, wheel / buttons / drag / finding chips change the visible range, and the drawn elements stay
bounded on a trace with a thousand steps."""

from __future__ import annotations

import numpy as np
import pytest
from test_html_dom import chromium, many_steps, probe, reports  # noqa: F401 - shared fixtures
from test_report_html import _console_errors

STATE_JS = """
function state() {
  var svg = document.getElementById("plot-timeline"), lanes = {};
  svg.querySelectorAll("g.lane").forEach(function (g) {
    var bg = g.querySelector("rect").getBoundingClientRect(), spans = [];
    g.querySelectorAll("rect.span").forEach(function (r) {
      var b = r.getBoundingClientRect(); spans.push([b.left, b.width, b.height]); });
    lanes[g.getAttribute("data-lane")] = {left: bg.left, width: bg.width, height: bg.height, spans: spans};
  });
  var ticks = []; svg.querySelectorAll("text.tick").forEach(function (t) { ticks.push(t.textContent); });
  return {v0: parseFloat(svg.getAttribute("data-v0")), v1: parseFloat(svg.getAttribute("data-v1")), lanes: lanes,
          ticks: ticks, range: document.getElementById("plot-timeline-range").textContent};
}
function at(frac) {
  var r = document.getElementById("plot-timeline").querySelector("g.lane rect").getBoundingClientRect();
  return {x: r.left + frac * r.width, y: r.top + r.height / 2};
}
var svg = document.getElementById("plot-timeline"), box = svg.parentElement, out = {start: state()};
var p = at(0.5);
svg.dispatchEvent(new WheelEvent("wheel", {deltaY: -100, clientX: p.x, clientY: p.y, bubbles: true,
                                            cancelable: true}));
out.wheel = state();
box.querySelector("button[data-act=in]").click();
out.button = state();
p = at(0.5);
svg.dispatchEvent(new MouseEvent("mousedown", {clientX: p.x, clientY: p.y, bubbles: true}));
window.dispatchEvent(new MouseEvent("mousemove", {clientX: p.x - 100, clientY: p.y, bubbles: true}));
window.dispatchEvent(new MouseEvent("mouseup", {clientX: p.x - 100, clientY: p.y, bubbles: true}));
out.drag = state();
box.querySelector("button[data-act=reset]").click();
out.reset = state();
var chip = box.querySelector("button.tl-chip[data-rule='%s']");
if (chip) { chip.click(); out.chip = state(); }
return out;
"""


def _window_ms(res) -> tuple[float, float]:
    tl = res.tables["timeline"]
    w = tl[tl.lane == "window"]
    return float(w.start_ps.iloc[0]), float(w.end_ps.iloc[0] - w.start_ps.iloc[0]) / 1e9


def _run(chromium, page, tmp, rule: str = "") -> dict:  # noqa: F811
    out, err = probe(chromium, page, STATE_JS % rule, tmp)
    assert not _console_errors(err), _console_errors(err)
    return out


def test_timeline_draws_the_steps_and_idle_where_they_are(chromium, reports, tmp_path):  # noqa: F811
    res, page = reports["synthetic_gpu_idle_gaps"]
    t0, span = _window_ms(res)
    out = _run(chromium, page, tmp_path)["start"]
    assert out["v0"] == 0 and abs(out["v1"] - span) < 1e-6
    steps = out["lanes"]["steps"]
    px = steps["width"] / span
    drawn = sorted(steps["spans"])
    assert len(drawn) == len(res.tables["steps"])  # every step, one bar each
    for (left, width, _), row in zip(drawn, res.tables["steps"].sort_values("start_ps").itertuples(), strict=True):
        assert abs(left - steps["left"] - (row.start_ps - t0) / 1e9 * px) < 1.0
        assert abs(width - (row.end_ps - row.start_ps) / 1e9 * px) < 1.0
    # the idle lane's area is the idle time of the window (bars are as high as their active share)
    idle = out["lanes"]["idle"]
    tl = res.tables["timeline"]
    want = tl[tl.lane == "idle"].covered_ps.sum() / 1e9 / span
    got = sum(w * h for _, w, h in idle["spans"]) / (idle["width"] * idle["height"])
    assert abs(got - want) < 0.01, (got, want)
    # the step_gaps finding's evidence: one mark per gap it counts
    marks = out["lanes"]["findings"]["spans"]
    gaps = res.tables["gaps"]
    counted = gaps.idle_ms >= _threshold_ms(res)
    assert counted.tolist() == gaps["counted"].tolist()
    assert len(marks) == int(counted.sum()) == res.metrics["gaps_count"]


def _threshold_ms(res) -> float:
    """The gaps analysis' definition, written out: idle of at least max(100 us, 5 % of the median step)."""
    return max(0.1, 0.05 * float(res.tables["steps"]["duration_ms"].median()))


def test_timeline_zooms_and_pans(chromium, reports, tmp_path):  # noqa: F811
    res, page = reports["synthetic_gpu_idle_gaps"]
    _, span = _window_ms(res)
    out = _run(chromium, page, tmp_path, "step_gaps")
    s, w, b, d, r = out["start"], out["wheel"], out["button"], out["drag"], out["reset"]
    assert abs((w["v1"] - w["v0"]) - span / 1.5) < 1e-6 * span  # the wheel zoomed in about the pointer
    assert abs((w["v0"] + w["v1"]) / 2 - span / 2) < 0.01 * span
    assert w["ticks"] != s["ticks"] and w["range"] != s["range"]
    assert abs((b["v1"] - b["v0"]) - span / 3) < 1e-6 * span  # "+" halves the range
    assert d["v0"] > b["v0"] and abs((d["v1"] - d["v0"]) - (b["v1"] - b["v0"])) < 1e-9 * span  # dragged left
    lane = d["lanes"]["steps"]
    moved = (d["v0"] - b["v0"]) / (b["v1"] - b["v0"]) * lane["width"]
    assert abs(moved - 100) < 1.0  # by the 100 px the pointer moved
    assert r["v0"] == 0 and abs(r["v1"] - span) < 1e-6 and r["ticks"] == s["ticks"]
    # the finding's chip zooms to its first gap and says so
    c = out["chip"]
    gaps = res.tables["gaps"]
    g = gaps[gaps.idle_ms >= _threshold_ms(res)].iloc[0]
    t0, _ = _window_ms(res)
    a, z = (g.start_ps - t0) / 1e9, (g.end_ps - t0) / 1e9
    assert c["v0"] <= a and c["v1"] >= z and c["v1"] - c["v0"] < span / 4
    assert "step_gaps" in c["range"]
    assert any(sp[1] > 20 for sp in c["lanes"]["findings"]["spans"])  # the marked gap, wide when zoomed


def test_timeline_stays_bounded_with_a_thousand_steps(chromium, many_steps, tmp_path):  # noqa: F811
    res, page = many_steps
    out = _run(chromium, page, tmp_path)
    for name, lane in out["start"]["lanes"].items():
        assert len(lane["spans"]) <= lane["width"] + 1, name  # at most one bar per pixel at any zoom
    idle = out["start"]["lanes"]["idle"]
    _, span = _window_ms(res)
    tl = res.tables["timeline"]
    want = tl[tl.lane == "idle"].covered_ps.sum() / 1e9 / span
    got = sum(w * h for _, w, h in idle["spans"]) / (idle["width"] * idle["height"])
    assert abs(got - want) < 0.01, (got, want)  # 1000 gaps, still the idle share, not a red lane
    assert page.stat().st_size < 2_500_000


@pytest.mark.parametrize("name", ["synthetic_multihost_straggler"])
def test_timeline_has_lanes_per_host(chromium, reports, tmp_path, name):  # noqa: F811
    res, page = reports[name]
    lanes = _run(chromium, page, tmp_path)["start"]["lanes"]
    assert len(res.hosts) >= 2
    for h in res.hosts:
        assert {f"{h.host}: steps", f"{h.host}: device compute"} <= set(lanes), (h.host, sorted(lanes))
    n = [len(lanes[f"{h.host}: steps"]["spans"]) for h in res.hosts]
    assert n == [len(h.tables["steps"]) for h in res.hosts]  # every host's steps, one bar each


@pytest.mark.parametrize("cover_slice", [7, 1 << 20], ids=["sliced", "one_slice"])
def test_coarsen_keeps_the_widest_holes_and_all_the_time(cover_slice, monkeypatch):
    from tfadvisor.analyses import timeline
    from tfadvisor.analyses.timeline import coarsen

    monkeypatch.setattr(timeline, "COVER_SLICE", cover_slice)  # the covered time summed a slice at a time
    rng = np.random.default_rng(1)
    gaps = rng.integers(1, 1000, 5000)
    lens = rng.integers(1, 500, 5000)
    s = np.cumsum(gaps + np.append(0, lens[:-1]))
    e = s + lens
    t = coarsen(s, e, max_spans=50)
    assert len(t) == 50 and t["count"].sum() == 5000
    assert t["covered_ps"].sum() == (e - s).sum()
    assert (t["start_ps"][1:] >= t["end_ps"][:-1]).all()
    kept = np.sort(t["start_ps"][1:] - t["end_ps"][:-1])
    assert (kept == np.sort(s[1:] - e[:-1])[-49:]).all()  # the 49 widest holes, exactly
    first = np.searchsorted(s, t["start_ps"])  # each span's own intervals: its covered time, one by one
    want = [int((e[a:a + c] - s[a:a + c]).sum()) for a, c in zip(first.tolist(), t["count"].tolist())]
    assert t["covered_ps"].tolist() == want


def test_widest_holes_of_equal_width_are_the_first_on_every_cpu():
    """Of holes as wide as the last one kept, the first are kept: the choice a stable sort makes, not the one a
    partition's vector unit leaves (which differed between AVX-512 and AVX2 on ``loop_log_every_step``)."""
    from tfadvisor.analyses.timeline import widest

    rng = np.random.default_rng(3)
    for n, k in [(10, 3), (1000, 49), (5000, 2999), (7, 7), (7, 20)]:
        w = rng.integers(0, 4, n)  # four widths: ties everywhere
        want = np.sort(np.argsort(-w, kind="stable")[:k])
        assert widest(w, k).tolist() == want.tolist(), (n, k)


@pytest.mark.parametrize("sample", ["input_bound_defaults_off", "eager", "python_overhead", "keras_fit_callback"])
def test_idle_lane_adds_up_to_idle_pct_on_real_captures(sample):
    """The timeline's idle lane is idle as the analyses count it (real TF captures)."""
    from test_html_dom import SAMPLES

    import tfadvisor
    from tfadvisor.report.busyidle import idle_columns

    res = tfadvisor.analyze(SAMPLES / sample)
    cols = idle_columns(res.tables["timeline"], res.tables["steps"])
    span = cols["hi"] - cols["lo"]
    assert abs(100 * cols["between"].sum() / span - res.metrics["idle_between_steps_pct"]) < 0.05
    assert abs(100 * cols["within"].sum() / span - res.metrics["idle_within_steps_pct"]) < 0.05
