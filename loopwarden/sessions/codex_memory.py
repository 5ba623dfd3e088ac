"""What a kept Codex session's adapter remembers across daemons: its values bounded going out, checked coming back.

`CodexAppServerAdapter.memory()` gives the store its thread, turn, request ids and texts as JSON values; a later
daemon reads them back through the readers here, each of which turns a value of the wrong type into its empty
default instead of raising (the store may also have cut a long string). Texts share one budget of characters,
handed out whole in order of need: a text that does not fit is left out, never cut.
"""

from __future__ import annotations

from typing import Any

import orjson

MEMORY_CHARS = 6000  # characters of text (and tool arguments) one memory holds at most, all together
KEPT_ENTRIES = 32  # entries of each list or map a memory holds at most
ID_GAP = 1000  # request ids skipped after a take-up: an earlier daemon may have sent some its memory does not say


class Budget:
    """The characters a memory may still spend on texts; whole texts are taken while they fit."""

    def __init__(self, chars: int = MEMORY_CHARS) -> None:
        self.left = chars

    def spend(self, size: int) -> bool:
        """Whether `size` more characters fit (then they are spent)."""
        if size > self.left:
            return False
        self.left -= size
        return True

    def text(self, value: str | None) -> str | None:
        """`value` if it fits, else None."""
        return value if value is None or self.spend(len(value)) else None

    def texts(self, values: list[str]) -> list[str] | None:
        """All of `values` if they fit together, else None."""
        return values if self.spend(sum(len(v) for v in values)) else None

    def value(self, value: Any) -> bool:
        """Whether a JSON value (a tool call's arguments) fits, by the length of its JSON text."""
        try:
            size = len(orjson.dumps(value))
        except TypeError:
            return False
        return self.spend(size)


def flag(value: Any, default: bool = False) -> bool:
    return value if isinstance(value, bool) else default


def count(value: Any) -> int:
    """A non-negative int, or 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def text(value: Any) -> str | None:
    """A non-empty string, or None."""
    return value if isinstance(value, str) and value else None


def texts(value: Any) -> list[str]:
    """The strings of a list (anything else: none)."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def entries(value: Any, width: int) -> list[list[Any]]:
    """The items of a list that are lists of `width` values, at most KEPT_ENTRIES of them (the last)."""
    found = [v for v in value if isinstance(v, list) and len(v) == width] if isinstance(value, list) else []
    return found[-KEPT_ENTRIES:]


def request_id(value: Any) -> int | str | None:
    """A JSON-RPC request id (a number or a string), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return value


def seq_key(key: Any) -> int | None:
    """A line seq kept as a JSON object key (a string of digits), or None."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key
    return int(key) if isinstance(key, str) and key.isdigit() and len(key) < 19 else None

