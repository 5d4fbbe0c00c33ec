"""The reports of every sample and real trace, kept as digests to hold them unchanged.

``tfadvisor analyze DIR --format json --tables`` of each trace (:func:`conftest.trace_dirs`) is cut into parts (each
top-level key, each table) and each part's JSON hashed; ``tests/output_digests.json`` holds the digests of the
last accepted reports. ``tests/test_outputs.py`` fails when a part changes, naming it: a change meant to keep the
answers (memory, speed, a refactoring) must leave every part as it was; a change of the answers is accepted by
writing the file again, ``python tests/outputs.py``, which prints the parts that changed. The report's ``version``
is left out, and the checkout's paths are written as ``<repo>`` and ``<shared>``. Floats are hashed as Python
writes them: a result that moves in its last digit (another CPU's vector unit, another numpy) shows as a change.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from click.testing import CliRunner

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SHARED = ROOT.parent / "shared"
DIGESTS = TESTS / "output_digests.json"
#: Left out of the digests: the tool's version changes with every release, not with the answers.
UNHASHED = ("version",)


def target_name(d: Path) -> str:
    """``sample_traces/<name>`` or ``real_traces/<name>``."""
    return f"{d.parent.name}/{d.name}"


def report(d: Path) -> dict:
    """``tfadvisor analyze d --format json --tables --quiet``, run through the command line's own code."""
    from tfadvisor.cli import app

    got = CliRunner().invoke(app, ["analyze", str(d), "--format", "json", "--tables", "--quiet"])
    if got.exit_code != 0:
        raise RuntimeError(f"{d}: analyze exited {got.exit_code}: {got.output[-2000:]}") from got.exception
    return json.loads(got.stdout)


def _digest(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    text = text.replace(str(ROOT), "<repo>").replace(str(SHARED), "<shared>")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def parts(rep: dict) -> dict[str, str]:
    """Digest per part of a report: each top-level key, and each table as ``tables.<name>``."""
    out = {}
    for key, value in rep.items():
        if key in UNHASHED:
            continue
        if key == "tables":
            out.update({f"tables.{name}": _digest(t) for name, t in value.items()})
        else:
            out[key] = _digest(value)
    return out


def changed(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """The parts that differ, appeared or went away."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def load() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}


def main() -> None:
    sys.path.insert(0, str(TESTS))
    from conftest import trace_dirs

    old = load()
    new = dict(old)
    for d in trace_dirs():
        name = target_name(d)
        new[name] = parts(report(d))
        diff = changed(old.get(name, {}), new[name])
        if diff:
            print(f"{name}: {', '.join(diff)}")
    DIGESTS.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    print(f"wrote {DIGESTS} ({len(new)} traces)")


if __name__ == "__main__":
    main()
