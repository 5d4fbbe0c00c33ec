"""Steps are training steps: Keras ``steps_per_execution`` and epoch ends inside the window.

The samples are real captures with the stock TensorBoard callback (make_samples.py):
``keras_fit_spe1`` / ``keras_fit_spe4`` (the same model with steps_per_execution 1 and 4) and
``keras_fit_epochs`` (two epoch ends with validation and a checkpoint inside the window).
Their ``measured.json`` holds Keras's own per-step wall time, timed outside tfadvisor."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import tfadvisor
from tfadvisor.analyses.activity import activity
from tfadvisor.analyses.base import Context, Options
from tfadvisor.analyses.step_detect import _loop_counts, detect_steps, executions
from tfadvisor.report.diff import diff_results
from tfadvisor.report.findings import finding_rule

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
TOLERANCE = 0.20  # tfadvisor's per-step time against Keras's own timing


@cache
def _result(name: str):
    return tfadvisor.analyze(str(SAMPLES / name))


def _measured(name: str) -> dict:
    return json.loads((SAMPLES / name / "measured.json").read_text())


def _keras_mean_ms(m: dict) -> float:
    """Keras's per-step time over the executions tfadvisor's statistics use (with more than five
    markers the first and the last are left out, as in xprof)."""
    ex = m["execution_ms"]
    if len(ex) > 5:
        ex = ex[1:-1]
    return sum(ex) / (len(ex) * m["steps_per_execution"])


def _m(result, name: str):
    v = result.metrics.get(name)
    return getattr(v, "value", v)


@pytest.mark.parametrize("name,k", [("keras_fit_spe1", 1), ("keras_fit_spe4", 4)])
def test_steps_are_training_steps(name: str, k: int):
    r, m = _result(name), _measured(name)
    assert m["steps_per_execution"] == k
    assert _m(r, "executions_count") == m["executions"]
    assert _m(r, "steps_count") == k * m["executions"] == m["train_steps"]
    assert _m(r, "steps_per_execution") == k
    assert _m(r, "steps_per_execution_source") == ("step_num_stride" if k > 1 else "none")
    assert _m(r, "step_markers_word") == ("calls of 4 steps" if k > 1 else "steps")
    tbl = r.tables["steps"]
    assert (tbl["train_steps"] == k).all()
    assert np.allclose(tbl["busy_ms_per_step"], tbl["duration_ms"] / k)
    assert np.allclose(tbl["ms_per_step"], tbl["wall_ms"] / k)


@pytest.mark.parametrize("name", ["keras_fit_spe1", "keras_fit_spe4"])
def test_step_time_matches_keras_timing(name: str):
    r, m = _result(name), _measured(name)
    # Keras's hooks were timed from on_train_batch_begin to _end (measured.json step_clock "busy"): the
    # busy part inside the marker
    assert m["step_clock"] == "busy"
    mean, want = _m(r, "step_busy_mean_ms"), _keras_mean_ms(m)
    assert abs(mean - want) <= TOLERANCE * want, f"{name}: tfadvisor {mean:.2f} ms/step, Keras {want:.2f}"
    med, want_med = _m(r, "step_busy_median_ms"), float(np.median(m["measured_step_ms"]))
    assert abs(med - want_med) <= TOLERANCE * want_med, f"{name}: median {med:.2f} vs Keras {want_med:.2f}"


def test_diff_spe1_vs_spe4_about_equal():
    d = diff_results(_result("keras_fit_spe1"), _result("keras_fit_spe4"))
    keras_pct = (_keras_mean_ms(_measured("keras_fit_spe4")) / _keras_mean_ms(_measured("keras_fit_spe1")) - 1) * 100
    pct = d["step_time"]["change_pct"]
    assert abs(keras_pct) < 10, "the samples were captured with Keras timing both runs alike"
    assert abs(pct - keras_pct) < 5, f"tfadvisor {pct:+.1f} %, Keras {keras_pct:+.1f} %"
    assert d["verdict"] == "unchanged" and d["verdict_text"].startswith("about equal"), d["verdict_text"]
    lo, hi = d["step_time"]["interval_pct"]
    assert lo < 0 < hi and hi - lo < 30, (lo, hi)
    assert d["figures"][[f["metric"] for f in d["figures"]].index("steps_count")]["after"] == 24
    back = diff_results(_result("keras_fit_spe4"), _result("keras_fit_spe1"))["step_time"]["change_pct"]
    assert abs(back + keras_pct) < 10 and back < 20  # the other way round: no regression past a 20 % gate


def test_diff_gate_passes_spe1_vs_spe4():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "diff", str(SAMPLES / "keras_fit_spe1"),
                        str(SAMPLES / "keras_fit_spe4"), "--fail-on-regression", "20", "--format", "json"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert abs(json.loads(r.stdout)["step_time"]["change_pct"]) < 20


def _steps_of(trace):
    ctx = Context(options=Options())
    act = activity(trace, ctx)
    return act, detect_steps(trace, ctx)


def test_loop_structure_source():
    """Keras' multi-step loop calls IteratorGetNextAsOptional once per step: 4 per marker. With
    no step_num stride (numbers unknown) the loop structure gives k."""
    trace = tfadvisor.load(str(SAMPLES / "keras_fit_spe4"))
    act, steps = _steps_of(trace)
    assert _loop_counts(act, steps).tolist() == [4] * 6
    ex = executions(trace, act, replace(steps, number=np.full(steps.number.shape, -1)))
    assert (ex.k, ex.source, ex.per_row.tolist()) == (4, "loop_structure", [4] * 6)
    one = tfadvisor.load(str(SAMPLES / "keras_fit_spe1"))
    act1, steps1 = _steps_of(one)
    assert _loop_counts(act1, steps1) is None  # steps_per_execution=1: no multi-step loop


def _copy_run(name: str, tmp_path: Path, run_json: dict | str) -> Path:
    dst = tmp_path / name
    shutil.copytree(SAMPLES / name, dst)
    run_dir = next(dst.rglob("*.xplane.pb")).parent
    (run_dir / "tfadvisor_run.json").write_text(run_json if isinstance(run_json, str) else json.dumps(run_json))
    return dst


def test_run_file_source_first(tmp_path: Path):
    r = tfadvisor.analyze(str(_copy_run("keras_fit_spe4", tmp_path, {"steps": {"steps_per_execution": 4}})))
    assert (_m(r, "steps_per_execution"), _m(r, "steps_per_execution_source"), _m(r, "steps_count")) == \
        (4, "run_file", 24)
    # a value the stride contradicts: the run file wins, with a note
    r = tfadvisor.analyze(str(_copy_run("keras_fit_spe4", tmp_path / "b", {"steps_per_execution": 2})))
    assert _m(r, "steps_count") == 12 and any("stride" in n and "2 used" in n for n in r.notes)
    # an unusable value is ignored with a note; the stride decides
    r = tfadvisor.analyze(str(_copy_run("keras_fit_spe4", tmp_path / "c", '{"steps": {"steps_per_execution": "x"}}')))
    assert _m(r, "steps_per_execution_source") == "step_num_stride"
    assert any("steps_per_execution = 'x'" in n for n in r.notes)


# --------------------------------------------------------------------------- epoch ends and validation


def test_epoch_ends_are_not_gaps():
    r, m = _result("keras_fit_epochs"), _measured("keras_fit_epochs")
    assert _m(r, "steps_count") == 18
    assert "step_gaps" not in [finding_rule(f) for f in r.findings]
    gaps = r.tables["gaps"]
    labelled = gaps[~gaps["kind"].isin(["between_steps", "batch_end"])]  # batch_end: a marker's end after its work
    assert labelled["kind"].tolist() == ["validation", "validation"]
    # tfadvisor's validation intervals match the epoch-end intervals the script timed
    assert len(m["epoch_gap_ms"]) == 2
    for got, want in zip(labelled["duration_ms"], m["epoch_gap_ms"]):
        assert abs(got - want) <= 0.2 * want, (got, want)
    assert _m(r, "non_train_gaps_count") == 2
    assert abs(_m(r, "non_train_ms") - labelled["duration_ms"].sum()) < 1e-6
    assert _m(r, "gaps_count") == 0 and _m(r, "idle_between_steps_pct") < 2
    assert _m(r, "steps_wall_pct") > 90
    steps = r.tables["steps"]
    after = steps[steps["preceded_by"] != ""]
    assert after["step"].tolist() == [0, 0]  # Keras numbers batches from 0 in each epoch
    assert not after["outlier"].any()


def test_the_report_says_what_the_epoch_ends_are():
    """The text report names the intervals left out of step time instead of hiding them."""
    from rich.console import Console

    from tfadvisor.report.terminal import print_result

    console = Console(record=True, width=120)
    print_result(_result("keras_fit_epochs"), console)
    text = console.export_text()
    assert "not steps  2 validation / epoch-end interval(s) between steps" in text
    console = Console(record=True, width=120)
    print_result(_result("keras_fit_spe1"), console)
    assert "not steps" not in console.export_text()


def test_without_labels_the_epoch_ends_would_be_gaps():
    """The same trace read without the labels: the epoch ends dominate the wall time (the test above
    could fail)."""
    r = _result("keras_fit_epochs")
    gaps = r.tables["gaps"]
    wall = r.tables["steps"]["end_ps"].max() - r.tables["steps"]["start_ps"].min()
    assert gaps.loc[gaps["kind"] != "between_steps", "idle_ms"].sum() * 1e9 / wall > 0.10


def test_epoch_end_eager_ops_are_not_training_eager_time():
    """Keras's evaluation and epoch-end callbacks dispatch eager ops between epochs: they are not
    the training loop's. Over the training wall time the share matches the same model's one-epoch
    run (keras_fit_spe1, no epoch end in its window); counted over the whole window it was ~10 %."""
    r, one = _result("keras_fit_epochs"), _result("keras_fit_spe1")
    assert _m(r, "eager_pct") < 1.0 and _m(one, "eager_pct") < 1.0
    assert abs(_m(r, "eager_pct") - _m(one, "eager_pct")) < 0.5
    assert "eager_execution" not in [finding_rule(f) for f in r.findings]


# --------------------------------------------------------------------------- no markers: the loop structure

_NO_MARKERS = r'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, keras, tensorflow as tf
keras.utils.set_random_seed(0)
m = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(4)])
m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=4)
x = np.random.rand(32 * 16, 16).astype("float32")
y = np.random.randint(0, 4, 32 * 16)
m.fit(x[:128], y[:128], batch_size=32, epochs=1, verbose=0)  # builds and traces the train function
tf.profiler.experimental.start(sys.argv[1])
m.fit(x, y, batch_size=32, epochs=2, verbose=0, validation_data=(x[:64], y[:64]))
tf.profiler.experimental.stop()
'''


@pytest.fixture(scope="module")
def no_markers_spe4(tmp_path_factory) -> Path:
    """A real capture: fit with steps_per_execution=4 (2 epochs of 16 steps, validation after each)
    between profiler start and stop, no step markers."""
    logdir = tmp_path_factory.mktemp("no_markers_spe4")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    subprocess.run([sys.executable, "-c", _NO_MARKERS, str(logdir)], check=True, env=env, timeout=300,
                   capture_output=True)
    return logdir


def test_no_markers_steps_from_the_loop_structure(no_markers_spe4: Path):
    r = tfadvisor.analyze(str(no_markers_spe4))
    assert _m(r, "steps_source") == "function_cadence"  # the train function, not the evaluation one
    assert (_m(r, "executions_count"), _m(r, "steps_count")) == (8, 32)
    assert (_m(r, "steps_per_execution"), _m(r, "steps_per_execution_source")) == (4, "loop_structure")
    gaps = r.tables["gaps"]
    assert gaps["kind"].tolist().count("validation") == 1  # the first epoch's end (the second follows the last step)
    assert "step_gaps" not in [finding_rule(f) for f in r.findings]
    steps = r.tables["steps"]
    cut = steps.index[steps["preceded_by"] == "validation"][0] - 1
    # the step before the validation ends with its own call: the evaluation is not inside it
    assert steps.loc[cut, "duration_ms"] < 5 * steps["duration_ms"].median()


# --------------------------------------------------------------------------- the callback's default window

_SPE10 = r'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, keras
from tfadvisor.keras import AdvisorCallback
keras.utils.set_random_seed(0)
m = keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=10)
x = np.random.rand(16 * 100, 16).astype("float32")
y = np.random.randint(0, 4, 16 * 100)
# the defaults, as a user following the advice would; argv[2]: min_executions (the window exactly as asked)
cb = AdvisorCallback(sys.argv[1], analyze=False, **({"min_executions": int(sys.argv[2])} if sys.argv[2:] else {}))
m.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[cb])
print("RUN", cb.run_dir, flush=True)
'''


def test_default_window_under_steps_per_execution_shows_steady_state(tmp_path):
    """Issue 26: with steps_per_execution=10 the default window (steps 10-19) held one execution and the report
    withheld all advice (capture_not_steady_state). It now lasts 5 executions: steady-state advice."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    p = subprocess.run([sys.executable, "-c", _SPE10, str(tmp_path)], env=env, timeout=300, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "profiling from step 10 (50 steps = 5 executions of steps_per_execution=10)" in p.stdout
    run_dir = next(ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("RUN "))
    r = tfadvisor.analyze(run_dir)
    assert (_m(r, "executions_count"), _m(r, "steps_count"), _m(r, "steps_per_execution")) == (5, 50, 10)
    assert _m(r, "capture_steady_state") is True
    assert "capture_not_steady_state" not in [finding_rule(f) for f in r.findings]


