"""Subscribers: clients that follow records live, each with a queue bounded by bytes.

A record is encoded once and offered to every subscriber that wants it. A subscriber
whose queue is full skips it (counted, and told how many it skipped before its next
message), so a slow reader never blocks a session and never grows the daemon. One
that has not taken a single message for CUTOFF_SECONDS while messages wait is cut
off with a reason. All queues together stay under TOTAL_BYTES, but for what readers
that keep up hold (FAIR_SHARE each at most): stuck readers never starve the others.
A subscriber sent nothing for a heartbeat's interval gets a small keep-alive record, so
its client can tell a quiet daemon from a stopped one (`keepalive`, on one daemon timer).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
import orjson
from anyio.abc import SocketStream

from ..supervisor.bounds import MAX_RECORD_DEPTH, cut_deep

QUEUE_BYTES = 4 << 20  # one subscriber's queue
TOTAL_BYTES = 64 << 20  # every subscriber's queue together...
FAIR_SHARE = 256 << 10  # ... except that a subscriber that keeps up (less than this queued) always gets its message
CUTOFF_SECONDS = 30.0  # no message taken for this long while messages wait: cut off
MESSAGE_LIMIT = 16 << 10  # bytes of one broadcast message; longer records are clipped (the store has them whole)
WRITE_BYTES = 256 << 10  # queued messages sent in one write, at most (one long message goes alone)
HEARTBEAT_MESSAGE = b'{"kind":"heartbeat"}\n'  # what a quiet subscription gets every heartbeat (clients skip it)


class QueueBudget:
    """Bytes queued for all subscribers together."""

    def __init__(self, limit: int = TOTAL_BYTES) -> None:
        self.limit = limit
        self.used = 0


class Subscriber:
    """One subscription: what it wants, its queue, and why it was cut off (if it was)."""

    def __init__(self, sessions: set[str] | None, events: bool, budget: QueueBudget, *,
                 limit: int = QUEUE_BYTES, cutoff: float = CUTOFF_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sessions = sessions
        self.events = events
        self.budget = budget
        self.limit = limit
        self.cutoff = cutoff
        self.clock = clock
        self.queue: deque[bytes] = deque()
        self.queued = 0
        self.head: bytes | None = None  # the reply to `subscribe`, sent before any update
        self.skipped = 0
        self.sending = 0  # bytes taken from the queue and being written
        self.cut_reason: str | None = None
        self.last_progress = clock()
        self._ready = anyio.Event()
        self._scope: anyio.CancelScope | None = None

    def first(self, reply: bytes) -> None:
        """The reply to `subscribe` (the sessions as they are), sent first; not held to the queue's limit."""
        self.head = reply
        self.budget.used += len(reply)

    def wants(self, session_id: str, is_event: bool) -> bool:
        return (self.events or not is_event) and (self.sessions is None or session_id in self.sessions)

    def offer(self, message: bytes) -> None:
        """Queue a message, or skip it when the queue (or all queues together) is full."""
        if self.cut_reason is not None:
            return
        size = len(message)
        full = self.queued + self.sending + size > self.limit
        if full or (self.queued >= FAIR_SHARE and self.budget.used + size > self.budget.limit):
            self.skipped += 1
            stalled = self.clock() - self.last_progress
            if (self.queue or self.head is not None) and stalled >= self.cutoff:
                self.cut(f"cut off: took no message for {stalled:.0f} s while {self.queued:,} bytes waited "
                         f"({self.skipped:,} skipped); subscribe again to resume")
            return
        if not self.queue and not self.sending:
            self.last_progress = self.clock()  # the stall clock runs only while something waits
        self.queue.append(message)
        self.queued += size
        self.budget.used += size
        self._ready.set()

    def keepalive(self, quiet: float) -> bool:
        """Offer a heartbeat when nothing was sent or queued for `quiet` seconds; True when offered. Never
        while anything waits or is being written: a reader that stops reading fills at most its socket's
        buffer with them, then gets none while that write waits (the cut-off rules are unchanged)."""
        if (self.cut_reason is not None or self.head is not None or self.queue or self.sending
                or self.clock() - self.last_progress < quiet):
            return False
        self.offer(HEARTBEAT_MESSAGE)
        return True

    def cut(self, reason: str) -> None:
        """End the subscription with `reason`, even while a send to it is blocked."""
        if self.cut_reason is None:
            self.cut_reason = reason
            self._ready.set()
            if self._scope is not None:
                self._scope.cancel()

    async def pump(self, stream: SocketStream) -> None:
        """Send queued messages until cut off (the caller closes the stream): what waits goes out in one
        write of up to WRITE_BYTES (one write per message cost more than encoding it); its bytes count
        against the budget until written."""
        with anyio.CancelScope() as scope:
            self._scope = scope
            if self.head is not None:
                head, self.head = self.head, None
                self.budget.used -= len(head)
                self.last_progress = self.clock()
                await stream.send(head)
                self.last_progress = self.clock()
            while self.cut_reason is None:
                await self._ready.wait()
                self._ready = anyio.Event()
                while self.queue and self.cut_reason is None:
                    batch = self._take()
                    try:
                        await stream.send(batch)
                    finally:
                        self.budget.used -= self.sending
                        self.sending = 0
                    self.last_progress = self.clock()
        if self.cut_reason is not None:
            with anyio.move_on_after(1.0, shield=True):
                await stream.send(orjson.dumps({"kind": "cut", "reason": self.cut_reason}) + b"\n")

    def _take(self) -> bytes:
        """The messages at the head of the queue, joined (after the skip count, when some were skipped), up
        to WRITE_BYTES unless one message is longer; their bytes are counted in `sending` until written."""
        queue = self.queue
        parts: list[bytes] = []
        if self.skipped:
            parts.append(orjson.dumps({"kind": "skipped", "count": self.skipped}) + b"\n")
            self.skipped = 0
        size = 0
        while queue and size < WRITE_BYTES:
            message = queue.popleft()
            parts.append(message)
            size += len(message)
        self.queued -= size
        self.sending = size
        return b"".join(parts) if len(parts) > 1 else parts[0]

    def release(self) -> None:
        """Give the queue's bytes back to the budget (the subscription has ended); a write under way gives
        its own back when it ends."""
        self.budget.used -= self.queued + (len(self.head) if self.head is not None else 0)
        self.head = None
        self.queue.clear()
        self.queued = 0


