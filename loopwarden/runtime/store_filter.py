"""Which stored records a `logs` or `audit` request wants: a time range, a piece of text, a rule, an actor.

The same filter is a SQL condition for the store (so the daemon reads only what matches) and a test of one
record as it arrives (for `logs --follow`). Text matches are case-insensitive for ASCII letters (SQLite's
`lower`), and look at the record's values, never its field names.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .requests import RequestError

_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)  # SQLite's lower(), for a live record
MAX_TEXT = 1000  # characters of a --grep (or --actor) text
_TEXT_COLUMNS = {  # the columns a --grep reads, besides an event's JSON values
    "verdicts": ("action", "rule", "reason", "message", "target", "gate_id"),
    "actions": ("action", "target", "note", "outcome", "actor", "user"),
}


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Records at or after `since`, at or before `until`, holding `grep`, of rule `rule` (verdicts only)."""

    since: float | None = None
    until: float | None = None
    grep: str | None = None
    rule: str | None = None

    @classmethod
    def of_request(cls, req: Mapping[str, Any]) -> RecordFilter:
        """The filter a request names (`since`, `until`, `grep`, `rule`); a wrong value is refused in one line."""
        return cls(since=time_field(req, "since"), until=time_field(req, "until"), grep=text_field(req, "grep"),
                   rule=text_field(req, "rule"))

    @property
    def empty(self) -> bool:
        return self.since is None and self.until is None and not self.grep and not self.rule

    def tables(self, wanted: Iterable[str]) -> list[str]:
        """The history tables worth reading: with a rule, the verdicts alone."""
        return [t for t in wanted if not self.rule or t == "verdicts"]

    def clause(self, table: str, first: int) -> tuple[str, list[Any]]:
        """` AND ...` for `table`'s query, its parameters numbered from ?`first` on; and their values."""
        column = "e." if table == "events" else ""
        parts: list[str] = []
        values: list[Any] = []

        def add(sql: str, value: Any) -> None:
            values.append(value)
            parts.append(sql.replace("?", f"?{first + len(values) - 1}"))

        if self.since is not None:
            add(f"{column}ts >= ?", self.since)
        if self.until is not None:
            add(f"{column}ts <= ?", self.until)
        if self.rule and table == "verdicts":
            add("rule = ?", self.rule)
        if self.grep:
            if table == "events":
                if _verbatim_in_json(self.grep):  # a row whose JSON lacks the text is passed over at once
                    add("instr(lower(e.data), lower(?)) > 0", self.grep)
                add("EXISTS (SELECT 1 FROM json_tree(e.data) j WHERE j.type = 'text'"
                    " AND instr(lower(j.atom), lower(?)) > 0)", self.grep)
            else:
                joined = " || char(10) || ".join(f"coalesce({c}, '')" for c in _TEXT_COLUMNS.get(table, ()))
                add(f"instr(lower({joined}), lower(?)) > 0", self.grep)
        return "".join(f" AND {part}" for part in parts), values

    def matches(self, kind: str | None, data: Mapping[str, Any], when: float | None) -> bool:
        """Whether one record as it arrives live (`logs --follow`) passes, as the store's query would have it."""
        if self.rule and (kind != "verdict" or data.get("rule") != self.rule):
            return False
        if when is not None and ((self.since is not None and when < self.since)
                                 or (self.until is not None and when > self.until)):
            return False
        if self.grep:
            needle = self.grep.translate(_ASCII_LOWER)
            return any(needle in text.translate(_ASCII_LOWER) for text in _strings(data))
        return True

    def fields(self) -> dict[str, Any]:
        """The filter as request fields (only those set)."""
        given = {"since": self.since, "until": self.until, "grep": self.grep, "rule": self.rule}
        return {key: value for key, value in given.items() if value is not None}


EVERY_RECORD = RecordFilter()


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _verbatim_in_json(text: str) -> bool:
    """Whether `text` is stored as itself in a record's JSON (no quote, backslash or control character, which
    JSON escapes), so a plain search of the JSON text may rule a row out before its values are walked."""
    return not any(c in '"\\' or ord(c) < 0x20 for c in text)


def time_field(req: Mapping[str, Any], key: str) -> float | None:
    """A time field of a request (seconds since the epoch), or None; anything else is refused in one line."""
    value = req.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise RequestError(f"'{key}' must be a time in seconds since the epoch")
    return float(value)


def text_field(req: Mapping[str, Any], key: str) -> str | None:
    """A text field of a request, or None; anything but a short text is refused in one line."""
    value = req.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise RequestError(f"'{key}' must be a text of at most {MAX_TEXT} characters")
    return value