def test_a_one_execution_window_gets_a_fix_it_does_not_already_have(tmp_path):
    """The window exactly as asked (steps 10-19, min_executions=0) holds one execution of 10 steps: the finding
    says so and its fix asks for executions, not for the steps=(10, 20) window the user already used."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    p = subprocess.run([sys.executable, "-c", _SPE10, str(tmp_path), "0"], env=env, timeout=300,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    run_dir = next(ln.split(" ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("RUN "))
    r = tfadvisor.analyze(run_dir)
    first = r.findings[0]
    assert finding_rule(first) == "capture_not_steady_state"
    assert "1 execution(s) of steps_per_execution = 10 steps (10 training steps)" in first.message
    assert "steps_per_execution=10" in first.fix and "5 x 10 steps" in first.fix
    assert "steps=(10, 20)" not in first.fix


#: figures per step beside their share of the step time, both over the steps the statistics count
PER_STEP_AND_PCT = [("tfdata_cost_ms_per_step", "tfdata_cost_pct"), ("tfdata_contention_ms_per_step",
                    "tfdata_contention_pct"), ("python_overhead_ms_per_step", "python_overhead_pct"),
                    ("numpy_feed_ms_per_step", "numpy_feed_pct")]


@pytest.mark.parametrize("name", ["keras_fit_spe1", "keras_fit_spe4", "loop_callback_spe10"])
def test_per_step_figures_are_per_training_step(name: str):
    """What an analysis says "per step" is per training step, as the step time: under steps_per_execution=k a marker
    holds k of them. Before this was so, loop_callback_spe10's recompute finding read "1.8 ms of work per step (11 %
    of step time)" in a 3.7 ms step (per marker of 10 steps: 0.18 ms per training step)."""
    r = _result(name)
    step = _m(r, "step_time_mean_ms")
    checked = 0
    for ms, pct in PER_STEP_AND_PCT:
        if _m(r, ms) is not None and _m(r, pct) is not None:
            assert 100.0 * _m(r, ms) / step == pytest.approx(_m(r, pct), rel=1e-9), (ms, pct)
            checked += 1
    assert checked >= 1
    # the pipeline's own figures over every step marker: per training step, the markers' training steps
    if _m(r, "tfdata_work_ms") is not None:
        assert _m(r, "tfdata_work_ms_per_step") * _m(r, "steps_count") == pytest.approx(_m(r, "tfdata_work_ms"),
                                                                                         rel=1e-9)


