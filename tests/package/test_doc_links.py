"""Every link in README.md, docs/ and bench/'s notes leads somewhere: a file that exists, and a heading for
its `#anchor`; every repository path written in backticks (`docs/...`, `loopwarden/...`) exists too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "bench").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
REPO_PATH = re.compile(r"`((?:docs|bench|tests|loopwarden|scripts)/[\w./-]+)`")
PLACEHOLDERS = ("bench/out/", "DIR", "...")  # generated files and paths a reader fills in


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        heading = re.match(r"#{1,6} (.*)", line)
        if heading and not fenced:
            slug = _slug(heading.group(1))
            found.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    broken += [f"`{path}`: no such file" for path in REPO_PATH.findall(text)
               if not (ROOT / path).exists() and not any(mark in path for mark in PLACEHOLDERS)]
    assert not broken, broken


def test_the_slug_is_githubs() -> None:
    assert _slug("Switching rules off, per session and per tool") == "switching-rules-off-per-session-and-per-tool"
    assert _slug("Why did it fire? `loopwarden explain`") == "why-did-it-fire-loopwarden-explain"
