"""Which shell calls are a test or lint run: a small pure classifier of command lines.

Agents wrap their commands (Codex: `bash -lc 'pytest -q'`; others: `cd repo && npm test`, an argv list), so a
command is a check when any of its words (quotes and a path stripped) starts one of the configured commands and
the whole line holds that command as words (`pytest`, `npm run lint`, `go test`, never `pytestx` or `ls pytest_notes`
... see `matches`)."""

from __future__ import annotations

import re
from typing import Any, Final

_QUOTES: Final = str.maketrans({c: " " for c in "'\"`();"})


def command_text(args: dict[str, Any]) -> str | None:
    """A shell call's command line ("command", "cmd", or an argv list), else None."""
    value = args.get("command", args.get("cmd"))
    if type(value) is str:
        return value
    if type(value) is list and all(type(v) is str for v in value):
        return " ".join(value)
    return None


def words(command: str) -> list[str]:
    """The command's words, quotes and parentheses taken as spaces (`bash -lc 'pytest -q'` holds `pytest`)."""
    return command.translate(_QUOTES).split()


class CheckCommands:
    """Tells a test or lint command line from others, by a list such as `reflections.commands`."""

    __slots__ = ("first_words", "pattern")

    def __init__(self, commands: list[str]) -> None:
        escaped = sorted((re.escape(c).replace(r"\ ", r"\s+") for c in commands), key=len, reverse=True)
        self.pattern = re.compile(r"(?<![\w.-])(?:" + "|".join(escaped) + r")(?![\w-])")
        self.first_words = frozenset(c.split()[0] for c in commands if c.split())

    def matches(self, command: str) -> bool:
        """Cheap pre-check first (a word, path stripped, starts an entry), then the pattern."""
        first = self.first_words
        split = words(command)
        if "/" not in command and first.isdisjoint(split):
            return False  # no word is a path, so none has a path to strip: one set test in C (most commands)
        for word in split:
            if word.rpartition("/")[2] in first:
                return self.pattern.search(command) is not None
        return False

    def of_call(self, args: dict[str, Any]) -> str | None:
        """The call's command line when it is a check, else None."""
        command = command_text(args)
        return command if command is not None and self.matches(command) else None
