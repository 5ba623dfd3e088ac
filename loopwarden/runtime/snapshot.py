"""One typed snapshot of a session, whatever its kind: what a console, `ls`, `status` and the store see."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ..sessions.base import Capability, capability_names
from ..supervisor.config import Config, changed_settings, stored_settings
from ..supervisor.health import GATED, SessionHealth
from ..supervisor.verdicts import SessionState


@dataclass(slots=True)
class Snapshot:
    """The fields every session kind fills; `extra` holds what only one kind has (a Claude session id)."""

    id: str
    name: str
    adapter: str
    agent: str
    capabilities: list[str]
    command: list[str]
    cwd: str | None
    env_keys: list[str]
    preset: str | None
    state: SessionState
    pid: int | None
    created_at: float
    started_at: float | None
    ended_at: float | None
    runtime: float
    max_runtime: float
    exit_code: int | None
    termination: str | None
    termination_text: str | None
    handshake: bool
    tool_calls: int
    events: int
    counters: dict[str, list[Any]]
    pending_gates: list[str]
    last_verdict: dict[str, Any] | None
    cpu_percent: float = 0.0
    rss: int = 0
    processes: int = 0
    open_files: int = 0
    stdin_dropped: int = 0
    rate: list[int] = field(default_factory=list)
    validation_failures: int = 0
    interventions: dict[str, int] = field(default_factory=dict)  # verdicts by action, short of terminate
    settings: dict[str, str] = field(default_factory=dict)  # keys that differ from their defaults, as shown
    config: dict[str, Any] = field(default_factory=dict)  # keys that differ from the preset's, as values (stored)
    conversation: str | None = None  # the agent's own conversation id (Claude's session, Codex's thread ...)
    resumable: bool = False  # `loopwarden continue` can continue that conversation once this run ended
    task: str | None = None
    cost: dict[str, Any] | None = None  # tokens by kind, dollars and where they came from (supervisor/cost.py)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Shallow: the containers are fresh already (asdict's deep copy cost 110 µs per publish)."""
        out = {name: getattr(self, name) for name in FIELDS}
        out.update(self.extra)
        return out


FIELDS = tuple(f.name for f in fields(Snapshot) if f.name != "extra")


def shown_state(state: SessionState, health: SessionHealth, paused: bool) -> SessionState:
    """A running session shows as paused (by the operator) or gated (waiting on a human)."""
    if state != SessionState.RUNNING:
        return state
    if paused:
        return SessionState.PAUSED
    return SessionState.GATED if health.state == GATED else state


def build(*, sid: str, name: str, command: list[str], cwd: str | None, env_keys: list[str], config: Config,
          health: SessionHealth, state: SessionState, paused: bool, adapter: str, agent: str, caps: Capability,
          pid: int | None, created_at: float, started_at: float | None, ended_at: float | None, now: float,
          exit_code: int | None, handshake: bool, tool_calls: int, gates_open: bool, conversation: str | None = None,
          resumes: bool = False, **kinds: Any) -> Snapshot:
    """The snapshot of one session; `kinds` are the optional fields (resources, rate, extra)."""
    h = health
    reason = h.termination_reason
    return Snapshot(
        id=sid, name=name, adapter=adapter, agent=agent, capabilities=_capabilities(caps), command=command,
        cwd=cwd, env_keys=env_keys, preset=config.preset, state=shown_state(state, h, paused), pid=pid,
        created_at=created_at, started_at=started_at, ended_at=ended_at,
        runtime=round((ended_at or now) - (started_at or created_at), 3), max_runtime=config.limits.max_runtime,
        exit_code=exit_code, termination=str(reason) if reason else None,
        termination_text=h.termination.reason if h.termination else None, handshake=handshake,
        tool_calls=tool_calls, events=h.events,
        counters={c.name: [c.value, c.limit] for c in h.counters(None if ended_at else now)},
        pending_gates=[g.id for g in h.pending_gates()] if gates_open else [],
        last_verdict=h.last_verdict.to_dict() if h.last_verdict else None, interventions=h.interventions(),
        settings=_settings(config), config=_stored(config), conversation=conversation,
        resumable=resumes and conversation is not None, cost=h.cost.view(), **kinds)


_CAPABILITIES: dict[Capability, list[str]] = {}  # a flag's names, listed once (a walk of the enum per build)


def _capabilities(caps: Capability) -> list[str]:
    names = _CAPABILITIES.get(caps)
    if names is None:
        names = _CAPABILITIES[caps] = capability_names(caps)  # few combinations: bounded by the adapters
    return list(names)


_SETTINGS_KEPT = 256
_settings_by_config: dict[int, tuple[Config, dict[str, Any]]] = {}


_stored_by_config: dict[int, tuple[Config, dict[str, Any]]] = {}


def _settings(config: Config) -> dict[str, str]:
    """changed_settings, computed once per config object (a snapshot is built on every publish)."""
    return _once(_settings_by_config, config, changed_settings)


def _stored(config: Config) -> dict[str, Any]:
    """stored_settings, computed once per config object."""
    return _once(_stored_by_config, config, stored_settings)


def _once(kept: dict[int, tuple[Config, dict[str, Any]]], config: Config,
          compute: Callable[[Config], dict[str, Any]]) -> dict[str, Any]:
    cached = kept.get(id(config))
    if cached is None or cached[0] is not config:  # the config is kept in the entry, so its id is not reused
        if len(kept) >= _SETTINGS_KEPT:
            kept.clear()
        cached = kept[id(config)] = (config, compute(config))
    return dict(cached[1])
