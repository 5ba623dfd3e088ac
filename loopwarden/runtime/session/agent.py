"""The agent as a live session speaks to it: its adapter, chosen when the user named none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from ...sessions import detect
from ...sessions.base import Adapter, Capability
from ...sessions.registry import adapters
from ...supervisor.config import Config
from ...supervisor.events import Event
from .spec import SessionSpec

LAUNCHED: Final = Capability.PROCESS_GROUP | Capability.HOLD  # what every launched session can do (SIGSTOP holds any)


class Agent:
    """The session's adapter. Left to `auto`, it is chosen from the command (an agent that waits for its client)
    or from the first stdout line (sessions/detect.py), and every part of the session speaks through the one chosen."""

    def __init__(self, adapter: Adapter, spec: SessionSpec, rows: bool) -> None:
        self.adapter = adapter
        self.spec = spec
        self.choice: detect.Choice | None = None  # how the adapter was chosen, when the user did not name one
        self.choosing = adapter.name == detect.AUTO  # until the first stdout line names the adapter
        self._rows = rows  # the daemon stores typed lines' rows as they are encoded
        # the adapter's typed lines (sessions/base.py TypedLines), once it is chosen and when the daemon takes rows:
        # how stdout's lines are read on the per-line path, and their rows encoded; else lines are parsed
        self.typed_read: Callable[[bytes, int], tuple[Event, Any] | None] | None = None
        self.typed_stored: Callable[[Any, Event], bytes | None] | None = None
        self._follow()

    def choose(self, choice: detect.Choice, *, final: bool) -> bool:
        """Hand the session to the chosen adapter; True when it is another one. Nothing was read with the one it
        replaces: the auto adapter reads nothing, and a provisional plain one (chosen for silence) had no stdout
        line yet."""
        self.choosing = not final
        self.choice = choice
        changed = choice.adapter != self.adapter.name
        if changed:
            adapter = adapters()[choice.adapter]()
            adapter.cwd = self.adapter.cwd
            self.adapter = adapter
            self.spec.adapter = adapter.name
        self._follow()
        return changed

    def _follow(self) -> None:
        typed = self.adapter.typed_lines if self._rows and not self.choosing else None
        self.typed_read = typed.read if typed is not None else None
        self.typed_stored = typed.stored if typed is not None else None

    def max_line(self, config: Config) -> int:
        """The longest stdout line read: limits.max_line_bytes, or the adapter's own default."""
        return config.limits.max_line_bytes or self.adapter.line_bytes

    @property
    def capabilities(self) -> Capability:
        """The adapter's, and its process group: loopwarden started the agent and leads its group."""
        return self.adapter.capabilities | LAUNCHED
