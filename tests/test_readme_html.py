"""README says what the HTML report holds (issue 55): its sentence on scripts agrees with the page that
``--html`` writes for a real sample (the zoomable timeline is drawn by one inline script), and nothing is fetched."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from conftest import ROOT, SAMPLES

import tfadvisor
from tfadvisor.report.html import write_html


def _html_bullet() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"^- `--html report\.html`:.*?(?=^- |\Z)", text, flags=re.M | re.S)
    assert m, "README has no `--html report.html` bullet"
    return re.sub(r"\s+", " ", m.group(0))


class _Tags(HTMLParser):
    """Every start tag with its attributes (a script's text is not parsed as tags)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def test_readme_sentence_on_scripts_matches_the_page(tmp_path):
    bullet = _html_bullet()
    says_none = re.search(r"\bno (java)?scripts?\b", bullet, flags=re.I) is not None
    says_one = re.search(r"\bone inline script\b", bullet) is not None
    assert says_none != says_one, f"README's --html bullet says both or neither: {bullet}"
    out = tmp_path / "r.html"
    write_html(tfadvisor.analyze(SAMPLES / "eager"), out)
    page = out.read_text(encoding="utf-8")
    assert 'id="plot-timeline"' in page  # the sample has a timeline: the page holds what README describes
    parsed = _Tags()
    parsed.feed(page)
    runs = [a for t, a in parsed.tags if t == "script" and a.get("type") != "application/json"]
    assert (len(runs) == 1) == says_one and (not runs) == says_none, (runs, bullet)
    # "nothing is fetched": no script, stylesheet, image or frame from elsewhere, no CSS import
    assert "nothing is fetched" in bullet
    fetched = [(t, a) for t, a in parsed.tags if "src" in a or (t == "link" and "href" in a)]
    assert not fetched and not re.search(r"@import|url\(\s*['\"]?https?:", page), fetched
