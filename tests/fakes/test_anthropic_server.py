"""The fake Messages API itself, driven by the real `anthropic` SDK."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic_server import (
    LIMIT_TEXT,
    FakeAnthropic,
    call,
    fail,
    say,
    tool_results,
)

pytestmark = pytest.mark.timeout(30)
MODEL = "claude-haiku-5-5"


def client(api: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=api.url, api_key="sk-fake-key", max_retries=0)


def _tool_loop(api: FakeAnthropic, stream: bool) -> list[Any]:
    sdk = client(api)
    messages: list[dict[str, object]] = [{"role": "user", "content": "summarise README"}]
    out = []
    for _ in range(2):
        kwargs: dict[str, Any] = {"model": MODEL, "max_tokens": 100, "messages": messages}
        if stream:
            with sdk.messages.stream(**kwargs) as s:
                reply: Any = s.get_final_message()
        else:
            reply = sdk.messages.create(**kwargs)
        out.append(reply)
        uses = [b for b in reply.content if b.type == "tool_use"]
        messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "text"}
                                                  for u in uses]}]
    return out


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_two_turn_tool_loop_with_unique_ids(fake_api: FakeAnthropic, stream: bool) -> None:
    fake_api.play([call("read_file", {"path": "README.md"}, text="Let me look."), say("It is short.")])
    first, second = _tool_loop(fake_api, stream)
    assert first.stop_reason == "tool_use" and [b.type for b in first.content] == ["text", "tool_use"]
    assert first.content[0].text == "Let me look."  # type: ignore[union-attr]
    assert first.content[1].input == {"path": "README.md"}  # type: ignore[union-attr]
    assert second.stop_reason == "end_turn" and second.content[0].text == "It is short."  # type: ignore[union-attr]
    assert first.id != second.id and first.usage.input_tokens > 0
    assert [bool(b.get("stream")) for b in fake_api.messages] == [stream, stream]
    [result] = tool_results(fake_api.messages[1])
    assert result["tool_use_id"] == first.content[1].id  # type: ignore[union-attr]


def test_past_max_turns_it_answers_a_final_end_turn(fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: call("bash", {"command": "ls"}), max_turns=3)
    sdk = client(fake_api)
    replies = [sdk.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "go"}])
               for _ in range(4)]
    assert [r.stop_reason for r in replies] == ["tool_use"] * 3 + ["end_turn"]
    assert replies[-1].content[0].text == LIMIT_TEXT  # type: ignore[union-attr]
    assert len({r.id for r in replies}) == 4


def test_errors_and_a_broken_script_come_back_as_api_errors(fake_api: FakeAnthropic) -> None:
    sdk = client(fake_api)
    fake_api.play([fail(529, "overloaded_error", "Overloaded")])
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        sdk.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "go"}])
    assert overloaded.value.status_code == 529
    fake_api.play(lambda body: body["no such key"])
    with pytest.raises(anthropic.InternalServerError):
        sdk.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "go"}])
    assert fake_api.errors == ["KeyError: 'no such key'"]


def test_other_endpoints_get_sensible_answers_and_credentials_are_not_recorded(fake_api: FakeAnthropic) -> None:
    sdk = client(fake_api)
    count = sdk.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hello there"}])
    assert count.input_tokens > 0
    assert MODEL in [m.id for m in sdk.models.list().data]
    head = urllib.request.urlopen(urllib.request.Request(fake_api.url + "/", method="HEAD"), timeout=10)
    assert head.status == 200
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(fake_api.url + "/v1/nothing", timeout=10)
    assert missing.value.code == 404
    assert json.loads(missing.value.read())["error"]["type"] == "not_found_error"
    beta = urllib.request.Request(fake_api.url + "/v1/messages?beta=true", method="POST",
                                  data=json.dumps({"model": MODEL, "messages": [], "stream": False}).encode(),
                                  headers={"x-api-key": "sk-fake-key", "content-type": "application/json"})
    assert json.loads(urllib.request.urlopen(beta, timeout=10).read())["type"] == "message"
    assert len(fake_api.messages) == 1  # the ?beta=true path is the conversation endpoint
    assert "sk-fake-key" not in repr(fake_api.requests)
