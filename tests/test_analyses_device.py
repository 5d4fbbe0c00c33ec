"""placement and precision: host vs device ops, precision classes, xprof's counting."""

from __future__ import annotations

import pytest
from conftest import SAMPLES, expected, load_sample, sample_dirs

from tfadvisor.analyses import placement, precision
from tfadvisor.analyses import steps as steps_analysis
from tfadvisor.analyses.base import AnalysisResult, Context, Options
from tfadvisor.analyses.inputs import run as run_analysis
from tfadvisor.model.trace import Trace
from tfadvisor_dev import synthetic as syn


def _steps(trace) -> AnalysisResult:
    return run_analysis(steps_analysis.analyze, trace, Context())


def run(module, trace, options: Options | None = None, steps: bool = True) -> AnalysisResult:
    ctx = Context(options=options or Options())
    if steps:
        ctx.results["steps"] = _steps(trace)
    return run_analysis(module.analyze, trace, ctx)


def values(res: AnalysisResult) -> dict:
    return {k: m.value for k, m in res.metrics.items()}


# --- kernel name classes ---------------------------------------------------------------

@pytest.mark.parametrize("name, cls, xprof16", [
    # Tensor-core fp16 GEMM whose name also says fp16: ours fp16; xprof counts it 16-bit
    # too, because its rule is "'half' or 'fp16' in the name".
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "fp16", True),
    # Tensor-core fp16 names without 'half'/'fp16': ours fp16, xprof 32-bit.
    ("ampere_h16816gemm_256x128_ldg8_stages_64x3_nn", "fp16", False),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16", False),
    ("turing_h1688gemm_128x128_ldg8_tn", "fp16", False),
    ("sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x32", "fp16", False),
    ("volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_nn", "fp16", True),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x32", "bf16", False),
    ("ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "bf16", False),
    ("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn", "tf32", False),
    ("ampere_s1688gemm_128x128_ldg8_stages_32x3_nt", "tf32", False),
    ("turing_i8816gemm_128x128_ldg8_nt", "int8", False),
    ("ampere_i16832gemm_int8_256x128_ldg16_stages_64x3_nt", "int8", False),
    ("ampere_sgemm_128x64_nn", "fp32", False),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "fp32", False),
    ("void tensorflow::BiasNHWCKernel<Eigen::half>(int, Eigen::half const*, Eigen::half*, int)", "fp16", True),
    ("void tensorflow::BiasNHWCKernel<float>(int, float const*, float*, int)", "fp32", False),
    # The argument list does not decide: a float kernel taking a double argument is fp32.
    ("void foo<float>(float*, double)", "fp32", False),
    ("void tensorflow::(anonymous namespace)::GenerateNormalizedProb<Eigen::half, float, 4>(Eigen::half const*)",
     "fp16", True),
    ("redzone_checker", "unknown", False),
])
def test_kernel_class(name, cls, xprof16):
    assert precision.kernel_class(name) == cls
    assert precision.xprof_is_16bit(name) is xprof16


# --- GPU samples -----------------------------------------------------------------------

def test_fp32_vs_mixed():
    fp32 = values(run(precision, load_sample("synthetic_gpu_fp32")))
    mixed = values(run(precision, load_sample("synthetic_gpu_mixed")))
    assert fp32["low_precision_pct"] < 1.0 and fp32["fp32_pct"] > 99.0
    assert mixed["low_precision_pct"] > 60.0
    # xprof misses tensor-core kernels whose names lack 'half'/'fp16'.
    assert mixed["xprof_16bit_pct"] < mixed["low_precision_pct"]
    for v in (fp32, mixed):
        assert v["tensor_core_capable"] is True and v["compute_capability"] == "8.0"
        assert v["device_compute_ms"] > 0
        assert v["cpu_low_precision_pct"] is None
        total = v["fp16_pct"] + v["bf16_pct"] + v["tf32_pct"] + v["int8_pct"] + v["fp32_pct"]
        assert total == pytest.approx(100.0, abs=1e-6)


@pytest.mark.parametrize("sample", [p.name for p in sample_dirs() if "fp16_pct" in expected(p).get("truth", {})])
def test_16bit_share_matches_truth(sample):
    lo, hi = expected(SAMPLES / sample)["truth"]["fp16_pct"]  # the 16-bit share: fp16 + bf16
    t = load_sample(sample)
    for h in t.hosts:
        v = values(run(precision, t.host(h), steps=False))
        assert lo <= v["fp16_pct"] + v["bf16_pct"] <= hi, (h, v)


