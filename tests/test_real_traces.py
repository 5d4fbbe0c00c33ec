"""Real profiles written by other people (sample_traces/real_*, provenance in REAL.md).

Each one is analysed by the real CLI five times in fresh processes: exit 0, byte-identical JSON, finite
numbers, percentages within 0..100, nothing written into the logdir. What the report says is checked
against what a careful reader sees in the file (``expected.toml``'s ``[real]`` table), with figures
recounted here from the protobuf itself where they are counts or durations.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SAMPLES, expected

REAL = sorted(p for p in SAMPLES.glob("real_*") if (p / "expected.toml").exists())
MANGLED = SAMPLES / "bad_input" / "tpu_inference_2_mangled"
RUNS = 5
_JSON: dict[str, list[bytes]] = {}


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONHASHSEED="random")
    return subprocess.run([sys.executable, "-m", "tfadvisor", *args], capture_output=True, timeout=300, env=env)


def _snapshot(d: Path) -> dict[str, tuple[int, int]]:
    return {str(f.relative_to(d)): (f.stat().st_size, f.stat().st_mtime_ns) for f in d.rglob("*")}


def _runs(sample: Path, n: int = RUNS) -> list[bytes]:
    """``n`` runs of ``analyze --format json`` (kept: the first of five is the report the other tests read)."""
    if len(_JSON.get(sample.name, [])) < n:
        before = _snapshot(sample)
        outs = []
        for _ in range(n):
            r = _cli("analyze", str(sample), "--format", "json")
            assert r.returncode == 0, f"{sample.name}: exit {r.returncode}\n{r.stderr.decode()[-2000:]}"
            assert not r.stderr.strip(), f"{sample.name}: stderr {r.stderr.decode()[-2000:]}"
            outs.append(r.stdout)
        assert _snapshot(sample) == before, f"{sample.name}: the analysis wrote into the logdir"
        _JSON[sample.name] = outs
    return _JSON[sample.name]


def report(sample: Path) -> dict:
    """One run's JSON: the module's tests go one by one to either xdist worker, so a worker that has not run the five
    runs of a sample makes one, not five."""
    return json.loads(_runs(sample, 1)[0])


def _numbers(obj, path=""):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _numbers(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, obj


@pytest.mark.parametrize("sample", REAL, ids=[p.name for p in REAL])
def test_five_runs_identical(sample):
    outs = _runs(sample)
    assert all(o == outs[0] for o in outs), f"{sample.name}: JSON differs between runs"


@pytest.mark.parametrize("sample", REAL, ids=[p.name for p in REAL])
def test_numbers_sane(sample):
    bad = []
    for path, v in _numbers(report(sample)):
        if isinstance(v, float) and not math.isfinite(v):
            bad.append(f"{path} = {v}")
        elif path.endswith("_pct") and not -1e-9 <= v <= 100 + 1e-9:
            bad.append(f"{path} = {v} (a percentage)")
        elif path.endswith(("_ms", "_us", "_bytes")) and v < 0:
            bad.append(f"{path} = {v} (negative)")
    assert not bad, f"{sample.name}: " + "; ".join(bad)


@pytest.mark.parametrize("sample", REAL, ids=[p.name for p in REAL])
def test_expected_findings(sample):
    want = expected(sample).get("findings", {})
    got = [f["rule"] for f in report(sample)["findings"]]
    if want.get("top_any"):
        assert got and got[0] in want["top_any"], f"{sample.name}: top finding {got[:1]}, want one of {want['top_any']}"
    for rid in want.get("present", []):
        assert rid in got, f"{sample.name}: {rid} should fire; got {got}"
    for rid in want.get("absent", []):
        assert rid not in got, f"{sample.name}: {rid} must not fire; got {got}"


@pytest.mark.parametrize("sample", [p for p in REAL if "jax" in p.name], ids=lambda p: p.name)
def test_no_nvidia_or_keras_words_on_amd_jax(sample):
    """AMD GPUs running JAX: no Tensor Cores, no Keras policy, no 'float32 training' claim."""
    text = json.dumps(report(sample)["findings"]).lower()
    for word in ("tensor core", "mixed_float16", "set_global_policy", "training runs in float32"):
        assert word not in text, f"{sample.name}: {word!r} in the findings"


def test_mangled_file_is_called_corrupt():
    before = _snapshot(MANGLED)
    r = _cli("analyze", str(MANGLED))
    err = r.stderr.decode().strip()
    assert r.returncode == 2, f"exit {r.returncode}: {err[-1000:]}"
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "tpu_inference_2.xplane.pb" in err and "corrupt" in err.lower() and "truncated" not in err.lower(), err
    assert _snapshot(MANGLED) == before


def _device_facts(sample: Path) -> dict:
    """Recount from the protobuf: which GPUs ran kernels (Stream lines, compute, not copies), their
    kernel time and their one `Steps` event (start, duration) in ms."""
    from tfadvisor.proto import xplane_pb2

    out = {}
    for f in sample.rglob("*.xplane.pb"):
        space = xplane_pb2.XSpace()
        space.ParseFromString(f.read_bytes())
        for p in space.planes:
            if not p.name.startswith("/device:GPU:"):
                continue
            dev = p.name.split("/device:")[1]
            kern, steps = 0, []
            for line in p.lines:
                for e in line.events:
                    name = p.event_metadata[e.metadata_id].name
                    if line.name.startswith("Stream") and "Memcpy" not in line.name and "Memcpy" not in name:
                        kern += e.duration_ps
                    if line.name == "Steps":
                        steps.append(((line.timestamp_ns * 1000 + e.offset_ps) / 1e9, e.duration_ps / 1e9))
            out[dev] = {"kernel_ms": kern / 1e9, "steps": steps}
    return out


def test_gpu_fragment_reported_as_it_is():
    sample = SAMPLES / "real_tf_gpu_multiworker"
    want = expected(sample)["real"]
    facts = _device_facts(sample)
    active = sorted(d for d, v in facts.items() if v["kernel_ms"] > 0)
    assert active == want["devices_with_kernels"] and len(facts) == want["devices_total"]
    for d in active:
        assert facts[d]["kernel_ms"] == pytest.approx(want["device_kernel_ms"][d], abs=0.01)
        assert [round(s[1], 2) for s in facts[d]["steps"]] == [want["device_step_ms"][d]]
    m = report(sample)["metrics"]
    assert m["devices_total"] == len(facts) and m["devices_active"] == len(active)
    assert m["devices_active_list"] == ", ".join(active)
    assert m["complete_steps"] == 1 and m["capture_steady_state"] is False
    starts = sorted(facts[d]["steps"][0][0] for d in active)
    assert m["step_skew_ms"] == pytest.approx(starts[1] - starts[0], abs=0.01)
    lo, hi = want["step_skew_ms"]
    assert lo <= m["step_skew_ms"] <= hi
    busy = sum(facts[d]["kernel_ms"] for d in active) / len(active)
    assert busy / m["capture_window_ms"] * 100 <= m["device_busy_pct"] <= 1.0  # copies add a little, never much
    top = report(sample)["findings"][0]
    assert top["rule"] == "capture_not_steady_state" and "GPU:4" in top["message"] + json.dumps(top)
