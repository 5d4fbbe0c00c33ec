"""Many hosts (SYNTHETIC runs above the reports' host-listing limit): stragglers at the host and device
level with the wait they cause, checked against the generator's bookkeeping, and reports that summarise
the hosts instead of listing them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tfadvisor
from tfadvisor.report import HOSTS_LISTED
from tfadvisor_dev import synthetic as syn

RUN = syn.RUN_NAME
HOSTS = 40  # above HOSTS_LISTED (16): the summarised reports
SLOW_HOST = "host013"
GPU_HOSTS = 24
SLOW_GPU_HOST, SLOW_GPU, GPU_FACTOR = "host007", 3, 1.4


def _specs(n: int, **per_host) -> list[syn.SyntheticSpec]:
    return [syn.SyntheticSpec(steps=8, num_gpus=4, allreduce_ms=20.0, host=f"host{i:03d}", seed=3, ops_per_step=24,
                              step_time_ms=80.0, **per_host.get(f"host{i:03d}", {})) for i in range(n)]


@pytest.fixture(scope="module")
def pod(tmp_path_factory) -> tuple[Path, dict]:
    """40 hosts x 4 GPUs, one host 1.35x slower (SYNTHETIC)."""
    root = tmp_path_factory.mktemp("pod")
    _, truth = syn.write_run(str(root), _specs(HOSTS, **{SLOW_HOST: {"slowdown": 1.35}}), run_meta={"hosts": HOSTS})
    return root, truth


@pytest.fixture(scope="module")
def pod_result(pod):
    return tfadvisor.analyze(str(pod[0]), jobs=2)


@pytest.fixture(scope="module")
def pod_gpu(tmp_path_factory) -> tuple[Path, dict]:
    """24 hosts x 4 GPUs, one GPU of one host 1.4x slower (SYNTHETIC)."""
    root = tmp_path_factory.mktemp("pod_gpu")
    slow = {SLOW_GPU_HOST: {"gpu_slowdown": ((SLOW_GPU, GPU_FACTOR),)}}
    _, truth = syn.write_run(str(root), _specs(GPU_HOSTS, **slow), run_meta={"hosts": GPU_HOSTS})
    return root, truth


def _cli(*args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", "-q", *args], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


# ------------------------------------------------------------------------------------------------
# Host straggler: named, and what it costs the others
# ------------------------------------------------------------------------------------------------
def test_the_straggler_and_the_wait_it_causes_match_the_bookkeeping(pod, pod_result):
    _, truth = pod
    m = pod_result.metrics
    assert m["straggler_host"] == SLOW_HOST
    hosts = truth["hosts"]
    # the others' all-reduce kernels last until the straggler arrives: their time beyond its own
    expect = float(np.median([t["allreduce_ms"] for h, t in hosts.items() if h != SLOW_HOST])
                   - hosts[SLOW_HOST]["allreduce_ms"])
    # measured: 0.7 % off (the wait also counts idle between steps, alike on every host); 5 % fails a 1.5x error
    assert m["straggler_wait_ms"] == pytest.approx(expect, rel=0.05)
    step = float(np.median([t["step_time_ms"] for t in hosts.values()]))
    # measured: 2.1 % off (the median host's step over the steps every host has, not every step)
    assert m["straggler_wait_pct"] == pytest.approx(100 * expect / step, rel=0.05)
    finding = next(f for f in pod_result.findings if f.rule == "straggler_host")
    assert f"{m['straggler_wait_ms']:.1f} ms per step" in finding.message


def test_only_the_straggler_stands_out(pod_result):
    hosts = pod_result.tables["hosts"]
    out = hosts[hosts["stands_out"] != ""]
    assert list(out["host"]) == [SLOW_HOST]
    assert pod_result.metrics["hosts_standing_out_count"] == 1
    assert "straggler" in out["stands_out"].iloc[0]


def test_distribution_is_the_hosts_tables(pod, pod_result):
    """Each row of hosts_distribution summarises its column of the hosts table; the step time is the
    bookkeeping's within 2 % (measured 0.03 %)."""
    _, truth = pod
    hosts, dist = pod_result.tables["hosts"], pod_result.tables["hosts_distribution"].set_index("column")
    for col, r in dist.iterrows():
        v = hosts[col].astype(float).to_numpy()
        assert r["median"] == pytest.approx(np.median(v)) and r["max"] == pytest.approx(v.max()), col
        assert r["hosts"] == HOSTS
    step = float(np.median([t["step_time_ms"] for t in truth["hosts"].values()]))
    assert dist.loc["step_time_mean_ms", "median"] == pytest.approx(step, rel=0.02)