def test_precision_tables():
    res = run(precision, load_sample("synthetic_gpu_mixed"), steps=False)
    mix = res.tables["precision_mix"]
    assert set(mix["precision"]) >= {"fp16", "bf16", "fp32"}
    assert mix["pct"].sum() == pytest.approx(100.0)
    k = res.tables["kernels"]
    assert {"kernel", "precision", "tensor_core", "xprof_16bit", "count", "total_ms"} <= set(k.columns)
    assert k["tensor_core"].any()


def test_placement_gpu():
    v = values(run(placement, load_sample("synthetic_gpu_allreduce")))
    assert v["device_present"] is True
    # the generator plants no host-only ops here, and its kernel time (per GPU, all steps) is the device op time
    planted = syn.build_xspaces(syn._samples()["synthetic_gpu_allreduce"].specs)[1]["hosts"]["synth-a100"]
    assert v["device_op_count"] > 0
    assert v["device_op_time_ms"] == pytest.approx(planted["kernel_ms_per_step"] * planted["steps"], rel=0.01)
    assert v["host_op_count"] == 0 and v["host_op_time_pct"] == 0.0


# --- CPU samples -----------------------------------------------------------------------

def test_cpu_mixed_precision_is_seen():
    res = run(precision, load_sample("mixed_precision"), steps=False)
    v = values(res)
    assert v["cpu_precision_source"] == "keras_casts"
    assert v["cpu_low_precision_pct"] > 30.0
    assert v["fp16_pct"] is None and v["xprof_16bit_pct"] is None  # no GPU
    assert any("GPU" in n for n in res.notes)


def test_cpu_precision_from_memory_events():
    res = run(precision, load_sample("memory_heavy"), steps=False)
    v = values(res)
    assert v["cpu_precision_source"] == "memory_events"
    assert v["cpu_low_precision_pct"] == 0.0  # an fp32 CNN
    mix = res.tables["dtype_mix"]
    assert mix.iloc[0]["data_type"] == "float32"


def test_cpu_precision_unknown_dtypes():
    res = run(precision, load_sample("eager"), steps=False)
    v = values(res)
    assert v["cpu_low_precision_pct"] is None and v["cpu_precision_source"] is None
    assert any("TF_CPU_ALLOCATOR_USE_BFC" in n for n in res.notes)


def test_placement_cpu_only():
    res = run(placement, load_sample("memory_heavy"))
    v = values(res)
    assert v["device_present"] is False
    assert v["host_op_count"] > 0 and v["device_op_count"] == 0
    assert v["host_op_time_ms"] > 0
    assert v["host_op_time_pct"] is None and v["device_op_time_ms"] is None
    assert res.notes
    ops = res.tables["host_ops"]
    assert ops.iloc[0]["type"].startswith("Conv2DBackprop")  # the heavy CNN gradients
    assert (ops["total_ms"].diff().dropna() <= 0).all()


def test_placement_counts_eager_ops():
    v = values(run(placement, load_sample("eager")))
    assert v["host_op_count"] > 100


# --- traces without the data -----------------------------------------------------------

@pytest.mark.parametrize("module", [placement, precision])
def test_empty_trace(module):
    res = run(module, Trace(planes=[], files=[]), steps=False)
    assert res.notes
    for name, m in res.metrics.items():
        if name != "device_present":
            assert m.value is None, name


@pytest.mark.parametrize("sample", ["synthetic_gpu_allreduce", "gpu_jax_mlp_bf16", "real_tf_gpu_multiworker"])
def test_kernel_rows_found_again_give_the_held_answers(sample, monkeypatch):
    """A big device plane does not hold its kernel rows for the run (``placement.HOLD_ROWS_UP_TO``): every plane
    treated as big, each caller finding them again, gives the same metrics and tables as held ones."""
    from test_declared_stats import _plain

    from tfadvisor import api

    held = _plain(api.analyze(str(SAMPLES / sample), jobs=1))
    monkeypatch.setattr(placement, "HOLD_ROWS_UP_TO", 0)
    assert _plain(api.analyze(str(SAMPLES / sample), jobs=1)) == held
