"""A configuration that someone other than the operator (a hook request) may make stricter, never looser.

An attached agent's hook sends the LOOPWARDEN_* variables of the terminal it runs in, and any process can
send hook events, so those values are a request: each key is taken where it is stricter than the
operator's own configuration and refused otherwise. Stricter means, for a count, a duration or a size, a
smaller positive number (0 switches a rule or a limit off, the loosest of all, and a positive number is
stricter than the operator's 0); a larger number for the windows that count more when larger; false for the
switches that forgive (a human turn resetting the counters, unblocking by itself); and, for the lists that
exempt things, a subset. Every other key stays the operator's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .config import KEYS, LIVE_KEYS, Config, show_value, value_of

_NUMBERS = ("int", "float", "duration", "size")
_LARGER_IS_STRICTER = frozenset({"attempts.window", "rereads.window"})  # more calls or time counted
_NEVER = frozenset({"gates.timeout", "limits.stall_timeout", "limits.kill_grace", "loop.similarity"})
_FALSE_IS_STRICTER = frozenset({"repetition.reset_on_user_message", "attempts.auto_unblock"})
_SUBSET_IS_STRICTER = frozenset({"rules.disabled", "tools.exempt", "tools.waiting"})


def stricter(key: str, operator: Any, asked: Any) -> bool:
    """Whether `asked` is a stricter value of `key` than the operator's."""
    if key in _SUBSET_IS_STRICTER:
        return isinstance(asked, list) and set(asked) < set(operator)
    if key in _FALSE_IS_STRICTER:
        return asked is False and operator is True
    if key not in LIVE_KEYS or key in _NEVER or KEYS.get(key) not in _NUMBERS or isinstance(asked, bool):
        return False
    if asked <= 0:  # off
        return False
    if key in _LARGER_IS_STRICTER:
        return bool(operator > 0 and asked > operator)
    return bool(operator <= 0 or asked < operator)


def tightened(operator: Config, asked: Config) -> tuple[Config, list[str]]:
    """`operator` with every stricter value of `asked` taken; and, one a key, the values refused."""
    refused: list[str] = []
    sections: dict[str, dict[str, Any]] = {}
    for key in KEYS:
        mine, theirs = value_of(operator, key), value_of(asked, key)
        if theirs == mine:
            continue
        if stricter(key, mine, theirs):
            section, name = key.split(".", 1)
            sections.setdefault(section, {})[name] = theirs
        else:
            refused.append(f"{key}={show_value(key, theirs)} (the operator's: {show_value(key, mine)})")
    for section, values in sections.items():
        operator = replace(operator, **{section: replace(getattr(operator, section), **values)})
    return operator, refused
