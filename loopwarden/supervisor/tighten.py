"""A configuration that someone other than the operator (a hook request) may make stricter, never looser.

An attached agent's hook sends the LOOPWARDEN_* variables of the terminal it runs in, and any process can
send hook events, so those values are a request: each key is taken where it is stricter than the
operator's own configuration and refused otherwise. Stricter means a smaller threshold for a count, a
duration or a size (0 is the loosest where it switches the limit off), a larger window for the windows
that count more when larger, and, for the lists that exempt things, a subset. Every other key stays the
operator's.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from .config import KEYS, LIVE_KEYS, SECTIONS, Config, show_value, value_of

_NUMBERS = ("int", "float", "duration", "size")
_LARGER_IS_STRICTER = frozenset({"attempts.window", "rereads.window"})  # more calls or time counted
_NEVER = frozenset({"gates.timeout", "limits.stall_timeout", "limits.kill_grace"})  # no order of strictness
_SUBSET_IS_STRICTER = frozenset({"rules.disabled", "tools.exempt", "tools.waiting"})
_OFF_AT_ZERO = frozenset(
    f"{section}.{key.name}" for section, cls in SECTIONS.items() for key in fields(cls)
    if any(words in key.metadata["help"] for words in ("0 = off", "0 = no limit", "0 = never")))


def stricter(key: str, operator: Any, asked: Any) -> bool:
    """Whether `asked` is a stricter value of `key` than the operator's."""
    if key in _SUBSET_IS_STRICTER:
        return isinstance(asked, list) and set(asked) < set(operator)
    if key not in LIVE_KEYS or key in _NEVER or KEYS.get(key) not in _NUMBERS or isinstance(asked, bool):
        return False
    if key in _LARGER_IS_STRICTER:
        return bool(asked > operator)
    if key in _OFF_AT_ZERO:
        return bool(asked > 0 and (operator <= 0 or asked < operator))
    return bool(asked < operator)


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
