"""Capture under faults (issue 30): every case of ``tests/capture_faults.py`` (real TensorFlow, real
processes, real signals, real sockets) holds. ``python tests/capture_faults.py`` prints the same
cases as a table."""

from __future__ import annotations

import importlib.util

import pytest
from capture_faults import CASES, run_case

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                       reason="capture tests need TensorFlow (pip install 'tfadvisor[tf-cpu]')"),
]


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_fault_case(name, tmp_path):
    outcome = run_case(name, tmp_path)
    assert outcome.ok, f"{name}: {outcome.what}"
