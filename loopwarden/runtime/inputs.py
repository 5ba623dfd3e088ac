"""What an operator gives a session's engine besides its events (a gate decided, counters reset, authority
granted, limits changed), written as log records in the session's event stream at the moment the engine takes
it, so a session rebuilt from the store (rebuild.py) takes each at the same place and time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ..supervisor.config import LIVE_KEYS, Config, show_value, value_of
from ..supervisor.health import SessionHealth

INPUT: Final = "engine"  # the key of a log record's data that holds the engine's input


def decided(gate_id: str, approve: bool, by: str, note: str | None) -> dict[str, Any]:
    return {"call": "decide", "gate": gate_id, "approve": approve, "by": by, "note": note}


def reset(counter: str | None) -> dict[str, Any]:
    return {"call": "reset", "counter": counter}


def granted(task: str | None, note: str | None) -> dict[str, Any]:
    return {"call": "grant", "task": task, "note": note}


def rewound(by: str, *, withdraw: bool) -> dict[str, Any]:
    """A rewind: pending gates approved by `by`, counters reset, and (`withdraw`) the loop's end withdrawn."""
    return {"call": "rewind", "by": by, "withdraw": withdraw}


def reconfigured(before: Config, after: Config) -> dict[str, Any]:
    """The live keys whose values moved, as the new config holds them."""
    return {"call": "set", "values": {key: value_of(after, key) for key in sorted(LIVE_KEYS)
                                      if value_of(before, key) != value_of(after, key)}}


def budgets(reached: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The daemon's budgets the session counts against that are reached now (SessionHealth.outside_budgets)."""
    return {"call": "budgets", "reached": {scope: dict(figures) for scope, figures in reached.items()}}


def described(given: Mapping[str, Any]) -> str:
    """The log line a person reads for an input."""
    call = given["call"]
    if call == "decide":
        verb = "approved" if given["approve"] else "denied"
        return f"gate {given['gate']} {verb} by {given['by']}"
    if call == "reset":
        return f"counters reset: {given['counter'] or 'all'}"
    if call == "grant":
        return "unblock authority granted"
    if call == "rewind":
        return f"rewound by {given['by']}: gates approved, counters reset"
    if call == "budgets":
        reached = given.get("reached") or {}
        return ("budgets reached: " + ", ".join(f"{scope} ${float(f.get('used') or 0):.2f} of "
                                                f"${float(f.get('limit') or 0):.2f}" for scope, f in reached.items())
                if reached else "no budget of the daemon's is reached")
    values = given["values"]
    return "limits changed: " + (", ".join(f"{k}={show_value(k, v)}" for k, v in values.items()) or "no change")


def record(given: dict[str, Any], now: float) -> dict[str, Any]:
    """The log record of an input the engine took at `now`."""
    return {"stream": "loopwarden", "text": described(given), "ts": now, INPUT: given}


def apply(health: SessionHealth, given: Mapping[str, Any], now: float) -> None:
    """Give `health` a stored input again, as the live session gave it (its verdicts are not acted on)."""
    call = given.get("call")
    if call == "decide":
        health.decide(str(given["gate"]), bool(given["approve"]), now, by=str(given["by"]), note=given.get("note"))
    elif call == "reset":
        health.reset_counters(given.get("counter"))
    elif call == "grant":
        health.grant_authority(now, task=given.get("task"), note=given.get("note"))
    elif call == "set":
        health.reconfigure(with_values(health.config, given.get("values") or {}))
        health.release_budget(now)
    elif call == "budgets":
        health.outside_budgets(given.get("reached") or {}, now)
    elif call == "rewind":
        _rewind(health, str(given.get("by")), now, withdraw=bool(given.get("withdraw")))


def _rewind(health: SessionHealth, by: str, now: float, *, withdraw: bool) -> None:
    """What a rewind asks of the engine (session/recovery.py), in its order."""
    for gate in health.pending_gates():
        health.decide(gate.id, True, now, by=by, note=None)
    health.reset_counters()
    if withdraw:
        health.withdraw_termination()


def with_values(config: Config, values: Mapping[str, Any]) -> Config:
    """`config` with stored live keys' values (as `reconfigured` recorded them) put back."""
    sections: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if key in LIVE_KEYS:
            section, name = key.split(".", 1)
            sections.setdefault(section, {})[name] = value
    return replace(config, **{s: replace(getattr(config, s), **v) for s, v in sections.items()})
