"""Matrix-work dtypes from the HLO that XLA/JAX profiles keep in the ``/host:metadata`` plane.

Each event metadata there is one compiled program (``jit_dot(64)``: module name and program id)
with a metadata-level stat ``Hlo Proto`` holding a serialized ``xla.HloProto``. Device kernels
name their instruction with the stats ``hlo_op``, ``hlo_module`` and ``program_id``. Only the
few fields needed are decoded, with a small wire reader that gives up (returns nothing) on any
malformed input:

- HloProto: hlo_module = 1 (HloModuleProto: name = 1, computations = 3, id = 5);
- HloComputationProto: instructions = 2;
- HloInstructionProto: name = 1, opcode = 2, shape = 3, custom_call_target = 28, id = 35,
  operand_ids = 36 (packed), called_computation_ids = 38; HloComputationProto id = 5;
- ShapeProto: element_type = 2 (xla PrimitiveType: F16 10, F32 11, F64 12, BF16 16, S8 2, U8 6,
  F8 kinds 19, 20, 23-25 and newer).
"""

from __future__ import annotations

import re

import tfadvisor.model.kinds as kinds
from tfadvisor.model.trace import Trace

# xla PrimitiveType -> precision class
PRIMITIVE_CLASS = {2: "int8", 6: "int8", 10: "fp16", 11: "fp32", 12: "fp64", 16: "bf16", 15: "fp32",
                   18: "fp64", 19: "fp8", 20: "fp8", 23: "fp8", 24: "fp8", 25: "fp8", 28: "fp8", 29: "fp8"}
_MATRIX_OPCODES = {"dot", "convolution", "ragged-dot", "scaled-dot"}
_MATRIX_TARGET = re.compile(r"gemm|matmul|blas|conv|cudnn|miopen|attn|attention|fmha|flash|mha|dot",
                            re.IGNORECASE)
MAX_HLO_BYTES = 64 << 20


class _Bad(Exception):
    pass


def _varint(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        if i >= len(b) or s > 63:
            raise _Bad
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b: bytes):
    """(field, wire type, value) of one message; length-delimited values as bytes."""
    i, n = 0, len(b)
    while i < n:
        key, i = _varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = _varint(b, i)
        elif w == 2:
            ln, i = _varint(b, i)
            if i + ln > n:
                raise _Bad
            v, i = b[i:i + ln], i + ln
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise _Bad
        yield f, w, v


def _packed(b: bytes) -> list[int]:
    out, i = [], 0
    while i < len(b):
        v, i = _varint(b, i)
        out.append(v)
    return out


def _instruction(b: bytes) -> dict:
    d: dict = {"ops": [], "called": []}
    for f, w, v in _fields(b):
        if f == 1 and w == 2:
            d["name"] = v.decode("utf-8", "replace")
        elif f == 2 and w == 2:
            d["opcode"] = v.decode("utf-8", "replace")
        elif f == 3 and w == 2:
            d["type"] = next((x for g, ww, x in _fields(v) if g == 2 and ww == 0), None)
        elif f == 28 and w == 2:
            d["target"] = v.decode("utf-8", "replace")
        elif f == 35 and w == 0:
            d["id"] = v
        elif f == 36:
            d["ops"].extend(_packed(v) if w == 2 else [v])
        elif f == 38:
            d["called"].extend(_packed(v) if w == 2 else [v])
    return d


#: The key of a module's one matrix dtype in :func:`module_classes` (no instruction is named so).
MODULE_KEY = "*module*"


def module_classes(hlo: bytes) -> tuple[str, int | None, dict[str, str]]:
    """(module name, module id, {entry-level instruction name: precision class or 'none'}).

    'none' marks an instruction that is not matrix work; a fusion is matrix work when a
    computation it calls holds a dot/convolution (or a gemm/conv/attention custom call).
    """
    mod = next((v for f, w, v in _fields(hlo) if f == 1 and w == 2), None)
    if mod is None:
        raise _Bad
    name, mid, comps = "", None, {}
    instrs: dict[int, dict] = {}
    for f, w, v in _fields(mod):
        if f == 1 and w == 2:
            name = v.decode("utf-8", "replace")
        elif f == 5 and w == 0:
            mid = v
        elif f == 3 and w == 2:
            cid, members = None, []
            for g, ww, x in _fields(v):
                if g == 2 and ww == 2:
                    members.append(_instruction(x))
                elif g == 5 and ww == 0:
                    cid = x
            for k, ins in enumerate(members):
                instrs[ins.get("id", (cid or 0) << 32 | k)] = ins
            if cid is not None:
                comps[cid] = members

    def own(ins: dict) -> str | None:
        op = ins.get("opcode", "")
        if op in _MATRIX_OPCODES or (op == "custom-call" and _MATRIX_TARGET.search(ins.get("target", ""))):
            lhs = instrs.get(ins["ops"][0]) if ins["ops"] else None
            t = lhs.get("type") if lhs else ins.get("type")
            return PRIMITIVE_CLASS.get(t, "unknown")
        return None

    def cls(ins: dict, depth: int = 0) -> str | None:
        c = own(ins)
        if c is not None or depth > 8:
            return c
        for cid in ins["called"]:
            for sub in comps.get(cid, ()):
                c = cls(sub, depth + 1)
                if c is not None:
                    return c
        return None

    out = {}
    for ins in instrs.values():
        if "name" in ins:
            c = cls(ins)
            out[ins["name"]] = c if c is not None else "none"
    # the module's one matrix dtype, for kernels whose instruction the HLO does not name (a CUDA graph's
    # kernels carry the command buffer's name, ``command_buffer_1``, made after this HLO was recorded)
    whole = {c for c in (own(i) for i in instrs.values()) if c is not None}
    if len(whole) == 1:
        out[MODULE_KEY] = whole.pop()
    return name, mid, out


def hlo_classes(trace: Trace) -> dict[tuple[str, str], str]:
    """{(program id or module name, instruction name): class} over the trace's HLO protos.

    Keys are ``("#<id>", op)`` and ``(module name, op)``; empty when the trace has no HLO.
    """
    out: dict[tuple[str, str], str] = {}
    for p in trace.planes:
        if p.name != "/host:metadata" or "Hlo Proto" not in p.stat_index:
            continue
        md = p.metadata_stat_values(p.stat_index["Hlo Proto"])
        if md is None:
            continue
        for kind, raw in zip(md[1].tolist(), md[2].tolist()):
            if kind not in (kinds.KIND_BYTES, kinds.KIND_STR) or not 0 <= raw < len(p.str_off):
                continue
            o, ln = int(p.str_off[raw]), int(p.str_len[raw])
            if ln <= 0 or ln > MAX_HLO_BYTES:
                continue
            try:
                name, mid, classes = module_classes(bytes(p.str_pool[o:o + ln]))
            except (_Bad, IndexError, ValueError, RecursionError):
                continue
            for op, c in classes.items():
                if mid is not None:
                    out[(f"#{mid}", op)] = c
                out.setdefault((name, op), c)
    return out
