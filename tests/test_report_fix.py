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


def test_markdown_it_is_imported_only_to_split_a_fix():
    code = ("import sys, tfadvisor.cli, tfadvisor.report.view, tfadvisor.report.terminal, tfadvisor.report.html, "
            "tfadvisor.report.markdown, tfadvisor.report.diff\n"
            "assert 'markdown_it' not in sys.modules\n"
            "from tfadvisor.report.findings import split_fix\n"
            "split_fix('a')\n"
            "assert 'markdown_it' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
