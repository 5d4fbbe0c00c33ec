"""Shared fixtures: the sample traces and their planted truth (expected.toml)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"


def sample_dirs() -> list[Path]:
    """Every sample directory that has an expected.toml."""
    return sorted(p.parent for p in SAMPLES.glob("*/expected.toml"))


def expected(sample: Path) -> dict:
    with open(sample / "expected.toml", "rb") as fh:
        return tomllib.load(fh)


@pytest.fixture(scope="session")
def samples() -> dict[str, Path]:
    return {p.name: p for p in sample_dirs()}


_LOADED: dict[str, object] = {}


def load_sample(name: str):
    """Load a sample once per test session."""
    import tfadvisor

    if name not in _LOADED:
        _LOADED[name] = tfadvisor.load(SAMPLES / name)
    return _LOADED[name]
