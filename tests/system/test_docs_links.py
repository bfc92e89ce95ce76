"""The docs as a reader meets them: every relative Markdown link of the README, docs/ and experiments/ leads to a file
that exists (and to a heading of it, where the link names one), and each results page stays a page a newcomer reads,
its history in docs/results/log/."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "experiments").glob("*.md")])
RESULTS = sorted((ROOT / "docs" / "results").glob("*.md"))
MOST_BYTES = 15_000
# [text](target) and ![alt](target); a target ends at the first space (a title may follow) or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"```.*?```", re.DOTALL)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


@functools.cache
def anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives a page: lower case, punctuation dropped, spaces as hyphens, -1, -2 … on
    repeats."""
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, repeat = slug, 0
        while anchor in found:
            repeat += 1
            anchor = f"{slug}-{repeat}"
        found.add(anchor)
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(CODE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …: not a file of this repository
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path):
    (tmp_path / "other.md").write_text("# A heading, with `code`\n## Twice\n## Twice\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("[fine](other.md#a-heading-with-code) [repeat](other.md#twice-1) [web](https://example.org)\n"
                    "[in a fence](other.md#not-a-heading)\n"
                    "`[in code](nowhere.md)` [gone](nowhere.md) [no heading](other.md#nowhere)\n")
    assert broken_links(page) == ["other.md#not-a-heading: no such heading", "nowhere.md: no such file",
                                  "other.md#nowhere: no such heading"]


@pytest.mark.parametrize("page", RESULTS, ids=lambda page: page.name)
def test_a_results_page_is_short_and_links_its_history(page):
    size, text = page.stat().st_size, page.read_text(encoding="utf-8")
    assert size <= MOST_BYTES, f"{page.name}: {size} bytes, over {MOST_BYTES}; move its history to log/"
    assert f"(log/{page.name})" in text, f"{page.name} does not link its history, log/{page.name}"
