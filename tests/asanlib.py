"""tfadvisor with its C kernels built under AddressSanitizer and UBSan, for bounds-safety tests.

:func:`instrumented` compiles ``tfadvisor/_native.c`` with ``-fsanitize=address,undefined`` into a
copy of the package in a temporary directory and returns what a child process needs to run that
copy: ``PYTHONPATH`` first, ``LD_PRELOAD`` of gcc's ``libasan.so`` (the interpreter itself is not
instrumented, so the runtime must be loaded first), ``ASAN_OPTIONS=detect_leaks=0`` (CPython
keeps objects alive at exit on purpose). Every heap allocation then has poisoned red zones:
a read or write one byte outside any numpy array the kernels touch (the file's bytes, the columns)
ends the child with an AddressSanitizer report and a non-zero exit status; undefined behaviour
(a shift too far, a signed overflow) ends it too (``-fno-sanitize-recover=all``).

The child must check that it imported the instrumented module (``CHECK_LOADED``), else a stale
build on ``sys.path`` would make the test vacuous.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Python for the child: fails unless tfadvisor's kernels come from the instrumented build in ``dest``.
CHECK_LOADED = (
    "import os, sys\n"
    "import tfadvisor._native as _n\n"
    "assert os.path.realpath(_n.__file__).startswith(os.path.realpath(os.environ['TFADVISOR_ASAN_DIR'])), "
    "_n.__file__\n"
)


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the AddressSanitizer build of tfadvisor/_native.c needs it")
    lib = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not lib or not os.path.isabs(lib) or not os.path.exists(lib):
        pytest.skip("gcc has no AddressSanitizer runtime (libasan.so)")
    return gcc


#: (C source's bytes, the package's files and mtimes) -> the environment of a copy built before in this process: the
#: module's three tests built the same copy each (~4 s of gcc apiece); a tmp_path lives for the whole session
_BUILT: dict[tuple[bytes, tuple], dict[str, str]] = {}


def _package_state() -> tuple:
    return tuple(sorted((str(p.relative_to(ROOT)), p.stat().st_mtime_ns, p.stat().st_size)
                        for p in [*(ROOT / "tfadvisor").rglob("*"), *(ROOT / "rules").rglob("*")]
                        if p.is_file() and "__pycache__" not in p.parts))


def instrumented(dest: Path, source: Path | None = None) -> dict[str, str]:
    """Build the instrumented copy of tfadvisor under ``dest`` (or reuse one this process built from the same source
    and package files); return the child's environment."""
    gcc = _gcc()
    source = source or ROOT / "tfadvisor" / "_native.c"
    key = (source.read_bytes(), _package_state())
    built = _BUILT.get(key)
    if built is not None and Path(built["TFADVISOR_ASAN_DIR"]).is_dir():
        return dict(built)
    pkg = dest / "tfadvisor"
    shutil.copytree(ROOT / "tfadvisor", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"))
    shutil.copytree(ROOT / "rules", dest / "rules")
    out = pkg / ("_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = [gcc, "-shared", "-fPIC", "-O1", "-g", "-std=c99", "-pthread", "-fsanitize=address,undefined",
           "-fno-omit-frame-pointer", "-fno-sanitize-recover=all", "-I", sysconfig.get_paths()["include"],
           "-I", np.get_include(), str(source), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"instrumented build failed: {' '.join(cmd)}\n{proc.stderr[-3000:]}"
    libasan = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD")}
    env.update(
        PYTHONPATH=str(dest),
        LD_PRELOAD=libasan,
        ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:exitcode=86",
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
        TFADVISOR_ASAN_DIR=str(dest),
        PYTHONDONTWRITEBYTECODE="1",
    )
    _BUILT[key] = dict(env)
    return env


def run_child(code: str, args: list[str], env: dict[str, str], timeout: float):
    """Run ``code`` (after :data:`CHECK_LOADED`) in a child Python under the sanitizers, in the instrumented
    copy's directory (``python -c`` puts the working directory first on ``sys.path``)."""
    return subprocess.run([sys.executable, "-c", CHECK_LOADED + code, *args], env=env, cwd=env["TFADVISOR_ASAN_DIR"],
                          capture_output=True, text=True, timeout=timeout)


def sanitizer_report(stderr: str) -> str | None:
    """The sanitizer's report in a child's stderr, if it wrote one."""
    for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: UndefinedBehaviorSanitizer"):
        i = stderr.find(marker)
        if i >= 0:
            return stderr[max(0, i - 200):i + 3000]
    return None
