"""A wheel of the tfadvisor running here, for a Vertex AI job to install (``tfadvisor capture vertex``).

The job must run the same tfadvisor as the one that analyses its profile, and must not look the
name up on a public index (it may not be published, or be someone else's there). This packs the
``tfadvisor`` package this process imports, file for file (``__pycache__`` left out), with the rules
(``tfadvisor/_rules``, as the released wheel has them) and the dependencies of ``pyproject.toml``
(or, installed from a wheel, of the installed metadata) into ``tfadvisor-<version>-py3-none-any.whl``.
No build tool is needed.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from pathlib import Path

from tfadvisor._version import __version__

PACKAGE = Path(__file__).resolve().parents[1]
NAME = "tfadvisor"


def requirements() -> list[str]:
    """``Requires-Dist`` lines: the checkout's pyproject.toml when there, else the installed metadata."""
    pyproject = PACKAGE.parent / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == NAME:
            out = list(project.get("dependencies", []))
            for extra, reqs in sorted(project.get("optional-dependencies", {}).items()):
                for r in reqs:
                    marker = f"extra == '{extra}'"
                    out.append(f"{r.split(';')[0].strip()}; ({r.split(';', 1)[1].strip()}) and {marker}"
                               if ";" in r else f"{r}; {marker}")
            return out
    from importlib import metadata

    return list(metadata.distribution(NAME).metadata.get_all("Requires-Dist") or [])


def _extras(reqs: list[str]) -> list[str]:
    return sorted({m for r in reqs for m in re.findall(r"extra == '([^']+)'", r)})


def _files() -> list[tuple[str, Path]]:
    """(name in the wheel, file here) for the package and the rules."""
    out = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo"):
            out.append((f"{NAME}/{path.relative_to(PACKAGE).as_posix()}", path))
    rules = PACKAGE.parent / "rules"
    if not (PACKAGE / "_rules").is_dir() and rules.is_dir():
        out.extend((f"{NAME}/_rules/{p.relative_to(rules).as_posix()}", p) for p in sorted(rules.rglob("*.toml")))
    return out


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(dest: str | Path) -> Path:
    """Write ``tfadvisor-<version>-py3-none-any.whl`` into ``dest``; its path."""
    version = __version__
    reqs = requirements()
    dist_info = f"{NAME}-{version}.dist-info"
    metadata = "\n".join(["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
                          "Requires-Python: >=3.10", *(f"Provides-Extra: {e}" for e in _extras(reqs)),
                          *(f"Requires-Dist: {r}" for r in reqs)]) + "\n"
    wheel = "Wheel-Version: 1.0\nGenerator: tfadvisor.capture.wheel\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entry = "[console_scripts]\ntfadvisor = tfadvisor.cli.process:main\n"
    path = Path(dest) / f"{NAME}-{version}-py3-none-any.whl"
    record: list[str] = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        def put(name: str, data: bytes) -> None:
            zf.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
            record.append(f"{name},{_digest(data)},{len(data)}")

        for name, file in _files():
            put(name, file.read_bytes())
        put(f"{dist_info}/METADATA", metadata.encode())
        put(f"{dist_info}/WHEEL", wheel.encode())
        put(f"{dist_info}/entry_points.txt", entry.encode())
        record.append(f"{dist_info}/RECORD,,")
        zf.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                    "\n".join(record) + "\n", zipfile.ZIP_DEFLATED)
    return path
