"""A compute-bound Keras CNN on the CPU (issue 24, in part): the step's time is in convolutions, and the report
names them with their shares (checked against an independent protobuf count) and gives the fix that fits this
CPU; never "no findings", and no 16-bit advice for a CPU without fast 16-bit math. Real TensorFlow capture."""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import CAPTURE_MARKS, ROOT, run_capture_script

import tfadvisor
from tfadvisor.analyses.opcost import INPUT_OPS, display_type
from tfadvisor.analyses.placement import WRAPPER_TYPES
from tfadvisor.proto import xplane_pb2
from tfadvisor.report.findings import finding_rule

pytestmark = CAPTURE_MARKS

CNN = r'''
import os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np, keras
from tfadvisor.keras import AdvisorCallback
keras.utils.set_random_seed(0)
x = np.random.rand(512, 32, 32, 3).astype("float32"); y = np.random.randint(0, 10, 512)
m = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Conv2D(32, 3, activation="relu"),
                      keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.MaxPooling2D(),
                      keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.GlobalAveragePooling2D(),
                      keras.layers.Dense(10)])
m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
cb = AdvisorCallback(sys.argv[1], steps=(3, 13), analyze=False)
m.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[cb])
print("RUN", cb.run_dir, flush=True)
'''
TF_OP = re.compile(r"^[^:\s]+:([A-Za-z_][A-Za-z0-9_]*)$")


@pytest.fixture(scope="module")
def cnn_run(tmp_path_factory) -> Path:
    return Path(run_capture_script(CNN, tmp_path_factory.mktemp("cnn")))


#: an op dispatched eagerly (``EagerLocalExecute: Identity``), not a function's call (``__inference_...``): the tool
#: counts those as TF ops too (a Keras fit's eager reads inside the window: one Identity of 5.7 ms here, 2.3 % of
#: the op time, which the graph ops' shares alone missed)
EAGER_OP = re.compile(r"^EagerLocalExecute: (?!__inference_)([A-Za-z][A-Za-z0-9_]*)$")


def _protobuf_shares(run_dir: Path) -> dict[str, float]:
    """Op-type shares of TF op time read with protobuf alone (not tfadvisor's reader)."""
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(next(run_dir.glob("*.xplane.pb")).read_bytes())
    by_type: dict[str, float] = defaultdict(float)
    for plane in xs.planes:
        if not plane.name.startswith("/host:"):
            continue
        for line in plane.lines:
            for ev in line.events:
                name = plane.event_metadata[ev.metadata_id].name
                m = TF_OP.match(name) or EAGER_OP.match(name)  # graph ops and ops dispatched eagerly (not calls)
                if m and m.group(1) not in WRAPPER_TYPES and not INPUT_OPS.match(display_type(m.group(1))):
                    by_type[display_type(m.group(1))] += max(ev.duration_ps, 0)
    total = sum(by_type.values())
    return {t: 100 * v / total for t, v in by_type.items()}


@pytest.mark.parametrize(("op", "want"), [
    ("BiasAddGrad", "elementwise"),  # "...AddGrad": not cuDNN's dgrad (its share once inflated the matrix ops')
    ("ReluGrad", "elementwise"), ("Conv2DBackpropInput", "matrix"), ("dgrad_engine", "matrix"),
    ("wgrad_alg0_engine", "matrix"), ("sm80_xmma_dgrad_implicit_gemm", "matrix"), ("Convert", "elementwise"),
])
def test_op_categories(op, want):
    from tfadvisor.analyses.opcost import category

    assert category(op) == want


def _finding(result, rule: str):
    return next(f for f in result.findings if finding_rule(f) == rule)


def test_the_dominant_ops_are_named_with_shares_that_match_protobuf(cnn_run):
    r = tfadvisor.analyze(cnn_run)
    rules = [finding_rule(f) for f in r.findings]
    assert "compute_bound_matrix" in rules, rules  # never "no findings" on a compute-bound run
    # nothing about the input pipeline or the runtime outranks it (on a loaded machine the findings about the
    # load may: step outliers, other processes taking the cores)
    assert all(x in ("compute_bound_matrix", "step_outliers", "system_competing_load", "variable_work_per_step")
               for x in rules[:rules.index("compute_bound_matrix")]), rules
    found = r.findings[rules.index("compute_bound_matrix")]
    assert "Conv2DBackprop" in found.message
    table = r.tables["op_types"]
    truth = _protobuf_shares(cnn_run)
    for row in table.head(3).itertuples():  # the top entries, within 1 percentage point
        assert row.pct == pytest.approx(truth[row.type], abs=1.0), (row.type, row.pct, truth[row.type])
    assert abs(table["pct"].sum() - 100) < 1e-6
    assert r.metrics["op_matrix_pct"] == pytest.approx(
        sum(v for t, v in truth.items() if re.search(r"(?i)conv|matmul|einsum", t)), abs=1.0)


def test_the_fix_fits_the_cpu(cnn_run, tmp_path):
    md = json.loads((cnn_run / "tfadvisor_run.json").read_text())
    flags = md["cpu"]["flags"]  # recorded at capture
    fast = any(f in flags for f in ("amx_bf16", "avx512_bf16"))
    fix = _finding(tfadvisor.analyze(cnn_run), "compute_bound_matrix").fix
    assert ('set_global_policy("mixed_bfloat16")' in fix) == fast
    # the same profile from a CPU without fast 16-bit math: keep float32, no 16-bit policy at all
    copy = tmp_path / "run"
    shutil.copytree(cnn_run, copy)
    md["cpu"]["flags"] = [f for f in flags if f not in ("amx_bf16", "avx512_bf16", "avx512_fp16", "amx_tile")]
    (copy / "tfadvisor_run.json").write_text(json.dumps(md))
    r = tfadvisor.analyze(copy)
    assert r.metrics["cpu_fast_bf16"] is False
    fix = _finding(r, "compute_bound_matrix").fix
    assert "keep float32" in fix and "set_global_policy" not in fix and "float16" not in fix.replace("16-bit", "")


HOST_OFFLOAD = ROOT / "sample_traces" / "real_jax_tpu_v6e4_host_offload"  # REAL.md: its source


def test_host_offload_tpu_trace_leads_with_the_copies():
    """Issue 24's real JAX trace (4 TPU v6e chips, host offload, no steps): copy-done takes ~96.5 % of the chips'
    op time (independent protobuf count below); the first finding says so instead of only "no steps"."""
    r = tfadvisor.analyze(HOST_OFFLOAD)
    first = r.findings[0]
    assert finding_rule(first) == "op_time_dominant" and first.severity == "warning", first.title
    assert "copy-done" in first.message and first.title == "The devices spend their op time moving data"
    # independent: every XLA op event of the TPU planes, read with protobuf, by HLO instruction name
    xs = xplane_pb2.XSpace()
    xs.ParseFromString(next(HOST_OFFLOAD.rglob("*.xplane.pb")).read_bytes())
    by: dict[str, float] = defaultdict(float)
    for plane in xs.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        ops = [ln for ln in plane.lines if ln.name == "XLA Ops"]
        for line in ops:
            for ev in line.events:
                name = plane.event_metadata[ev.metadata_id].name
                by[re.sub(r"\.\d+$", "", name.lstrip("%").split(" ", 1)[0])] += ev.duration_ps
    share = 100 * by["copy-done"] / sum(by.values())
    assert 96 <= share <= 97
    assert r.metrics["op_top_ops"].startswith("copy-done")
    assert r.metrics["op_data_movement_pct"] == pytest.approx(share + 100 * by["copy-start"] / sum(by.values()),
                                                              abs=1.0)
