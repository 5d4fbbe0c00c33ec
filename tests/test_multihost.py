"""Multi-host analysis: per-host tasks in worker processes / on Dask, and the cross-host metrics."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tfadvisor
from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import Run, resolve
from tfadvisor.model.trace import Plane, Trace
from tfadvisor.multihost.analysis import analyze_hosts, combine_hosts
from tfadvisor.multihost.runtime import HostEvent, InFlight, run_pool
from tfadvisor.multihost.runtime import local as local_runtime
from tfadvisor.multihost.runtime.local import host_peak_bytes
from tfadvisor.multihost.scaling import scaling_report
from tfadvisor.multihost.worker import analyze_host
from tfadvisor_dev import synthetic as syn

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
RUN = "2026_01_01_00_00_00"
CROSS_HOST_RULES = ("straggler_host", "missing_host", "load_imbalance")
#: The cross-host metrics every multi-host result carries.
CROSS = ("hosts_count", "hosts_expected", "missing_hosts", "missing_hosts_count", "straggler_host",
         "straggler_ratio", "slowest_host", "slowest_host_ratio", "load_imbalance_pct", "hosts_misaligned",
         "hosts_misaligned_count", "common_steps", "median_host")


@pytest.fixture(scope="module")
def straggler_dir(tmp_path_factory) -> Path:
    """The 4-of-5-hosts straggler sample (the committed one, else freshly generated)."""
    committed = SAMPLES / "synthetic_multihost_straggler"
    if list(committed.glob(f"plugins/profile/{RUN}/*.xplane.pb")):
        return committed
    from tfadvisor_dev import synthetic

    root = tmp_path_factory.mktemp("samples")
    synthetic.write_sample("synthetic_multihost_straggler", str(root))
    return root / "synthetic_multihost_straggler"


@pytest.fixture(scope="module")
def straggler_local(straggler_dir):
    return analyze_hosts(resolve(straggler_dir), jobs=2)


@pytest.fixture(scope="module")
def many_hosts(tmp_path_factory, straggler_dir) -> Path:
    """Six host files (copies of the sample's four) in one run directory."""
    src = sorted((straggler_dir / "plugins/profile" / RUN).glob("*.xplane.pb"))
    run = tmp_path_factory.mktemp("six") / "plugins" / "profile" / RUN
    run.mkdir(parents=True)
    for i in range(6):
        shutil.copy(src[i % len(src)], run / f"worker{i}.xplane.pb")
    return run


def _cross(result) -> dict:
    return {k: result.metrics.get(k) for k in CROSS}


# ------------------------------------------------------------------------------------------------
# The straggler sample
# ------------------------------------------------------------------------------------------------
def test_straggler_and_missing_host(straggler_local):
    m = straggler_local.metrics
    assert m["straggler_host"] == "host2"
    # host2's work (its step less its wait in the all-reduce) over the median host's, from the bookkeeping
    work = {h: x["step_time_ms"] * (1 - x["idle_pct"] / 100) - x["allreduce_ms"]
            for h, x in syn.build_xspaces(syn._samples()["synthetic_multihost_straggler"].specs)[1]["hosts"].items()}
    # measured: 0.1 % apart
    assert m["straggler_ratio"] == pytest.approx(work["host2"] / float(np.median(list(work.values()))), rel=0.02)
    assert "host4" in m["missing_hosts"].split(", ")
    assert m["missing_hosts_count"] == 1
    assert m["hosts_count"] == 4 and m["hosts_expected"] == 5
    assert m["common_steps"] == 10 and m["hosts_misaligned"] is None
    assert m["load_imbalance_pct"] > 40
    assert all(m.source[k] == "multihost" for k in CROSS)
    hosts = straggler_local.tables["hosts"]
    assert list(hosts["host"]) == ["host0", "host1", "host2", "host3"]
    row = hosts.set_index("host")
    # the others wait in AllReduce for host2
    assert row.loc["host2", "allreduce_ms_per_step"] < 0.5 * row.loc["host0", "allreduce_ms_per_step"]
    assert row.loc["host2", "work_ratio"] == pytest.approx(m["straggler_ratio"])
    assert [h.host for h in straggler_local.hosts] == ["host0", "host1", "host2", "host3"]


def test_run_level_metrics_are_the_median_hosts(straggler_local):
    m = straggler_local.metrics
    med = next(h for h in straggler_local.hosts if h.host == m["median_host"])
    assert med.host != "host2"
    for k in ("step_time_mean_ms", "steps_count", "allreduce_ms_per_step", "step_device_compute_pct"):
        assert m[k] == med.metrics[k]
    times = sorted(h.metrics["step_time_mean_ms"] for h in straggler_local.hosts)
    assert m["step_time_mean_ms"] == times[(len(times) - 1) // 2]
    assert "steps" in straggler_local.tables and "hosts_steps" in straggler_local.tables
    assert len(straggler_local.tables["hosts_steps"]) == 40


def test_summary_describes_everything_loaded(straggler_dir, straggler_local):
    s = straggler_local.summary
    run = resolve(straggler_dir)
    assert s["hosts"] == ["host0", "host1", "host2", "host3"]
    assert s["files"] == list(run.files)
    assert s["file_bytes"] == sum(os.path.getsize(f) for f in run.files)
    whole = tfadvisor.load(straggler_dir)  # every host in one Trace
    assert s["events"] == whole.n_events
    assert len(s["planes"]) == len(whole.planes)
    assert s["executor"] == "processes" and s["jobs"] == 2


def test_in_process_gives_the_same(straggler_dir, straggler_local):
    inline = analyze_hosts(resolve(straggler_dir), jobs=1)
    assert inline.summary["executor"] == "in-process"
    assert dict(inline.metrics) == dict(straggler_local.metrics)
    pd.testing.assert_frame_equal(inline.tables["hosts"], straggler_local.tables["hosts"])


def test_findings_name_the_straggler(straggler_dir):
    result = tfadvisor.analyze(straggler_dir)
    ids = [f.rule for f in result.findings]
    assert "straggler_host" in ids and "missing_host" in ids
    top = next(f for f in result.findings if f.rule in CROSS_HOST_RULES)
    assert "host2" in top.message
    missing = next(f for f in result.findings if f.rule == "missing_host")
    assert "host4" in missing.message


def test_worker_returns_no_trace(straggler_dir):
    run = resolve(straggler_dir)
    payload = analyze_host(run, "host1")
    blob = pickle.dumps(payload)

    def walk(x):
        assert not isinstance(x, (Trace, Plane))
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(payload)
    assert set(payload) >= {"host", "metrics", "units", "tables", "notes", "summary", "held", "pid"}
    assert "steps" in payload["tables"]
    assert payload["summary"]["hosts"] == ["host1"]
    assert len(blob) < 2_000_000


def test_above_the_limit_hosts_send_back_only_their_own_tables(straggler_dir, tmp_path, monkeypatch):
    """Past ``ALL_TABLES_UP_TO`` hosts each worker runs the comparison analyses and sends back the per-host
    tables only, without their ``DETAIL_METRICS``; the median host and the hosts that stand out are analysed again
    in full: the run's metrics and tables are those of a run where every host was analysed in full."""
    import tfadvisor.multihost.analysis as mh
    from tfadvisor.analyses import COMPARISON, detail_metrics
    from tfadvisor.analyses.base import NO_DETAIL
    from tfadvisor.multihost.worker import HOST_TABLES

    run = resolve(straggler_dir)
    few = analyze_hosts(run, jobs=1)
    monkeypatch.setattr(mh, "ALL_TABLES_UP_TO", 2)  # the 4 hosts are now "many"
    seen = InFlight()
    many = analyze_hosts(run, jobs=2, observe=seen)
    assert dict(many.metrics) == dict(few.metrics)
    assert sorted(many.tables) == sorted(few.tables)
    for name in few.tables:
        pd.testing.assert_frame_equal(many.tables[name], few.tables[name], check_dtype=False, obj=name)
    median = many.metrics["median_host"]
    hosts = many.tables["hosts"]
    drawn = {median, *hosts.loc[hosts["stands_out"] != "", "host"]}  # analysed again in full
    assert len(drawn) == 2 and many.metrics["straggler_host"] in drawn
    few_by = {h.host: h for h in few.hosts}
    for h in many.hosts:
        if h.host in drawn:  # as in the run where every host was analysed in full
            assert dict(h.metrics) == dict(few_by[h.host].metrics) and sorted(h.tables) == sorted(few_by[h.host].tables)
        else:  # the comparison analyses only, and their figures as in the full analysis
            assert set(h.tables) <= set(HOST_TABLES) and "steps" in h.tables, (h.host, sorted(h.tables))
            left_out = {k: v for k, v in h.metrics.items() if k in detail_metrics()}  # None, with NO_DETAIL
            assert left_out and set(left_out.values()) == {None} and any(NO_DETAIL in n for n in h.notes), h.host
            assert {k: v for k, v in h.metrics.items() if k not in left_out}.items() <= few_by[h.host].metrics.items()
            assert {few_by[h.host].metrics.source[k] for k in h.metrics} == set(COMPARISON)
    assert len(next(h for h in few.hosts if h.host not in drawn).tables) > len(HOST_TABLES)
    # the drawn hosts were analysed again by the run's own workers (the pool's thread and process), after
    # every host's comparison: no worker started a second time, nothing in the calling thread alone
    started = seen.hosts("started")
    assert sorted(started[:4]) == sorted(h.host for h in few.hosts) and sorted(started[4:]) == sorted(drawn)
    assert {e.slot for e in seen.events} <= {"thread", "process"}


def test_worker_table_choice_is_checked(straggler_dir):
    with pytest.raises(ValueError, match="tables must be"):
        analyze_host(resolve(straggler_dir), "host1", tables="some")


# ------------------------------------------------------------------------------------------------
# Bounded memory: at most `jobs` hosts' events held at once
# ------------------------------------------------------------------------------------------------
def _bounded(seen: InFlight, hosts: list[str], jobs: int) -> set[int]:
    """Every host started and finished once; never more than ``jobs`` handed out at once (and every slot
    used); the intervals the workers measured (load start .. trace dropped) never overlap more than that.
    The processes that analysed the hosts."""
    assert sorted(seen.hosts("started")) == sorted(hosts) == sorted(seen.hosts("finished"))
    done = [e for e in seen.events if e.kind == "finished"]
    assert all(e.held is not None and e.held[0] <= e.held[1] for e in done)
    assert seen.max_in_flight == jobs
    assert 1 <= seen.max_held <= jobs
    return {e.pid for e in done}


@pytest.mark.parametrize("jobs", [2, 3])
def test_at_most_jobs_hosts_in_flight(many_hosts, jobs):
    seen = InFlight()
    run = resolve(str(many_hosts))
    result = analyze_hosts(run, jobs=jobs, observe=seen)
    pids = _bounded(seen, run.hosts, jobs)
    # one host at a time in this process's thread, the others in (at most jobs - 1) worker processes
    assert os.getpid() in pids and 2 <= len(pids) <= jobs
    assert {e.slot for e in seen.events} == {"thread", "process"}
    assert result.metrics["hosts_count"] == 6


def test_pool_keeps_jobs_in_flight(many_hosts):
    """The process-only pool (no in-process slot) honours the bound too."""
    seen = InFlight()
    run = resolve(str(many_hosts))
    got = dict(run_pool(run, run.hosts, None, 2, local_slot=False, observe=seen))
    assert sorted(got) == sorted(run.hosts)
    pids = _bounded(seen, run.hosts, 2)
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_in_flight_peaks_count_overlaps():
    """The observer's peaks: touching intervals do not overlap, nested ones do."""
    seen = InFlight()
    for i, held in enumerate([(0.0, 2.0), (1.0, 3.0), (2.0, 4.0), (10.0, 15.0), (11.0, 12.0), (11.5, 13.0)]):
        seen(HostEvent("started", f"h{i}", "process", 1 + i % 3))
        seen(HostEvent("finished", f"h{i}", "process", 0, held, 1))
    assert seen.max_held == 3 and seen.max_in_flight == 3
    assert InFlight().max_held == 0 == InFlight().max_in_flight


def test_bad_host_file_is_a_trace_error(many_hosts, tmp_path):
    run_dir = tmp_path / "plugins" / "profile" / RUN
    shutil.copytree(many_hosts, run_dir)
    bad = run_dir / "worker3.xplane.pb"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(TraceError) as err:
        analyze_hosts(resolve(str(run_dir)), jobs=2)
    assert err.value.path.endswith("worker3.xplane.pb")
    assert "truncated" in err.value.problem


def test_unguarded_main_script(straggler_dir, tmp_path):
    """Worker processes do not re-run the caller's __main__ (a script without the __name__ guard)."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import tfadvisor\n"
        "print('START')\n"
        f"r = tfadvisor.analyze({str(straggler_dir)!r}, jobs=2)\n"
        "print('STRAGGLER', r.metrics['straggler_host'])\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("START") == 1
    assert "STRAGGLER host2" in out.stdout


@pytest.mark.parametrize("setting", ["plain", "threaded", "framework"])
def test_workers_forked_only_where_safe(straggler_dir, straggler_local, tmp_path, setting):
    """A process with no other thread and no framework loaded forks its worker (it starts in milliseconds,
    everything imported); with a thread of its own running, or TensorFlow / JAX / torch loaded, it spawns
    one. Either way the figures are those of the analysis in one process."""
    setup = {"plain": "",
             "threaded": "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
             "framework": "sys.modules['torch'] = types.ModuleType('torch')\n"}[setting]
    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys, threading, time, types\n"
        "import tfadvisor\n"
        "from tfadvisor.multihost.runtime.spawn import start_method\n"
        + setup +
        "print('METHOD', start_method())\n"
        f"r = tfadvisor.analyze({str(straggler_dir)!r}, jobs=2)\n"
        "print('WORKERS', r.summary['worker_processes'])\n"
        "print('METRICS', json.dumps(dict(r.metrics), default=str, sort_keys=True))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert lines["METHOD"] == ("fork" if setting == "plain" else "spawn")
    assert lines["WORKERS"] == "1"
    want = json.loads(json.dumps(dict(straggler_local.metrics), default=str, sort_keys=True))
    assert json.loads(lines["METRICS"]) == want


# ------------------------------------------------------------------------------------------------
# Dask
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        yield cluster


def test_dask_gives_the_same_as_local(straggler_dir, straggler_local, dask_cluster):
    seen = InFlight()
    run = resolve(straggler_dir)
    res = analyze_hosts(run, dask=dask_cluster.scheduler_address, observe=seen)
    assert res.summary["executor"] == "dask"
    assert dict(res.metrics) == dict(straggler_local.metrics)
    assert res.metrics.units == straggler_local.metrics.units
    pd.testing.assert_frame_equal(res.tables["hosts"], straggler_local.tables["hosts"])
    pd.testing.assert_frame_equal(res.tables["hosts_steps"], straggler_local.tables["hosts_steps"])
    assert [h.host for h in res.hosts] == [h.host for h in straggler_local.hosts]
    for a, b in zip(res.hosts, straggler_local.hosts):
        assert dict(a.metrics) == dict(b.metrics)
    s = {k: v for k, v in res.summary.items() if k not in ("executor", "scheduler", "jobs", "worker_processes")}
    t = {k: v for k, v in straggler_local.summary.items() if k not in ("executor", "scheduler", "jobs",
                                                                        "worker_processes")}
    assert s == t
    assert _bounded(seen, run.hosts, 2) and {e.slot for e in seen.events} == {"dask"}  # 2 workers x 1 thread


def test_dask_bad_address_is_a_trace_error(straggler_dir, monkeypatch):
    pytest.importorskip("distributed")
    import tfadvisor.multihost.runtime.dask as rd

    monkeypatch.setattr(rd, "CONNECT_TIMEOUT_S", 2)  # nothing listens there: the wait is all this test would cost
    with pytest.raises(TraceError) as err:
        analyze_hosts(resolve(straggler_dir), dask="tcp://127.0.0.1:1")
    assert "Dask scheduler" in err.value.problem


# ------------------------------------------------------------------------------------------------
# The real two-worker capture (both files say hostname "vm": hosts are told apart by file name)
# ------------------------------------------------------------------------------------------------
def test_multiworker_sample_local_and_dask(dask_cluster):
    path = SAMPLES / "multiworker_allreduce"
    local = tfadvisor.analyze(path, jobs=2)
    dask = tfadvisor.analyze(path, dask=dask_cluster.scheduler_address)
    for res in (local, dask):
        m = res.metrics
        assert [h.host for h in res.hosts] == ["worker0", "worker1"]
        assert m["hosts_count"] == 2 and m["common_steps"] == 8 and m["steps_count"] == 8
        assert m["hosts_expected"] is None and m["missing_hosts"] is None
        assert m["hosts_misaligned"] is None
        assert m["straggler_host"] is None  # both wait for each other on the same two cores
        assert "missing_host" not in [f.rule for f in res.findings]
    assert dict(local.metrics) == dict(dask.metrics)
    default = tfadvisor.analyze(path)  # small files: analysed in-process without --jobs
    assert default.summary["executor"] == "in-process"
    assert dict(default.metrics) == dict(local.metrics)


# ------------------------------------------------------------------------------------------------
# Combining (hand-made per-host results)
# ------------------------------------------------------------------------------------------------
def _payload(host: str, steps: list[int], compute: float, allreduce: float | None, inp: float = 1.0) -> dict:
    n = len(steps)
    tbl = pd.DataFrame({
        "step": steps, "duration_ms": [compute + inp + (allreduce or 0)] * n, "in_stats": [True] * n,
        "device_compute_ms": [compute] * n, "input_ms": [inp] * n, "host_compute_ms": [0.0] * n,
        "kernel_launch_ms": [0.0] * n, "collective_ms": [allreduce or 0.0] * n, "idle_ms": [0.0] * n,
        "other_ms": [0.0] * n,
    })
    metrics = {"steps_count": n, "step_time_mean_ms": compute + inp + (allreduce or 0),
               "step_time_median_ms": compute + inp + (allreduce or 0), "allreduce_present": allreduce is not None,
               "allreduce_ms_per_step": allreduce}
    return {"host": host, "metrics": metrics, "units": {}, "docs": {}, "source": {}, "tables": {"steps": tbl},
            "notes": [], "summary": {"hosts": [host], "events": 10, "file_bytes": 100, "planes": []},
            "options": {}}


def _run(hosts: list[str]) -> Run:
    return Run(name=RUN, directory="/nowhere", files=tuple(f"/nowhere/{h}.xplane.pb" for h in hosts))


def test_combine_misaligned_and_port_suffixed_names():
    hosts = ["worker0_6009", "worker1_6009", "worker2_6009"]
    payloads = [_payload(hosts[0], list(range(10, 20)), 50, 10), _payload(hosts[1], list(range(10, 20)), 50, 10),
                _payload(hosts[2], list(range(40, 50)), 50, 10)]
    res = combine_hosts(_run(hosts), payloads,
                        metadata={"hosts": 4, "host_names": ["worker0", "worker1", "worker2", "worker3"]})
    m = res.metrics
    assert m["missing_hosts"] == "worker3" and m["missing_hosts_count"] == 1 and m["hosts_expected"] == 4
    assert m["hosts_misaligned"] == "worker2_6009" and m["hosts_misaligned_count"] == 1
    assert m["common_steps"] == 0
    assert any("do not line up" in n for n in res.notes)


def test_combine_straggler_needs_others_waiting():
    hosts = ["a", "b", "c"]
    steps = list(range(8))
    # c works 1.5x but also waits the longest: the others do not wait for it
    res = combine_hosts(_run(hosts), [_payload("a", steps, 40, 5), _payload("b", steps, 40, 5),
                                      _payload("c", steps, 60, 20)])
    m = res.metrics
    assert m["straggler_host"] is None and m["straggler_ratio"] is None
    assert m["slowest_host"] == "c" and m["slowest_host_ratio"] == pytest.approx(61 / 41)
    # the usual picture: c works longer, a and b wait for it
    res = combine_hosts(_run(hosts), [_payload("a", steps, 40, 25), _payload("b", steps, 40, 25),
                                      _payload("c", steps, 60, 5)])
    m = res.metrics
    assert m["straggler_host"] == "c" and m["straggler_ratio"] == pytest.approx(61 / 41)
    assert m["load_imbalance_pct"] == pytest.approx(50.0)
    assert m["hosts_expected"] is None and m["missing_hosts"] is None and m["missing_hosts_count"] is None
    # no AllReduce at all: the work ratio alone decides
    res = combine_hosts(_run(hosts), [_payload("a", steps, 40, None), _payload("b", steps, 40, None),
                                      _payload("c", steps, 60, None)])
    assert res.metrics["straggler_host"] == "c"
    # balanced: no straggler, the ratio is still reported
    res = combine_hosts(_run(hosts), [_payload("a", steps, 40, 5), _payload("b", steps, 41, 5),
                                      _payload("c", steps, 42, 5)])
    assert res.metrics["straggler_host"] is None and 1.0 < res.metrics["straggler_ratio"] < 1.1


def test_combine_uses_common_steps_only():
    hosts = ["a", "b"]
    pa = _payload("a", list(range(0, 10)), 40, 5)
    pb = _payload("b", list(range(2, 12)), 40, 5)
    pa["tables"]["steps"].loc[0:1, "device_compute_ms"] = 400.0  # steps 0-1: only on a, slow (warm-up)
    res = combine_hosts(_run(hosts), [pa, pb])
    assert res.metrics["common_steps"] == 8 and res.metrics["hosts_misaligned"] is None
    rows = res.tables["hosts"].set_index("host")
    assert rows.loc["a", "device_compute_ms"] == pytest.approx(40.0)
    assert rows.loc["a", "steps_used"] == 8


# ------------------------------------------------------------------------------------------------
# Scaling
# ------------------------------------------------------------------------------------------------
SCALING_TRUTH: list[dict] = []  # the generator's bookkeeping per run, filled by scaling_runs


@pytest.fixture(scope="module")
def scaling_runs(tmp_path_factory) -> list[Path]:
    """The same model on 2 and 4 replicas (one GPU per host), 64 examples per replica; the
    all-reduce grows from 4 to 12 ms per step, the compute stays (the step grows from 40 to 48 ms)."""

    out = []
    SCALING_TRUTH.clear()
    for n, ar in ((2, 4.0), (4, 12.0)):
        logdir = tmp_path_factory.mktemp(f"scale{n}")
        specs = [syn.SyntheticSpec(steps=8, ops_per_step=40, step_time_ms=36.0 + ar, host=f"w{i}", allreduce_ms=ar,
                                   strategy="MultiWorkerMirroredStrategy", seed=3 + i, batch_size=64 * n)
                 for i in range(n)]
        _, truth = syn.write_run(str(logdir), specs, run_meta={"hosts": n, "replicas": n, "batch_size": 64 * n})
        SCALING_TRUTH.append(truth["hosts"])
        out.append(logdir)
    return out


def _planted(i: int) -> tuple[float, float]:
    """Run i's step period and all-reduce ms, host means of the generator's bookkeeping."""
    hosts = SCALING_TRUTH[i].values()
    return float(np.mean([h["step_time_ms"] for h in hosts])), float(np.mean([h["allreduce_ms"] for h in hosts]))


def test_scaling_report(scaling_runs):
    rep = scaling_report([str(p) for p in scaling_runs], jobs=1)
    a, b = rep["runs"]
    assert rep["baseline_replicas"] == 2 and a["baseline"] and not b["baseline"]
    assert (a["replicas"], b["replicas"]) == (2, 4) and (a["global_batch"], b["global_batch"]) == (128, 256)
    (period_a, ar_a), (period_b, ar_b) = _planted(0), _planted(1)
    assert (period_a, period_b) == pytest.approx((40.0, 48.0), rel=0.01)  # the planted 40 -> 48 ms
    # the step time is the wall clock per step (start to next start): the generator's period
    assert a["step_time_ms"] == pytest.approx(period_a, rel=0.01)
    assert b["step_time_ms"] == pytest.approx(period_b, rel=0.01)
    # measured: 0.78 % and 0.46 % apart (the first and last steps' edges)
    assert a["allreduce_ms_per_step"] == pytest.approx(ar_a, rel=0.02)
    assert b["allreduce_ms_per_step"] == pytest.approx(ar_b, rel=0.02)
    assert a["examples_per_s"] == pytest.approx(128 / (period_a / 1000), rel=0.01)
    assert b["examples_per_s"] == pytest.approx(256 / (period_b / 1000), rel=0.01)
    assert b["examples_per_s_per_replica"] == pytest.approx(256 / (period_b / 1000) / 4, rel=0.01)
    # weak scaling, 64 examples per replica: efficiency = the 2-replica step / the 4-replica step
    assert a["scaling_efficiency_pct"] == pytest.approx(100.0)
    assert b["scaling_efficiency_pct"] == pytest.approx(100 * period_a / period_b, rel=0.01)
    # the lost points add up to 100 - efficiency, and AllReduce's planted 8 ms is (nearly) all of it
    assert sum(b["loss_pct"].values()) == pytest.approx(100 - b["scaling_efficiency_pct"])
    # measured: 0.30 % and 0.18 % apart
    assert b["loss_ms"]["allreduce"] == pytest.approx(ar_b - ar_a, rel=0.03)
    assert b["loss_ms_per_step"] == pytest.approx(period_b - period_a, rel=0.03)


def test_scaling_flags_override_metadata(scaling_runs):
    rep = scaling_report([str(p) for p in scaling_runs], replicas="1,2", batch_sizes="100", jobs=1)
    a, b = rep["runs"]
    assert (a["replicas"], b["replicas"]) == (1, 2) and a["global_batch"] == b["global_batch"] == 100
    # strong scaling: the ideal step halves
    assert b["ideal_step_time_ms"] == pytest.approx(a["step_time_ms"] / 2)


def test_scaling_bad_input(scaling_runs, tmp_path):
    with pytest.raises(TraceError, match="two or more"):
        scaling_report([str(scaling_runs[0])])
    with pytest.raises(TraceError, match="one value per run"):
        scaling_report([str(p) for p in scaling_runs], replicas="2,4,8")
    with pytest.raises(TraceError, match="whole numbers"):
        scaling_report([str(p) for p in scaling_runs], replicas="two,four")
    bare = tmp_path / "bare"
    shutil.copytree(scaling_runs[0], bare)
    for f in bare.rglob("tfadvisor_run.json"):
        f.unlink()
    with pytest.raises(TraceError, match="replica count unknown"):
        scaling_report([str(bare), str(scaling_runs[1])], jobs=1)
    with pytest.raises(TraceError, match="batch size unknown"):
        scaling_report([str(bare), str(scaling_runs[1])], replicas="2,4", jobs=1)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               COLUMNS="200")
    return subprocess.run([sys.executable, "-m", "tfadvisor", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_scaling_cli(scaling_runs):
    paths = [str(p) for p in scaling_runs]
    out = _cli("scaling", *paths, "--format", "json", "--jobs", "1")
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert [r["replicas"] for r in rep["runs"]] == [2, 4]
    assert np.isfinite(rep["runs"][1]["scaling_efficiency_pct"])
    from jsonschema import Draft202012Validator

    from tfadvisor.report.schema import shipped

    errors = [e.message for e in Draft202012Validator(json.loads(shipped("scaling"))).iter_errors(rep)]
    assert not errors, errors[:5]  # the JSON contract (tfadvisor schema scaling)
    out = _cli("scaling", *paths)
    assert out.returncode == 0, out.stderr
    assert "efficiency" in out.stdout and "AllReduce" in out.stdout
    out = _cli("scaling", paths[0])
    assert out.returncode == 2
    assert out.stderr.startswith("tfadvisor: ") and len(out.stderr.strip().splitlines()) == 1


def test_analyze_cli_multihost(straggler_dir):
    out = _cli("analyze", str(straggler_dir), "--jobs", "2", "--format", "json", "-q")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["metrics"]["straggler_host"] == "host2"
    assert [h["host"] for h in doc["hosts"]] == ["host0", "host1", "host2", "host3"]


@pytest.mark.parametrize("ahead_below", [local_runtime.QUEUE_AHEAD_BELOW_BYTES, 0])
def test_a_worker_process_has_its_next_small_host_queued_behind_the_one_it_analyses(many_hosts, monkeypatch,
                                                                                    ahead_below):
    """Small hosts: the worker process is handed its next host while it analyses one (two of its hosts
    outstanding in the pool at once), and that host is reported started only once the one before it is back:
    the observer never sees more than ``jobs`` in flight, nor the worker process two at once. With every host
    counted as big (``ahead_below`` 0) a worker process has one host at a time, as before. Same results."""
    from concurrent.futures import ProcessPoolExecutor

    monkeypatch.setattr(local_runtime, "QUEUE_AHEAD_BELOW_BYTES", ahead_below)
    run = resolve(str(many_hosts))
    sizes = {h: os.path.getsize(f) for h, f in zip(run.hosts, run.files)}
    outstanding: list[int] = []  # at each hand-out to the pool: its hosts not yet back, this one included
    futures: list = []
    submit = ProcessPoolExecutor.submit

    def counted(self, *args, **kwargs):
        fut = submit(self, *args, **kwargs)
        futures.append(fut)
        outstanding.append(sum(not f.done() for f in futures))
        return fut

    monkeypatch.setattr(ProcessPoolExecutor, "submit", counted)
    seen = InFlight()
    got = dict(run_pool(run, run.hosts, None, 2, observe=seen, sizes=sizes, memory=None))
    assert sorted(got) == sorted(run.hosts) and all("metrics" in p for p in got.values())
    _bounded(seen, run.hosts, 2)
    now = peak = 0  # the worker process' hosts in flight, as reported
    for e in seen.events:
        if e.slot == "process":
            now += 1 if e.kind == "started" else -1
            peak = max(peak, now)
    assert peak == 1
    assert max(outstanding) == (2 if ahead_below else 1), outstanding
    if ahead_below:
        assert all(s < ahead_below for s in sizes.values())


def test_hosts_too_big_to_fit_beside_each_other_wait(many_hosts):
    """With the memory counted for each host (2.2 bytes per byte of file + 150 MB) larger than the budget for
    two, the pool runs one host at a time and says so; with room for two it runs two: the same results."""
    run = resolve(str(many_hosts))
    sizes = {h: os.path.getsize(f) for h, f in zip(run.hosts, run.files)}
    one = max(host_peak_bytes(s) for s in sizes.values())
    results = {}
    for memory, peak in ((2 * one + 1, 2), (one + 1, 1)):
        seen, info = InFlight(), {}
        got = dict(run_pool(run, run.hosts, None, 2, observe=seen, sizes=sizes, memory=memory, info=info))
        assert sorted(got) == sorted(run.hosts) == sorted(seen.hosts("finished"))
        assert seen.max_in_flight == peak  # the executor's count of hosts handed out at once
        assert seen.max_held <= peak  # the workers' own load-to-drop intervals
        # each host after the first waited with a slot free (one held back at a time)
        assert info.get("waited_for_memory", 0) == (0 if peak == 2 else len(run.hosts) - 1)
        results[peak] = {h: p["metrics"] for h, p in got.items()}
    assert results[1] == results[2]


def test_memory_wait_is_a_note_of_the_run(many_hosts, monkeypatch):
    """Through analyze: the note and the summary's count, when the memory available holds one host at a time."""
    import tfadvisor.multihost.runtime as rt

    run = resolve(str(many_hosts))
    one = max(host_peak_bytes(os.path.getsize(f)) for f in run.files)
    monkeypatch.setattr(rt, "available_memory", lambda: one + 1)  # the machine's memory, as small as one host
    res = analyze_hosts(run, jobs=2)
    assert res.summary["waited_for_memory"] == len(run.hosts) - 1
    assert any("waited for memory" in n for n in res.notes)
    monkeypatch.undo()
    free = analyze_hosts(run, jobs=2)  # this machine's own memory: room for both
    assert "waited_for_memory" not in free.summary
    assert res.metrics == free.metrics
