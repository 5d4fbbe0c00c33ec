"""Where op time goes: every TF op's (or XLA op's) time summed by op type and by category, so that a
step whose cost is in the math gets a finding that names the ops, not "no rule matched".

Categories, by op type (first match): ``matrix`` (convolutions, matrix products, einsum, attention),
``optimizer`` (variable updates: ``ResourceApply*``, ``Assign*Variable*``), ``gather_scatter``
(gathers, scatters, segment sums, embedding lookups), ``data_movement`` (copies, transposes, sends
and receives, host offload), ``collective`` (all-reduce and friends), and ``elementwise`` (the rest:
activations, normalisation, pooling, reductions, fusions). Shares are of the op time summed over
the ops (on a device: its op-attribution lines, ``TensorFlow Ops`` or ``XLA Ops``, outermost events
only; CPU-only: the TF op events on the host, wrappers such as ``PartitionedCall`` left out, and the
input ops such as ``IteratorGetNext``, whose time is waiting for data), so they sum to 100.

The CPU's fast low-precision support (``cpu_fast_bf16``: AMX or AVX512-BF16) comes from the run file
the capture wrote (``tfadvisor_run.json`` ``cpu.flags``); None when the capture did not record it.
"""

from __future__ import annotations

import re

import numpy as np

from tfadvisor.analyses.base import PS_PER_MS, AnalysisResult, Context, declare
from tfadvisor.analyses.names import name_test
from tfadvisor.analyses.placement import TF_OP_RE, device_op_rows, meta_durations, op_type, tf_op_meta_mask
from tfadvisor.model.table import Table
from tfadvisor.model.trace import Trace

#: (category, pattern over the op type), first match wins; anything else is ``elementwise``.
CATEGORY_PATTERNS: tuple[tuple[str, re.Pattern], ...] = (
    ("collective", re.compile(r"(?i)allreduce|all-reduce|all_reduce|allgather|all-gather|reducescatter|"
                              r"reduce-scatter|collective|nccl|horovod|alltoall|all-to-all")),
    ("optimizer", re.compile(r"(?i)^(_mkl)?(resource)?apply|assign(add|sub)?variable|^assign(add|sub)?$")),
    # (not convert/conversion; wgrad/dgrad: cuDNN's dgrad_engine, not BiasAddGrad; fmha: fused multi-head attention,
    # CK's FmhaFwdKernel/FmhaBwd*Kernel; attn: an attention library's op or kernel, Transformer Engine's
    # te_fused_attn_forward_ffi custom call, flash_attn)
    ("matrix", re.compile(r"(?i)conv(?!ert|ersion)|matmul|einsum|^dot|gemm|attention|batchmatmul|^cijk_|cutlass|xmma|"
                          r"nvjet|(?<![a-z])(?:wgrad|dgrad)|fprop|flash|fmha|attn")),
    ("custom_call", re.compile(r"(?i)custom-call|custom_call|customcall|pallas|mosaic")),
    ("gather_scatter", re.compile(r"(?i)gather|scatter|segment|embedding|lookup")),
    ("data_movement", re.compile(r"(?i)copy|transpose|^_?send|^_?recv|_hostsend|_hostrecv|memcpy|offload|"
                                 r"dynamicupdateslice|dynamic-update-slice|concat")),
)
CATEGORIES = ("matrix", "elementwise", "optimizer", "gather_scatter", "data_movement", "collective", "custom_call")
#: Input ops: their time is the step waiting for data (the input analysis counts it), not math.
INPUT_OPS = re.compile(r"(?i)^(iteratorgetnext|optional(getvalue|hasvalue|none|fromvalue)|multideviceiterator|"
                       r"anonymousiterator|makeiterator|iteratorfromstringhandle)")
#: How many op types ``op_top_ops`` names.
TOP_OPS = 3
#: CPU flags (``/proc/cpuinfo``) of fast bfloat16 math.
FAST_BF16_FLAGS = ("amx_bf16", "avx512_bf16")


@name_test
def category(op_type_name: str) -> str:
    """The category of an op type (see the module docs)."""
    for name, pattern in CATEGORY_PATTERNS:
        if pattern.search(op_type_name):
            return name
    return "elementwise"


@name_test
def display_type(op_type_name: str) -> str:
    """An op type as a user wrote it: oneDNN's ``_MklNative``/``_Mkl`` prefix and XLA's ``.N`` suffix dropped."""
    t = re.sub(r"^_(MklNative|Mkl)", "", op_type_name)
    return re.sub(r"\.\d+$", "", t)


