"""TensorFlow's DataType enum: names and precision classes (shared by the precision and memory analyses)."""

from __future__ import annotations

# TF DataType enum values (tensorflow/core/framework/types.proto).
DTYPE_NAMES = {
    0: "invalid", 1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
    8: "complex64", 9: "int64", 10: "bool", 11: "qint8", 12: "quint8", 13: "qint32", 14: "bfloat16", 15: "qint16",
    16: "quint16", 17: "uint16", 18: "complex128", 19: "float16", 20: "resource", 21: "variant", 22: "uint32",
    23: "uint64", 24: "float8_e5m2", 25: "float8_e4m3fn",
}
DTYPE_CLASS = {1: "fp32", 2: "fp64", 6: "int8", 11: "int8", 12: "int8", 14: "bf16", 19: "fp16", 24: "fp8",
               25: "fp8", 8: "fp32"}
