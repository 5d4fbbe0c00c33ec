"""Numeric precision of the computation: fp16 / bf16 / tf32 / fp32 / int8 shares.

On a GPU the precision of each kernel is read from its name (cuBLAS/cuDNN/CUTLASS names
carry the tensor-core instruction shape and operand types: ``h884``, ``s1688``, ``16816``,
``hmma``, ``xmma_..._f16f16...``, ``bf16``, ``half``...). The class is decided once per
distinct kernel name and the time summed with ``bincount``. Kernels whose name tells no
type fall back to the dtype their TF op allocates (from memory events, when the trace has
them), else count as 32-bit, as xprof does.

``xprof_16bit_pct`` repeats xprof's own counting for comparison: a kernel is 16-bit only
when its name contains ``half`` or ``fp16`` (or, when the kernel has a ``tensor_shapes``
stat, when that contains ``half``); tensor-core names without those words are 32-bit.

On a CPU-only trace there are no kernels; the 16-bit share of TF op time is computed where
the trace tells dtypes: from memory events (``tf_op`` + ``data_type``, recorded with
``TF_CPU_ALLOCATOR_USE_BFC=true``), else from the Keras mixed-precision signature (a layer
casting its variables to the compute dtype: ``<layer>/Cast/Cast:Cast``).
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.hlo_dtypes import MODULE_KEY, hlo_classes
from tfadvisor.analyses.names import name_test
from tfadvisor.analyses.placement import (
    NO_KERNEL_TYPES,
    compute_kernel_rows,
    device_meta_classes,
    gpu_planes,
    kernel_meta_totals,
    meta_durations,
    op_name,
    op_type,
    tf_op_meta_mask,
)
from tfadvisor.analyses.tf_dtypes import DTYPE_CLASS, DTYPE_NAMES
from tfadvisor.model.table import Table, group_sum
from tfadvisor.model.trace import Trace
from tfadvisor.model.values import as_int

if TYPE_CHECKING:
    import pandas as pd

#: The event-level stats this module reads (the reader keeps only those some module declares).
EVENT_STATS = ("hlo_module", "hlo_op", "program_id", "tf_op", "tensor_shapes")

CLASSES = ("fp16", "bf16", "tf32", "fp32", "int8", "fp8", "fp64", "unknown")
LOW_PRECISION = ("fp16", "bf16", "int8", "fp8")

_INT8 = re.compile(r"i8816|i16832|imma|int8|i8i8|s8s8|u8s8|_s8_")
_BF16 = re.compile(r"bf16|bfloat16")
_FP8 = re.compile(r"fp8|e4m3|e5m2|qmma")
_TF32 = re.compile(r"tf32|tensorfloat")
_FP64 = re.compile(r"double|dgemm|f64|fp64|d884|dmma|zgemm")
# m16n8k16 (16816) and m8n8k4 (884) tensor-core shapes take 16-bit operands; h-prefixed
# shapes accumulate in half; hmma is the half-precision MMA instruction.
_FP16 = re.compile(r"fp16|f16|half|h884|h1688|h16816|hgemm|hmma|16816|884")
# m16n8k8 with 32-bit operands (s1688 without fp16 in the name) runs as TF32 on Ampere+.
_TF32_TC = re.compile(r"s1688|c1688")
_FP32 = re.compile(r"float|sgemm|f32|fp32|scudnn|single|cgemm")


def _strip_args(name: str) -> str:
    """``void f<T>(T const*, double)`` -> ``void f<T>``: the argument list can mention other types."""
    name = name.replace("(anonymous namespace)", "anonymous_namespace")
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


# hipBLASLt/Tensile (also behind rocBLAS): ``Cijk_Ailk_Bljk_<types>_...``; the first letters of
# <types> are the input type (B bf16, H fp16, S fp32, D fp64, I8/4xi8 int8, F8/B8 fp8), the next
# the output and compute types (BBS: bf16 in and out, fp32 accumulate).
_TENSILE = re.compile(r"^Cijk_A[a-z]+_B[a-z]+_([A-Za-z0-9]+)")
_TENSILE_IN = (("4xi8", "int8"), ("I8", "int8"), ("F8", "fp8"), ("B8", "fp8"), ("BF", "bf16"), ("B", "bf16"),
               ("H", "fp16"), ("S", "fp32"), ("C", "fp32"), ("D", "fp64"), ("Z", "fp64"))
# Matrix work: GEMM, convolution and attention kernels of cuBLAS/cuDNN/CUTLASS, hipBLASLt/
# Tensile/rocBLAS/MIOpen/Composable Kernel, Triton and XLA (``gemm_fusion_dot``). Not
# ``convert`` fusions, not batch-norm kernels.
_MATRIX = re.compile(
    r"gemm|gemv|matmul|^cijk_|cutlass|xmma|wgmma|hmma|imma|^nvjet_|(?<![a-z0-9])[a-z_]*(?:884|1688|16816|8816|16832)"
    r"|conv(?!ert|ersion)|winograd|fprop|dgrad|wgrad|contraction"
    r"|fmha|flash_?attn|flash_fwd|flash_bwd|attention|mha_|_attn_"
    r"|(?:^|[_.:])dot(?:[_.]|$)|dot_general|triton_gemm|ck::.*gemm|ck_tile::.*(?:gemm|fmha)")
_NOT_MATRIX = re.compile(r"bn_fw|bn_bw|batch_?norm|im2col|im3d2col|col2im|redzone")
# Helpers a library runs inside a matrix op (buffer fills, RNG state): never matrix work,
# whatever HLO instruction they belong to.
_AUX = re.compile(r"fillbuffer|copybuffer|memset|rng_state|philox|random")


@name_test
def is_aux_kernel(name: str) -> bool:
    """True for a buffer-fill/copy or RNG helper kernel."""
    return _AUX.search(name.lower()) is not None


@name_test
def is_matrix_kernel(name: str) -> bool:
    """True for a GEMM / convolution / attention kernel, by its name."""
    n = _strip_args(name).lower()
    return _MATRIX.search(n) is not None and _NOT_MATRIX.search(n) is None and _AUX.search(n) is None


@name_test
def kernel_class(name: str) -> str:
    """Precision class of a GPU kernel from its name (one of :data:`CLASSES`)."""
    m = _TENSILE.match(name.strip())
    if m:
        code = m.group(1)
        for prefix, cls in _TENSILE_IN:
            if code.startswith(prefix):
                return "tf32" if cls == "fp32" and "_XF32" in name.upper() else cls
        return "unknown"
    n = _strip_args(name).lower()
    if "bhalf" in n:  # Composable Kernel's bf16 type: ck::bhalf_t
        return "bf16"
    if _INT8.search(n):
        return "int8"
    if _BF16.search(n):
        return "bf16"
    if _FP8.search(n):
        return "fp8"
    if _TF32.search(n):
        return "tf32"
    if _FP64.search(n):
        return "fp64"
    if _FP16.search(n):
        return "fp16"
    if _TF32_TC.search(n):
        return "tf32"
    if _FP32.search(n):
        return "fp32"
    return "unknown"


def xprof_is_16bit(name: str) -> bool:
    """xprof's rule (ClassifyGpuCompute): the kernel name contains ``half`` or ``fp16``."""
    return "half" in name or "fp16" in name


