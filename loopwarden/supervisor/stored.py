"""A stored event record (`Event.to_dict()` with its `seq`, as the store keeps it) made an Event again, and a
stored verdict row a Verdict: what a session rebuilt from the store is fed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Final

from .events import EVENT_TYPES, Event, InvalidLine, Output
from .verdicts import Action, Termination, Verdict

STORED_TYPES: Final[dict[str, type[Event]]] = {**EVENT_TYPES, InvalidLine.kind: InvalidLine, Output.kind: Output}
_HIDDEN: Final = frozenset({"seq", "sig", "digest"})  # the engine's own fields: never stored, set again by it
_FIELDS: Final = {cls: tuple(f.name for f in fields(cls) if f.name not in _HIDDEN) for cls in STORED_TYPES.values()}


def stored_event(data: Mapping[str, Any], seq: int | None) -> Event | None:
    """The event a stored record holds; None for one no event can come from (a record the store cut to its
    preview, a kind unknown to this engine, a field of the wrong shape)."""
    cls = STORED_TYPES.get(data.get("type"))  # type: ignore[arg-type]
    if cls is None:
        return None
    values = dict(data)  # the common case: the event's fields, its type and its seq (one copy, no lookups)
    del values["type"]
    values["seq"] = seq or 0
    try:
        return cls(**values)
    except TypeError:  # a key that is no field of the event's: only the fields are taken
        pass
    values = {name: data[name] for name in _FIELDS[cls] if name in data}
    try:
        return cls(seq=seq or 0, **values)
    except TypeError:  # a required field the store did not keep
        return None


def stored_verdict(row: Mapping[str, Any]) -> Verdict:
    """A verdicts row as the Verdict that was stored."""
    termination = row.get("termination")
    return Verdict(Action(row["action"]), row.get("rule") or "", row.get("reason") or "", message=row.get("message"),
                   seq=row.get("seq") or 0, termination=Termination(termination) if termination else None,
                   target=row.get("target"), gate_id=row.get("gate_id"), evidence=dict(row.get("evidence") or {}))
