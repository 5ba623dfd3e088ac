"""A session's judgement as plain data: every guard's counters and windows, gates, termination, counts.

Two SessionHealths that would judge the next event alike give equal states, so a live session and one rebuilt
from the store can be compared. Left out: the configuration's objects (given as `config` instead), what is
derived from it (dispatch tables, tool control), the clock's last reading and the resource figures a sample
last gave (neither is judgement: the next tick or sample sets them again)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any, Final

from .config import SECTIONS, Config
from .control import ToolControl
from .health import SessionHealth

_DEPTH: Final = 12
_DERIVED: Final = frozenset({"config", "cfg", "control", "_dispatch", "_observers", "_gate_timeout"})
_CLOCK: Final = {"RuntimeGuard": frozenset({"now", "waiting_on_human"}),
                 "BudgetGuard": frozenset({"rss", "processes"})}
_SKIPPED_TYPES: Final = (Config, ToolControl, *SECTIONS.values())


def health_state(health: SessionHealth) -> dict[str, Any]:
    """The complete, comparable picture of `health`: {"config": ..., "health": ...}. Work some guards defer
    until it is needed (an error's fingerprint) is done first, as a view of the counters does it."""
    health.counters()
    return {"config": health.config.to_dict(), "health": _plain(health, 0)}


def _attributes(value: object) -> list[str]:
    """An object's attribute names: a dataclass's fields, its slots, a compiled class's, or its dict's."""
    if is_dataclass(value):
        return [f.name for f in fields(value)]
    names = getattr(type(value), "__mypyc_attrs__", None)
    if names is None:
        names = [n for cls in type(value).__mro__ for n in getattr(cls, "__slots__", ())]
        names += list(getattr(value, "__dict__", {}))
    return sorted(set(names) - {"__dict__", "__weakref__"})


def _plain(value: Any, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > _DEPTH:
        return "..."
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in value.items() if not callable(v)}
    if isinstance(value, (list, tuple, deque)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v, depth + 1) for v in value), key=repr)
    if callable(value) or isinstance(value, _SKIPPED_TYPES):
        return None
    skipped = _CLOCK.get(type(value).__name__, frozenset())
    out: dict[str, Any] = {"type": type(value).__name__}
    for name in _attributes(value):
        if name in _DERIVED or name in skipped or not hasattr(value, name):
            continue
        out[name] = _plain(getattr(value, name), depth + 1)  # (a function it holds: None, as config is)
    return out
