"""``--run NAME`` picks one run or says which ones it matches; a logdir of several runs says which was taken."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from tfadvisor.errors import TraceError
from tfadvisor.io.discovery import resolve

#: a real capture (small), copied into made-up runs: the runs differ by name only
SOURCE = next((ROOT / "sample_traces" / "input_bound_defaults_off" / "plugins" / "profile").rglob("*.xplane.pb"))


def _logdir(root: Path, runs: list[str]) -> Path:
    for r in runs:
        d = root / r
        d.mkdir(parents=True)
        shutil.copy(SOURCE, d / SOURCE.name)
    return root


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return _logdir(tmp_path / "logs", ["train/plugins/profile/2026_03_01_10_00_00",
                                       "train/plugins/profile/2026_03_01_10_00_005",
                                       "train/plugins/profile/2026_03_02_09_00_00"])


def test_exact_name_wins_over_a_longer_name_it_prefixes(logdir):
    assert resolve(logdir, run="2026_03_01_10_00_00").name == "2026_03_01_10_00_00"
    assert resolve(logdir, run="2026_03_01_10_00_005").name == "2026_03_01_10_00_005"


def test_unique_prefix_and_full_label_pick_one(logdir):
    assert resolve(logdir, run="2026_03_02").name == "2026_03_02_09_00_00"
    run = resolve(logdir, run="train/plugins/profile/2026_03_01_10_00_00")
    assert run.name == "2026_03_01_10_00_00" and run.picked_by == "--run"


def test_ambiguous_prefix_is_bad_input(logdir):
    with pytest.raises(TraceError) as err:
        resolve(logdir, run="2026_03_01")
    text = str(err.value)
    assert "matches 2 runs" in text
    assert "train/plugins/profile/2026_03_01_10_00_00" in text and "2026_03_01_10_00_005" in text
    assert "2026_03_02_09_00_00" not in text


def test_same_name_in_two_logdirs_is_ambiguous_but_the_path_is_not(tmp_path):
    root = _logdir(tmp_path / "logs", ["train/plugins/profile/2026_03_01_10_00_00",
                                       "validation/plugins/profile/2026_03_01_10_00_00"])
    with pytest.raises(TraceError, match="matches 2 runs"):
        resolve(root, run="2026_03_01_10_00_00")
    assert resolve(root, run="validation/plugins/profile/2026_03_01_10_00_00").directory.endswith(
        "validation/plugins/profile/2026_03_01_10_00_00")


def test_unknown_name_lists_the_runs(logdir):
    with pytest.raises(TraceError, match=r"no run named 'x'.*2026_03_02_09_00_00"):
        resolve(logdir, run="x")


def test_cli_ambiguous_run_exits_2_with_one_line(logdir):
    proc = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(logdir), "--run", "2026_03_01"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert str(logdir) in lines[0] and "2026_03_01_10_00_005" in lines[0]
    assert proc.stdout == ""


def _cli(monkeypatch, capsys, *args: str) -> str:
    from tfadvisor.cli.app import main

    monkeypatch.setattr(sys, "argv", ["tfadvisor", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as ex:
        main()
    assert ex.value.code in (0, None)
    return capsys.readouterr().out


def test_report_says_which_of_several_runs_was_taken(logdir, monkeypatch, capsys):
    text = _cli(monkeypatch, capsys, "analyze", str(logdir))
    head = text.splitlines()[:3]
    assert "report for train/plugins/profile/2026_03_02_09_00_00" in head[0]
    assert head[1].split()[0] == "run" and "the newest of 3 runs" in head[1] and "--run" in head[1]
    assert "2026_03_01_10_00_005" in head[1]

    doc = json.loads(_cli(monkeypatch, capsys, "analyze", str(logdir), "--format", "json",
                          "--run", "2026_03_01_10_00_00"))
    assert doc["run"]["name"] == "2026_03_01_10_00_00"
    assert sorted(doc["run"]["other_runs"]) == ["train/plugins/profile/2026_03_01_10_00_005",
                                                "train/plugins/profile/2026_03_02_09_00_00"]


def test_single_run_says_nothing_about_others(tmp_path, monkeypatch, capsys):
    root = _logdir(tmp_path / "one", ["plugins/profile/2026_03_01_10_00_00"])
    run = resolve(root)
    assert run.others == () and run.selection() is None
    doc = json.loads(_cli(monkeypatch, capsys, "analyze", str(root), "--format", "json"))
    assert doc["run"]["other_runs"] == []