def test_report_step_section_is_per_training_step():
    """The Markdown/HTML step section and its chart count training steps and give ms per training step, as the
    header: under steps_per_execution=10 it said "5 steps." (markers), "between steps 16.3 ms per step" beside a 3.7
    ms step and a mean of 3.34 ms over every marker (the header's 3.74 over the statistics' steps)."""
    from tfadvisor.report.markdown import render_markdown
    from tfadvisor.report.stepchart import steps_svg

    r = _result("loop_callback_spe10")
    md = render_markdown(r)
    sec = md[md.index("## Step time"):]
    sec = sec[:sec.index("Outlier steps") if "Outlier steps" in sec else None]
    assert sec.split("\n")[2] == f"{_m(r, 'steps_count')} steps."
    step = _m(r, "step_time_mean_ms")
    assert f"| step time (mean) | {step:.3g} ms |" in sec
    rows = [ln.split("|") for ln in sec.split("\n") if ln.startswith("| ") and ln.count("|") == 4]
    ms = sum(float(c[2]) for c in rows if c[1].strip() not in ("category", "value") and c[2].strip()[0].isdigit())
    assert ms == pytest.approx(step, rel=0.02)  # the rows' rounding (3 significant digits)
    svg = steps_svg(r.tables["steps"])
    assert f'data-steps="{_m(r, "steps_count")}"' in svg
    # each bar per training step, its categories summing to it (their tooltip lines)
    bars = re.findall(r"<title>step \d+: ([\d.]+) ms\n([^<]*)</title>", svg)
    assert bars
    for total, lines in bars:
        parts = sum(float(x) for x in re.findall(r": ([\d.]+) ms", lines))
        assert parts == pytest.approx(float(total), rel=0.02), (total, lines)
    top = max(float(t) for t, _ in bars)
    assert top == pytest.approx(float(r.tables["steps"]["ms_per_step"].max()), rel=0.01)


