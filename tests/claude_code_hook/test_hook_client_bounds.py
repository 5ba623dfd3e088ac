"""The hook client's input: any event, however deep or large, becomes a request the daemon takes."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from loopwarden import hook_client as hc
from loopwarden.supervisor.bounds import CUT_MARKER, MAX_DEPTH, MAX_REQUEST_BYTES, depth_exceeds

from .helpers import event


def request_event(data: bytes) -> dict[str, Any]:
    assert data.endswith(b"\n") and len(data) - 1 <= MAX_REQUEST_BYTES
    return json.loads(data)["event"]


def pre_with(tool_input: Any) -> dict[str, Any]:
    return event("PreToolUse", tool_name="Write", tool_input=tool_input, tool_use_id="toolu_1")


def test_a_request_that_fits_is_sent_as_it_is() -> None:
    pre = pre_with({"content": "x" * 1000})
    assert request_event(hc.request_line(pre, 1.0, 2.0)) == pre


def test_a_request_one_byte_over_the_daemons_limit_is_cut_and_one_at_it_is_not() -> None:
    base = len(hc.request_line(pre_with({"content": ""}), 1.0, 2.0)) - 1
    at_limit = pre_with({"content": "x" * (MAX_REQUEST_BYTES - base)})
    assert request_event(hc.request_line(at_limit, 1.0, 2.0)) == at_limit
    content = "x" * (MAX_REQUEST_BYTES - base + 1)
    sent = request_event(hc.request_line(pre_with({"content": content}), 1.0, 2.0))
    assert sent["tool_input"]["content"].endswith(f"characters, digest {hc.digest(content.encode())}]")


def test_large_strings_are_cut_with_their_length_and_digest_so_different_ones_stay_different() -> None:
    one = request_event(hc.request_line(pre_with({"content": "a" * (3 << 20)}), 1.0, 2.0))
    two = request_event(hc.request_line(pre_with({"content": "a" * (3 << 20) + "b"}), 1.0, 2.0))
    assert one["tool_input"]["content"] != two["tool_input"]["content"]
    assert "3,145,728 characters, digest" in one["tool_input"]["content"]
    assert (one["session_id"], one["tool_use_id"]) == ("c-1", "toolu_1")


@pytest.mark.parametrize("tool_input", [
    {f"k{n}": "v" for n in range(150_000)},  # many keys: cutting strings alone never made this fit
    {"edits": [[str(n)] * 300 for n in range(1000)]},  # 300,000 short strings in nested arrays
])
def test_a_multitude_of_small_values_still_fits(tool_input: dict[str, Any]) -> None:
    sent = request_event(hc.request_line(pre_with(tool_input), 1.0, 2.0))
    assert (sent["session_id"], sent["hook_event_name"], sent["tool_name"]) == ("c-1", "PreToolUse", "Write")
    assert "cut by loopwarden" in json.dumps(sent["tool_input"])


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1, 999, 1000, 1024, 1025, 100_000])
def test_any_depth_is_read_and_cut_to_the_bound(depth: int) -> None:
    # the event (1) > tool_input (2...): tool_input nests depth - 1 levels
    raw = json.dumps(pre_with({"x": 0})).replace('{"x": 0}', '{"a":' * (depth - 2) + "{}" + "}" * (depth - 2))
    got = hc.read_event(io.BytesIO(raw.encode()))
    assert got["session_id"] == "c-1" and not depth_exceeds(got)
    assert (CUT_MARKER[:-1] in json.dumps(got)) is (depth > MAX_DEPTH)


def test_an_event_too_large_to_read_keeps_the_fields_that_name_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hc, "MAX_INPUT", 1000)
    raw = json.dumps(pre_with({"content": "x" * 5000})).encode()
    got = hc.read_event(io.BytesIO(raw))
    assert (got["session_id"], got["hook_event_name"], got["tool_name"]) == ("c-1", "PreToolUse", "Write")
    assert f"is {len(raw):,} bytes, over the 1,000-byte limit" in got["tool_input"]["loopwarden"]
    with pytest.raises(hc.NoAnswer, match="names no session"):
        hc.read_event(io.BytesIO(b'{"pad":"' + b"x" * 2000 + b'"}'))
