"""The wheel holds what users run: the package with its compiled kernels and rules; no development
tools (the synthetic trace generator), tests, samples or C sources."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contents(tmp_path):
    src = tmp_path / "src"  # a clean copy: an old build/ in the checkout could carry removed files
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "build", "*.egg-info")
    for name in ("tfadvisor", "tfadvisor_dev", "rules"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, src / name)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    (wheel,) = tmp_path.glob("tfadvisor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"tfadvisor", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, tops
    assert any(n.startswith("tfadvisor/_native.") and n.endswith((".so", ".pyd")) for n in names)
    assert "tfadvisor/_rules/10_input.toml" in names and "tfadvisor/report/timeline.js" in names
    templates = sorted(p.name for p in (ROOT / "tfadvisor" / "report" / "templates").iterdir() if p.is_file())
    assert templates and all(f"tfadvisor/report/templates/{t}" in names for t in templates), templates
    zf = zipfile.ZipFile(wheel)  # no test-only hooks in what users run
    assert not [n for n in names if n.endswith(".py") and b"MULTIHOST_COUNTER" in zf.read(n)]
    assert not [n for n in names if "synthetic" in n or n.endswith(".c") or "/tests/" in n], names