@pytest.mark.parametrize("name", ["keras_fit_spe1", "keras_fit_spe4"])
def test_hosts_table_row_is_per_training_step(name: str):
    """A host's row of a run of many hosts (the step time it used, its categories) per training step, beside its
    step time and all-reduce per step: per marker it read 4x the step time on keras_fit_spe4."""
    from tfadvisor.analyses import analyze_trace
    from tfadvisor.analyses.steps import CATEGORIES
    from tfadvisor.multihost.analysis import _host_row

    ha = analyze_trace(tfadvisor.load(str(SAMPLES / name)))
    row = _host_row(ha, set(), {})
    assert row["step_time_used_ms"] == pytest.approx(ha.metrics["step_busy_mean_ms"], rel=1e-9)
    # the step's categories sum to its wall time: per training step, the step time
    parts = sum(row[f"{c}_ms"] or 0.0 for c in CATEGORIES)
    assert parts == pytest.approx(ha.metrics["step_time_mean_ms"], rel=1e-9)
    # the per-marker table of every host says how many training steps each marker holds
    from tfadvisor.multihost.analysis import _hosts_steps

    per_marker = _hosts_steps([ha])
    k = int(ha.metrics["steps_per_execution"])
    assert (per_marker["train_steps"] == k).all() and len(per_marker) == ha.metrics["executions_count"]


