"""loopwarden's own protocol: events on stdout, verdicts and injections on stdin (docs/protocol.md)."""

from __future__ import annotations

from ..supervisor import protocol
from ..supervisor.events import Event, Hello, ToolCall, ToolResult
from ..supervisor.spill import SpillResult
from ..supervisor.verdicts import Action, Verdict
from .base import Adapter, line


class NativeAdapter(Adapter):
    name = "native"

    def __init__(self) -> None:
        super().__init__()
        self.spill_threshold = 0

    @property
    def can_inject(self) -> bool:
        return True

    def parse_stdout(self, raw: bytes, seq: int) -> list[Event]:
        event = protocol.parse_line(raw, seq)
        if type(event) is Hello:
            self.handshake = bool(event.handshake)  # type: ignore[attr-defined]
        return [event]

    def hello_reply(self, hello: Hello, session: str, spill_threshold: int) -> bytes | None:
        self.spill_threshold = spill_threshold
        return line({"type": "welcome", "protocol": protocol.PROTOCOL_VERSION, "session": session,
                     "spill_threshold": spill_threshold})

    def verdict_line(self, call: ToolCall, verdict: Verdict | None) -> bytes | None:
        if not self.handshake:
            return None
        blocked = verdict is not None and verdict.action == Action.BLOCK
        return line({"type": "verdict", "call_id": call.call_id, "seq": call.seq,
                     "action": "block" if blocked else "allow",
                     "message": verdict.message if blocked and verdict else None})

    def spill_line(self, result: ToolResult, spill: SpillResult) -> bytes | None:
        if not self.handshake or not self.spill_threshold or spill.size <= self.spill_threshold:
            return None
        return line({"type": "spill", "call_id": result.call_id, "seq": result.seq, "path": spill.path,
                     "size": spill.size, "message": spill.message})

    def inject_line(self, text: str, kind: str, rule: str, model: str | None = None) -> bytes | None:
        obj = {"type": "inject", "kind": kind, "rule": rule, "text": text}
        if model is not None:
            obj["model"] = model
        return line(obj)

    def stop_line(self, reason: str, message: str) -> bytes | None:
        return line({"type": "stop", "reason": reason, "message": message})

