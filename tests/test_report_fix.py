"""A rule's fix is read once, as CommonMark (advice.docs.markdown_blocks, markdown-it-py): the HTML and
Markdown reports (report.findings.split_fix), the terminal and ``tfadvisor rules explain`` find the same
code blocks in it."""

from __future__ import annotations

import io
import subprocess
import sys

from rich.console import Console

from tfadvisor.advice.docs import _para, markdown_blocks
from tfadvisor.report.findings import finding_fix, split_fix
from tfadvisor.report.terminal import _finding, _fix_parts

FIX = """Prefetch so the next batch is read while this one trains:

```python
ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
ds = ds.prefetch(tf.data.AUTOTUNE)
```

Or with an indented block:

    model.fit(ds, steps_per_execution=32)

- one item
- two: `code span`

~~~sh
tfadvisor analyze logs/
~~~
"""


def test_blocks_are_fences_indented_code_and_the_text_between():
    blocks = markdown_blocks(FIX)
    assert [b.kind for b in blocks] == ["text", "code", "text", "code", "text", "code", "text"]
    fence, indented, tilde = (b for b in blocks if b.kind == "code")
    assert (fence.lang, fence.body) == ("python", "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)\n"
                                                  "ds = ds.prefetch(tf.data.AUTOTUNE)\n")
    assert fence.source.startswith("```python\n") and fence.source.endswith("\n```")
    assert (indented.lang, indented.body) == ("", "model.fit(ds, steps_per_execution=32)\n")
    assert (tilde.lang, tilde.body) == ("sh", "tfadvisor analyze logs/\n")
    # nothing lost: the blocks' lines are the text's lines
    assert "\n".join(b.source for b in blocks) == FIX


def test_split_fix_html_and_markdown_parts():
    assert split_fix(FIX) == [
        ("text", "Prefetch so the next batch is read while this one trains:", ""),
        ("code", "ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)\nds = ds.prefetch(tf.data.AUTOTUNE)",
         "python"),
        ("text", "Or with an indented block:", ""),
        ("code", "model.fit(ds, steps_per_execution=32)", ""),
        ("text", "- one item\n- two: `code span`", ""),
        ("code", "tfadvisor analyze logs/", "sh"),
    ]
    assert split_fix({"text": "Do this.", "code": "x = 1\n"}) == [("text", "Do this.", ""), ("code", "x = 1", "python")]
    assert split_fix(["a", "b\n\nc"]) == [("text", "a", ""), ("text", "b", ""), ("text", "c", "")]
    assert split_fix(None) == [] and split_fix("") == []
    assert finding_fix({"fix": "Do this.", "code": "\nx = 1\n"})[-1] == ("code", "x = 1", "python")


def test_every_reader_finds_the_same_code():
    """A fence in a list item, an unclosed fence, a fence of four backticks holding one of three, CRLF."""
    texts = [FIX, "- Step one:\n\n  ```python\n  x = 1\n  ```\n- Step two",
             "Do this:\n\n```python\nx = 1\n", "Show:\n\n````md\n```python\nx\n```\n````\n",
             "Do this:\r\n\r\n```python\r\nx = 1\r\n```\r\n"]
    for text in texts:
        code = [body for kind, body, _ in split_fix(text) if kind == "code"]
        assert code, text
        assert [body for kind, body in _fix_parts(text) if kind == "code"] == code
        out = io.StringIO()
        _finding(Console(file=out, width=100), 1, {"rule": "r", "title": "t", "message": "m", "fix": text}, {})
        for body in code:
            assert "\n".join(" " * 7 + ln for ln in body.splitlines()) in out.getvalue()


def test_rules_explain_keeps_code_as_written_and_wraps_prose():
    long = "word " * 30
    out = _para(f"{long}\n\n```python\nx = [1,   2]  # {long}\n```\n\n    indented = True\n\n- {long}")
    lines = out.split("\n")
    assert all(len(ln) <= 80 for ln in lines if "x = [1" not in ln)
    assert "```python" in lines and f"x = [1,   2]  # {long}".rstrip() in lines and "    indented = True" in lines
    assert lines[lines.index("```python") + 2] == "```"
    assert _para("a\n~~~\nb c\n~~~").split("\n") == ["a", "~~~", "b c", "~~~"]  # a fence interrupts a paragraph


def test_markdown_it_is_imported_only_to_split_a_fix_it_is_needed_for():
    """Prose and closed fences at the margin are read without it (the rules' usual fix); a list is not."""
    code = ("import sys, tfadvisor.cli.app, tfadvisor.report.view, tfadvisor.report.terminal, tfadvisor.report.html, "
            "tfadvisor.report.markdown, tfadvisor.report.diff\n"
            "assert 'markdown_it' not in sys.modules\n"
            "from tfadvisor.report.findings import split_fix\n"
            "split_fix('a\\n\\n```python\\nx = 1\\n```\\n')\n"
            "assert 'markdown_it' not in sys.modules\n"
            "split_fix('- a')\n"
            "assert 'markdown_it' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


#: Texts at the edge of what is read without markdown-it (each either read so or handed to it).
EDGES = [
    "", "a", "\n", "a\n```\n", "```\n```", "```py x\ncode\n\n  more\n```\nb\n```\n```\n", "a\n~~~\nb c\n~~~",
    "````md\n```python\nx\n```\n````\n", "```\nx\n  ```\n", "```\nx\n ````  \ny\n```", "```\nx\n```` \n",
    "``` a`b\nx\n```", "~~~ a`b ~\nx\n~~~~~\n", "```\nx\n~~~\n```", "~~~\nx\n```\n~~~", "``\nx\n``",
    "`a` b\n~~ c\n```\nd\n```",
    "a\n\n    code\n", "a\n\tcode\n", "1. one\n\n   ```\n   x\n   ```\n", "> ```\n> x\n> ```",
    "<div>\n```\nx\n```\n</div>",
    "a\n---\n```\nx\n```", "para\n```sh\nrun\n```\ntail", "x\r\n```\r\ny\r\n```\r\n", "a\0\n```\nb\n```",
    "# Title\n\n```\n    indented inside\n\tand a tab\n```\n", "```\n\n```\n\n```\nz\n```", "```\nunclosed",
]


def _rule_texts() -> list[str]:
    from pathlib import Path

    import tomllib

    out = []
    for f in sorted((Path(__file__).resolve().parent.parent / "rules").glob("*.toml")):
        for rule in tomllib.loads(f.read_text(encoding="utf-8")).get("rule", []):
            for t in [rule, *rule.get("case", [])]:
                out += [t[k] for k in ("fix", "why", "example") if isinstance(t.get(k), str)]
    return out


def test_blocks_read_without_markdown_it_are_its_blocks(monkeypatch):
    """Every rule's fix, why and example, and the edge texts: the same blocks with markdown-it alone; most
    rule texts (282 of 289 on 2026-12-02) are read without it."""
    from tfadvisor.advice import docs

    texts = _rule_texts() + EDGES
    fast = [markdown_blocks(t) for t in texts]
    took = sum(docs._simple_fences(t.replace("\r\n", "\n").split("\n")) is not None for t in texts)
    monkeypatch.setattr(docs, "_simple_fences", lambda lines: None)
    assert fast == [markdown_blocks(t) for t in texts]
    assert len(texts) > 250 and took > len(texts) * 0.7, (took, len(texts))
