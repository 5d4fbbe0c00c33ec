"""Stat value kinds: what each stat row's ``Plane.st_kind`` says its ``st_value`` holds.

The decoder (``tfadvisor/_native.c``) writes them and defines them; they are taken from its exports, never
copied.
"""

import tfadvisor._native as _native

KIND_NONE = _native.KIND_NONE
KIND_DOUBLE = _native.KIND_DOUBLE
KIND_UINT64 = _native.KIND_UINT64
KIND_INT64 = _native.KIND_INT64
KIND_STR = _native.KIND_STR
KIND_BYTES = _native.KIND_BYTES
KIND_REF = _native.KIND_REF
KIND_GZIP = _native.KIND_GZIP

__all__ = ["KIND_BYTES", "KIND_DOUBLE", "KIND_GZIP", "KIND_INT64", "KIND_NONE", "KIND_REF", "KIND_STR", "KIND_UINT64"]
