"""The rules' cache (tfadvisor.advice.cache): rules read back are the rules parsed, a changed file (or metric set) is
checked again, an error is never kept, and no directory it cannot write, no entry it cannot read, no concurrent
writer changes what is loaded."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfadvisor.advice import cache, evaluate_rule, load_rules, rule_dict
from tfadvisor.advice.expr import Expr, Template
from tfadvisor.advice.rules import RuleError, load_file

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"

RULE = '''
[[rule]]
id = "cached_rule"
title = "A test rule"
severity = "warning"
when = "{when}"
message = "input is {{input_pct:.1f}} %[[; {{tfdata_cause_pct:.0f}} % of it the pipeline]]"
fix = "do something"

[[rule.case]]
when = "input_pct >= 50"
severity = "critical"
impact = "min(input_pct, 100)"
'''


class _Forgetful(dict):
    """The process's memo of rule files read (``rules._LOADED``) that keeps nothing: each load below goes to the disk
    cache, the layer these tests check (the memo has its own test)."""

    def __setitem__(self, key, value) -> None:
        pass


@pytest.fixture(autouse=True)
def no_memo(monkeypatch):
    import tfadvisor.advice.rules as rules

    monkeypatch.setattr(rules, "_LOADED", _Forgetful())


def test_a_second_load_in_one_process_reads_nothing_again(tmp_path, monkeypatch):
    """The memo: a file read once in this process is neither read from the cache nor parsed again (the same rules,
    their expressions parsed once); a changed file or other metric names are read again."""
    import tfadvisor.advice.rules as rules

    monkeypatch.setattr(rules, "_LOADED", {})
    monkeypatch.setenv("TFADVISOR_CACHE_DIR", str(tmp_path / "cache"))
    d = _rules_dir(tmp_path)
    first = load_rules([d], builtin=False)
    _no_parsing(monkeypatch)
    monkeypatch.setattr(cache, "read", lambda *a, **k: pytest.fail("read from the disk cache again"))
    again = load_rules([d], builtin=False)
    assert again[0] is first[0]
    monkeypatch.setattr(cache, "read", lambda *a, **k: None)  # not in the disk cache either: parsed
    with pytest.raises(AssertionError, match="parsed, not read back"):  # other names: checked again
        load_rules([d], builtin=False, known_metrics={"input_pct", "other"})
    _rules_dir(tmp_path, when="input_pct >= 7")
    with pytest.raises(AssertionError, match="parsed, not read back"):  # other bytes: read again
        load_rules([d], builtin=False)


@pytest.fixture
def cache_in(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TFADVISOR_CACHE_DIR", str(d))
    return d


def _rules_dir(tmp_path: Path, when: str = "input_pct >= 5") -> Path:
    d = tmp_path / "myrules"
    d.mkdir(exist_ok=True)
    (d / "r.toml").write_text(textwrap.dedent(RULE.format(when=when)).lstrip("\n"), encoding="utf-8")
    return d


def _no_parsing(monkeypatch):
    """Make parsing a rule file fail: what loads after this came from the cache."""
    import tfadvisor.advice.rules as rules

    def refuse(*a, **k):
        raise AssertionError("parsed, not read back")

    monkeypatch.setattr(rules, "_parse_file", refuse)


def _plain(x):
    """A rule as plain data, every field of it and of its cases (expressions as their source)."""
    if dataclasses.is_dataclass(x):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, (Expr, Template)):
        return (type(x).__name__, x.source)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    return x


@pytest.fixture(scope="module")
def metrics():
    from tfadvisor.api import analyze

    return [analyze(SAMPLES / name).metrics for name in ("input_bound_defaults_off", "tfdata_repeat_map",
                                                          "memory_heavy", "synthetic_gpu_mixed")]


def test_the_builtin_rules_read_back_are_the_rules_parsed(cache_in, monkeypatch, metrics):
    """Every built-in rule read back from the cache: the same fields, and on four samples' metrics the same finding
    (or none), the same message of every case, the same impact; its expressions parsed only when evaluated."""
    parsed = load_rules()
    assert len(list(cache_in.glob("rules-*.json"))) == len({r.path for r in parsed})
    _no_parsing(monkeypatch)
    kept = load_rules()
    assert [_plain(r) for r in kept] == [_plain(r) for r in parsed]
    assert [rule_dict(r) for r in kept] == [rule_dict(r) for r in parsed]
    assert all(r.when._fn is None for r in kept)  # nothing parsed yet
    fired = 0
    for m in metrics:
        for a, b in zip(parsed, kept):
            fa, fb = evaluate_rule(a, m), evaluate_rule(b, m)
            assert (fa and fa.to_dict()) == (fb and fb.to_dict()), a.id
            fired += fa is not None
            for ca, cb in zip(a.cases, b.cases):
                assert ca.when.test(m) == cb.when.test(m)
                if ca.message is not None:
                    assert ca.message.render(m) == cb.message.render(m)
                if ca.impact is not None:
                    assert ca.impact.evaluate(m) == cb.impact.evaluate(m)
            assert a.message.names() == b.message.names() and a.when.names() == b.when.names()
    assert fired >= 8, fired


def test_a_changed_rule_file_is_checked_again(cache_in, tmp_path, monkeypatch):
    d = _rules_dir(tmp_path)
    first = load_rules([d], builtin=False)
    assert first[0].when.source == "input_pct >= 5" and len(list(cache_in.glob("*.json"))) == 1
    _rules_dir(tmp_path, when="input_pct >= 7")  # same size, same second, other content
    second = load_rules([d], builtin=False)
    assert second[0].when.source == "input_pct >= 7"
    _rules_dir(tmp_path, when="inptu_pct >= 7")  # now wrong: an error, each time, never kept
    for _ in range(2):
        with pytest.raises(RuleError, match="unknown metric 'inptu_pct'"):
            load_rules([d], builtin=False)
    entry = json.loads(next(cache_in.glob("*.json")).read_text())
    assert entry["value"][0]["when"] == "input_pct >= 7"  # the last good one, not used for other content
    assert len(list(cache_in.glob("*"))) == 1  # no temporary file left


def test_other_metric_names_check_again(cache_in, tmp_path):
    """An entry checked against other metric names is not used: a metric an analysis no longer declares is an
    error, not a rule read back."""
    d = _rules_dir(tmp_path)
    path = d / "r.toml"
    from tfadvisor.analyses import known_metrics

    known = set(known_metrics())
    load_file(path, known)
    with pytest.raises(RuleError, match="unknown metric 'input_pct'"):
        load_file(path, known - {"input_pct"})


def test_no_cache_where_it_cannot_be_written_or_read(tmp_path, monkeypatch):
    d = _rules_dir(tmp_path)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("TFADVISOR_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot be made
    assert load_rules([d], builtin=False)[0].id == "cached_rule"
    monkeypatch.setenv("TFADVISOR_CACHE_DIR", "")  # off
    assert cache.cache_dir() is None
    assert load_rules([d], builtin=False)[0].id == "cached_rule"
    good = tmp_path / "cache"
    monkeypatch.setenv("TFADVISOR_CACHE_DIR", str(good))
    load_rules([d], builtin=False)
    (entry,) = good.glob("*.json")
    key = json.loads(entry.read_bytes())["key"]
    for broken in (b"", b"{", b'{"key": 1}', b"[]", b"\xff", json.dumps({"key": key, "value": [{"id": 1}]}).encode(),
                   json.dumps({"key": key, "value": [["x"]]}).encode()):
        entry.write_bytes(broken)
        assert load_rules([d], builtin=False)[0].when.source == "input_pct >= 5", broken
        assert json.loads(entry.read_bytes())["value"][0]["id"] == "cached_rule"  # rewritten whole


def test_concurrent_writers_leave_one_whole_entry(tmp_path):
    """Six processes loading the built-in rules at once into an empty cache: each gets the 80-odd rules, and the
    entries left are whole and used by the next run."""
    code = "from tfadvisor.advice import load_rules; print(len(load_rules()))"
    env = dict(os.environ, TFADVISOR_CACHE_DIR=str(tmp_path / "c"))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(6)]
    counts = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(counts) == 1, counts
    files = sorted((tmp_path / "c").iterdir())
    assert files and all(f.suffix == ".json" for f in files), files
    assert all(json.loads(f.read_bytes())["value"] for f in files)
    check = "import tfadvisor.advice.rules as r; r._parse_file = None; from tfadvisor.advice import load_rules; " \
            "print(len(load_rules()))"
    out = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == counts.pop(), out.stderr[-2000:]


def test_the_cache_lives_in_the_cache_directory_only(tmp_path):
    """`tfadvisor analyze` with a fresh home: entries under $XDG_CACHE_HOME/tfadvisor, nothing new in the logdir."""
    import shutil

    logdir = tmp_path / "logdir"
    shutil.copytree(SAMPLES / "input_bound_defaults_off", logdir)
    before = sorted(p.relative_to(logdir) for p in logdir.rglob("*"))
    env = {k: v for k, v in os.environ.items() if k != "TFADVISOR_CACHE_DIR"}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "tfadvisor", "analyze", str(logdir)], env=env,
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.relative_to(logdir) for p in logdir.rglob("*")) == before
    entries = list((tmp_path / "xdg" / "tfadvisor").glob("rules-*.json"))
    assert len(entries) == len(list((ROOT / "rules").glob("*.toml")))
    assert not (tmp_path / "home").exists()


def test_rules_read_back_parse_no_toml(tmp_path):
    """A run whose rules all come from the cache imports no TOML parser (nor tempfile: nothing to write)."""
    code = ("import sys; from tfadvisor.advice import load_rules; load_rules(); "
            "print(sorted({'tomllib', 'tempfile'} & set(sys.modules)))")
    env = dict(os.environ, TFADVISOR_CACHE_DIR=str(tmp_path / "c"))
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert [r.stdout.strip() for r in runs] == ["['tempfile', 'tomllib']", "[]"], [r.stderr[-2000:] for r in runs]


def test_no_relative_cache_directory(monkeypatch):
    """A relative XDG_CACHE_HOME is ignored (the XDG rule) and a home that is not known keeps no cache: a relative
    directory would be the working directory's, perhaps the logdir."""
    monkeypatch.delenv("TFADVISOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", "/home/someone")
    assert cache.cache_dir() == Path("/home/someone/.cache/tfadvisor")
    monkeypatch.setenv("XDG_CACHE_HOME", "/abs/cache")
    assert cache.cache_dir() == Path("/abs/cache/tfadvisor")
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setattr(os.path, "expanduser", lambda p: p)  # no home known: "~" stays "~"
    assert cache.cache_dir() is None


def test_no_key_no_cache(cache_in, tmp_path, monkeypatch):
    """Where the checking code's source cannot be read (a frozen application), nothing is kept or read back."""
    import tfadvisor.advice.rules as rules

    monkeypatch.setattr(rules, "_checkers", lambda: None)
    d = _rules_dir(tmp_path)
    assert load_rules([d], builtin=False)[0].id == "cached_rule"
    assert not cache_in.exists()
