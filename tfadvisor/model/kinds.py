"""Stat value kinds: what each stat row's ``Plane.st_kind`` says its ``st_value`` holds."""

KIND_NONE = 0
KIND_DOUBLE = 1
KIND_UINT64 = 2
KIND_INT64 = 3
KIND_STR = 4
KIND_BYTES = 5
KIND_REF = 6
KIND_GZIP = 8

__all__ = ["KIND_BYTES", "KIND_DOUBLE", "KIND_GZIP", "KIND_INT64", "KIND_NONE", "KIND_REF", "KIND_STR", "KIND_UINT64"]