def encode(kind: str, session_id: str, data: dict[str, Any]) -> tuple[bytes, str | None]:
    """One broadcast line, and why it had to be cut (None when it did not); never raises.

    A record too long for a message is sent clipped (marked `clipped`). One orjson cannot write
    (nested past its 254 levels, a lone surrogate) goes out cut to MAX_RECORD_DEPTH, or as a stub
    naming it when even that fails; the store keeps what it can.
    """
    try:
        return _line(kind, session_id, data), None
    except Exception as exc:  # noqa: BLE001 - orjson's JSONEncodeError, or a value whose str() raises
        trouble = f"{type(exc).__name__}: {exc}"
    try:
        return _line(kind, session_id, cut_deep(data, MAX_RECORD_DEPTH)), trouble
    except Exception:  # noqa: BLE001 - down to a stub of plain values, which cannot fail
        stub: dict[str, Any] = {"clipped": True}
        for key in ("type", "seq", "ts", "action", "rule"):
            value = data.get(key)
            if ((isinstance(value, str) and value.isascii() and len(value) < 200)
                    or (isinstance(value, (int, float)) and abs(value) < 2**53)):
                stub[key] = value
        return _dumps({"kind": kind, "session": session_id, "data": stub}), trouble


def _line(kind: str, session_id: str, data: dict[str, Any]) -> bytes:
    message = _dumps({"kind": kind, "session": session_id, "data": data})
    if len(message) > MESSAGE_LIMIT:  # subscribers get a preview; the store has the rest
        message = _dumps({"kind": kind, "session": session_id, "data": clipped(data)})
    return message


def _dumps(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj, default=str) + b"\n"


def clipped(data: dict[str, Any], limit: int = 2000) -> dict[str, Any]:
    """A record with long strings and large values cut, for broadcasting."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str) and len(value) > limit:
            out[key] = value[:limit] + f"… [{len(value):,} characters]"
        elif isinstance(value, (dict, list)):
            text = orjson.dumps(value, default=str)
            out[key] = value if len(text) <= limit else text[:limit].decode(errors="replace") + "…"
        else:
            out[key] = value
    out["clipped"] = True
    return out
