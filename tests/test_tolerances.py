"""Every tolerance of the tests has its measured figure beside it, and ``tests/TOLERANCES.md`` lists them all
(regenerate with ``python tests/tolerances.py``)."""

from __future__ import annotations

from tolerances import NOTE, collect, render


def test_every_loose_tolerance_has_a_measured_figure():
    missing = [f"{t.file}:{t.line} {t.what}" for t in collect() if t.loose and not t.measured]
    assert not missing, "a tolerance looser than 1 % with no measured figure beside it: " + ", ".join(missing)


def test_the_note_is_current():
    tols = collect()
    assert len(tols) > 50
    assert NOTE.read_text() == render(tols), "tests/TOLERANCES.md is stale: run python tests/tolerances.py"
