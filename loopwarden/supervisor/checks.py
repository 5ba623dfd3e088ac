"""Which shell calls are a test or lint run: a small pure classifier of command lines.

Agents wrap their commands (Codex: `bash -lc 'pytest -q'`; others: `cd repo && npm test`, an argv list), so a
command is a check when one of its simple commands (split at `&&`, `;`, `|`, parentheses; quotes taken as spaces)
starts, after a shell, `sudo`, `uv run`, `python -m` and the like, with one of the configured commands (`pytest`,
`npm run lint`, `go test`, never `pytestx`, `ls pytest_notes` or `grep pytest`)."""

from __future__ import annotations

import re
from typing import Any, Final

_QUOTES: Final = str.maketrans({c: " " for c in "'\"`();"})
# where a new command starts: a list or pipe operator, a subshell, a command substitution, a new line
_SEPARATOR: Final = re.compile(r"&&|\|\||[;|()\n`]|\$\(")
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})  # `bash -lc '...'`: its script follows
_PREFIXES: Final = frozenset({"sudo", "time", "env", "exec", "command", "nice", "nohup", "npx", "bunx"})
_RUNNERS: Final = frozenset({("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"),
                             ("pnpm", "exec"), ("bundle", "exec"), ("python", "-m"), ("python3", "-m")})


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


def _command_words(segment: list[str]) -> list[str]:
    """A simple command's words from the program on: a shell's options, `sudo`/`time`/`env`..., `uv run`,
    `python -m`, `timeout 60` and variable assignments (`CI=1`) before it left out, its path stripped."""
    i = 0
    while i < len(segment):
        word = segment[i].rpartition("/")[2]
        if word in _SHELLS or word in _PREFIXES or ("=" in word and not word.startswith("=")) or word.startswith("-"):
            i += 1
        elif word == "timeout" or (i + 1 < len(segment) and (word, segment[i + 1]) in _RUNNERS):
            i += 2
        else:
            return [word, *segment[i + 1:]]
    return []


class CheckCommands:
    """Tells a test or lint command line from others, by a list such as `reflections.commands`: a check is a
    simple command of the line (between `&&`, `;`, `|`..., or in a shell's quoted script) that starts with one of
    them; a word in an argument (`git commit -m 'fix pytest'`, `grep pytest`, `which ruff`) is none."""

    __slots__ = ("commands", "first_words")

    def __init__(self, commands: list[str]) -> None:
        self.commands = [tuple(c.split()) for c in commands if c.split()]
        self.first_words = frozenset(c[0] for c in self.commands)

    def matches(self, command: str) -> bool:
        """Cheap pre-check first (a word, path stripped, names an entry's program), then each simple command."""
        first = self.first_words
        if not any(word in command for word in first):
            return False  # no program of the list is even a substring: substring tests in C, no split
        split = words(command)
        if "/" not in command and first.isdisjoint(split):
            return False  # no word is a path, so none has a path to strip: one set test in C (most commands)
        if not any(word.rpartition("/")[2] in first for word in split):
            return False
        return self.runs_check(command)

    def runs_check(self, command: str) -> bool:
        """Whether a simple command of `command` is a check (what `matches` tells, without its pre-check)."""
        first = self.first_words
        for part in _SEPARATOR.split(command):
            program = _command_words(part.translate(_QUOTES).split())
            if program and program[0] in first and any(tuple(program[:len(c)]) == c for c in self.commands):
                return True
        return False

    def of_call(self, args: dict[str, Any]) -> str | None:
        """The call's command line when it is a check, else None."""
        command = command_text(args)
        return command if command is not None and self.matches(command) else None
