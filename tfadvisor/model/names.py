"""How profile files name their hosts: ``<host>.xplane.pb``."""

from __future__ import annotations

XPLANE_SUFFIX = ".xplane.pb"


def host_name(path: str) -> str:
    """``.../worker0.xplane.pb`` -> ``worker0``."""
    base = path.rstrip("/").rsplit("/", 1)[-1]
    return base[: -len(XPLANE_SUFFIX)] if base.endswith(XPLANE_SUFFIX) else base


__all__ = ["XPLANE_SUFFIX", "host_name"]
