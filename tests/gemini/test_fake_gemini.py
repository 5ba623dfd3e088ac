"""The fake Gemini API on its own, over real HTTP: its routes, script, limits, errors and records."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.gemini.fake_gemini import (
    EXHAUSTED_TEXT,
    LIMIT_TEXT,
    FakeGemini,
    function_responses,
    http_error,
    run,
    say,
    user_texts,
)

pytestmark = pytest.mark.timeout(30)


def post(fake: FakeGemini, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(fake.url + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def stream(fake: FakeGemini, body: dict[str, Any]) -> dict[str, Any]:
    status, raw = post(fake, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", body)
    assert status == 200
    [line] = [x for x in raw.decode().split("\r\n\r\n") if x]
    assert line.startswith("data: ")
    return dict(json.loads(line[len("data: "):]))


def part(chunk: dict[str, Any]) -> dict[str, Any]:
    return dict(chunk["candidates"][0]["content"]["parts"][0])


PROMPT = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}


def test_a_script_answers_in_order_then_says_it_is_exhausted(fake_gemini: FakeGemini) -> None:
    fake_gemini.play([run("echo hi"), say("done")])
    assert part(stream(fake_gemini, PROMPT)) == {"functionCall": {"name": "run_shell_command",
                                                                  "args": {"command": "echo hi"}}}
    assert part(stream(fake_gemini, PROMPT)) == {"text": "done"}
    assert part(stream(fake_gemini, PROMPT)) == {"text": EXHAUSTED_TEXT}
    assert fake_gemini.models == ["gemini-2.5-pro"] * 3


def test_a_looping_model_is_bounded(fake_gemini: FakeGemini) -> None:
    fake_gemini.play(run("echo hi"), repeat=True, max_replies=3)
    answers = [part(stream(fake_gemini, PROMPT)) for _ in range(4)]
    assert [a.get("functionCall", {}).get("args") for a in answers[:3]] == [{"command": "echo hi"}] * 3
    assert answers[3] == {"text": LIMIT_TEXT}


def test_http_errors_and_unknown_routes(fake_gemini: FakeGemini) -> None:
    fake_gemini.play([http_error(500)])
    status, raw = post(fake_gemini, "/v1beta/models/m:streamGenerateContent?alt=sse", PROMPT)
    assert status == 500 and json.loads(raw)["error"]["status"] == "INTERNAL"
    assert post(fake_gemini, "/v1/other", {})[0] == 404
    assert fake_gemini.other == ["POST /v1/other"]


def test_a_broken_script_answers_500_and_says_why(fake_gemini: FakeGemini) -> None:
    fake_gemini.play(lambda body: [][1])
    assert post(fake_gemini, "/v1beta/models/m:streamGenerateContent", PROMPT)[0] == 500
    assert fake_gemini.errors and fake_gemini.errors[0].startswith("IndexError")


def test_utility_calls_get_json_that_fits_their_schema(fake_gemini: FakeGemini) -> None:
    schema = {"type": "object", "properties": {"reasoning": {"type": "string"}, "model_choice": {"type": "string"},
                                               "complexity_score": {"type": "integer"}}}
    status, raw = post(fake_gemini, "/v1beta/models/flash:generateContent",
                       {**PROMPT, "generationConfig": {"responseJsonSchema": schema}})
    text = json.loads(raw)["candidates"][0]["content"]["parts"][0]["text"]
    assert status == 200 and json.loads(text) == {"reasoning": "(fake server)", "model_choice": "flash",
                                                  "complexity_score": 1}
    assert post(fake_gemini, "/v1beta/models/flash:countTokens", PROMPT)[0] == 200
    assert fake_gemini.utility == ["generateContent flash", "countTokens flash"] and not fake_gemini.bodies


def test_requests_are_recorded_for_the_test_to_read(fake_gemini: FakeGemini) -> None:
    body = {"contents": [
        {"role": "user", "parts": [{"text": "loop"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "echo hi"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command",
                                                         "response": {"error": "canceled by the user"}}}]},
        {"role": "user", "parts": [{"text": "REASON-1 stop looping"}]},
    ]}
    stream(fake_gemini, body)
    [sent] = fake_gemini.requests()
    assert user_texts(sent) == ["loop", "REASON-1 stop looping"]
    assert function_responses(sent)[0]["response"] == {"error": "canceled by the user"}
    assert fake_gemini.received("REASON-1") == [0] and fake_gemini.received("canceled by the user") == [0]


def test_a_stopped_server_refuses(fake_gemini: FakeGemini) -> None:
    url = fake_gemini.url
    fake_gemini.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/v1beta/models/m:countTokens", data=b"{}", timeout=5)
