"""Vendor-neutral precision: real JAX traces from AMD MI300X GPUs (hipBLASLt/Tensile, CK, Triton)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from conftest import SAMPLES

import tfadvisor
from tfadvisor.analyses import precision
from tfadvisor.analyses.hlo_dtypes import hlo_classes
from tfadvisor.proto import xplane_pb2

MATRIX_TRACES = ["real_jax_rocm_mi300_gemm", "real_jax_rocm_mi300_attention", "real_jax_rocm_mi300_conv_08",
                 "real_jax_rocm_mi300_conv_legacy", "real_jax_rocm_te_fused_attn"]
ELEMENTWISE = "real_jax_rocm_mi300_elementwise"
AMD_TRACES = [*MATRIX_TRACES, ELEMENTWISE]
NVIDIA_WORDS = re.compile(r"Tensor Core|mixed_float16|compute capability", re.IGNORECASE)


@pytest.fixture(scope="module")
def results() -> dict:
    return {s: tfadvisor.analyze(SAMPLES / s) for s in AMD_TRACES}


def _metric(res, name):
    m = res.metrics.get(name)
    return getattr(m, "value", m)


def _recount(sample: str) -> tuple[float, dict[str, float]]:
    """Independent recount with the generated protobuf module: bf16 matrix kernels (Tensile ``_BBS_``,
    CK ``bfloat16_t``) in ms, and the time per HLO-named instruction of the Triton GEMM fusions."""
    f = next(Path(SAMPLES / sample).rglob("*.xplane.pb"))
    sp = xplane_pb2.XSpace()
    sp.ParseFromString(f.read_bytes())
    bf16_ps = 0
    triton: dict[str, float] = {}
    for p in sp.planes:
        if not p.name.startswith("/device:GPU"):
            continue
        for line in p.lines:
            for e in line.events:
                n = p.event_metadata[e.metadata_id].name
                if re.match(r"Cijk_A[a-z]+_B[a-z]+_BBS_", n) or ("ck_tile::" in n and "bfloat16_t" in n):
                    bf16_ps += e.duration_ps
                elif n.startswith("gemm_fusion_dot"):
                    triton[n] = triton.get(n, 0.0) + e.duration_ps / 1e9
    return bf16_ps / 1e9, triton


@pytest.mark.parametrize("sample", MATRIX_TRACES)
def test_amd_matrix_work_is_bf16(sample, results):
    res = results[sample]
    assert _metric(res, "device_vendor") == "amd"
    assert _metric(res, "framework") == "jax"
    assert _metric(res, "tensor_core_capable") is False
    assert _metric(res, "matrix_dtype") == "bf16"
    assert _metric(res, "matrix_bf16_pct") == pytest.approx(100.0)
    assert _metric(res, "matrix_fp32_pct") == 0.0 and _metric(res, "matrix_unknown_pct") == 0.0
    assert "hlo" in _metric(res, "precision_source")
    # matrix time = the named bf16 library kernels + the Triton GEMM fusions (bf16 per the HLO)
    # + the convolution's im2col kernel (part of the bf16 conv custom call in the HLO).
    named, triton = _recount(sample)
    matrix_ms = _metric(res, "matrix_time_ms")
    assert matrix_ms >= named + sum(triton.values()) - 1e-6
    tables = res.tables.get("kernels") if hasattr(res, "tables") else None
    if "conv" not in sample:
        assert matrix_ms == pytest.approx(named + sum(triton.values()), rel=1e-6)
    assert tables is None or len(tables)
    ids = [f.rule for f in res.findings]
    assert "mixed_precision_unused" not in ids and "mixed_precision_unused_amd" not in ids


@pytest.mark.parametrize("sample", AMD_TRACES)
def test_no_nvidia_words_on_amd(sample, results):
    for f in results[sample].findings:
        text = " ".join([f.title, f.message, f.fix or ""])
        assert not NVIDIA_WORDS.search(text), (f.rule, text[:200])


def test_elementwise_trace_has_no_matrix_work(results):
    res = results[ELEMENTWISE]
    assert _metric(res, "matrix_time_ms") is None and _metric(res, "matrix_dtype") is None
    assert _metric(res, "fp32_pct") is None  # elementwise fusions tell no dtype: never counted as fp32
    assert _metric(res, "precision_unknown_pct") == 100.0
    assert not [f for f in res.findings if f.rule.startswith("mixed_precision")]


def test_hlo_decoded_from_host_metadata():
    h = hlo_classes(tfadvisor.load(SAMPLES / "real_jax_rocm_te_fused_attn"))
    matrix = {k: v for k, v in h.items() if v != "none" and k[0].startswith("#")}
    assert matrix and set(matrix.values()) == {"bf16"}
    ops = {op for _, op in matrix}
    assert any(op.startswith("gemm_fusion_dot") for op in ops)
    assert any(op.startswith("te_fused_attn_forward") for op in ops)
    assert h[("#17", "gemm_fusion_dot")] == "bf16"


# --- the kernel-name classifier on names from the traces --------------------------------------

TENSILE_BBS = ("Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB1_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS3_ASE_"
               "ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR1_DTLA0_DTLB0_DTVA1_DTVB0_DVO0_ETSP_EPS1")
HIPBLASLT_BIAS = ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1_CMS_SN_LDSB0_AFC0_AG1_"
                  "AFEM1_AFEM1_ASEM1_CLR0_CADS0_DTLA1_DTLB1_DTVA0_DTVB0_EPS0_ELFLR0_EMLLn1_FDSI0_GRPM1")
CK_FMHA = ("void ck_tile::kentry<ck_tile::gfx950_t, 2, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync<"
           "ck_tile::BlockFmhaPipelineProblem<std::bfloat16_t, std::bfloat16_t, std::bfloat16_t, float, float>>>>")


@pytest.mark.parametrize("name, cls, matrix", [
    (TENSILE_BBS, "bf16", True),
    (HIPBLASLT_BIAS, "bf16", True),
    (TENSILE_BBS.replace("_BBS_", "_HHS_"), "fp16", True),
    (TENSILE_BBS.replace("_BBS_BH_", "_SS_"), "fp32", True),
    (TENSILE_BBS.replace("_BBS_BH_", "_SSS_"), "fp32", True),
    (CK_FMHA, "bf16", True),
    (CK_FMHA.replace("std::bfloat16_t", "ck_tile::fp16_t"), "fp16", True),
    ("gemm_fusion_dot.kd", "unknown", True),
    ("gemm_fusion_dot_general_1.kd", "unknown", True),
    ("Im3d2Col.kd", "unknown", False),
    ("loop_convert_fusion.kd", "unknown", False),
    ("input_reduce_fusion.kd", "unknown", False),
    # Eigen casts (TF) are TensorConversionOp: not convolutions
    ("void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::TensorMap<"
     "Eigen::Tensor<Eigen::half, 1, 1, long>, 16, Eigen::MakePointer>, Eigen::TensorConversionOp<Eigen::half, "
     "Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, long>, 16, Eigen::MakePointer> const> const> const, "
     "Eigen::GpuDevice>, long>(int)", "fp16", False),
    ("void cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float, true>(int)", "fp32", True),
    ("input_transpose_fusion", "unknown", False),
    ("wrapped_broadcast.kd", "unknown", False),
    ("ampere_sgemm_128x64_nn", "fp32", True),
    ("volta_h884gemm_64x64_ldg8_nn", "fp16", True),
])
def test_name_classifier(name, cls, matrix):
    assert precision.kernel_class(name) == cls
    assert precision.is_matrix_kernel(name) is matrix


# --- odd values ------------------------------------------------------------------------------

@pytest.mark.parametrize("v, want", [(9, 9), (9.0, 9), ("7", 7), (float("nan"), None), (float("inf"), None),
                                     (-float("inf"), None), (1e400, None), ("x", None), (None, None), (2**70, None)])
def test_finite_int(v, want):
    assert precision._finite_int(v) == want


def test_fuzz_case_percentages_in_range():
    case = Path(__file__).resolve().parent / "data" / "fuzz_cases" / "insane_precision_pct_over_100" / "logdir"
    res = tfadvisor.analyze(case)
    seen = 0
    for name, m in res.metrics.items():
        v = getattr(m, "value", m)
        if name.endswith("_pct") and isinstance(v, float) and name in _PRECISION_PCTS:
            assert math.isfinite(v) and 0.0 <= v <= 100.0, (name, v)
            seen += 1
    assert seen >= 8


_PRECISION_PCTS = {"fp16_pct", "bf16_pct", "tf32_pct", "int8_pct", "fp32_pct", "low_precision_pct",
                   "xprof_16bit_pct", "precision_unknown_pct", "matrix_fp16_pct", "matrix_bf16_pct",
                   "matrix_tf32_pct", "matrix_fp32_pct", "matrix_int8_pct", "matrix_low_precision_pct",
                   "matrix_unknown_pct"}


# --- wording fits vendor, framework and kind of run --------------------------------------------

@pytest.mark.parametrize("rule_id, metrics, must, must_not", [
    ("mixed_precision_unused", {"device_vendor": "nvidia", "tensor_core_capable": True, "framework": "tensorflow",
                                "steps_count": 10, "step_device_compute_pct": 70.0}, ["training", "mixed_float16"],
     ["jnp."]),
    ("mixed_precision_unused", {"device_vendor": "nvidia", "tensor_core_capable": True, "framework": "jax",
                                "steps_count": 0, "device_compute_ms": 5.0}, ["matrix work", "jnp.bfloat16"],
     ["training runs", "mixed_float16"]),
    ("mixed_precision_unused_amd", {"device_vendor": "amd", "framework": "jax", "steps_count": 0,
                                    "device_compute_ms": 5.0}, ["Matrix Cores", "jnp.bfloat16"],
     ["Tensor Core", "mixed_float16"]),
    ("mixed_precision_unused_amd", {"device_vendor": "amd", "framework": "tensorflow", "steps_count": 10,
                                    "step_device_compute_pct": 50.0}, ["training", "mixed_bfloat16"],
     ["Tensor Core", "mixed_float16"]),
])
def test_rule_wording(rule_id, metrics, must, must_not):
    from tfadvisor.advice import evaluate_rule, load_rules

    rule = {r.id: r for r in load_rules()}[rule_id]
    base = {"matrix_fp32_pct": 100.0, "matrix_unknown_pct": 0.0, "matrix_time_ms": 40.0, "compute_capability": "8.0"}
    f = evaluate_rule(rule, {**base, **metrics})
    assert f is not None
    text = " ".join([f.title, f.message, f.fix])
    for w in must:
        assert w in text, (w, text[:300])
    for w in must_not:
        assert w not in text, (w, text[:300])


def _kernel_tables_by_pandas(kernels, class_ps, matrix_ps, total_ps):
    """The pandas statement of the ``precision_mix`` and ``kernels`` tables (group, sum, sort, left join), which
    :func:`precision._kernel_tables` computes with numpy."""
    import numpy as np
    import pandas as pd

    keys = ["kernel", "precision", "matrix", "tensor_core", "xprof_16bit"]
    k = kernels.to_pandas().groupby(keys, as_index=False)[["count", "total_ps"]].sum()
    k["total_ms"] = k["total_ps"] / precision.PS_PER_MS
    k["pct"] = np.minimum(100.0, 100.0 * k["total_ps"] / total_ps)
    k = k.sort_values(["total_ps", "kernel"], ascending=[False, True], kind="stable")
    mix = pd.DataFrame({"precision": list(precision.CLASSES), "total_ms": class_ps / precision.PS_PER_MS,
                        "pct": 100.0 * class_ps / total_ps, "matrix_ms": matrix_ps / precision.PS_PER_MS})
    kn = k.groupby("precision").agg(kernels=("kernel", "size"), count=("count", "sum"))
    mix = mix.join(kn, on="precision")
    mix = mix[mix["total_ms"] > 0].sort_values("total_ms", ascending=False, kind="stable").reset_index(drop=True)
    return (mix[["precision", "kernels", "count", "total_ms", "pct", "matrix_ms"]],
            k.head(precision.TOP_KERNELS).drop(columns="total_ps").reset_index(drop=True))


@pytest.mark.parametrize("every_class", [False, True], ids=["some_classes", "every_class"])
def test_kernel_tables_are_the_pandas_group_and_join(every_class):
    """Random kernel rows (repeated names across devices, equal times, every class or some): the numpy tables are
    the pandas ones, row for row and dtype for dtype (floats where a class has no kernel, as the join leaves)."""
    import numpy as np
    import pandas as pd

    from tfadvisor.model.table import Table

    rng = np.random.default_rng(11)
    for _ in range(40):
        n = int(rng.integers(0 if not every_class else 8, 120))
        classes = list(precision.CLASSES)
        prec = [classes[i % 8] for i in range(8)] + [classes[int(c)] for c in rng.integers(0, 8, n - 8)] \
            if every_class else [classes[int(c)] for c in rng.integers(0, 5, n)]
        kernels = Table({
            "kernel": np.array([f"k{int(i)}" for i in rng.integers(0, 25, n)]),
            "precision": prec,
            "matrix": rng.random(n) < 0.5,
            "tensor_core": rng.random(n) < 0.3,
            "xprof_16bit": rng.random(n) < 0.2,
            "count": rng.integers(1, 50, n),
            "total_ps": rng.integers(1, 6, n).astype(np.float64) * 1e6,  # equal times: the tie order counts
        }, n=n)
        class_ps = rng.integers(0, 4, 8).astype(np.float64) * 1e9
        matrix_ps = class_ps / 2
        total = float(class_ps.sum()) or 1.0
        got = precision._kernel_tables(kernels, class_ps, matrix_ps, total)
        want = _kernel_tables_by_pandas(kernels, class_ps, matrix_ps, total)
        for g, w in zip(got, want):
            pd.testing.assert_frame_equal(g.to_pandas(), w, check_dtype=True)
