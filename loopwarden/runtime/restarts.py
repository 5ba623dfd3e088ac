"""What `restart` needs of a launched session after it left memory: its spec and how it failed, bounded by bytes.

An ended session leaves the daemon's memory once stored, and its environment is never stored; the
newest ended ones are kept here (RESTART_BYTES at most), so a loop that ended a session can still be
restarted from the console or `loopwarden restart`.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..supervisor import messages
from ..supervisor.config import Config
from .session import SessionSpec

RESTART_BYTES = 4 << 20  # the newest ended sessions' specs, at most this many bytes of them


@dataclass
class Restartable:
    """A launched session's task, settings and failure: enough to start it again, told what failed."""

    spec: SessionSpec
    config: Config
    ended: str | None = None  # how it ended (its termination, or its agent's own failure)
    last: str | None = None  # the last intervention's text: the loop's evidence
    errors: list[str] = field(default_factory=list)
    exit_code: int | None = None  # its agent's exit code (None: still running, or killed by a signal)

    def summary(self, note: str | None) -> str:
        return messages.restart_summary(self.spec.task, self.ended, self.last, self.errors, note, self.exit_code)

    @property
    def size(self) -> int:
        """Roughly the bytes it holds (its environment dominates)."""
        spec = self.spec
        words = [*spec.command, *spec.sets, *spec.env, *spec.env.values(), spec.cwd or "", spec.task or "",
                 self.ended or "", self.last or "", *self.errors]
        return 512 + sum(len(w) + 50 for w in words)


class Restartables:
    """The newest ended sessions' Restartable, oldest dropped first past `max_bytes`."""

    def __init__(self, max_bytes: int = RESTART_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._kept: OrderedDict[str, Restartable] = OrderedDict()

    def add(self, sid: str, item: Restartable) -> None:
        self.discard(sid)
        self._kept[sid] = item
        self.used += item.size
        while self.used > self.max_bytes and self._kept:
            _, old = self._kept.popitem(last=False)
            self.used -= old.size

    def get(self, sid: str) -> Restartable | None:
        return self._kept.get(sid)

    def discard(self, sid: str) -> None:
        old = self._kept.pop(sid, None)
        if old is not None:
            self.used -= old.size
