"""System samples and start-up (issue 18): the file format, the sampler, the analysis, the rules.

* The samples file: written by the sampler's own writer, read back strictly; bad files give a
  note, never a crash.
* GPU rules on RECORDED NVML-style readings (GPU columns built with the writer from recorded
  values, beside a real GPU-plane profile): no GPU exists on this machine.
* Real TensorFlow (slow): a Keras fit with the callback writes the samples; planted causes a
  CPU-only machine can produce each give the right finding first: CPU-bound preprocessing,
  a sleep-bound loader with idle CPUs (through `tfadvisor capture run`), a slow start from
  reading many small files before fit.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import capture_env

import tfadvisor
from tfadvisor.capture.system_sampler import SystemSampler
from tfadvisor.io.system_samples import SamplesError, file_name, load_samples, write_samples

ROOT = Path(__file__).resolve().parent.parent
HAS_TF = importlib.util.find_spec("tensorflow") is not None


# --------------------------------------------------------------------------- recorded samples


def recorded_columns(n: int, t0: float, span_s: float, *, cpu: float, gpu: list[float] | None,
                     cores: int = 8, disk_busy: float = 0.0, net_mbps: float = 0.0) -> tuple[dict, dict]:
    """Columns and meta as the sampler writes them, from recorded figures (flat, with jitter)."""
    rng = np.random.default_rng(0)
    t = t0 + np.linspace(0, span_s, n)
    dt = np.diff(t, prepend=t[0] - span_s / n)
    core = np.clip(cpu + rng.normal(0, 2, (n, cores)), 0, 100)
    cols = {
        "t_unix_s": t, "cpu_pct": core.mean(axis=1), "cpu_core_pct": core, "proc_cpu_pct": core.sum(axis=1) * 0.9,
        "proc_rss_bytes": np.full(n, 3e9), "mem_available_bytes": np.full(n, 50e9), "swap_used_bytes": np.zeros(n),
        "swap_in_bytes": np.zeros(n), "swap_out_bytes": np.zeros(n),
        "disk_read_bytes": np.cumsum(dt * 1e6), "disk_write_bytes": np.cumsum(dt * 1e5),
        "disk_busy_ms": np.cumsum(dt * disk_busy * 10)[:, None], "proc_read_chars": np.cumsum(dt * 2e6),
        "net_recv_bytes": np.cumsum(dt * net_mbps * 1e6), "net_sent_bytes": np.cumsum(dt * 1e3),
    }
    meta = {"host": "recorded", "hz": n / span_s, "cpu_count": cores, "mem_total_bytes": 64e9,
            "mem_limit_bytes": 64e9, "swap_total_bytes": 0, "disks": ["nvme0n1"], "origin": "recorded",
            "sampler_cpu_s": 0.01, "profile_start_unix_s": t0}
    if gpu is None:
        meta.update(gpu_sampler=None, gpu_note="no GPU sampler (nvml: nvidia-ml-py is not installed)", gpus=[])
    else:
        g = np.clip(np.array(gpu)[None, :] + rng.normal(0, 1, (n, len(gpu))), 0, 100)
        cols.update(gpu_util_pct=g, gpu_mem_used_bytes=np.full((n, len(gpu)), 20e9),
                    gpu_power_w=np.full((n, len(gpu)), 120.0))
        meta.update(gpu_sampler="nvml", gpu_note="", gpus=[{"name": "NVIDIA A100-SXM4-40GB",
                                                            "memory_total_bytes": 40e9}] * len(gpu))
    return cols, meta


def gpu_run(tmp_path: Path, **kw) -> str:
    """A copy of the synthetic GPU input-bound run with recorded samples beside its profile."""
    src = next((ROOT / "sample_traces/synthetic_gpu_input_bound").rglob("*.xplane.pb"))
    run = tmp_path / "run"
    run.mkdir(parents=True)
    shutil.copy(src, run / src.name)
    trace = tfadvisor.load(str(run))
    env = [p for p in trace.planes if p.name == "Task Environment"]
    t0 = env[0].stats["profile_start_time"] / 1e9 if env else 1.7e9
    span = (trace.time_span_ps()[1]) / 1e12
    cols, meta = recorded_columns(max(12, int(span * 20)), t0, span, **kw)
    write_samples(str(run / file_name(src.name[: -len(".xplane.pb")])), cols, meta)
    return str(run)


def test_writer_and_reader_round_trip(tmp_path):
    cols, meta = recorded_columns(50, 1.8e9, 5.0, cpu=40.0, gpu=[30.0, 90.0])
    path = write_samples(str(tmp_path / file_name("host-1")), cols, meta)
    s = load_samples(path)
    assert s.n == 50 and s.gpu_count == 2 and s.gpu_sampler == "nvml"
    assert s.meta["origin"] == "recorded" and s.meta["format"] == "tfadvisor_system"
    np.testing.assert_allclose(s.columns["gpu_util_pct"], cols["gpu_util_pct"], atol=1e-4)
    assert os.path.getsize(path) < 30_000  # columnar and small


BAD = [
    (b"", "empty file"),
    (b"\x00" * 100, "not a numpy .npz"),
    (b"PK\x03\x04garbage", "corrupt archive"),
]


@pytest.mark.parametrize("data, words", BAD)
def test_bad_bytes_are_a_clear_error(tmp_path, data, words):
    p = tmp_path / file_name("h")
    p.write_bytes(data)
    with pytest.raises(SamplesError) as err:
        load_samples(str(p))
    assert str(p) in str(err.value) and words in str(err.value)


@pytest.mark.parametrize("mutate, words", [
    (lambda c, m: m.update(format="other"), "not a tfadvisor system samples file"),
    (lambda c, m: m.update(version=99), "unsupported samples version"),
    (lambda c, m: c.update(cpu_pct=-c["cpu_pct"]), "negative"),
    (lambda c, m: c.update(cpu_pct=c["cpu_pct"][:-1]), "shape"),
    (lambda c, m: c.pop("net_recv_bytes"), "missing column net_recv_bytes"),
    (lambda c, m: c.update(t_unix_s=c["t_unix_s"][::-1].copy()), "ascending"),
    (lambda c, m: c.pop("gpu_power_w"), "GPU columns incomplete"),
    (lambda c, m: c.update(gpu_util_pct=c["gpu_util_pct"] * 10), "above 100"),
])
def test_malformed_content_is_rejected(tmp_path, mutate, words):
    cols, meta = recorded_columns(20, 1.8e9, 2.0, cpu=40.0, gpu=[50.0])
    mutate(cols, meta)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    arrays["meta"] = np.array(json.dumps({"format": "tfadvisor_system", "version": 1, **meta}))
    p = tmp_path / file_name("h")
    np.savez(p, **arrays)
    with pytest.raises(SamplesError, match=words):
        load_samples(str(p))


def test_pickled_arrays_are_refused(tmp_path):
    p = tmp_path / file_name("h")
    np.savez(p, meta=np.array([{"format": "tfadvisor_system"}], dtype=object))
    with pytest.raises(SamplesError, match="corrupt archive|meta"):
        load_samples(str(p))


def test_bad_samples_file_is_a_note_not_a_crash(tmp_path):
    run = gpu_run(tmp_path, cpu=95.0, gpu=[20.0])
    samples = next(Path(run).glob("tfadvisor_system.*"))
    samples.write_bytes(b"PK\x03\x04 truncated")
    r = tfadvisor.analyze(run)
    assert r.metrics["system_cpu_util_pct"] is None
    assert any("system samples ignored" in n and samples.name in n for n in r.notes)


def test_no_samples_leaves_metrics_unknown_with_a_note():
    r = tfadvisor.analyze(str(ROOT / "sample_traces/input_bound_defaults_off"))
    assert r.metrics["system_cpu_util_pct"] is None and r.metrics["startup_to_first_step_s"] is None
    assert any("no system samples" in n for n in r.notes)
    assert not [f for f in r.findings if f.rule.startswith("system_")]


# --------------------------------------------------------------------------- GPU rules, recorded readings


def test_recorded_gpu_low_cpu_high_is_preprocessing_bound(tmp_path):
    r = tfadvisor.analyze(gpu_run(tmp_path, cpu=95.0, gpu=[18.0]))
    m = r.metrics
    assert m["system_gpu_sampler"] == "nvml" and abs(m["system_gpu_util_pct"] - 18) < 2
    assert m["system_cpu_util_pct"] > 90
    assert r.findings[0].rule == "system_preprocessing_bound", [f.rule for f in r.findings]


def test_recorded_everything_low_asks_for_parallelism(tmp_path):
    r = tfadvisor.analyze(gpu_run(tmp_path, cpu=12.0, gpu=[22.0]))
    assert r.findings[0].rule == "system_input_underused", [f.rule for f in r.findings]
    assert "system_gpu_util_pct" in r.findings[0].evidence


def test_recorded_disk_saturated_is_disk_bound(tmp_path):
    r = tfadvisor.analyze(gpu_run(tmp_path, cpu=30.0, gpu=[25.0], disk_busy=97.0))
    assert r.metrics["system_disk_busy_pct"] > 90
    assert r.findings[0].rule == "system_input_disk_bound", [f.rule for f in r.findings]


def test_recorded_idle_gpus_of_several(tmp_path):
    r = tfadvisor.analyze(gpu_run(tmp_path, cpu=30.0, gpu=[85.0, 0.0, 0.0, 1.0]))
    assert r.metrics["system_gpu_count"] == 4 and r.metrics["system_gpu_idle_count"] == 3
    assert "idle_gpus" in [f.rule for f in r.findings]


def test_no_gpu_sampler_is_said(tmp_path):
    r = tfadvisor.analyze(gpu_run(tmp_path, cpu=30.0, gpu=None))
    assert r.metrics["system_gpu_sampler"] == "none" and r.metrics["system_gpu_util_pct"] is None
    assert any("no GPU sampler" in n for n in r.notes)


def test_reports_and_diff_show_the_samples(tmp_path):
    from tfadvisor.report.diff import diff_results
    from tfadvisor.report.html import render_html
    from tfadvisor.report.json_report import result_to_dict
    from tfadvisor.report.markdown import render_markdown

    a = tfadvisor.analyze(gpu_run(tmp_path / "a", cpu=95.0, gpu=[18.0]))
    b = tfadvisor.analyze(gpu_run(tmp_path / "b", cpu=40.0, gpu=[80.0]))
    html = render_html(a)
    assert 'id="plot-system"' in html and "<polyline" in html
    assert html.index('id="findings"') < html.index('id="timeline"') < html.index('id="system"')
    assert "| GPU busy |" in render_markdown(a)
    assert result_to_dict(a)["system"]["figures"]["system_gpu_util_pct"] == pytest.approx(
        a.metrics["system_gpu_util_pct"])
    d = diff_results(a, b)
    gpu = next(f for f in d["figures"] if f["metric"] == "system_gpu_util_pct")
    assert gpu["judgement"] == "better" and gpu["section"] == "System"


# --------------------------------------------------------------------------- the sampler itself


def test_sampler_samples_this_machine(tmp_path):
    s = SystemSampler(hz=20)
    assert s.start(), s.error
    time.sleep(0.6)
    s.stop()
    path = s.write(str(tmp_path), "thishost")
    got = load_samples(path)
    assert got.n >= 8 and got.meta["origin"] == "captured"
    assert got.meta["cpu_count"] == os.cpu_count()
    assert got.columns["proc_rss_bytes"][-1] > 10e6
    assert got.meta["gpu_sampler"] is None and got.meta["gpu_note"].startswith("no GPU sampler")
    assert 0 < got.meta["sampler_cpu_s"] < 0.6


# --------------------------------------------------------------------------- real TensorFlow

SCENARIO = r'''
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
kind, out = sys.argv[1], sys.argv[2]
if kind == "slowstart":  # the training data are many small files, all read before fit
    d = os.path.join(out, "files")
    os.makedirs(d, exist_ok=True)
    for i in range(30000):
        with open(os.path.join(d, f"{i}.txt"), "w") as fh:
            fh.write("x" * 64)
    data = []
    for _ in range(2):
        for name in os.listdir(d):
            with open(os.path.join(d, name), "rb") as fh:
                data.append(fh.read())
import numpy as np
import keras
import tensorflow as tf
from tfadvisor.keras import AdvisorCallback

steps = 60
x = np.random.default_rng(0).random((32 * (steps + 8), 32), dtype=np.float32)
y = np.random.default_rng(1).random((32 * (steps + 8), 1), dtype=np.float32)
ds = tf.data.Dataset.from_tensor_slices((x, y))
if kind == "cpu":  # CPU-bound preprocessing: heavy math per element on every core
    def heavy(a, b):
        m = tf.reshape(tf.tile(a, [3 * 96]), (96, 96))
        for _ in range(30):
            m = tf.tanh(tf.matmul(m, m) * 0.01 + m)
        return a + tf.reduce_mean(m) * 0.0, b
    ds = ds.map(heavy, num_parallel_calls=tf.data.AUTOTUNE).batch(32).prefetch(tf.data.AUTOTUNE)
elif kind == "sleep":  # a loader that waits (sleeps) one element at a time: CPUs idle
    def slow(a, b):
        def f(v):
            time.sleep(0.002)
            return v
        a = tf.py_function(f, [a], tf.float32)
        a.set_shape((32,))
        return a, b
    ds = ds.map(slow).batch(32).prefetch(2)
else:
    ds = ds.batch(32).cache().prefetch(tf.data.AUTOTUNE)
m = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(1)])
m.compile("adam", "mse")
cbs = []
if os.environ.get("OWN_CALLBACK", "1") == "1":
    cbs.append(AdvisorCallback(os.path.join(out, "log"), steps=(3, 3 + steps), analyze=False, verbose=False))
m.fit(ds, epochs=1, verbose=0, callbacks=cbs)
print("RUN_DIR", cbs[0].run_dir if cbs else None)
'''

needs_tf = pytest.mark.skipif(not HAS_TF, reason="needs TensorFlow (tensorflow-cpu)")



def _scenario(tmp_path: Path, kind: str) -> str:
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    out = subprocess.run([sys.executable, str(script), kind, str(tmp_path)], env=capture_env(), capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = out.stdout.split("RUN_DIR", 1)[1].strip()
    assert os.path.isdir(run_dir), out.stdout
    return run_dir


@pytest.mark.slow
@pytest.mark.serial  # CPU use and idle cores are the figures under test (conftest)
@needs_tf
def test_tf_callback_writes_samples_and_cpu_bound_preprocessing_is_found(tmp_path):
    run_dir = _scenario(tmp_path, "cpu")
    samples = list(Path(run_dir).glob("tfadvisor_system.*.npz"))
    assert len(samples) == 1 and load_samples(str(samples[0])).n >= 3
    with open(Path(run_dir) / "tfadvisor_run.json") as fh:
        md = json.load(fh)
    assert md["system"]["samples"] == samples[0].name and md["system"]["gpu_sampler"] is None
    assert md["startup"]["fit_start"]["t_unix_s"] > md["startup"]["process_start_unix_s"]
    r = tfadvisor.analyze(run_dir)
    m = r.metrics
    assert m["system_cpu_util_pct"] >= 80 and m["input_pct"] >= 20
    assert r.findings[0].rule == "system_preprocessing_bound", [(f.rule, f.impact_pct) for f in r.findings]
    assert 0 < m["startup_before_fit_s"] < m["startup_to_first_step_s"]


@pytest.mark.slow
@pytest.mark.serial  # CPU use and idle cores are the figures under test (conftest)
@needs_tf
def test_tf_capture_run_sleep_bound_loader_with_idle_cpus(tmp_path):
    script = tmp_path / "scenario.py"
    script.write_text(SCENARIO)
    logdir = tmp_path / "log"
    out = subprocess.run([sys.executable, "-m", "tfadvisor", "capture", "run", "--logdir", str(logdir),
                          "--start-step", "3", "--steps", "50", "--no-analyze", "--",
                          sys.executable, str(script), "sleep", str(tmp_path)],
                         env=capture_env(OWN_CALLBACK="0"), capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    run = tfadvisor.io.discovery.resolve(str(logdir))
    assert list(Path(run.directory).glob("tfadvisor_system.*.npz"))
    r = tfadvisor.analyze(run)
    m = r.metrics
    # at least a core's worth of CPU idle; which core is idle is the scheduler's choice (seen on 2 cores: both
    # ~24 % busy, so no single core under the 20 % that counts it idle)
    idle_cores = (100.0 - m["system_cpu_util_pct"]) / 100.0 * m["system_cpu_cores"]
    assert m["system_cpu_util_pct"] < 50 and m["input_pct"] >= 20 and idle_cores >= 1, (m["system_cpu_util_pct"],
                                                                                       m["system_cpu_cores"])
    assert r.findings[0].rule == "system_input_underused", [(f.rule, f.impact_pct) for f in r.findings]


@pytest.mark.slow
@pytest.mark.serial  # CPU use and idle cores are the figures under test (conftest)
@needs_tf
def test_tf_slow_start_from_many_small_files(tmp_path):
    r = tfadvisor.analyze(_scenario(tmp_path, "slowstart"))
    m = r.metrics
    startup = {k: v for k, v in m.items() if k.startswith("startup_")}
    assert m["startup_phase"] == "before_fit" and m["startup_before_fit_read_calls"] >= 50_000, startup
    assert r.findings[0].rule == "slow_startup", ([(f.rule, f.impact_pct) for f in r.findings], startup)
    assert r.findings[0].title == "Start-up reads many small files"

