"""What a live session is given and where it reports: its spec, the daemon's sinks and record path."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ...supervisor.events import Event
from ..store import EventRow


@dataclass
class SessionSpec:
    """What to run. `env` is passed to the process and never stored (only its keys are)."""

    id: str
    name: str
    command: list[str]
    adapter: str = "native"
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    preset: str | None = None
    sets: list[str] = field(default_factory=list)
    task: str | None = None
    worktree: dict[str, str] | None = None  # the session's own git worktree (runtime/worktrees.py), if any
    tags: list[str] = field(default_factory=list)  # the operator's labels (supervisor/tags.py)


class Sink(Protocol):
    """Where a session reports: the daemon stores and broadcasts each record (`size`: the bytes it came from;
    `at`: when the engine took an event, its stored time)."""

    def __call__(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0,
                 at: float | None = None) -> None: ...


class RowsSink(Protocol):
    """Where events whose records are JSON already (an adapter's typed lines) go instead of the sink: a chunk's
    rows at once, with their events (for subscribers), read from `size` bytes."""

    def __call__(self, session_id: str, rows: list[EventRow], events: list[Event], size: int) -> None: ...


class Records(Protocol):
    """The daemon's record path as a session sees it (runtime/records.py)."""

    @property
    def over_backlog(self) -> bool: ...
    def mark(self, lane: str) -> int: ...
    async def durable(self, lane: str, mark: int) -> bool: ...
    async def backpressure(self) -> None: ...


@dataclass
class Resources:
    cpu_percent: float = 0.0
    rss: int = 0
    processes: int = 0
    open_files: int = 0
    tree: list[dict[str, Any]] = field(default_factory=list)


_ENV_KEEP: Final = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL", "TERM")


def minimal_env() -> dict[str, str]:
    """For a client that sent no environment: the basics, not the daemon's whole environment."""
    return {k: v for k in _ENV_KEEP if (v := os.environ.get(k)) is not None}
