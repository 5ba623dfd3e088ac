"""What a live adapter does: build the command, read its output, and speak back to it."""

from __future__ import annotations

from typing import Any

import orjson

from ..supervisor.events import Event, Hello, ToolCall, ToolResult
from ..supervisor.events import SpillResult
from ..supervisor.verdicts import Verdict


class Adapter:
    """Defaults: observe only, no way to talk back."""

    name = "adapter"
    stop_grace = 0.0  # seconds the agent gets to exit by itself after its stop line, before SIGTERM

    def __init__(self) -> None:
        self.handshake = False

    @property
    def can_veto(self) -> bool:
        """Whether a block verdict stops the call before it runs."""
        return self.handshake

    @property
    def can_inject(self) -> bool:
        return False

    def command(self, argv: list[str]) -> list[str]:
        return list(argv)

    def start_lines(self) -> list[bytes]:
        """Lines to write to stdin once the process runs."""
        return []

    def parse_stdout(self, line: bytes, seq: int) -> list[Event]:
        raise NotImplementedError

    def parse_stderr(self, line: bytes, seq: int) -> list[Event]:
        """stderr is logged, not judged, unless an adapter says otherwise."""
        return []

    def hello_reply(self, hello: Hello, session: str, spill_threshold: int) -> bytes | None:
        return None

    def verdict_line(self, call: ToolCall, verdict: Verdict | None) -> bytes | None:
        return None

    def spill_line(self, result: ToolResult, spill: SpillResult) -> bytes | None:
        return None

    def inject_line(self, text: str, kind: str, rule: str, model: str | None = None) -> bytes | None:
        return None

    def oversized_reply(self, head: bytes, length: int, seq: int, limit: int) -> bytes | None:
        """What to tell an agent whose line was too long to read (None: nothing)."""
        return None

    def stop_line(self, reason: str, message: str) -> bytes | None:
        return None

    def replies(self, gated: bool) -> list[bytes]:
        """Lines owed to the agent after a line was read or a gate decided (b"" closes its stdin)."""
        return []


def line(obj: dict[str, Any]) -> bytes:
    """One JSON line for the agent's stdin."""
    return orjson.dumps(obj) + b"\n"