TOP_KERNELS = 30


# ----------------------------------------------------------------------------------------
# dtypes from memory events
# ----------------------------------------------------------------------------------------

def op_dtypes(trace: Trace, ctx: Context | None = None, memory: pd.DataFrame | None = None,
              ) -> tuple[dict[str, int], pd.DataFrame | None]:
    """TF op name -> TF DataType of its largest output, from MemoryAllocation events.

    Also returns a table of allocated bytes per dtype (None when there are no such events).
    Outputs tell an op's dtype; temporaries may differ (a half MatMul on the CPU computes
    through float32 temporaries), so they are used only for ops with no output allocation.
    """
    from tfadvisor.analyses.memory import memory_events

    ev = memory if memory is not None else memory_events(trace, ctx)
    if ev is None or "data_type" not in ev:
        return {}, None
    al = ev[ev["alloc"] & ev["data_type"].notna()]
    if al.empty:
        return {}, None
    dt = al["data_type"].astype(np.int64)
    mix = al.assign(dtype=dt).groupby("dtype", as_index=False).agg(
        allocations=("requested_bytes", "size"), bytes=("requested_bytes", "sum"))
    mix.insert(0, "data_type", [DTYPE_NAMES.get(int(d), str(d)) for d in mix["dtype"]])
    mix = mix.sort_values("bytes", ascending=False, kind="stable").drop(columns="dtype").reset_index(drop=True)

    fl = al.assign(dtype=dt, output=(al["region_type"] == "output"), bytes=al["requested_bytes"].fillna(0.0))
    fl = fl[fl["tf_op"].notna() & (fl["tf_op"] != "") & fl["dtype"].isin(list(DTYPE_CLASS))]
    out: dict[str, int] = {}
    if len(fl):
        g = fl.groupby(["tf_op", "dtype", "output"], as_index=False)["bytes"].sum()
        g = g.sort_values(["output", "bytes", "dtype"], ascending=[False, False, True]).drop_duplicates("tf_op")
        out = {str(o): int(d) for o, d in zip(g["tf_op"], g["dtype"])}
    return out, mix


# ----------------------------------------------------------------------------------------
# GPU
# ----------------------------------------------------------------------------------------

