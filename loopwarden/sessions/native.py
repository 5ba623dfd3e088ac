"""loopwarden's own protocol: events on stdout, verdicts and injections on stdin (docs/protocol.md)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..supervisor import protocol
from ..supervisor.events import Event, Hello, InvalidLine, ToolCall, ToolResult
from ..supervisor.events import SpillResult
from ..supervisor.lines import DEFAULT_MAX_LINE_BYTES
from ..supervisor.typed import stored_json
from ..supervisor.typed_line import typed_record
from ..supervisor.verdicts import Action, Verdict
from .base import Adapter, Capability, TypedLines, line

_TYPE = re.compile(rb'"type"\s*:\s*"([a-z_]{1,40})"')
_CALL_ID = re.compile(rb'"call_id"\s*:\s*"([^"\\]{0,200})"')


class NativeAdapter(Adapter):
    name = "native"
    listed = 1
    agent = "native"
    summary = "loopwarden's JSONL protocol: verdicts and injections on stdin (docs/protocol.md)"
    declared = Capability.VETO | Capability.HOLD | Capability.INJECT  # veto and hold need the handshake
    line_bytes = DEFAULT_MAX_LINE_BYTES
    typed_lines = TypedLines(read=typed_record, stored=stored_json)  # msgspec's typed decoding (supervisor/typed.py)
    streams_outputs = True
    keepable = True  # (see Adapter.keepable)
    replay_format = "native"

    def __init__(self) -> None:
        super().__init__()
        self.spill_threshold = 0
        self.owed: list[bytes] = []  # answers to rejected lines, sent once the line is judged (`replies`)
        self._preface: str | None = None  # a restart's summary, sent right after the welcome

    @property
    def can_inject(self) -> bool:
        return True

    def parse_stdout(self, raw: bytes, seq: int) -> list[Event]:
        return self.parsed(protocol.parse_line(raw, seq), raw)

    @classmethod
    def replay_parser(cls) -> Callable[[bytes, int], list[Event]]:
        return _replayed

    def parsed(self, event: Event, raw: bytes) -> list[Event]:
        """The events of a line parsed from `raw` (its first part, for a long line read in chunks: see
        supervisor/longline.py); a hello turns the handshake on, a rejected tool_call is answered."""
        if type(event) is Hello:
            self.handshake = bool(event.handshake)
        elif type(event) is InvalidLine and self.handshake:
            self._refuse_call(raw, event.seq, event.reason)
        return [event]

    def taken_up(self, first: list[Event]) -> None:
        """The handshake is on when the session's hello asked for it."""
        for event in first:
            if type(event) is Hello:
                self.handshake = bool(event.handshake)
                return

    def _refuse_call(self, raw: bytes, seq: int, reason: str) -> None:
        """A rejected tool_call line still gets a block verdict, so a handshake agent waiting on it never hangs."""
        kind = _TYPE.search(raw)
        if not kind or kind.group(1) != b"tool_call":
            return
        message = (f"Tool call blocked: loopwarden could not read it ({reason}). Fix the call and send it again; "
                   "pass large or deeply nested data by reference (a file path) instead of inline.")
        self.owed.append(_block(_call_id(raw), seq, message))

    def replies(self, gated: bool) -> list[bytes]:
        out = self.owed
        if out:  # asked after every line: nothing is allocated while nothing is owed
            self.owed = []
        return out

    def hello_reply(self, hello: Hello, session: str, spill_threshold: int) -> bytes | None:
        self.spill_threshold = spill_threshold
        welcome = line({"type": "welcome", "protocol": protocol.PROTOCOL_VERSION, "session": session,
                        "spill_threshold": spill_threshold})
        preface, self._preface = self._preface, None
        return welcome + (self.inject_line(preface, "guidance", "restart") or b"") if preface else welcome

    def preface(self, text: str) -> bool:
        """A restart's summary: the first inject, right after the welcome (an agent that says no hello reads none)."""
        self._preface = text
        return True

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

    def oversized_reply(self, head: bytes, length: int, seq: int, limit: int) -> bytes | None:
        """An answer to an over-long line, so a handshake agent waiting on it is never left hanging."""
        if not self.handshake:
            return None
        kind = _TYPE.search(head)
        call_id = _call_id(head)
        if kind and kind.group(1) == b"tool_result":
            message = (f"Tool response too large ({length:,} bytes; the limit for one line is {limit:,}). "
                       "It was discarded. Ask for a smaller part of the output instead (head, tail, grep, "
                       "or a byte range).")
            return line({"type": "spill", "call_id": call_id, "seq": seq, "path": None, "size": length,
                         "message": message})
        if kind and kind.group(1) == b"tool_call":
            message = (f"Tool call blocked: its line is {length:,} bytes, over the {limit:,}-byte limit. "
                       "Pass large content by reference (a file path) instead of inline.")
            return _block(call_id, seq, message)
        return None

    def stop_line(self, reason: str, message: str) -> bytes | None:
        return line({"type": "stop", "reason": reason, "message": message})


def _call_id(raw: bytes) -> str | None:
    """The call_id of a line that could not be parsed, found by pattern."""
    match = _CALL_ID.search(raw)
    return match.group(1).decode("utf-8", "replace") if match else None


def _block(call_id: str | None, seq: int, message: str) -> bytes:
    return line({"type": "verdict", "call_id": call_id, "seq": seq, "action": "block", "message": message})


def _replayed(raw: bytes, seq: int) -> list[Event]:
    """A recorded line's one event (the handshake and what answers it are a live agent's)."""
    return [protocol.parse_line(raw, seq)]