# ------------------------------------------------------------------------------------------------
# Reports that scale
# ------------------------------------------------------------------------------------------------
def test_terminal_summarises_the_hosts(pod):
    out = _cli(str(pod[0]), "--jobs", "2")
    head = out.split("\nFindings")[0]
    assert len(head.splitlines()) <= 60, head
    named = set(re.findall(r"host\d{3}", head))
    # the straggler, the median host (whose charts the run's are) and the first few names of the summary line
    assert SLOW_HOST in named and len(named - {f"host{i:03d}" for i in range(6)}) <= 3, named
    hosts_part = head.split("\nHosts")[1]
    assert f"{HOSTS}" in hosts_part.splitlines()[0] and "1 of 40 hosts stand out" in hosts_part
    assert "wait" in out.split("straggler_host ·")[1].split("Evidence")[0]
    # the whole report is one screen: findings brief, evidence, fixes and notes behind --full
    assert len(out.splitlines()) <= 60, out
    assert "Fix:" not in out and "--full" in out.splitlines()[-1] + out.splitlines()[-2]
    full = _cli(str(pod[0]), "--jobs", "2", "--full")
    assert full.count("   Fix:") == len(re.findall(r"^\d+\. ", out, flags=re.M)) and "Notes:" in full


def test_markdown_and_json_at_scale(pod, tmp_path):
    md = _cli(str(pod[0]), "--jobs", "2", "-f", "markdown")
    section = md.split("## Hosts")[1].split("\n## ")[0]
    assert "| figure |" in section and SLOW_HOST in section
    assert len(re.findall(r"`host\d{3}`", section)) <= HOSTS_LISTED
    doc = json.loads(_cli(str(pod[0]), "--jobs", "2", "-f", "json"))
    assert len(doc["hosts"]) == HOSTS  # JSON keeps every host


def test_html_hosts_at_a_glance_in_chromium(pod, pod_result, tmp_path):
    """At 1280 px the hosts plot is one screen high, its outlier dots name the straggler, and the full
    host table is one click away (a closed <details> with every host)."""
    from test_html_dom import probe
    from test_report_html import _chromium

    from tfadvisor.report.html import write_html

    chromium = _chromium()
    page = tmp_path / "pod.html"
    write_html(pod_result, str(page))
    js = """
    var svg = document.getElementById('plot-hosts');
    var r = svg.getBoundingClientRect();
    var red = Array.prototype.map.call(svg.querySelectorAll('circle.stands-out'),
                                       function (c) { return c.textContent; });
    var det = svg.closest('figure').querySelector('details.folded');
    return {height: r.height, width: r.width, dots: svg.querySelectorAll('circle').length, red: red,
            open: det ? det.open : null, rows: det ? det.querySelectorAll('tbody tr').length : 0,
            labels: Array.prototype.map.call(svg.querySelectorAll('text'), function (t) { return t.textContent; })};
    """
    out, _ = probe(chromium, page, js, tmp_path, width=1280)
    assert out["height"] < 600 and out["width"] <= 1280, out
    figures = len(pod_result.tables["hosts_distribution"])
    assert out["dots"] == HOSTS * figures
    assert out["red"] and all(t.startswith(SLOW_HOST) for t in out["red"]), out["red"]
    assert SLOW_HOST in out["labels"]
    assert out["open"] is False and out["rows"] == HOSTS


