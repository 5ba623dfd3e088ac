"""The native adapter's answers to lines it could not read: a handshake agent is never left waiting."""

from __future__ import annotations

import json

import pytest

from loopwarden.sessions.native import NativeAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.bounds import MAX_DEPTH, TOO_DEEP


def deep_call(depth: int, call_id: str = "c9") -> bytes:
    """A tool_call line nested `depth` levels deep, its own object included."""
    return (f'{{"type":"tool_call","tool":"t","call_id":"{call_id}","args":'.encode()
            + b'{"a":' * (depth - 2) + b"{}" + b"}" * (depth - 1))


def handshaking() -> NativeAdapter:
    adapter = NativeAdapter()
    adapter.parse_stdout(b'{"type":"hello","handshake":true}', 1)
    return adapter


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 250, 255, 1023, 1024, 1025, 5000])
def test_a_too_deep_tool_call_gets_a_block_verdict(depth: int) -> None:
    adapter = handshaking()
    [event] = adapter.parse_stdout(deep_call(depth), 5)
    assert isinstance(event, ev.InvalidLine) and event.reason == TOO_DEEP
    [reply] = adapter.replies(False)
    verdict = json.loads(reply)
    assert (verdict["type"], verdict["call_id"], verdict["seq"], verdict["action"]) == ("verdict", "c9", 5, "block")
    assert TOO_DEEP in verdict["message"]
    assert adapter.replies(False) == []  # owed once


def test_a_call_at_the_bound_is_an_event_and_its_verdict_comes_from_the_engine() -> None:
    adapter = handshaking()
    [event] = adapter.parse_stdout(deep_call(MAX_DEPTH), 5)
    assert isinstance(event, ev.ToolCall)
    assert adapter.replies(False) == []


def test_any_rejected_tool_call_is_answered_and_other_rejected_lines_are_not() -> None:
    adapter = handshaking()
    adapter.parse_stdout(b'{"type":"tool_call","tool":"t","args":"ls","call_id":"c3"}', 3)
    [reply] = adapter.replies(False)
    assert json.loads(reply)["action"] == "block" and "'args' must be an object" in json.loads(reply)["message"]
    adapter.parse_stdout(b'{"type":"tool_result","output":' + b"[" * 100 + b"]" * 100 + b"}", 4)
    adapter.parse_stdout(b'{"type":"done","note":"\\"type\\":\\"tool_call\\""', 5)  # only quoted, and cut
    assert adapter.replies(False) == []


def test_without_the_handshake_nothing_is_owed() -> None:
    adapter = NativeAdapter()
    adapter.parse_stdout(deep_call(MAX_DEPTH + 1), 2)
    assert adapter.replies(False) == []
