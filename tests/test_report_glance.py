"""Reports read at a glance (issue 19): a multi-host page says which host each chart is and draws
the straggler's too; the timeline leaves out lanes with nothing to see; the busy/idle header says
what is drawn; legends list only what is drawn; one tick set, one number of decimals."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pandas as pd

import tfadvisor
from tfadvisor.report import formatting as F
from tfadvisor.report.html import render_html
from tfadvisor.report.stepchart import steps_svg
from tfadvisor.report.timeline import timeline_data

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"


@cache
def _result(sample: str):
    return tfadvisor.analyze(SAMPLES / sample)


def test_multihost_charts_name_their_host_and_draw_the_straggler():
    r = _result("synthetic_multihost_straggler")
    median, slow = r.metrics["median_host"], r.metrics["straggler_host"]
    page = render_html(r)
    assert f"Step time per step: {median}, the median host" in page
    assert f"Busy vs idle: {median}, the median host" in page
    assert f'id="plot-steps-{slow}"' in page and f'id="plot-busy-{slow}"' in page
    assert f'<h4 class="host-view">{slow}, the straggler</h4>' in page
    # the straggler's chart is its own steps, not the median host's
    own = next(h for h in r.hosts if h.host == slow).tables["steps"]
    svg = page.split(f'id="plot-steps-{slow}"')[1].split("</svg>")[0]
    drawn = [float(x) for x in re.findall(r'data-ms="([^"]+)"', svg)]
    assert drawn == [float(f"{v:.6g}") for v in own["wall_ms"]]  # each step's wall time, start to next start


def test_one_host_charts_do_not_name_a_host():
    page = render_html(_result("synthetic_gpu_idle_gaps"))
    assert "the median host" not in page and 'class="host-view"' not in page


def test_multihost_timeline_leaves_out_lanes_with_nothing_to_see():
    data = timeline_data(_result("synthetic_multihost_straggler"))
    span = data["span_ms"]
    assert data["dropped"] and "host0: host collectives" in data["dropped"]
    kinds = {}
    for lane in data["lanes"]:
        if lane.get("kind") in ("steps", "marks") or lane["tags"]:
            continue
        f = lane.get("f") or [100] * len(lane["s"])
        active = sum((e - s) * x / 100 for s, e, x in zip(lane["s"], lane["e"], f))
        kinds[lane["kind"]] = max(kinds.get(lane["kind"], 0.0), active)
    assert all(v > 0.01 * span for v in kinds.values()), kinds
    # every host keeps the same lanes
    per_host = {}
    for lane in data["lanes"]:
        per_host.setdefault(lane["host"], set()).add(lane["kind"])
    assert len({frozenset(v - {"marks"}) for v in per_host.values()}) == 1
    page = render_html(_result("synthetic_multihost_straggler"))
    assert 'id="plot-timeline-dropped"' in page and "host collectives" in page


def test_busy_header_says_what_is_drawn():
    page = render_html(_result("synthetic_multihost_straggler"))
    busy = page.split('id="busy"')[1]
    assert "gaps: <strong>0</strong>" not in busy and "longest gap: <strong>0 ms" not in busy
    assert re.search(r"No gap between steps has [\d.]+ ms or more idle", busy)
    assert "idle in all: <strong>" in busy
    gaps_page = render_html(_result("synthetic_gpu_idle_gaps"))
    assert re.search(r"gaps between steps with [\d.]+ ms or more idle: <strong>9</strong>", gaps_page)


def test_step_legend_lists_only_categories_with_time():
    steps = pd.DataFrame({"step": [1, 2], "start_ps": [0, 10], "end_ps": [10, 20], "duration_ms": [10.0, 10.0],
                          "device_compute_ms": [6.0, 7.0], "input_ms": [4.0, 3.0], "idle_ms": [0.0, 0.0],
                          "kernel_launch_ms": [0.0, 0.0]})
    svg = steps_svg(steps)
    legend = re.findall(r"<text[^>]*>([^<]+)</text>", svg)
    assert "device compute" in legend and "input" in legend
    assert "idle" not in legend and "kernel launch" not in legend


def test_tick_labels_share_their_decimals_and_values_have_no_padding():
    assert F.tick_labels([0, 0.5, 1, 1.5]) == ["0.0", "0.5", "1.0", "1.5"]
    assert F.tick_labels([0, 25, 50]) == ["0", "25", "50"]
    assert F.tick_labels([0, 0.02, 0.04]) == ["0.00", "0.02", "0.04"]
    assert [F.fmt_num(v) for v in (1.0, 0.04, 1.5, 12.345)] == ["1", "0.04", "1.5", "12.3"]
    svg = steps_svg(pd.DataFrame({"step": [1], "start_ps": [0], "end_ps": [1], "duration_ms": [1.6]}))
    ticks = re.findall(r'text-anchor="end"\s+fill="#333">([^<]+)</text>', svg)
    assert len(ticks) >= 3 and len({len(t.split(".")[1]) if "." in t else 0 for t in ticks}) == 1, ticks


def test_fraction_unit_reads_as_percent():
    assert F.fmt_value(0.23, "fraction") == "23 %"
