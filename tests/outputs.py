"""The reports of every sample and real trace, kept to hold them unchanged on any machine.

``tfadvisor analyze DIR --format json --tables`` of each trace (:func:`conftest.trace_dirs`) is cut into parts (each
top-level key, each table). A part is kept as the digest of its JSON with every float masked (keys, orderings,
strings, integers and where the floats stand: exact) and its floats to 12 significant digits, compared within
:data:`TOL_REL` / :data:`TOL_ABS`; the text report (``analyze``) is kept as its digest, byte for byte.
``tests/output_digests.json`` holds the last accepted reports. ``tests/test_outputs.py`` fails when a part changes,
naming it (and the floats that moved): a change meant to keep the answers (memory, speed, a refactoring) must leave
every part as it was; a change of the answers is accepted by writing the file again, ``python tests/outputs.py``,
which prints the parts that changed. ``python tests/outputs.py --check`` compares without writing (exit 1 on a
change): the test runs it with numpy's vector dispatch narrowed, as on a CPU without AVX-512 or AVX2.

The report's ``version`` is left out, and the checkout's paths are written as ``<repo>`` and ``<shared>``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from pathlib import Path

from typer.testing import CliRunner

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SHARED = ROOT.parent / "shared"
DIGESTS = TESTS / "output_digests.json"
#: Left out of the digests: the tool's version changes with every release, not with the answers.
UNHASHED = ("version",)
#: The text report's part.
TEXT = "text"
# Floats of a report may move in their last digits where a sum's order changes (another numpy, another vector
# unit): a float64 sum of 1e6 terms reordered moves by at most ~1e-10 relative. Measured: 0 of the 129,679 floats
# of the 89 traces' reports moved between numpy's AVX-512, AVX2 and SSE4.2 (baseline) dispatch on this machine
# (2026-12-01); the stored 12 digits themselves are within 5e-13.
TOL_REL = 1e-9
# An absolute floor for figures that are differences of large ones (a share near 0 %, ms near 0).
TOL_ABS = 1e-9
_MASK = "\x00f"


def target_name(d: Path) -> str:
    """``sample_traces/<name>`` or ``real_traces/<name>``."""
    return f"{d.parent.name}/{d.name}"


def _run(args: list[str]) -> str:
    from tfadvisor.cli.app import app

    got = CliRunner().invoke(app, args)
    if got.exit_code != 0:
        raise RuntimeError(f"{args}: analyze exited {got.exit_code}: {got.output[-2000:]}") from got.exception
    return got.stdout


def report(d: Path) -> dict:
    """``tfadvisor analyze d --format json --tables --quiet``, run through the command line's own code."""
    return json.loads(_run(["analyze", str(d), "--format", "json", "--tables", "--quiet"]))


def text_report(d: Path) -> str:
    """``tfadvisor analyze d --quiet``: the terminal report."""
    return _run(["analyze", str(d), "--quiet"])


def reports(d: Path) -> tuple[dict, str]:
    """:func:`report` and :func:`text_report` of ``d`` from one analysis: the command line's own code renders both, its
    call of :func:`tfadvisor.api.analyze` answered the second time by the first's result (same arguments; a report
    reads its result, never changes it: the stored digests of both formats say so). Half the analyses of the
    check (107 traces: ~30 s of 2 cores in the suite)."""
    import tfadvisor.api as api

    real, memo, calls = api.analyze, {}, []

    def once(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        calls.append(key)
        if key not in memo:
            memo[key] = real(*args, **kwargs)
        return memo[key]

    api.analyze = once
    try:
        out = report(d), text_report(d)
    finally:
        api.analyze = real
    assert len(calls) == 2 and len(memo) == 1, f"{d}: the two reports did not share one analysis: {calls}"
    return out


def _paths(text: str) -> str:
    return text.replace(str(ROOT), "<repo>").replace(str(SHARED), "<shared>")


def _sha(text: str) -> str:
    return hashlib.sha256(_paths(text).encode()).hexdigest()[:16]


def _split(value, floats: list[float]):
    """``value`` with every float replaced by a mark, the floats appended to ``floats`` in document order."""
    if isinstance(value, float):
        floats.append(float(f"{value:.12g}"))
        return _MASK
    if isinstance(value, dict):
        return {k: _split(v, floats) for k, v in value.items()}
    if isinstance(value, list):
        return [_split(v, floats) for v in value]
    return value


def _part(value) -> dict:
    floats: list[float] = []
    masked = _split(value, floats)
    return {"digest": _sha(json.dumps(masked, sort_keys=True, default=str)), "floats": floats}


def parts(rep: dict, text: str | None = None) -> dict[str, dict]:
    """Each part of a report (each top-level key, each table as ``tables.<name>``) as its digest and floats; the
    text report, when given, as part :data:`TEXT` (a digest, no floats)."""
    out = {}
    for key, value in rep.items():
        if key in UNHASHED:
            continue
        if key == "tables":
            out.update({f"tables.{name}": _part(t) for name, t in value.items()})
        else:
            out[key] = _part(value)
    if text is not None:
        out[TEXT] = {"digest": _sha(text), "floats": []}
    return out


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=TOL_REL, abs_tol=TOL_ABS)


def changed(old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """The parts that differ, appeared or went away: a part whose structure, strings or integers changed by its
    name, one whose floats moved beyond the tolerance with the first of them (``index: old -> new``). A part
    missing from ``new`` that it was not asked for (the text report) is not a change."""
    keys = set(old) | set(new)
    if TEXT not in new:
        keys.discard(TEXT)
    out = []
    for k in sorted(keys):
        a, b = old.get(k), new.get(k)
        if a is None or b is None or a["digest"] != b["digest"] or len(a["floats"]) != len(b["floats"]):
            out.append(k)
            continue
        moved = [(i, x, y) for i, (x, y) in enumerate(zip(a["floats"], b["floats"])) if not _close(x, y)]
        if moved:
            out.append(f"{k} ({len(moved)} floats, first {moved[0][0]}: {moved[0][1]!r} -> {moved[0][2]!r})")
    return out


def load() -> dict[str, dict[str, dict]]:
    return json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}


def _write(accepted: dict) -> None:
    """One line per part: the file stays diffable."""
    lines = ["{"]
    for i, (name, ps) in enumerate(sorted(accepted.items())):
        lines.append(f" {json.dumps(name)}: {{")
        for j, (k, v) in enumerate(sorted(ps.items())):
            comma = "," if j < len(ps) - 1 else ""
            lines.append(f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{comma}")
        lines.append(" }" + ("," if i < len(accepted) - 1 else ""))
    lines.append("}")
    DIGESTS.write_text("\n".join(lines) + "\n")


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(TESTS))
    from conftest import trace_dirs

    check = "--check" in argv
    old = load()
    new = dict(old)
    bad = 0
    for d in trace_dirs():
        name = target_name(d)
        new[name] = parts(*reports(d))
        diff = changed(old.get(name, {}), new[name])
        if diff:
            bad += 1
            print(f"{name}: {', '.join(diff)}")
    if check:
        print(f"{bad} of {len(new)} traces' reports differ from {DIGESTS.name}")
        return 1 if bad else 0
    _write(new)
    print(f"wrote {DIGESTS} ({len(new)} traces)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