# ------------------------------------------------------------------------------------------------
# Device straggler: one GPU of one host
# ------------------------------------------------------------------------------------------------
def _gpu_truth(truth: dict, host: str) -> tuple[float, float]:
    """(ratio of the slow GPU's kernel time to the host's median GPU, the others' wait for it per step)."""
    t = truth["hosts"][host]
    k, ar = np.array(t["gpu_kernel_ms_per_step"]), np.array(t["gpu_allreduce_ms"])
    others = np.delete(np.arange(k.size), SLOW_GPU)
    return float(k[SLOW_GPU] / np.median(k)), float(np.median(ar[others]) - ar[SLOW_GPU])


def test_device_straggler_in_one_host_file(pod_gpu):
    root, truth = pod_gpu
    r = tfadvisor.analyze(str(root / "plugins/profile" / RUN / f"{SLOW_GPU_HOST}.xplane.pb"))
    m = r.metrics
    ratio, wait = _gpu_truth(truth, SLOW_GPU_HOST)
    assert m["device_straggler"] == f"GPU:{SLOW_GPU}"
    # measured: ratio 0.03 % off (kernel time vs the union of kernel intervals), wait 0.1 % off
    assert m["device_straggler_ratio"] == pytest.approx(ratio, rel=0.03)
    assert m["device_straggler_wait_ms"] == pytest.approx(wait, rel=0.05)
    f = next(f for f in r.findings if f.rule == "device_straggler")
    assert f"GPU:{SLOW_GPU}" in f.message and "wait" in f.message


def test_device_straggler_across_hosts(pod_gpu):
    root, truth = pod_gpu
    r = tfadvisor.analyze(str(root), jobs=2)
    m = r.metrics
    ratio, wait = _gpu_truth(truth, SLOW_GPU_HOST)
    assert m["device_straggler_host"] == SLOW_GPU_HOST and m["device_straggler"] == f"GPU:{SLOW_GPU}"
    assert m["device_straggler_wait_ms"] == pytest.approx(wait, rel=0.05)  # measured 0.1 % off
    f = next(f for f in r.findings if f.rule == "device_straggler")
    assert SLOW_GPU_HOST in f.message
    hosts = r.tables["hosts"].set_index("host")
    assert f"GPU:{SLOW_GPU}" in hosts.loc[SLOW_GPU_HOST, "stands_out"]
    # the host with the slow GPU is the one the others wait for; the device finding names the cause instead
    assert m["straggler_host"] == SLOW_GPU_HOST
    assert not any(f.rule == "straggler_host" for f in r.findings)


def test_no_device_straggler_on_alike_devices(pod_result):
    assert pod_result.metrics["device_straggler"] is None
    assert not any(f.rule == "device_straggler" for f in pod_result.findings)


# ------------------------------------------------------------------------------------------------
# Horovod as users run it (SYNTHETIC: HorovodAllreduce ops per gradient tensor, fused into one NCCL
# all-reduce launched by Horovod's background thread)
# ------------------------------------------------------------------------------------------------
def _horovod_run(root: Path, hosts: int, allreduce_ms: float, **meta) -> dict:
    specs = [syn.SyntheticSpec(steps=8, num_gpus=8, allreduce_ms=allreduce_ms, host=f"worker{i:02d}", seed=7,
                               ops_per_step=16, strategy="Horovod", step_time_ms=80.0 + allreduce_ms)
             for i in range(hosts)]
    _, truth = syn.write_run(str(root), specs, run_meta={"hosts": hosts, "replicas": 8 * hosts,
                                                         "batch_size": 64 * 8 * hosts, **meta})
    return truth


def test_horovod_allreduce_is_measured_and_checked_against_the_formula(tmp_path):
    truth = _horovod_run(tmp_path, 2, 30.0, param_count=25_000_000, bandwidth_gbps=12.0)
    r = tfadvisor.analyze(str(tmp_path), jobs=1)
    m = r.metrics
    ar = float(np.median([t["allreduce_ms"] for t in truth["hosts"].values()]))
    assert m["allreduce_ms_per_step"] == pytest.approx(ar, rel=0.03)  # measured 0.2 % off
    # the formula: 25 M float32 gradients / 12 GB/s, and x 2(N-1)/N for a ring over 16 replicas
    assert m["allreduce_expected_ms"] == pytest.approx(25e6 * 4 / 12e9 * 1e3)
    f = next(f for f in r.findings if f.rule == "allreduce_overhead")
    assert "25,000,000" in f.message and "16 replicas" in f.message


