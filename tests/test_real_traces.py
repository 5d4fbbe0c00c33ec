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


def _runs(sample: Path) -> list[bytes]:
    if sample.name not in _JSON:
        before = _snapshot(sample)
        outs = []
        for _ in range(RUNS):
            r = _cli("analyze", str(sample), "--format", "json")
            assert r.returncode == 0, f"{sample.name}: exit {r.returncode}\n{r.stderr.decode()[-2000:]}"
            assert not r.stderr.strip(), f"{sample.name}: stderr {r.stderr.decode()[-2000:]}"
            outs.append(r.stdout)
        assert _snapshot(sample) == before, f"{sample.name}: the analysis wrote into the logdir"
        _JSON[sample.name] = outs
    return _JSON[sample.name]


def report(sample: Path) -> dict:
    return json.loads(_runs(sample)[0])


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
