"""The notes on what a trace could not tell (issue 55): the terminal report lists only those that change what a finding
shown means (an analysis declares them with ``AnalysisResult.qualify``) and counts the others in one line; ``--notes``
lists every note; the JSON keeps them all."""

from __future__ import annotations

import json
import re

import pytest
from conftest import analysed, cli_uses_shared_analysis, sample_dirs
from typer.testing import CliRunner

import tfadvisor
from tfadvisor.analyses.base import AnalysisResult, UndeclaredMetric
from tfadvisor.cli.app import app
from tfadvisor.report import cpu_only

#: The most lines the notes may take in the terminal report of a CPU-only sample without --notes (issue 55).
MOST_NOTE_LINES = 3


_ANALYSED: dict[str, object] = {}


def _text(d, *extra: str) -> list[str]:
    """The terminal report through the command line's own code; its analysis made once per trace for the reports
    with and without ``--notes`` (the same call of ``api.analyze``: the flag is the report's, not the analysis')."""
    import tfadvisor.api as api

    real = api.analyze

    def once(*args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        if key not in _ANALYSED:
            _ANALYSED.clear()  # one trace at a time: its two reports are asked for one after the other
            _ANALYSED[key] = real(*args, **kwargs)
        return _ANALYSED[key]

    api.analyze = once
    try:
        got = CliRunner().invoke(app, ["analyze", str(d), "--quiet", *extra], env={"COLUMNS": "80"})
    finally:
        api.analyze = real
    assert got.exit_code == 0, got.output[-2000:]
    return got.stdout.splitlines()


def _shared_text(d, *extra: str) -> list[str]:
    """:func:`_text` with the command line's plain call of the analysis answered by the shared one (conftest's
    :func:`cli_uses_shared_analysis`: the same call, made once per process)."""
    with cli_uses_shared_analysis():
        return _text(d, *extra)


def _notes_part(short: list[str], full: list[str]) -> tuple[list[str], list[str]]:
    """The non-blank lines where the two reports part: everything before the notes is the same."""
    i = 0
    while i < min(len(short), len(full)) and short[i] == full[i]:
        i += 1
    return [ln for ln in short[i:] if ln.strip()], [ln for ln in full[i:] if ln.strip()]


def _flat(lines: list[str]) -> str:
    return re.sub(r"\s+", " ", " ".join(lines))


@pytest.fixture(scope="module")
def cpu_samples():
    out = []
    for d in sample_dirs():
        res = analysed(d)
        if cpu_only(res):
            out.append((d, res))
    assert len(out) >= 70, f"only {len(out)} CPU-only samples"  # 79 on 2026-12-02
    return out


def test_notes_take_at_most_three_lines_on_every_cpu_sample(cpu_samples):
    """Before (2026-12-02): 28-51 lines of notes (19-28 notes) on the 79 CPU samples; after: at most 3."""
    most = 0
    for d, res in cpu_samples:
        short, full = _notes_part(_shared_text(d), _shared_text(d, "--notes"))
        most = max(most, len(short))
        assert len(short) <= MOST_NOTE_LINES, (d.name, short)
        # --notes lists every note, worded as the JSON has it
        assert full[0] == "Notes: what this trace could not tell", (d.name, full[:2])
        listed = _flat(full)
        for n in res.notes:
            assert _flat([f"- {n}"]) in listed, (d.name, n)
        # without: the notes on the findings shown in full, the others counted
        on = [ln for ln in short if ln.startswith("Note on finding")]
        assert short[-1].endswith(": --notes") and short[-1].split()[0] == str(len(res.notes) - len(on)), short
        assert "CPU-only trace" in short[-1]
    assert most >= 1


def test_a_note_that_changes_a_finding_is_shown_beside_its_number():
    """no_markers: its steps are the calls of the train function (no step marker); the step-outlier finding rests
    on those steps, so the steps analysis's note on how it found them is listed without --notes."""
    d = next(p for p in sample_dirs() if p.name == "no_markers")
    res = tfadvisor.analyze(d)
    note = next(n for n in res.notes if n.startswith("steps: no step markers"))
    nums = [i for i, f in enumerate(res.findings, 1) if set(f.evidence) & set(res.metrics.notes)]
    assert nums, [f.evidence for f in res.findings]
    out = _flat(_text(d))
    assert _flat([f"Note on finding{'s' if len(nums) > 1 else ''} {', '.join(map(str, nums))}: {note}"]) in out
    # a note no finding rests on stays folded
    gaps = next(n for n in res.notes if n.startswith("gaps: steps follow a call cadence"))
    assert "idle_within_steps_pct" in res.metrics and not any("idle_within_steps_pct" in f.evidence
                                                              for f in res.findings)
    assert _flat([gaps]) not in out


def test_json_keeps_every_note(cpu_samples):
    d, res = max(cpu_samples, key=lambda dr: len(dr[1].notes))
    got = CliRunner().invoke(app, ["analyze", str(d), "--quiet", "--format", "json"])
    assert json.loads(got.stdout)["notes"] == [str(n) for n in res.notes] and len(res.notes) > MOST_NOTE_LINES


def test_qualify_refuses_an_undeclared_metric():
    res = AnalysisResult("steps")
    with pytest.raises(UndeclaredMetric):
        res.qualify(("no_such_metric",), "a note")
    res.qualify(("step_time_mean_ms",), "a note")
    assert res.notes == ["a note"] and res.qualifies == {"a note": ("step_time_mean_ms",)}