def test_scaling_8_64_256_gpus_matches_the_bookkeeping(tmp_path):
    """Throughput per GPU against the 8-GPU run, as seed-style benchmarks report it; the generator's step
    times give the truth (measured: within 0.03 % at 64 and 256 GPUs; 2 % fails a 1.5x error in the loss)."""
    from tfadvisor.multihost.scaling import scaling_report

    runs, truth = [], {}
    for hosts, ar in ((1, 10.0), (8, 18.0), (32, 24.0)):
        root = tmp_path / f"gpus{8 * hosts}"
        tr = _horovod_run(root, hosts, ar)
        runs.append(str(root))
        truth[str(root)] = (8 * hosts, float(np.median([t["step_time_ms"] for t in tr["hosts"].values()])))
    rep = scaling_report(runs, jobs=2)
    n0, s0 = truth[runs[0]]
    effs = []
    for row in rep["runs"]:
        n, s = truth[row["run"]]
        expect = 100.0 * (n / s) / (n / n0 * n0 / s0)  # examples per second per GPU against the 8-GPU run
        assert row["replicas"] == n and row["hosts"] == n // 8
        assert row["scaling_efficiency_pct"] == pytest.approx(expect, rel=0.02), (n, row["scaling_efficiency_pct"])
        effs.append(row["scaling_efficiency_pct"])
    assert effs[0] == 100.0 and effs[0] > effs[1] > effs[2] > 80.0


# ------------------------------------------------------------------------------------------------
# Beyond one machine: a Dask cluster the way users run one (a scheduler and worker processes started
# from the command line), on 256 hosts
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dask_cli_cluster(tmp_path_factory):
    """``dask scheduler`` and ``dask worker --nworkers 2``: separate processes, as on a cluster."""
    pytest.importorskip("distributed")
    import os
    import time

    tmp = tmp_path_factory.mktemp("dask")
    sched_file = tmp / "scheduler.json"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp)]
    try:
        deadline = time.time() + 120
        while not sched_file.is_file() and time.time() < deadline:
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "2",
                                       "--nthreads", "1", "--no-dashboard", "--memory-limit", "0"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp))
        from distributed import Client

        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=180)
            worker_pids = set(client.run(os.getpid).values())
        yield address, worker_pids
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_dask_cluster_on_256_hosts(tmp_path, dask_cli_cluster):
    from tfadvisor.io.discovery import resolve
    from tfadvisor.multihost.analysis import analyze_hosts
    from tfadvisor.multihost.runtime import InFlight

    address, worker_pids = dask_cli_cluster
    specs = [syn.SyntheticSpec(steps=6, num_gpus=2, allreduce_ms=10.0, host=f"host{i:03d}", seed=11, ops_per_step=12,
                               slowdown=1.4 if i == 200 else 1.0, step_time_ms=60.0) for i in range(256)]
    syn.write_run(str(tmp_path), specs, run_meta={"hosts": 256})
    seen = InFlight()
    res = analyze_hosts(resolve(str(tmp_path)), dask=address, observe=seen)
    assert res.summary["executor"] == "dask" and res.metrics["hosts_count"] == 256
    assert res.metrics["straggler_host"] == "host200"
    ran = {e.pid for e in seen.events if e.kind == "finished"}
    assert ran == worker_pids and len(ran) == 2  # both worker processes, none of them this one
    assert seen.max_in_flight == 2
    local = analyze_hosts(resolve(str(tmp_path)), jobs=2)
    assert dict(res.metrics) == dict(local.metrics)
    for name in local.tables:  # the median host's tables (built again on the cluster) and the hosts table
        a, b = res.tables[name], local.tables[name]
        assert a.shape == b.shape and list(a.columns) == list(b.columns), name
    import pandas as pd

    pd.testing.assert_frame_equal(res.tables["hosts"], local.tables["hosts"])
