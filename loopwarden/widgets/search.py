"""Find text in a view's lines: a case-insensitive plain-text matcher, the current match, and its highlighting.

Highlighting only adds style spans to a copy of a line that is already sanitised text (`Text.stylize`): what
an agent wrote is never turned into markup, so a match cannot change how the rest of a line is read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.text import Text

MAX_MATCHES = 10_000  # counted and cycled through at most: a search of a huge file stays quick
MATCH_STYLE = "black on yellow"
CURRENT_STYLE = "bold black on bright_cyan"


@dataclass(frozen=True, slots=True)
class Match:
    """One occurrence: its line and where in it (character offsets, end excluded)."""

    line: int
    start: int
    end: int


def find(lines: Sequence[str], query: str, limit: int = MAX_MATCHES) -> list[Match]:
    """Every occurrence of `query` in `lines`, case-insensitive plain text, in reading order (at most `limit`)."""
    if not query:
        return []
    pattern = re.compile(re.escape(query), re.IGNORECASE)  # offsets stay the line's own (lower() can change lengths)
    out: list[Match] = []
    for number, line in enumerate(lines):
        for found in pattern.finditer(line):
            out.append(Match(number, found.start(), found.end()))
            if len(out) >= limit:
                return out
    return out


@dataclass
class Search:
    """A query over a view's lines, its matches and the one the view shows."""

    query: str = ""
    matches: list[Match] = field(default_factory=list)
    current: int = 0
    by_line: dict[int, list[int]] = field(default_factory=dict)  # line -> indexes of its matches

    def run(self, query: str, lines: Sequence[str], from_line: int = 0, from_column: int = 0) -> None:
        """Search `lines` for `query`; the current match is the first at or after `from_line` (its
        `from_column`), else the first."""
        self.query = query
        self.matches = find(lines, query)
        self.by_line = {}
        for index, found in enumerate(self.matches):
            self.by_line.setdefault(found.line, []).append(index)
        self.current = next((i for i, m in enumerate(self.matches) if (m.line, m.start) >= (from_line, from_column)), 0)

    def refresh(self, lines: Sequence[str], dropped: int = 0) -> None:
        """The same query over changed lines, the current match kept where it is; `dropped`: lines gone from the
        top since (a bounded view), so the same text is that many lines up."""
        found = self.match
        if found is None or found.line < dropped:
            self.run(self.query, lines)
        else:
            self.run(self.query, lines, found.line - dropped, found.start)

    def step(self, forward: bool) -> Match | None:
        """Move to the next (or previous) match, wrapping around; the match now current."""
        if self.matches:
            self.current = (self.current + (1 if forward else -1)) % len(self.matches)
        return self.match

    @property
    def match(self) -> Match | None:
        return self.matches[self.current] if self.matches else None

    @property
    def active(self) -> bool:
        return bool(self.query)

    def count_text(self) -> str:
        """`3/17`, `no match`, or `` with no query; a capped count says so (`3/10000+`)."""
        if not self.query:
            return ""
        if not self.matches:
            return "no match"
        more = "+" if len(self.matches) >= MAX_MATCHES else ""
        return f"{self.current + 1}/{len(self.matches)}{more}"

    def on_line(self, number: int) -> list[tuple[int, int, bool]]:
        """The matches on line `number`: (start, end, is the current one)."""
        return [(self.matches[i].start, self.matches[i].end, i == self.current) for i in self.by_line.get(number, ())]

    def highlight(self, text: Text, number: int, offset: int = 0) -> Text:
        """A copy of line `number` with its matches styled; `offset`: where the searched text starts in `text`."""
        spans = self.on_line(number)
        if not spans:
            return text
        out = text.copy()
        for start, end, current in spans:
            out.stylize(CURRENT_STYLE if current else MATCH_STYLE, start + offset, end + offset)
        return out
