"""Named interconnects and the bandwidth gradients can use across them.

Figures are GB/s (10^9 bytes per second) **per GPU, per direction**: what one replica can
push to its neighbours in a ring all-reduce. Vendors usually quote the bidirectional
aggregate (twice the figure here) or a line rate in Gbit/s (eight times the figure here).

Sources (public datasheets and specifications):

* NVLink: NVIDIA's data-center GPU datasheets quote the total bidirectional NVLink bandwidth
  per GPU: V100 SXM2 300 GB/s (NVLink 2, 6 links x 25 GB/s per direction), A100 SXM 600 GB/s
  (NVLink 3, 12 links x 25 GB/s), H100 SXM 900 GB/s (NVLink 4, 18 links x 25 GB/s), B200
  1.8 TB/s (NVLink 5). Per direction that is 150 / 300 / 450 / 900 GB/s.
* PCIe x16: PCI-SIG line rates 8 / 16 / 32 GT/s per lane for gen 3 / 4 / 5 with 128b/130b
  coding: 16 lanes x 8 GT/s x 128/130 / 8 bits = 15.75 GB/s per direction (gen 3), 31.5
  (gen 4), 63 (gen 5). Rounded to 16 / 32 / 64 here, as they are commonly quoted.
* AWS Elastic Fabric Adapter: instance network bandwidth from the EC2 instance pages, e.g.
  100 Gbit/s (p3dn) = 12.5 GB/s, 400 Gbit/s (p4d, per instance) = 50 GB/s.
* InfiniBand (IBTA data rates, 4x port): EDR 100 Gbit/s, HDR 200 Gbit/s, NDR 400 Gbit/s
  -> 12.5 / 25 / 50 GB/s.
* Ethernet: the line rate / 8 (10, 25, 100, 200, 400 GbE).
* TPU inter-chip interconnect (ICI), per chip: Cloud TPU's system-architecture pages quote the
  bidirectional ICI bandwidth per chip: v5e 400 GB/s, v5p 1200 GB/s, v6e (Trillium) 800 GB/s; per
  direction 200 / 600 / 400 GB/s. Data-center network (DCN) between slices: v5p 50 Gbit/s per chip
  (6.25 GB/s); v5e 2 x 100 Gbit/s NICs per 8-chip host (3.125 GB/s per chip).

These are peak figures: a measured all-reduce reaching 60-80 % of them is doing well.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Link:
    name: str
    gbps: float  # GB/s per GPU per direction
    description: str


_LINKS = (
    Link("nvlink2", 150.0, "NVLink 2 (V100 SXM2): 6 links x 25 GB/s per direction"),
    Link("nvlink3", 300.0, "NVLink 3 (A100 SXM): 12 links x 25 GB/s per direction"),
    Link("nvlink4", 450.0, "NVLink 4 (H100 SXM): 18 links x 25 GB/s per direction"),
    Link("nvlink5", 900.0, "NVLink 5 (B200): 1.8 TB/s bidirectional"),
    Link("pcie3", 16.0, "PCIe 3.0 x16 (15.75 GB/s per direction)"),
    Link("pcie4", 32.0, "PCIe 4.0 x16 (31.5 GB/s per direction)"),
    Link("pcie5", 64.0, "PCIe 5.0 x16 (63 GB/s per direction)"),
    Link("efa-100g", 12.5, "AWS EFA 100 Gbit/s"),
    Link("efa-400g", 50.0, "AWS EFA 400 Gbit/s"),
    Link("ib-edr", 12.5, "InfiniBand EDR 4x, 100 Gbit/s"),
    Link("ib-hdr", 25.0, "InfiniBand HDR 4x, 200 Gbit/s"),
    Link("ib-ndr", 50.0, "InfiniBand NDR 4x, 400 Gbit/s"),
    Link("eth-10g", 1.25, "10 Gbit Ethernet"),
    Link("eth-25g", 3.125, "25 Gbit Ethernet"),
    Link("eth-100g", 12.5, "100 Gbit Ethernet"),
    Link("eth-200g", 25.0, "200 Gbit Ethernet"),
    Link("eth-400g", 50.0, "400 Gbit Ethernet"),
    Link("ici-v5e", 200.0, "TPU v5e ICI: 400 GB/s bidirectional per chip"),
    Link("ici-v5p", 600.0, "TPU v5p ICI: 1200 GB/s bidirectional per chip"),
    Link("ici-v6e", 400.0, "TPU v6e (Trillium) ICI: 800 GB/s bidirectional per chip"),
    Link("dcn-v5e", 3.125, "TPU v5e data-center network: 2 x 100 Gbit/s per 8-chip host"),
    Link("dcn-v5p", 6.25, "TPU v5p data-center network: 50 Gbit/s per chip"),
)

#: Link name -> :class:`Link`.
LINKS: dict[str, Link] = {link.name: link for link in _LINKS}

# Spellings people use for the same links.
_ALIASES = {
    "nvlink": "nvlink3",
    "nvlink-a100": "nvlink3",
    "nvlink-v100": "nvlink2",
    "nvlink-h100": "nvlink4",
    "pcie": "pcie4",
    "pcie-gen3": "pcie3",
    "pcie-gen4": "pcie4",
    "pcie-gen5": "pcie5",
    "efa": "efa-100g",
    "infiniband-hdr": "ib-hdr",
    "infiniband-edr": "ib-edr",
    "infiniband-ndr": "ib-ndr",
    "hdr": "ib-hdr",
    "edr": "ib-edr",
    "ndr": "ib-ndr",
}

_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")


def _canonical(name: str) -> str:
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    key = re.sub(r"^(nvlink|pcie)-?(\d)$", r"\1\2", key)  # nvlink-3, pcie-4
    key = re.sub(r"^(pcie)-?gen-?(\d)$", r"\1\2", key)
    key = re.sub(r"^(efa|eth|ib)-?(\d+)g(?:bit|bps|be)?$", r"\1-\2g", key)
    return _ALIASES.get(key, key)


def bandwidth_gbps(spec: str | float | int | None) -> float | None:
    """GB/s for a link name (``nvlink3``, ``pcie4``, ``efa-100g``...) or a number.

    A plain number, or one followed by ``GB/s`` / ``GBps``, is GB/s; a number followed by
    ``Gbit`` / ``Gbps`` / ``Gb/s`` is gigabits per second (divided by 8). ``None`` gives
    ``None``. Raises :class:`ValueError` for anything else, naming the known links.
    """
    if spec is None:
        return None
    if isinstance(spec, (int, float)) and not isinstance(spec, bool):
        value = float(spec)
        if value <= 0:
            raise ValueError(f"link bandwidth must be positive, got {spec!r}")
        return value
    text = str(spec).strip()
    m = _NUMBER.match(text)
    if m:
        value, unit = float(m.group(1)), m.group(2)
        if unit in ("", "GB/s", "GBps", "GB", "gbs", "GBs"):
            pass
        elif unit.lower() in ("gbit", "gbit/s", "gb/s", "gbps", "g") and unit not in ("GB/s", "GBps"):
            value /= 8.0
        else:
            raise ValueError(f"unknown bandwidth unit {unit!r} in {text!r} (use GB/s or Gbit/s)")
        if value <= 0:
            raise ValueError(f"link bandwidth must be positive, got {text!r}")
        return value
    link = LINKS.get(_canonical(text))
    if link is None:
        raise ValueError(f"unknown link {text!r}; known links: {', '.join(LINKS)} (or a number in GB/s)")
    return link.gbps


def describe(spec: str | float | int | None) -> str:
    """A short human description of a link spec, for notes."""
    if spec is None:
        return ""
    if isinstance(spec, str):
        link = LINKS.get(_canonical(spec))
        if link is not None:
            return f"{link.name} ({link.gbps:g} GB/s: {link.description})"
    return f"{bandwidth_gbps(spec):g} GB/s"


__all__ = ["LINKS", "Link", "bandwidth_gbps", "describe"]