DECLARED = declare(
    "opcost",
    *[(f"op_{c}_pct", "%", f"share of op time in {c.replace('_', ' ')} ops") for c in CATEGORIES],
    ("op_time_ms", "ms", "op time summed over the ops (all threads or devices)"),
    ("op_top_category", "", "the category with the most op time"),
    ("op_top_category_pct", "%", "its share of op time"),
    ("op_top_ops", "", "the op types with the most time, each with its share of op time"),
    ("op_source", "", "where the op time was read: `device` (op lines of the device planes), `kernels` (device "
                      "kernels, where the planes have no op lines) or `host` (TF ops on the host)"),
    ("cpu_fast_bf16", "", "the CPU has fast bfloat16 math (AMX or AVX512-BF16), from the run file's cpu.flags"),
    doc="Op time by type and category (matrix, elementwise, optimizer, gather_scatter, data_movement, "
        "collective): shares of the summed op time, 100 in all.",
    tables="`op_types` (type, category, count, total_ms, pct)",
)


def _kernel_parts(trace: Trace, ctx: Context) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Device time per kernel name, for device planes without op lines (e.g. ROCm: kernel streams only)."""
    from tfadvisor.analyses.placement import kernel_meta_totals

    names: list[str] = []
    dur: list[np.ndarray] = []
    cnt: list[np.ndarray] = []
    for p in trace.device_planes:
        c, d = kernel_meta_totals(p, ctx)
        used = np.flatnonzero((c > 0) & (d > 0))
        if not used.size:
            continue
        names.extend(kernel_type(str(p.event_names[i])) for i in used)
        dur.append(d[used].astype(np.float64))
        cnt.append(c[used])
    if not names:
        return [], np.empty(0), np.empty(0, np.int64)
    return names, np.concatenate(dur), np.concatenate(cnt)


#: Kernel launchers whose own name says nothing of the work: the kernel they run is a template argument
#: (Composable Kernel's ``ck_tile::kentry<arch, blocks, ck_tile::FmhaFwdKernel<...>, Kargs>``, CUTLASS's
#: ``cutlass::Kernel2<cutlass_80_..._gemm_...>`` and ``cutlass::device_kernel<...::GemmUniversal<...>>``).
_LAUNCHERS = re.compile(r"^(?:ck_tile::kentry|cutlass::(?:Kernel2?|device_kernel))$")


def _template_args(name: str, start: int) -> list[str]:
    """The top-level template arguments of the list that opens at ``name[start]`` (``<``)."""
    args, depth, begin = [], 0, start + 1
    for i in range(start, len(name)):
        ch = name[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth == 0:
                return args + [name[begin:i].strip()]
        elif ch == "," and depth == 1:
            args.append(name[begin:i].strip())
            begin = i + 1
    return args  # cut short (a truncated name): the arguments read so far


def _short(name: str) -> str:
    base = re.sub(r"^void\s+", "", name).split("(", 1)[0]
    return re.sub(r"<.*$", "", base).rsplit("::", 1)[-1]


@name_test
def kernel_type(name: str) -> str:
    """A kernel's name without its C++ signature and namespaces (``void at::native::foo<...>(...)`` -> ``foo``); of a
    launcher (:data:`_LAUNCHERS`) the kernel it launches: its first template argument named ``...Kernel``, else its
    last that is not a number (``ck_tile::kentry<ck_tile::gfx950_t, 2, ck_tile::FmhaFwdKernel<...>, ...>`` ->
    ``FmhaFwdKernel``)."""
    full = re.sub(r"^void\s+", "", name)
    lt = full.find("<")
    if lt > 0 and _LAUNCHERS.match(full[:lt].strip()):
        args = [a for a in _template_args(full, lt) if a and not re.match(r"^[-+(]?\d", a)]
        pick = _short(next((a for a in args if "kernel" in _short(a).lower()), args[-1] if args else "")).strip()
        if pick:
            return pick[:60]
    base = _short(name)
    return base[:60] or name[:60]


def _device_parts(trace: Trace) -> tuple[list[str], np.ndarray, np.ndarray]:
    names: list[str] = []
    dur: list[np.ndarray] = []
    cnt: list[np.ndarray] = []
    for p in trace.device_planes:
        rows = device_op_rows(p)
        if not rows.size:
            continue
        meta = p.ev_meta[rows]
        d = np.bincount(meta, weights=p.ev_dur_ps[rows].astype(np.float64), minlength=len(p.event_names))
        c = np.bincount(meta, minlength=len(p.event_names))
        used = np.flatnonzero(c)
        names.extend(str(p.event_names[i]) for i in used)
        dur.append(d[used])
        cnt.append(c[used])
    if not names:
        return [], np.empty(0), np.empty(0, np.int64)
    return names, np.concatenate(dur), np.concatenate(cnt)


def _host_parts(trace: Trace, ctx: Context) -> tuple[list[str], np.ndarray, np.ndarray]:
    from tfadvisor.analyses.placement import meta_counts

    names: list[str] = []
    dur: list[np.ndarray] = []
    cnt: list[np.ndarray] = []
    for p in trace.host_planes:
        mm = tf_op_meta_mask(p)
        if not mm.any():
            continue
        c = meta_counts(p, ctx)
        idx = np.flatnonzero(mm & (c > 0))
        if not idx.size:
            continue
        d = meta_durations(p, ctx)
        names.extend(str(p.event_names[i]) for i in idx)
        dur.append(np.maximum(d[idx], 0).astype(np.float64))
        cnt.append(c[idx])
    if not names:
        return [], np.empty(0), np.empty(0, np.int64)
    return names, np.concatenate(dur), np.concatenate(cnt)


def op_parts(trace: Trace, ctx: Context) -> tuple[str, list[str], np.ndarray, np.ndarray]:
    """(source, op names, summed durations ps, counts): the device's op lines (``device``), else its kernels
    (``kernels``), else the TF ops on the host (``host``)."""
    for source, parts in (("device", lambda: _device_parts(trace)), ("kernels", lambda: _kernel_parts(trace, ctx)),
                          ("host", lambda: _host_parts(trace, ctx))):
        names, dur, cnt = parts()
        if names:
            return source, names, dur, cnt
    return "host", [], np.empty(0), np.empty(0, np.int64)


def op_type_of(name: str, source: str) -> str:
    """The op type of an op event: a TF op's ``Type`` (``scope/name:Type``), an XLA op's instruction name
    (``%copy-start.2 = (...) copy-start(...)`` or ``fusion.12``)."""
    if name.startswith("%"):  # HLO text: the instruction's name, which XLA derives from its opcode
        return name[1:].split(" ", 1)[0]
    if source == "kernels" or (source == "device" and TF_OP_RE.match(name) is None):
        return name
    return op_type(name) or name


def cpu_fast_bf16(run_metadata: dict) -> bool | None:
    """Whether the captured CPU has fast bfloat16 math, from ``cpu.flags`` in the run file; None when unknown."""
    cpu = run_metadata.get("cpu") if isinstance(run_metadata, dict) else None
    flags = cpu.get("flags") if isinstance(cpu, dict) else None
    if not isinstance(flags, list) or not flags:
        return None
    return any(f in flags for f in FAST_BF16_FLAGS)


def analyze(trace: Trace, ctx: Context) -> AnalysisResult:
    res = AnalysisResult("opcost")
    fast = cpu_fast_bf16(trace.run_metadata or {})
    if fast is None:  # said only where the CPU does the math: with a device its features do not matter
        res.missing(["cpu_fast_bf16"], "the run file does not say the CPU's features (cpu.flags in "
                                       "tfadvisor_run.json; tfadvisor's capture records them)"
                    if not trace.device_planes else "")
    else:
        res.add("cpu_fast_bf16", fast)
    source, names, dur, cnt = op_parts(trace, ctx)
    metrics = [f"op_{c}_pct" for c in CATEGORIES] + ["op_time_ms", "op_top_category", "op_top_category_pct",
                                                      "op_top_ops", "op_source"]
    total = float(dur.sum()) if len(names) else 0.0
    if total <= 0:
        res.missing(metrics, "no op events with a duration (no TF ops on the host, no op lines on a device)")
        return res
    types = [op_type_of(n, source) for n in names]
    keep = [i for i, t in enumerate(types) if not INPUT_OPS.match(display_type(t))]
    total = float(dur[keep].sum()) if keep else 0.0
    if total <= 0:
        res.missing(metrics, "no op time besides waiting for input")
        return res
    by_type: dict[str, list[float]] = {}
    for t, d, c in ((types[i], float(dur[i]), int(cnt[i])) for i in keep):
        acc = by_type.setdefault(display_type(t), [0.0, 0])
        acc[0] += d
        acc[1] += int(c)
    order = sorted(by_type, key=lambda t: (-by_type[t][0], t))
    cats = {c: 0.0 for c in CATEGORIES}
    for t in order:
        cats[category(t)] += by_type[t][0]
    for c in CATEGORIES:
        res.add(f"op_{c}_pct", 100.0 * cats[c] / total)
    top = max(CATEGORIES, key=lambda c: cats[c])
    res.add("op_time_ms", total / PS_PER_MS)
    res.add("op_top_category", top)
    res.add("op_top_category_pct", 100.0 * cats[top] / total)
    res.add("op_top_ops", ", ".join(f"{t} {100.0 * by_type[t][0] / total:.0f} %" for t in order[:TOP_OPS]))
    res.add("op_source", source)
    res.tables["op_types"] = Table({
        "type": np.array(order, dtype=object),
        "category": np.array([category(t) for t in order], dtype=object),
        "count": np.array([by_type[t][1] for t in order], np.int64),
        "total_ms": np.array([by_type[t][0] / PS_PER_MS for t in order]),
        "pct": np.array([100.0 * by_type[t][0] / total for t in order]),
    }, n=len(order))
    return res


__all__ = ["CATEGORIES", "analyze", "category", "cpu_fast_bf16", "display_type"]
