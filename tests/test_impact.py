"""One number per quantity, and impact = the time actually recoverable.

Within one report a finding's message, evidence and impact use the figure the breakdown
shows; findings that share a root figure do not each claim it; each impact is checked
against planted truth: a real capture with planted slow steps (outliers), the synthetic
straggler's wait, the multi-worker run's collective time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import ROOT

import tfadvisor
from tfadvisor.model.interconnects import LINKS
from tfadvisor.report.json_report import result_to_dict
from tfadvisor_dev.synthetic import _samples, build_xspaces

SAMPLES = ROOT / "sample_traces"


@pytest.fixture(scope="module")
def reports():
    out = {}
    for name in ("multiworker_allreduce", "synthetic_gpu_allreduce", "synthetic_multihost_straggler",
                 "input_bound_defaults_off"):
        res = tfadvisor.analyze(str(SAMPLES / name))
        out[name] = (res, result_to_dict(res))
    return out


def _explanations(doc: dict) -> list[dict]:
    """Every rule that fired: the findings, and the explanations folded into them (``also``: a finding of the same
    part of the wall time), each with its own message, evidence and impact."""
    return [x for f in doc["findings"] for x in [f, *f["also"]]]


def _finding(doc: dict, rule: str) -> dict:
    f = next((f for f in _explanations(doc) if f["rule"] == rule), None)
    assert f is not None, [x["rule"] for x in _explanations(doc)]
    return f


def test_collective_share_is_the_breakdowns(reports):
    res, doc = reports["multiworker_allreduce"]
    m = doc["metrics"]
    share = doc["summary"]["breakdown_pct"]["collective"]
    assert share == m["step_collective_pct"]
    f = _finding(doc, "allreduce_share")
    assert f.get("message").startswith(f"Collectives take {share:.0f} % of step time")
    assert f["evidence"]["step_collective_pct"] == share
    assert f"{f['impact_pct']:.0f} % of step time is not hidden" in f["message"]
    # Truth counted from the protobuf outside the tool (measured.json): the median host's CollectiveReduceV2
    # time, % of its steps (53.1 %). The tool's share is 54.2 %: 2 % apart, as the two clocks differ (the
    # steps' wall time against the markers'); 10 % is allowed.
    truth = json.loads((SAMPLES / "multiworker_allreduce" / "measured.json").read_text())
    median = truth["files"][m["median_host"]]["collective_reduce_pct_of_steps"]
    assert share == pytest.approx(median, rel=0.10)
    # The impact is the part not hidden behind compute: at most the share, and the tool finds 20 % of the
    # all-reduce overlapped; a hidden part of more than 30 % of the truth (a 1.4x error) fails.
    assert 0.7 * median <= f["impact_pct"] <= 1.05 * median
    # the bandwidth question claims no share of its own: the collectives are one finding (tfadvisor.advice.explain),
    # the bandwidth question folded into the share's
    assert _finding(doc, "allreduce_overhead")["impact_pct"] is None
    assert [x["rule"] for x in doc["findings"] if x["node"] == "collective"] == ["allreduce_share"]
    assert [a["rule"] for a in f["also"]] == ["allreduce_overhead"]


def test_allreduce_excess_is_the_planted_one(reports):
    """The generator's bookkeeping (the sample regenerated: same seed, same trace) against the AllReduce
    check's expectation from the run's own facts: ring all-reduce of param_count x 4 bytes over the link."""
    _, doc = reports["synthetic_gpu_allreduce"]
    sample = _samples()["synthetic_gpu_allreduce"]
    truth = next(iter(build_xspaces(sample.specs)[1]["hosts"].values()))
    n, params = sample.run_meta["replicas"], sample.run_meta["param_count"]
    ring_ms = 2 * (n - 1) / n * params * 4 / (LINKS[sample.run_meta["link"]].gbps * 1e9) * 1e3
    planted = 100 * (truth["allreduce_ms"] - ring_ms) / truth["step_time_ms"]
    f = _finding(doc, "allreduce_overhead")
    # measured: 1.08 against 1.07 (0.7 %); the trace's kernels differ from the bookkeeping by <1 %
    assert f["impact_pct"] == pytest.approx(planted, rel=0.05)
    assert f["impact_pct"] <= doc["summary"]["breakdown_pct"]["collective"]


def test_median_host_is_not_the_slowest_and_straggler_impact_is_the_wait(reports):
    res, doc = reports["synthetic_multihost_straggler"]
    m = doc["metrics"]
    assert m["slowest_host"] == m["straggler_host"] == "host2"
    assert m["median_host"] != m["slowest_host"]
    hosts = res.tables["hosts"].set_index("host")
    med = hosts.loc[m["median_host"]]
    assert m["straggler_ratio"] == pytest.approx(hosts.loc["host2", "work_ms"] / med["work_ms"])
    # planted: host2's kernels are slower, the others wait for it inside the all-reduce; that wait
    # (their all-reduce time beyond host2's own) is what the run would gain
    # (their all-reduce time beyond host2's own), from the generator's bookkeeping: 34.1 % of the step;
    # the tool says 35.8 % (5 % apart: it divides by the steps it uses, 1.7 % shorter than the period)
    sample = _samples()["synthetic_multihost_straggler"]
    truth = build_xspaces(sample.specs)[1]["hosts"]
    wait = truth[m["median_host"]]["allreduce_ms"] - truth["host2"]["allreduce_ms"]
    f = _finding(doc, "straggler_host")
    assert f["impact_pct"] == pytest.approx(100 * wait / truth[m["median_host"]]["step_time_ms"], rel=0.1)
    assert f"{f['impact_pct']:.0f} % of the step" in f["message"]


def test_two_hosts_median_differs_from_slowest(reports):
    res, doc = reports["multiworker_allreduce"]
    m = doc["metrics"]
    assert m["median_host"] != m["slowest_host"]
    work = res.tables["hosts"].set_index("host")["work_ms"]
    assert m["slowest_host_ratio"] == pytest.approx(work.max() / work.min())


def test_input_causes_do_not_each_claim_the_input_share(reports):
    _, doc = reports["input_bound_defaults_off"]
    m = doc["metrics"]
    main = _finding(doc, "input_bound")
    assert round(doc["summary"]["breakdown_pct"]["input"]) == round(m["input_pct"])
    # Truth from the script's clock (measured.json): time in next() over the step, 80.8 %; the tool reads
    # 77.0 % (5 % apart: the script's timer calls are inside its step); 10 % is allowed.
    truth = json.loads((SAMPLES / "input_bound_defaults_off" / "measured.json").read_text())["input_pct"]
    assert main["impact_pct"] == pytest.approx(truth, rel=0.10)
    others = [f for f in _explanations(doc) if f["rule"] != "input_bound" and not f["rule"].startswith("cost_")]
    assert len(others) >= 2  # the planted causes: no prefetch, a sequential expensive map, no cache
    for f in others:
        assert f["impact_pct"] is None or f["impact_pct"] < main["impact_pct"], f["rule"]
        if f["impact_pct"] is None:  # a cause of the input wait cites input_bound's figure
            assert f"{m['input_pct']:.0f} % of step time" in f["message"], f["rule"]
    # Prefetching overlaps input with the rest of the step: at most that rest (19.2 % by the script's clock)
    # is recovered. The tool says 23.0 %; 5 points are allowed (a 1.5x error, 12.8 or 28.8, fails).
    assert _finding(doc, "tfdata_no_prefetch")["impact_pct"] == pytest.approx(100 - truth, abs=5.0)


CAPTURE = textwrap.dedent('''
    import json, os, sys, time
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    logdir, slow = sys.argv[1], {int(k): float(v) for k, v in json.loads(sys.argv[2]).items()}
    w = tf.random.normal((64, 64))

    @tf.function
    def step(x):
        return tf.reduce_sum(tf.matmul(x, w))

    step(w)
    durations = []
    tf.profiler.experimental.start(logdir)
    for i in range(14):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            t0 = time.perf_counter()
            float(step(w))
            time.sleep(0.008 + slow.get(i, 0.0))  # a steady step, and planted slow ones
            durations.append((time.perf_counter() - t0) * 1e3)
    tf.profiler.experimental.stop()
    print(json.dumps(durations))
''')


@pytest.mark.serial  # a TensorFlow capture timed against its own clock (conftest)
def test_outlier_impact_is_their_excess_over_the_median(tmp_path):
    """A real capture with two planted slow steps (+60 ms, +25 ms): the impact is their summed
    excess over the median step, not count x (max ratio - 1) x median."""
    pytest.importorskip("tensorflow")
    slow = {5: 0.060, 9: 0.025}
    proc = subprocess.run([sys.executable, "-c", CAPTURE, str(tmp_path / "log"), json.dumps(slow)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    wall = np.array(json.loads(proc.stdout.strip().splitlines()[-1]))

    res = tfadvisor.analyze(str(tmp_path / "log"))
    tbl = res.tables["steps"]
    flagged = tbl.index[tbl["outlier"]].tolist()
    assert len(tbl) == 14 and set(slow) <= set(flagged)  # a busy machine may slow a few more
    # truth from the wall clock of the loop: the flagged steps' excess over the median step
    truth = 100 * float(np.sum(np.clip(wall[flagged] - np.median(wall), 0, None))) / float(wall.sum())
    planted = 100 * (0.060 + 0.025) * 1e3 / float(wall.sum())
    assert truth >= 0.8 * planted
    found = [f for f in res.findings if f.rule == "step_outliers"]
    # what the rule's condition reads, with the step times, where it stays silent (a rare failure on a loaded
    # machine left nothing else to go on)
    why = {k: res.metrics.get(k) for k in ("steps_count", "step_outliers_count", "step_outlier_max_ratio",
                                           "capture_steady_state", "periodic_pct", "work_varies", "one_off_pct",
                                           "step_outliers_excess_pct")}
    assert found, f"step_outliers silent: {why}; loop step ms {np.round(wall, 1).tolist()}"
    f = found[0]
    assert f.impact_pct == pytest.approx(truth, rel=0.1)
    old = len(flagged) * (res.metrics["step_outlier_max_ratio"] - 1) * res.metrics["step_time_median_ms"] * 100 / (
        14 * res.metrics["step_time_mean_ms"])
    assert old > 1.2 * truth  # what the old formula claimed (2 x 60 ms for 85 ms of excess: ~1.4x)
    # one number: the message prints the figure the impact is (the impact is rounded to 0.01 first, so print the
    # metric: 39.7498 is "39.7" in the message and 39.75 as the impact)
    assert f.impact_pct == pytest.approx(res.metrics["step_outliers_excess_pct"], abs=0.005)
    assert f"{res.metrics['step_outliers_excess_pct']:.1f} % of all step time" in f.message