def _finite_int(v) -> int | None:
    """An int from a stat value of any type, or None (NaN, inf, text, out of range)."""
    return as_int(v, -10**6, 10**6)


def device_vendor(trace: Trace) -> str:
    """'nvidia', 'amd' or 'unknown' from the GPU planes' ``device_vendor`` stat (NVIDIA writers
    often leave it out: a GPU plane with a compute capability and no vendor is NVIDIA's)."""
    vendors = set()
    for p in gpu_planes(trace):
        v = str(p.stats.get("device_vendor", "")).strip().lower()
        if "amd" in v or "advanced micro" in v:
            vendors.add("amd")
        elif "nvidia" in v:
            vendors.add("nvidia")
        elif not v and _finite_int(p.stats.get("compute_cap_major")) is not None:
            vendors.add("nvidia")
    return vendors.pop() if len(vendors) == 1 else "unknown"


_JAX_MODULE = re.compile(r"^jit_|^pmap_|^xmap_")
_TF_THREAD = re.compile(r"^tf_Compute|^tf_data|^tf_Eigen|^tf_numa|^tf_GPU|^tf_inter_op")


def framework(trace: Trace) -> str:
    """'jax', 'tensorflow' or 'unknown': JAX programs are named ``jit_<fn>`` (``/host:metadata``,
    ``hlo_module``); TF has its executor threads (``tf_Compute``, ``tf_data_*``) and ``scope/op:Type``
    events."""
    for p in trace.planes:
        if p.name == "/host:metadata" and any(_JAX_MODULE.match(str(n)) for n in p.event_names):
            return "jax"
    for p in gpu_planes(trace):
        if p.has_stat("hlo_module"):
            _, strings = p.stat("hlo_module").codes()
            if any(_JAX_MODULE.match(s) for s in strings):
                return "jax"
    for p in trace.host_planes:
        if any(_TF_THREAD.match(str(n)) for n in p.line_names):
            return "tensorflow"
        if tf_op_meta_mask(p).any():
            return "tensorflow"
    return "unknown"


def _add_framework(res: AnalysisResult, trace: Trace) -> None:
    fw = framework(trace)
    if fw == "unknown":
        res.missing(["framework"], "the trace shows neither JAX (jit_ programs) nor TensorFlow (TF threads/ops)")
    else:
        res.add("framework", fw)


