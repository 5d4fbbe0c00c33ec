"""The HTML report: self-contained, escaped, every plot (or its 'not in this trace' box) present,
and it loads in real headless Chromium without console errors."""

from __future__ import annotations

import html.parser
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tfadvisor.advice import Finding
from tfadvisor.analyses import HostAnalysis, Metric, Metrics
from tfadvisor.api import Result
from tfadvisor.io.discovery import Run
from tfadvisor.report.html import PLOT_IDS, render_html, write_html

ROOT = Path(__file__).resolve().parent.parent
NASTY = "model/dense<1>/MatMul&Add:Fused<float>"


#: The rule engine's own finding class (test_diff imports it under this name).
FakeFinding = Finding


def _metrics(values: dict) -> Metrics:
    m = Metrics()
    for k, v in values.items():
        unit = "ms" if k.endswith("_ms") else "%" if k.endswith("_pct") else "bytes" if k.endswith("_bytes") else ""
        m.put("test", k, Metric(v, unit, f"meaning of {k}"))
    return m


def make_steps(n: int = 24, base: float = 100.0, input_ms: float = 60.0, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows, t = [], 0
    for i in range(n):
        dev = base * 0.3 + rng.normal(0, 2)
        inp = input_ms + rng.normal(0, 3)
        host = 5 + rng.normal(0, 0.5)
        idle = 3.0
        if i == 7:
            inp *= 4  # one outlier
        dur = dev + inp + host + idle
        rows.append(dict(step=i, start_ps=int(t * 1e9), end_ps=int((t + dur) * 1e9), duration_ms=dur,
                         device_compute_ms=dev, input_ms=inp, host_compute_ms=host, kernel_launch_ms=0.0,
                         collective_ms=0.0, idle_ms=idle, other_ms=0.0, outlier=(i == 7)))
        t += dur + 2.0
    return pd.DataFrame(rows)


def make_result(step_base: float = 100.0, input_ms: float = 60.0, findings: list | None = None,
                hosts: int = 2, full: bool = True) -> Result:
    """A Result with every table the report draws (built by hand, no trace needed)."""
    steps = make_steps(base=step_base, input_ms=input_ms)
    mean = float(steps.duration_ms.mean())
    gaps = pd.DataFrame([dict(start_ps=int(r.end_ps), end_ps=int(r.end_ps + 2e9), duration_ms=2.0,
                              between_steps=True, host_activity="python" if i % 2 else "input")
                         for i, r in enumerate(steps.itertuples())][:-1])
    end = int(steps.end_ps.max())
    timeline = pd.concat([
        pd.DataFrame(dict(lane=["window"], start_ps=[0], end_ps=[end], covered_ps=[end], count=[1])),
        pd.DataFrame(dict(lane="device compute", start_ps=steps.start_ps, end_ps=steps.end_ps,
                          covered_ps=steps.end_ps - steps.start_ps, count=1)),
        pd.DataFrame(dict(lane="idle", start_ps=gaps.start_ps, end_ps=gaps.end_ps,
                          covered_ps=gaps.end_ps - gaps.start_ps, count=1))], ignore_index=True)
    tables = {"steps": steps, "gaps": gaps, "timeline": timeline}
    values = dict(steps_count=len(steps), steps_source="trace_context", step_time_mean_ms=mean,
                  step_time_median_ms=float(steps.duration_ms.median()),
                  step_time_p90_ms=float(steps.duration_ms.quantile(0.9)),
                  step_time_min_ms=float(steps.duration_ms.min()), step_time_max_ms=float(steps.duration_ms.max()),
                  input_pct=float(steps.input_ms.sum() / steps.duration_ms.sum() * 100),
                  step_device_compute_pct=float(steps.device_compute_ms.sum() / steps.duration_ms.sum() * 100),
                  idle_pct=5.0, gaps_count=len(gaps), gap_max_ms=2.0, device_present=True)
    if full:
        tables["tfdata_stages"] = pd.DataFrame([
            dict(stage="Map", iterator="Iterator::Root::Prefetch::Map<lambda>&x", calls=640, total_ms=480.0,
                 mean_us=750.0, parallelism=1, autotune=False, buffered_elements=0, batch_size=None),
            dict(stage="TensorSlice", iterator="Iterator::Root::Prefetch::Map::TensorSlice", calls=640,
                 total_ms=12.0, mean_us=18.75, parallelism=None, autotune=None, buffered_elements=None,
                 batch_size=None),
            dict(stage="BatchV2", iterator="Iterator::Root::BatchV2", calls=20, total_ms=500.0, mean_us=25000.0,
                 parallelism=None, autotune=None, buffered_elements=None, batch_size=32),
        ])
        tables["precision_mix"] = pd.DataFrame(dict(precision=["fp32", "fp16", "tf32"],
                                                    time_ms=[80.0, 15.0, 5.0]))
        t = np.linspace(0, mean * 3, 300)
        b = (2e9 + 1.5e9 * np.abs(np.sin(t / mean * np.pi))).astype(np.int64)
        tables["memory_timeline"] = pd.DataFrame(dict(time_ms=t, bytes_in_use=b))
        tables["memory_live_at_peak"] = pd.DataFrame(dict(
            tf_op=[NASTY, "adam/m/kernel:Var", "conv<2>/Conv2D:Conv2D"], shape=["[1024,4096]", "[4096]", "[8,3,3]"],
            region_type=["output", "persist", "temp"], bytes=[16777216, 16384, 1536]))
        values.update(fp32_pct=80.0, fp16_pct=15.0, tf32_pct=5.0, low_precision_pct=15.0,
                      memory_present=True, memory_peak_bytes=int(b.max()), memory_capacity_bytes=16 * 2**30,
                      memory_peak_pct=b.max() / (16 * 2**30) * 100, allreduce_present=True,
                      allreduce_ms_per_step=12.5, allreduce_expected_ms=4.0, allreduce_expected_ring_ms=6.0,
                      allreduce_ratio=12.5 / 4.0, tfdata_pipeline="Iterator::Root::BatchV2::Map<lambda>")
    else:
        values.update(memory_present=False, allreduce_present=False, allreduce_ms_per_step=None)
    metrics = _metrics(values)
    host_list = []
    for h in range(hosts):
        hv = dict(values)
        hv["step_time_mean_ms"] = mean * (1 + 0.3 * h)
        hv["step_time_max_ms"] = values["step_time_max_ms"] * (1 + 0.3 * h)
        host_list.append(HostAnalysis(host=f"worker{h}<&>", metrics=_metrics(hv), tables=dict(tables)))
    run = Run(name="2024_01_01_00_00_00", directory="/logs/plugins/profile/2024_01_01_00_00_00",
              files=tuple(f"/logs/plugins/profile/2024_01_01_00_00_00/worker{h}.xplane.pb" for h in range(hosts)),
              logdir="/logs")
    if findings is None:
        findings = [
            FakeFinding("input_bound", "critical", "Training is input-bound",
                        f"The host waits for `IteratorGetNext` {values['input_pct']:.0f} % of each step; op {NASTY}.",
                        {"input_pct": values["input_pct"], "tfdata_pipeline": "Map<lambda>&x"}, 55.0,
                        "Parallelise and prefetch the pipeline:\n\n```python\nds = ds.map(f, num_parallel_calls="
                        "tf.data.AUTOTUNE)\nds = ds.prefetch(tf.data.AUTOTUNE)  # a < b && c > d\n```\n",
                        ["https://www.tensorflow.org/guide/data_performance"]),
            FakeFinding("low_precision", "warning", "Little 16-bit compute", "Only 15 % of device compute is 16-bit.",
                        {"low_precision_pct": 15.0}, 10.0,
                        "Turn on mixed precision:\n\n    keras.mixed_precision.set_global_policy('mixed_float16')"),
            FakeFinding("step_gaps", "info", "Idle gaps between steps", "5 % idle.", {"idle_pct": 5.0}),
        ]
    return Result(run=run, summary=dict(run=run.name, run_dir=run.directory, files=list(run.files),
                                        file_bytes=12_345_678, hosts=[f"worker{h}" for h in range(hosts)],
                                        events=123456, time_span_ms=float(steps.end_ps.max() / 1e9), planes=[]),
                  metrics=metrics, tables=tables, notes=["memory: <none> here & there"] if not full else [],
                  findings=findings, hosts=host_list)


def make_bare_result() -> Result:
    """Nothing but a run: every plot must show its 'not in this trace' box."""
    run = Run(name="r", directory="/x/r", files=("/x/r/h.xplane.pb",))
    notes = ["steps: no step markers & no <TraceContext> events", "memory: no MemoryAllocation events "
             "(on the CPU set TF_CPU_ALLOCATOR_USE_BFC=true)", "tfdata: no Iterator:: events"]
    return Result(run=run, summary={}, metrics=Metrics(), tables={}, notes=notes, findings=[], hosts=[])


class IdCollector(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.external: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids[a["id"]] = tag
        if tag == "script":
            self.scripts += 1
        for k in ("src", "href"):
            v = a.get(k) or ""
            if tag in ("link", "script", "img", "iframe", "source", "image", "use") and v and not v.startswith(
                    ("#", "data:")):
                self.external.append(v)


def _parse(text: str) -> IdCollector:
    p = IdCollector()
    p.feed(text)
    return p


# --------------------------------------------------------------------------- static checks


def test_html_has_every_plot_and_finding(tmp_path):
    res = make_result()
    path = write_html(res, tmp_path / "sub" / "report.html")
    text = path.read_text(encoding="utf-8")
    p = _parse(text)
    for pid in PLOT_IDS[:-1]:  # no --data given: plot-datafiles is a box
        assert p.ids.get(pid) == "svg", (pid, p.ids.get(pid))
    assert p.ids.get("plot-datafiles") == "div"
    for rule in ("input_bound", "low_precision", "step_gaps"):
        assert f"finding-{rule}" in p.ids
    assert "<pre><code" in text and "num_parallel_calls=tf.data.AUTOTUNE" in text
    assert "keras.mixed_precision.set_global_policy" in text  # an indented code block became <pre><code>
    assert p.scripts == 2 and p.external == []  # the timeline's data and viewer, inline
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    # every plot has a legend/axis label and <title> tooltips
    steps_svg = re.search(r'<svg id="plot-steps".*?</svg>', text, re.S).group(0)
    assert steps_svg.count("<title>") > 24 and "device compute" in steps_svg and "step time (ms)" in steps_svg
    assert "outlier" in steps_svg


def test_html_escapes_trace_text():
    text = render_html(make_result())
    assert NASTY not in text
    assert esc_(NASTY) in text
    assert "Map&lt;lambda&gt;&amp;x" in text
    assert "worker1&lt;&amp;&gt;" in text
    assert "a &lt; b &amp;&amp; c &gt; d" in text  # inside the fix's code block
    # still well-formed: the parser sees the same ids as before escaping mattered
    assert "<1>" not in text


def esc_(s: str) -> str:
    import html

    return html.escape(s, quote=True)


def test_html_bare_result_shows_reasons(tmp_path):
    text = write_html(make_bare_result(), tmp_path / "r.html").read_text()
    p = _parse(text)
    for pid in PLOT_IDS:
        assert p.ids.get(pid) == "div", pid
    assert "not in this trace" in text
    assert "no step markers &amp; no &lt;TraceContext&gt; events" in text  # the analysis' note is the reason
    assert "TF_CPU_ALLOCATOR_USE_BFC" in text
    assert "No findings" in text


def test_html_partial_tables_do_not_crash():
    res = make_result(full=False, hosts=1)
    res.tables["steps"] = res.tables["steps"].drop(columns=["input_ms", "host_compute_ms"])
    res.tables["gaps"] = res.tables["gaps"].iloc[0:0]
    res.tables["precision_mix"] = pd.DataFrame({"what": ["x"], "n": ["y"]})
    res.tables["memory_timeline"] = pd.DataFrame({"time_ms": [1.0], "bytes_in_use": [10]})
    res.metrics.put("t", "allreduce_ms_per_step", Metric(3.0, "ms"))
    text = render_html(res)
    p = _parse(text)
    assert p.ids["plot-steps"] == "svg" and "unattributed" in text
    for tables in [res.tables] + [h.tables for h in res.hosts]:
        tables.pop("timeline")
    text = render_html(res)
    p = _parse(text)
    assert p.ids["plot-busy"] == "div" and p.ids["plot-timeline"] == "div" and "no activity timeline" in text
    assert p.ids["plot-memory"] == "svg"
    assert p.ids["plot-allreduce"] == "svg" and "--params" in text
    assert p.ids["plot-hosts"] == "div" and p.ids["plot-precision"] == "div"


def test_html_many_steps_are_binned():
    res = make_result(full=False, hosts=1)
    big = make_steps(n=5000)
    res.tables["steps"] = big
    text = render_html(res)
    steps_svg = re.search(r'<svg id="plot-steps".*?</svg>', text, re.S).group(0)
    assert "each bar the mean of 15 consecutive steps" in steps_svg and 'data-steps="5000"' in steps_svg
    assert steps_svg.count('class="step"') == 334
    assert len(text) < 3_000_000


# --------------------------------------------------------------------------- real Chromium


def _chromium() -> str:
    exe = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if exe is None:
        script = ROOT / ".ci" / "install-chromium.sh"
        r = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=900)
        exe = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
        if exe is None:
            pytest.skip(f"Chromium is not installed and .ci/install-chromium.sh could not install it: "
                        f"{(r.stderr or r.stdout).strip()[-300:]}")
    return exe


def _run_chromium(exe: str, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="tfadvisor-chromium-")
    try:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _console_errors(stderr: str) -> list[str]:
    """Console messages and page load errors Chromium logs to stderr."""
    bad = []
    for line in stderr.splitlines():
        if "CONSOLE" in line or "Uncaught" in line or "net::ERR" in line or "Failed to load" in line:
            bad.append(line)
    return bad


@pytest.fixture(scope="module")
def chromium() -> str:
    return _chromium()


@pytest.mark.parametrize("kind", ["full", "bare"])
def test_html_in_headless_chromium(chromium, tmp_path, kind):
    res = make_result() if kind == "full" else make_bare_result()
    page = write_html(res, tmp_path / "report.html")
    r = _run_chromium(chromium, "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    p = _parse(dom)
    for pid in PLOT_IDS:
        assert pid in p.ids, f"{pid} missing from the DOM Chromium built"
    if kind == "full":
        for rule in ("input_bound", "low_precision", "step_gaps"):
            assert f"finding-{rule}" in p.ids
        assert "Training is input-bound" in dom
    assert not _console_errors(r.stderr), _console_errors(r.stderr)

    # a screenshot outside git, to look at: artifacts/ is git-ignored
    shots = Path(os.environ.get("TFADVISOR_ARTIFACTS", ROOT / "artifacts"))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{kind}.png"
    r = _run_chromium(chromium, f"--screenshot={shot}", "--window-size=1100,4200", "--hide-scrollbars",
                      page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 10_000
    assert not _console_errors(r.stderr), _console_errors(r.stderr)


def test_console_error_detector_is_not_vacuous(chromium, tmp_path):
    """The check above would catch a broken page: a console error and an uncaught exception."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>console.error('boom'); undefined_fn();</script></body></html>")
    r = _run_chromium(chromium, "--dump-dom", bad.as_uri())
    errors = _console_errors(r.stderr)
    assert any("boom" in e for e in errors) and any("undefined_fn" in e for e in errors), r.stderr[-2000:]


def _expected_truth(sample: str) -> dict:
    import tomllib

    with open(ROOT / "sample_traces" / sample / "expected.toml", "rb") as fh:
        return tomllib.load(fh).get("truth", {})


REAL_SAMPLES = sorted(p.parent.name for p in (ROOT / "sample_traces").glob("*/expected.toml"))
#: What each sample is about must be drawn, not boxed as missing.
DRAWN = {"input_bound": ["plot-steps", "plot-busy", "plot-timeline", "plot-tfdata"],
         "memory_heavy": ["plot-memory"],
         "synthetic_multihost_straggler": ["plot-hosts", "plot-allreduce"],
         "synthetic_gpu_mixed": ["plot-precision"],
         "synthetic_gpu_idle_gaps": ["plot-busy", "plot-timeline"]}


@pytest.mark.parametrize("sample", REAL_SAMPLES)
def test_real_sample_report_in_chromium(chromium, tmp_path, sample):
    """`tfadvisor analyze SAMPLE --html` on every sample, loaded in Chromium."""
    import subprocess
    import sys

    src = ROOT / "sample_traces" / sample
    page = tmp_path / f"{sample}.html"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(src), "--html", str(page), "-q",
                        "--format", "json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    findings = [f["rule"] for f in json.loads(r.stdout).get("findings", [])]
    text = page.read_text()
    p = _parse(text)
    assert p.external == []
    r = _run_chromium(chromium, "--dump-dom", page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = _parse(r.stdout)
    for pid in PLOT_IDS:
        assert pid in dom.ids, pid
    for rule in findings:
        assert f"finding-{rule}" in dom.ids, rule
    assert not _console_errors(r.stderr), _console_errors(r.stderr)
    no_steps = _expected_truth(sample).get("steps") == 0  # micro-benchmarks: nothing to draw per step
    for pid in DRAWN.get(sample, [] if no_steps else ["plot-steps"]):
        assert dom.ids[pid] == "svg", pid
    if no_steps:
        assert dom.ids["plot-steps"] != "svg" and "no steps found" in text  # the placeholder says why
    if sample == "synthetic_multihost_straggler":
        shots = Path(os.environ.get("TFADVISOR_ARTIFACTS", ROOT / "artifacts"))
        shots.mkdir(parents=True, exist_ok=True)
        r = _run_chromium(chromium, f"--screenshot={shots / f'report-{sample}.png'}", "--window-size=1100,5000",
                          "--hide-scrollbars", page.as_uri())
        assert r.returncode == 0


def test_memory_live_at_peak_lists_no_junk_rows():
    """A real JAX capture whose live buffers carry no op, shape or data type (`invalid`): no empty row,
    one sentence with their count and size instead."""
    import tfadvisor

    res = tfadvisor.analyze(ROOT / "sample_traces" / "real_jax_rocm_mi300_gemm")
    live = res.tables["memory_live_at_peak"]
    assert (live["data_type"] == "invalid").all() and (live["tf_op"].astype(str).str.strip() == "").all()
    text = render_html(res)
    assert 'id="memory-live-at-peak"' not in text and "<td>invalid</td>" not in text
    n = int(live["count"].sum())
    line = re.search(r'<p class="sub" id="memory-live-unnamed">(.*?)</p>', text, re.S).group(1)
    assert line.startswith(f"{n} live allocations (") and "not listed by name" in line


def test_wide_tables_turn_on_their_side_and_drop_empty_columns():
    from tfadvisor.report.html import MAX_COLUMNS, _table

    df = pd.DataFrame({f"col_{i}": [i * 10 + r for r in range(4)] for i in range(MAX_COLUMNS + 6)})
    df["stage"] = ["a", "b", "c", "d"]
    df["empty"] = [None, np.nan, None, ""]
    df = df[["stage"] + [c for c in df.columns if c != "stage"]]
    p = _parse_rows(_table(df, "t"))
    assert p[0] == ["stage", "a", "b", "c", "d"]  # one column per row of the data
    assert len(p) == 1 + MAX_COLUMNS + 6 and ["col_3", "30", "31", "32", "33"] in p and "empty" not in str(p)
    narrow = _parse_rows(_table(df[["stage", "col_1", "empty"]], "n"))
    assert narrow == [["stage", "col_1"], ["a", "10"], ["b", "11"], ["c", "12"], ["d", "13"]]


def _parse_rows(text: str) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", text, re.S)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", r, re.S)] for r in rows]
