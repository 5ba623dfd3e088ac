"""What the operator switched off: whole rules (`rules.disabled`), rules for some tools (`tools.exempt`),
and the repetition rules for commands that only wait (`tools.waiting`: `sleep 60`, `gh run watch`).

Tool names and arguments are the agent's text: they are compared as plain strings, never compiled
into patterns, and a command is a waiting one only when it is nothing else (no `;`, `&&`, pipe,
redirection, substitution or quote anywhere), so `sleep 1; rm -rf x` is judged like any call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from .config import RULES, Config, change, tool_limits

# The guards that read a tool's own thresholds (tools.limits) while they judge that tool's events
TUNED_GUARDS: Final = frozenset({"repetition", "same_error"})

# The rules a waiting command, or a tool exempt without naming a rule, is taken out of: the ones that
# count repeats and failures of calls, and the stall while the call waits.
REPEAT_RULES: Final = frozenset({"repetition", "same_error", "alternation", "consecutive_failures", "stall"})
NOTHING: Final[frozenset[str]] = frozenset()

_PLAIN_WORD: Final = re.compile(r"[A-Za-z0-9_./:=@%+,-]+")
_SHELL_WRAPPER: Final = re.compile(r"(?:/usr)?(?:/bin/)?(?:ba|z|da)?sh\s+-l?c\s+(['\"])(.*)\1", re.DOTALL)
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})
_BLANKS: Final = re.compile(r"[ \t]+")
_MAX_COMMAND: Final = 300
_MAX_WORDS: Final = 16


def command_words(args: dict[str, Any]) -> list[str] | None:
    """The words of a plain shell command in `command` or `cmd` (a string, or a list of strings, with a
    `bash -lc '...'` wrapper taken off), or None when it has anything but plain words."""
    raw = args.get("command")
    if raw is None:
        raw = args.get("cmd")
    if isinstance(raw, list):
        if not all(isinstance(w, str) for w in raw) or len(raw) > _MAX_WORDS:
            return None
        if len(raw) == 3 and raw[0].rsplit("/", 1)[-1] in _SHELLS and raw[1] in ("-c", "-lc"):
            raw = raw[2]
        else:
            raw = " ".join(raw)
    if not isinstance(raw, str) or len(raw) > _MAX_COMMAND:
        return None
    text = raw.strip()
    wrapped = _SHELL_WRAPPER.fullmatch(text)
    if wrapped:
        text = wrapped.group(2).strip()
    words = [w for w in _BLANKS.split(text) if w]  # a newline is no blank here: it starts another command
    if not words or len(words) > _MAX_WORDS or not all(_PLAIN_WORD.fullmatch(w) for w in words):
        return None
    return words


class ToolControl:
    """Answers, per tool call, which rules do not judge it; built once per config."""

    def __init__(self, config: Config) -> None:
        self.disabled = frozenset(config.rules.disabled)
        by_tool: dict[str, set[str]] = {}
        for entry in config.tools.exempt:
            tool, rule = split_exemption(entry)
            by_tool.setdefault(tool, set()).update((rule,) if rule else REPEAT_RULES)
        self.by_tool = {tool: frozenset(rules) for tool, rules in by_tool.items()}
        per_tool: dict[str, dict[str, Any]] = {}
        for tool, key, value in tool_limits("tools.limits", config.tools.limits):
            per_tool.setdefault(tool, {})[key] = value
        self.tuned = {tool: change(config, values) for tool, values in per_tool.items()}  # each tool's own config
        self.waiting = [w.split() for w in config.tools.waiting if w.split()]
        self.waiting_tools = frozenset(w[0] for w in self.waiting if len(w) == 1)
        self.waiting_firsts = frozenset(w[0] for w in self.waiting)

    def exempt(self, tool: str, args: dict[str, Any]) -> frozenset[str]:
        """The rules that do not judge this call (usually none)."""
        own = self.by_tool.get(tool, NOTHING) if self.by_tool else NOTHING
        if tool in self.waiting_tools or (("command" in args or "cmd" in args) and self.is_waiting(args)):
            return own | REPEAT_RULES
        return own

    def is_waiting(self, args: dict[str, Any]) -> bool:
        """Whether the call's command is only a waiting command from `tools.waiting`."""
        raw = args.get("command", args.get("cmd"))
        if isinstance(raw, str):  # the hot path: most commands are told apart by their first word
            first = raw.split(None, 1)[0] if raw and not raw.isspace() else ""
            if first not in self.waiting_firsts and first.rsplit("/", 1)[-1] not in _SHELLS:
                return False
        words = command_words(args)
        if not words or words[0] not in self.waiting_firsts:
            return False
        return any(words[:len(w)] == w for w in self.waiting)


def split_exemption(entry: str) -> tuple[str, str | None]:
    """'Read:repetition' -> ('Read', 'repetition'); 'TodoWrite' -> ('TodoWrite', None). A tool name may
    itself hold a colon (an MCP server's): only a known rule name after the last one is a rule."""
    tool, sep, rule = entry.rpartition(":")
    if sep and tool and rule in RULES:
        return tool, rule
    return entry, None


def off_rules(names: Iterable[str]) -> list[str]:
    """Disabled rule names as given, in the order of the rule table."""
    wanted = set(names)
    return [r for r in RULES if r in wanted]