def _hlo_event_classes(p, rows: np.ndarray, hlo: dict[tuple[str, str], str],
                       matrix_rows: np.ndarray | None = None) -> np.ndarray:
    """Per row: a class index from the HLO, -2 for an instruction that is not matrix work, -1 when
    the HLO does not name the kernel's instruction. A matrix kernel (``matrix_rows``) whose instruction the
    HLO does not name takes its module's dtype when all the module's matrix work has one."""
    cls_idx = {c: k for k, c in enumerate(CLASSES)}
    cols = p.stat_columns(("hlo_op", "program_id", "hlo_module"), rows)

    def coded(name: str) -> tuple[np.ndarray, list[str]]:
        col = cols[name]
        codes, strings = col.codes()
        pos = col.positions(rows)
        return np.where(pos >= 0, codes[np.maximum(pos, 0)] if codes.size else -1, -1), strings

    op, ops = coded("hlo_op")
    pid, pids = coded("program_id")
    mod, mods = coded("hlo_module")
    key = np.stack([op, pid, mod], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    val = np.full(len(uniq), -1, np.int64)
    for k, (o, i, m) in enumerate(uniq.tolist()):
        if o < 0:
            continue
        c = None
        if i >= 0:
            n = _finite_int(pids[i])
            c = hlo.get((f"#{n}", ops[o])) if n is not None else None
        if c is None and m >= 0:
            c = hlo.get((mods[m], ops[o]))
        if c is not None:
            val[k] = -2 if c == "none" else cls_idx[c]
    out = val[inv.reshape(-1)]
    if matrix_rows is not None and (out == -1).any():
        whole = np.full(len(uniq), -1, np.int64)
        for k, (_o, i, m) in enumerate(uniq.tolist()):
            n = _finite_int(pids[i]) if i >= 0 else None
            c = (hlo.get((f"#{n}", MODULE_KEY)) if n is not None else None) or \
                (hlo.get((mods[m], MODULE_KEY)) if m >= 0 else None)
            if c is not None:
                whole[k] = cls_idx[c]
        fill = (out == -1) & matrix_rows
        out[fill] = whole[inv.reshape(-1)][fill]
    return out


def _gpu_precision(trace: Trace, res: AnalysisResult, dtypes: dict[str, int], ctx: Context | None) -> None:
    planes = gpu_planes(trace)
    cls_idx = {c: k for k, c in enumerate(CLASSES)}
    unknown_idx = cls_idx["unknown"]
    nc = len(CLASSES)
    class_ps = np.zeros(nc)
    matrix_ps = np.zeros(nc)
    xprof16_ps = 0.0
    total_ps = 0.0
    kparts = []
    caps = []
    hlo = hlo_classes(trace)
    sources = set()
    for p in planes:
        major = _finite_int(p.stats.get("compute_cap_major"))
        if major is not None and major >= 0:
            minor = _finite_int(p.stats.get("compute_cap_minor") or 0) or 0
            caps.append((major, max(minor, 0)))
        names = p.event_names
        nm = len(names)
        # Time and count per kernel name (shared per-plane totals); the class is decided
        # once per name.
        cnt, tot = kernel_meta_totals(p, ctx)
        memcpy, coll = device_meta_classes(p, ctx)
        comp = ~(memcpy | coll)
        cnt = np.where(comp, cnt, 0)
        tot = np.where(comp, np.maximum(tot, 0.0), 0.0)
        used = np.flatnonzero(cnt)
        if used.size == 0:
            continue
        cls_meta = np.full(nm, unknown_idx, np.int64)
        x16_meta = np.zeros(nm, bool)
        mat_meta = np.zeros(nm, bool)
        aux_meta = np.zeros(nm, bool)
        for i in used:
            aux_meta[i] = is_aux_kernel(names[i])
            cls_meta[i] = cls_idx[kernel_class(names[i])]
            x16_meta[i] = xprof_is_16bit(names[i])
            mat_meta[i] = is_matrix_kernel(names[i])
        if mat_meta.any():
            sources.add("kernel_names")
        # time per (name, class): by name, then moved for the events a fallback reclassifies.
        name_cls = np.zeros((nm, nc))
        name_cls[used, cls_meta[used]] = tot[used]
        mat_cls = name_cls * mat_meta[:, None]

        # The HLO (XLA/JAX): the dtype of each kernel's instruction, and whether it is matrix work.
        if hlo and p.has_stat("hlo_op"):
            rows = compute_kernel_rows(p, ctx)
            rm = p.ev_meta[rows]
            # the module's dtype only for matrix kernels whose name tells none (a name's TF32 is more exact)
            untold = mat_meta & (cls_meta == unknown_idx)
            hc = _hlo_event_classes(p, rows, hlo, np.where(rm >= 0, untold[np.maximum(rm, 0)], False))
            named = np.unique(p.ev_meta[rows[hc != -1]])
            named = named[named >= 0]
            if named.size:
                sources.add("hlo")
                sel = hc != -1
                r, h = rows[sel], hc[sel]
                m = p.ev_meta[r].astype(np.int64)  # the column's narrow type would wrap in m * nc below
                ok = m >= 0
                r, h, m = r[ok], h[ok], m[ok]
                dur = np.maximum(p.ev_dur_ps[r], 0).astype(np.float64)
                ev_mat = ((h >= 0) & ~aux_meta[m]) | mat_meta[m]
                ev_cls = np.where(h >= 0, h, cls_meta[m])
                flat = m * nc + ev_cls
                all_moved = np.bincount(flat, weights=dur, minlength=nm * nc).reshape(nm, nc)
                mat_moved = np.bincount(flat, weights=dur * ev_mat, minlength=nm * nc).reshape(nm, nc)
                # events of these kernels that the HLO does not name keep their name class
                rest = np.zeros((nm, nc))
                rest[named, cls_meta[named]] = np.maximum(tot[named] - all_moved[named].sum(axis=1), 0.0)
                name_cls[named] = all_moved[named] + rest[named]
                mat_cls[named] = mat_moved[named] + rest[named] * mat_meta[named, None]

        # Kernels whose name tells no type: use the dtype their TF op allocates.
        unknown_meta = cls_meta == unknown_idx
        unk_used = used[unknown_meta[used]]
        if unk_used.size and dtypes and p.has_stat("tf_op"):
            rows = compute_kernel_rows(p, ctx)
            urows = rows[unknown_meta[p.ev_meta[rows]]]
            col = p.stat("tf_op", urows)
            codes, strings = col.codes()
            if strings:
                sources.add("tf_op_dtypes")
                # Kernels name their op ``scope/name:Type``; memory events ``scope/name``.
                dts = [dtypes.get(x, dtypes.get(op_name(x))) for x in strings]
                code_cls = np.array([cls_idx[DTYPE_CLASS[d]] if d is not None else unknown_idx for d in dts]
                                    + [unknown_idx], np.int64)
                pos = col.positions(urows)
                c = code_cls[np.where(pos >= 0, codes[np.maximum(pos, 0)], len(strings))]
                um = p.ev_meta[urows].astype(np.int64)  # um * nc below: not in the column's narrow type
                moved = np.bincount(um * nc + c, weights=np.maximum(p.ev_dur_ps[urows], 0).astype(np.float64),
                                    minlength=nm * nc).reshape(nm, nc)
                name_cls[unk_used] = moved[unk_used]
                mat_cls[unk_used] = moved[unk_used] * mat_meta[unk_used, None]

        # xprof: a tensor_shapes stat, when present, decides instead of the name.
        x16_ps = float(tot[x16_meta].sum())
        if p.has_stat("tensor_shapes"):
            col = ctx.stats(p, ("tensor_shapes",))["tensor_shapes"]
            codes, strings = col.codes()
            if strings:
                rows = compute_kernel_rows(p, ctx)
                m = p.ev_meta[rows]
                half = np.array(["half" in x for x in strings] + [False], bool)
                pos = col.positions(rows)
                has = pos >= 0
                ev_x16 = np.where(has, half[np.where(has, codes[np.maximum(pos, 0)], len(strings))],
                                  x16_meta[m])
                x16_ps = float(np.maximum(p.ev_dur_ps[rows][ev_x16], 0).sum())

        class_ps += name_cls.sum(axis=0)
        matrix_ps += mat_cls.sum(axis=0)
        xprof16_ps += x16_ps
        total_ps += float(tot.sum())
        kparts.append(Table({
            "kernel": names[used].astype(str),
            "precision": [CLASSES[int(k)] for k in name_cls[used].argmax(axis=1)],
            "matrix": mat_cls[used].sum(axis=1) > 0,
            "tensor_core": [_tensor_core(names[i]) for i in used],
            "xprof_16bit": x16_meta[used],
            "count": cnt[used],
            "total_ps": tot[used],
        }))

    vendor = device_vendor(trace)
    res.add("device_vendor", vendor)
    _add_framework(res, trace)
    if caps:
        major, minor = max(caps)
        res.add("compute_capability", f"{major}.{minor}")
        res.add("tensor_core_capable", vendor == "nvidia" and major >= 7)
    elif planes:
        res.missing(["compute_capability", "tensor_core_capable"],
                    "GPU plane has no compute_cap_major/minor stats")

    _matrix_metrics(res, matrix_ps, sources)
    total_ps = float(class_ps.sum())  # the shares below are of this total: 0..100 by construction
    known_ps = total_ps - float(class_ps[unknown_idx])
    if total_ps <= 0 or known_ps <= 0:
        res.missing(["device_compute_ms", "fp16_pct", "bf16_pct", "tf32_pct", "fp32_pct", "int8_pct",
                     "low_precision_pct", "xprof_16bit_pct", "precision_unknown_pct"],
                    "GPU plane has no compute kernels" if total_ps <= 0 else
                    "no GPU compute kernel has a dtype the trace tells")
        if total_ps > 0:
            res.add("device_compute_ms", total_ps / PS_PER_MS)
            res.add("precision_unknown_pct", 100.0)
        return
    pct = {c: 100.0 * float(class_ps[k]) / known_ps for k, c in enumerate(CLASSES) if c != "unknown"}
    res.add("device_compute_ms", total_ps / PS_PER_MS)
    res.add("fp16_pct", pct["fp16"])
    res.add("bf16_pct", pct["bf16"])
    res.add("tf32_pct", pct["tf32"])
    res.add("int8_pct", pct["int8"])
    res.add("fp32_pct", pct["fp32"] + pct["fp64"])
    res.add("precision_unknown_pct", 100.0 * float(class_ps[unknown_idx]) / total_ps)
    res.add("low_precision_pct", min(100.0, sum(pct[c] for c in LOW_PRECISION)))
    res.add("xprof_16bit_pct", min(100.0, 100.0 * xprof16_ps / total_ps))

    if kparts:
        built = functools.cache(lambda: _kernel_tables(Table.concat(kparts), class_ps, matrix_ps, total_ps))
        res.tables["precision_mix"] = lambda: built()[0]
        res.tables["kernels"] = lambda: built()[1]


def _kernel_tables(kernels: Table, class_ps: np.ndarray, matrix_ps: np.ndarray,
                   total_ps: float) -> tuple[Table, Table]:
    """The ``precision_mix`` and ``kernels`` tables (built when somebody reads them), as numpy columns: a host of
    a pod analysed in full in a worker builds them without importing pandas (half a second, once per process).

    ``kernels``: the rows of the devices' kernels summed by (kernel, precision, matrix, tensor_core, xprof_16bit),
    the :data:`TOP_KERNELS` longest (by time, then name; equal ones in the order of those keys). ``precision_mix``:
    per precision class with time, its kernels and their events, the longest first; ``kernels`` and ``count`` are
    floats where some class has no kernel (as a left join leaves them)."""
    keys = ("kernel", "precision", "matrix", "tensor_core", "xprof_16bit")
    # one code per row, ordered as the keys are (the first most significant): the groups come out in key order
    kcodes = [np.unique(_sortable(kernels[c]), return_inverse=True)[1].reshape(-1) for c in keys]
    code = np.ravel_multi_index(kcodes, [int(k.max()) + 1 if k.shape[0] else 1 for k in kcodes])
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    n = first.shape[0]
    groups = Table({c: kernels[c][first] for c in keys}, n=n)
    groups["count"] = group_sum(inv, kernels["count"], n).astype(np.int64)  # whole counts: exact as floats
    tps = group_sum(inv, kernels["total_ps"], n)  # whole picoseconds as floats: exact sums in any order
    groups["total_ms"] = tps / PS_PER_MS
    groups["pct"] = np.minimum(100.0, 100.0 * tps / total_ps)
    top = groups.take(np.lexsort((_sortable(groups["kernel"]), -tps))[:TOP_KERNELS])  # stable: keys' order kept

    names, cls = np.unique(_sortable(groups["precision"]), return_inverse=True)
    per = dict(zip(names.tolist(), zip(np.bincount(cls, minlength=len(names)).tolist(),
                                       group_sum(cls, groups["count"], len(names)).astype(np.int64).tolist())))
    ms = class_ps / PS_PER_MS
    keep = np.flatnonzero(ms > 0)
    keep = keep[np.argsort(-ms[keep], kind="stable")]
    # a class without kernels: a left join's missing values, so the columns are floats
    got = [per.get(CLASSES[i], (np.nan, np.nan)) for i in keep.tolist()]
    num = np.float64 if len(per) < len(CLASSES) else np.int64
    mix = Table({"precision": [CLASSES[i] for i in keep.tolist()],
                 "kernels": np.array([g[0] for g in got], num), "count": np.array([g[1] for g in got], num),
                 "total_ms": ms[keep], "pct": 100.0 * class_ps[keep] / total_ps,
                 "matrix_ms": matrix_ps[keep] / PS_PER_MS}, n=keep.shape[0])
    return mix, top


def _sortable(values: np.ndarray) -> np.ndarray:
    """Text columns (object) as strings numpy sorts; others as they are."""
    return values.astype(str) if values.dtype == object else values


MATRIX_METRICS = ("matrix_time_ms", "matrix_fp16_pct", "matrix_bf16_pct", "matrix_tf32_pct", "matrix_fp32_pct",
                  "matrix_int8_pct", "matrix_low_precision_pct", "matrix_unknown_pct", "matrix_dtype",
                  "precision_source")


def _matrix_metrics(res: AnalysisResult, matrix_ps: np.ndarray, sources: set[str]) -> None:
    """Precision of the matrix work (GEMM, convolution, attention): what the verdict rests on."""
    names = list(MATRIX_METRICS)
    total = float(np.maximum(matrix_ps, 0).sum())
    if total <= 0:
        res.missing(names, "no matrix work (GEMM, convolution, attention kernels) on the GPUs")
        return
    k = {c: float(max(matrix_ps[i], 0.0)) for i, c in enumerate(CLASSES)}
    known = total - k["unknown"]
    res.add("matrix_time_ms", total / PS_PER_MS)
    res.add("matrix_unknown_pct", 100.0 * k["unknown"] / total)
    res.add("precision_source", "+".join(sorted(sources)) or "none")
    if known <= 0:
        res.missing(names[1:7] + ["matrix_dtype"], "no matrix kernel has a dtype the trace tells")
        return
    pct = {c: 100.0 * v / known for c, v in k.items() if c != "unknown"}
    res.add("matrix_fp16_pct", pct["fp16"])
    res.add("matrix_bf16_pct", pct["bf16"])
    res.add("matrix_tf32_pct", pct["tf32"])
    res.add("matrix_fp32_pct", pct["fp32"] + pct["fp64"])
    res.add("matrix_int8_pct", pct["int8"])
    res.add("matrix_low_precision_pct", min(100.0, sum(pct[c] for c in LOW_PRECISION)))
    res.add("matrix_dtype", max((c for c in pct), key=lambda c: (pct[c], c)))


_TC = re.compile(r"16816|884|1688|hmma|imma|xmma|i8816|i16832|tensorop|wgmma|gmma")


@name_test
def _tensor_core(name: str) -> bool:
    return _TC.search(name.lower()) is not None


# ----------------------------------------------------------------------------------------
# CPU
# ----------------------------------------------------------------------------------------

_LAYER_CAST = re.compile(r"^(?P<scope>.+?)/Cast(?:/Cast)?:Cast$")


def _low_precision_scopes(names: set[str]) -> set[str]:
    """Keras layer scopes that cast their variables to a 16-bit compute dtype.

    Keras 3 writes ``<layer>/Cast/Cast:Cast`` next to ``<layer>/Cast/ReadVariableOp`` only
    when the variable dtype differs from the compute dtype; Keras 2 writes
    ``<layer>/Cast:Cast`` reading ``<layer>/Cast/ReadVariableOp``.
    """
    scopes = set()
    for n in names:
        m = _LAYER_CAST.match(n)
        if m is None:
            continue
        scope = m.group("scope")
        if scope.startswith("gradient_tape/"):
            continue
        if n.endswith("/Cast/Cast:Cast") or f"{scope}/Cast/ReadVariableOp:ReadVariableOp" in names:
            scopes.add(scope)
    return scopes


def _cpu_precision(trace: Trace, res: AnalysisResult, dtypes: dict[str, int], ctx: Context | None = None) -> None:
    planes = [(p, tf_op_meta_mask(p)) for p in trace.host_planes]
    planes = [(p, mm) for p, mm in planes if mm.any()]
    if not planes:
        res.missing(["cpu_low_precision_pct", "cpu_precision_source"], "no TF op events on the host plane",
                    tf_only=True)
        return

    all_names = set()
    for p, mm in planes:
        all_names.update(p.event_names[mm].tolist())
    scopes = _low_precision_scopes(all_names)

    # Which source tells dtypes: memory events first, then the Keras cast signature.
    known_ops = {n for n in all_names if op_name(n) in dtypes}
    if known_ops:
        source = "memory_events"
    elif scopes:
        source = "keras_casts"
    else:
        res.missing(["cpu_low_precision_pct", "cpu_precision_source"],
                    "the trace does not tell op dtypes (no memory events with data_type, no mixed-precision "
                    "casts); capture with TF_CPU_ALLOCATOR_USE_BFC=true to record them")
        return

    low_ps = 0.0
    total_ps = 0.0
    prefixes = tuple(f"{s}/" for s in scopes) + tuple(f"gradient_tape/{s}/" for s in scopes)
    for p, mm in planes:
        names = p.event_names
        low = np.zeros(len(names), bool)
        counted = np.zeros(len(names), bool)
        for i in np.flatnonzero(mm):
            n = names[i]
            t = op_type(n)
            if t in NO_KERNEL_TYPES:
                continue
            if source == "memory_events":
                d = dtypes.get(op_name(n))
                if d is None:
                    continue
                counted[i] = True
                low[i] = DTYPE_CLASS[d] in LOW_PRECISION
            else:
                counted[i] = True
                low[i] = t != "Cast" and n.startswith(prefixes)
        dur = meta_durations(p, ctx)
        low_ps += float(dur[low].sum())
        total_ps += float(dur[counted].sum())
    if total_ps <= 0:
        res.missing(["cpu_low_precision_pct", "cpu_precision_source"], "no op time with a known dtype")
        return
    res.add("cpu_low_precision_pct", 100.0 * low_ps / total_ps)
    res.add("cpu_precision_source", source)
    if source == "keras_casts":
        res.qualify(("cpu_low_precision_pct", "cpu_precision_source"),
                    f"op dtypes inferred from the Keras mixed-precision casts of {len(scopes)} layer(s): "
                    f"{', '.join(sorted(scopes)[:5])}{'...' if len(scopes) > 5 else ''}")


# ----------------------------------------------------------------------------------------

DECLARED = declare(
    "precision",
    ("device_compute_ms", "ms", "sum of compute kernel time on all GPUs"),
    ("fp16_pct", "%", "fp16 share of device compute with a known dtype"),
    ("bf16_pct", "%", "bf16 share of device compute with a known dtype"),
    ("tf32_pct", "%", "tf32 (tensor-core fp32) share of device compute with a known dtype"),
    ("fp32_pct", "%", "fp32 and fp64 share of device compute with a known dtype"),
    ("int8_pct", "%", "int8 share of device compute with a known dtype"),
    ("low_precision_pct", "%", "fp16 + bf16 + int8 (+ fp8) share of device compute with a known dtype"),
    ("xprof_16bit_pct", "%", "16-bit share as xprof counts it ('half'/'fp16' in the kernel name) (xprof's counting: "
                             "`half`/`fp16` in name only)"),
    ("precision_unknown_pct", "%", "share of device compute whose dtype the trace tells not (not counted in the "
                                   "shares above)"),
    ("tensor_core_capable", "", "NVIDIA GPU with compute capability >= 7.0 (Volta or newer)"),
    ("compute_capability", "", "GPU compute capability (highest on the host)"),
    ("device_vendor", "", "GPU vendor: nvidia, amd or unknown (GPU plane stat device_vendor)"),
    ("matrix_time_ms", "ms", "GEMM/convolution/attention kernel time on all GPUs"),
    ("matrix_fp16_pct", "%", "fp16 share of matrix time with a known dtype"),
    ("matrix_bf16_pct", "%", "bf16 share of matrix time with a known dtype"),
    ("matrix_tf32_pct", "%", "tf32 share of matrix time with a known dtype"),
    ("matrix_fp32_pct", "%", "fp32/fp64 share of matrix time with a known dtype"),
    ("matrix_int8_pct", "%", "int8 share of matrix time with a known dtype"),
    ("matrix_low_precision_pct", "%", "fp16 + bf16 + int8 + fp8 share of matrix time with a known dtype"),
    ("matrix_unknown_pct", "%", "share of matrix time whose dtype neither the HLO nor the kernel name tells"),
    ("matrix_dtype", "", "the dtype with the largest share of matrix time"),
    ("precision_source", "", "where dtypes came from: hlo (/host:metadata), kernel_names, tf_op_dtypes (memory "
                             "events)"),
    ("framework", "", "framework that produced the trace: jax (jit_ programs) or tensorflow"),
    ("cpu_low_precision_pct", "%", "share of host TF op time computing in 16 bits (of op time whose dtype the trace "
                                   "tells) (CPU-only: share of op time with 16-bit dtypes, where dtypes are known)"),
    ("cpu_precision_source", "", "where the dtypes came from: memory_events (data_type of each op's outputs) or "
                                 "keras_casts (ops inside layers that cast their variables to a 16-bit compute dtype)"),
    doc="`precision_unknown_pct` (device compute whose kernel name and TF op dtype tell no type; included in "
        "`fp32_pct`, which is \"32-bit or unspecified\", as xprof counts), `cpu_precision_source` (`memory_events`: "
        "dtypes of each op's output allocations; `keras_casts`: ops inside Keras layers that cast their variables to a "
        "16-bit compute dtype). Note: `expected.toml`'s `fp16_pct` truth is the 16-bit share (fp16 + bf16), compare it "
        "with `fp16_pct + bf16_pct`\n\nVendor-neutral: `device_vendor` (`nvidia`/`amd`/`unknown`, GPU plane stat "
        "`device_vendor`; NVIDIA writers may leave it out), `framework` (`jax`: `jit_` programs; `tensorflow`: TF "
        "threads/ops; `unknown`), `matrix_time_ms` (GEMM/convolution/attention kernel time, all GPUs), "
        "`matrix_fp16_pct`, `matrix_bf16_pct`, `matrix_tf32_pct`, `matrix_fp32_pct` (fp32 + fp64), `matrix_int8_pct`, "
        "`matrix_low_precision_pct` (shares of matrix time with a KNOWN dtype), `matrix_unknown_pct` (matrix time "
        "whose dtype neither HLO nor name tells), `matrix_dtype` (largest share), `precision_source` (`hlo`, "
        "`kernel_names`, `tf_op_dtypes`, joined by `+`). Dtypes: the HLO in `/host:metadata` (`Hlo Proto`, via "
        "`hlo_op`/`program_id`) first, else kernel names (cuBLAS/cuDNN/CUTLASS, hipBLASLt/Tensile type codes "
        "`BBS`/`HHS`/`SS`, CK `bfloat16_t`/`bhalf_t`/`half_t`), else unknown. Since this row, `fp16_pct` ... "
        "`fp32_pct`, `low_precision_pct` are shares of device compute with a known dtype (unknown no longer counted as "
        "fp32); `tensor_core_capable` is NVIDIA only",
    tables="`precision_mix`, `kernels` (top kernels with precision class); `dtype_mix` (data_type, allocations, "
           "bytes; from memory events), `precision_mix` (precision, kernels, count, total_ms, pct), `kernels` (kernel, "
           "precision, tensor_core, xprof_16bit, count, total_ms, pct); `precision_mix` also has matrix_ms; `kernels` "
           "also has matrix",
)


def analyze(trace: Trace, ctx: Context, *, memory: pd.DataFrame | None) -> AnalysisResult:
    res = AnalysisResult("precision")
    dtypes, mix = op_dtypes(trace, ctx, memory)
    if mix is not None and len(mix):
        res.tables["dtype_mix"] = mix
    if gpu_planes(trace):
        _gpu_precision(trace, res, dtypes, ctx)
        res.missing(["cpu_low_precision_pct", "cpu_precision_source"],
                    "cpu_low_precision_pct is for CPU-only traces; this one has a GPU (see fp16_pct ...)")
    else:
        why = ("no GPU plane: device compute precision needs GPU kernels"
               if not trace.device_planes else "no GPU plane (TPU precision is not read from kernel names)")
        res.missing(["device_compute_ms", "fp16_pct", "bf16_pct", "tf32_pct", "fp32_pct", "int8_pct",
                     "low_precision_pct", "xprof_16bit_pct", "precision_unknown_pct", "tensor_core_capable",
                     "compute_capability", "device_vendor", *MATRIX_METRICS], why)
        _add_framework(res, trace)
        _cpu_precision(trace, res, dtypes, ctx)
    return res
