"""Records to the daemon's subscribers: each encoded once for all who want it, and a heartbeat on quiet ones."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import anyio

from .subscribers import QueueBudget, Subscriber, encode

HEARTBEAT_ENV = "LOOPWARDEN_HEARTBEAT"  # the daemon's: seconds between heartbeats on a quiet subscription
HEARTBEAT_SECONDS = 5.0  # ... when it is not set (clients give up after 3 missed, and at least LOOPWARDEN_TIMEOUT)


def heartbeat_seconds(env: dict[str, str] | None = None) -> float:
    """The heartbeat's interval: LOOPWARDEN_HEARTBEAT in the daemon's environment (0.05 to 60 s), else 5 s."""
    raw = (os.environ if env is None else env).get(HEARTBEAT_ENV, "")
    try:
        value = float(raw.strip().removesuffix("s"))
    except ValueError:
        return HEARTBEAT_SECONDS
    return min(max(value, 0.05), 60.0) if math.isfinite(value) else HEARTBEAT_SECONDS


class Broadcaster:
    """The subscriptions: who follows records live, the bytes queued for them all, and their heartbeat."""

    def __init__(self, log: Callable[[str], None], *, heartbeat: float) -> None:
        self.log = log
        self.subscribers: list[Subscriber] = []
        self.budget = QueueBudget()
        self.heartbeat = heartbeat  # seconds between keep-alive records on a quiet subscription
        self.unserialisable = 0  # records subscribers got as a clipped copy because orjson could not write them
        self._subscribed = anyio.Event()  # set when a subscriber comes: wakes the heartbeat timer

    def broadcast(self, kind: str, session_id: str, data: dict[str, Any], *, is_event: bool) -> None:
        """A record to every subscriber that wants it, encoded once."""
        message: bytes | None = None
        for sub in self.subscribers:
            if sub.wants(session_id, is_event):
                if message is None:
                    message, trouble = encode(kind, session_id, data)
                    if trouble:
                        self._unserialisable(kind, session_id, trouble)
                sub.offer(message)

    def to_all(self, kind: str, data: dict[str, Any]) -> None:
        """A record of the daemon's own (its health) to every subscriber."""
        message, _ = encode(kind, "", data)
        for sub in self.subscribers:
            sub.offer(message)

    def _unserialisable(self, kind: str, session_id: str, trouble: str) -> None:
        """Count (and now and then log) a record that went out clipped; a session never hears of it."""
        self.unserialisable += 1
        if self.unserialisable == 1 or self.unserialisable % 1000 == 0:
            self.log(f"a {kind} record of session {session_id} could not be serialised ({trouble}); "
                     f"subscribers got a clipped copy ({self.unserialisable} so far)")

    def add(self, sub: Subscriber) -> None:
        self.subscribers.append(sub)
        self._subscribed.set()

    def remove(self, sub: Subscriber) -> None:
        self.subscribers.remove(sub)
        sub.release()
        if sub.cut_reason:
            self.log(f"subscriber {sub.cut_reason}")

    def busy(self) -> bool:
        """Whether a subscriber still has records to be sent (an attached `run` waiting for the final snapshots)."""
        return any(s.cut_reason is None and (s.head is not None or s.queue or s.sending) for s in self.subscribers)

    async def heartbeats(self) -> None:
        """One timer for every subscription: each `heartbeat` seconds, a heartbeat to each subscriber that
        was sent nothing meanwhile. With no subscriber it sleeps until one comes: an idle daemon stays idle."""
        while True:
            if not self.subscribers:
                self._subscribed = anyio.Event()
                await self._subscribed.wait()
            await anyio.sleep(self.heartbeat)
            for sub in self.subscribers:
                sub.keepalive(self.heartbeat * 0.9)  # sent ~a period ago counts: at most two periods apart