@pytest.mark.parametrize("name", ["loop_log_every_20", "pipe_dataset_per_epoch"])
def test_periodic_work_each_time_is_per_occurrence(name: str):
    """Work in some steps only: what it adds each time it runs is the marker's excess, all its training steps; spread
    over the steps it is per training step. The same trace read as markers of 2 steps each (same wall time, each
    marker's ms per step halved): the same ms each time and share of the step, half the ms per step. Per training
    step it read half the logging's 4 ms each time (found by review, helper 15)."""
    from test_analyses_device import _steps

    from tfadvisor.analyses import variation
    from tfadvisor.analyses.inputs import run as run_analysis

    t = tfadvisor.load(str(SAMPLES / name))
    got = {}
    for k in (1, 2):
        ctx = Context(options=Options())
        ctx.results["steps"] = _steps(t)
        tbl = ctx.results["steps"].tables.raw("steps")
        tbl["train_steps"] = tbl["train_steps"] * k
        tbl["ms_per_step"] = tbl["ms_per_step"] / k
        got[k] = {n: m.value for n, m in run_analysis(variation.analyze, t, ctx).metrics.items()}
    assert got[1]["periodic_ms_each"] > 1
    for same in ("periodic_ms_each", "periodic_pct", "periodic_traced_pct"):
        assert got[2][same] == pytest.approx(got[1][same], rel=1e-9), same
    assert got[2]["periodic_ms_per_step"] == pytest.approx(got[1]["periodic_ms_per_step"] / 2, rel=1e-9)


@pytest.mark.parametrize("name", ["keras_fit_spe4", "custom_loop_python"])
def test_report_lists_every_outlier_step(name: str):
    """The step section's figures are over the statistics' steps, its outlier table over every step, as the outliers
    are found (the first or last step can be one): 06cf70f listed only those among the statistics' steps."""
    from tfadvisor.report.markdown import render_markdown

    r = _result(name)
    steps = r.tables["steps"]
    want = min(int(steps["outlier"].astype(bool).sum()), 10)
    md = render_markdown(r)
    sec = md[md.index("## Step time"):]
    sec = sec[:sec.index("\n## ", 1)]
    assert want >= 1 and "Outlier steps" in sec
    table = sec[sec.index("Outlier steps"):]
    rows = [ln for ln in table.split("\n") if ln.startswith("| ") and not ln.startswith("| step ")]
    assert len(rows) == want, rows
