"""The codex adapter without a process: launching words, the approval handshake, answers owed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopwarden.sessions import registry
from loopwarden.sessions.base import Capability, capability_names
from loopwarden.sessions.codex_app import CodexAppServerAdapter, launch_command, split_args
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.support.jsonl import json_lines


def test_words_split_into_app_server_options_thread_settings_and_the_prompt() -> None:
    args = split_args(["-c", "model_reasoning_effort=low", "--enable=x", "-m", "gpt-5.5", "-s", "read-only",
                       "--strict-config", "fix the tests"])
    assert args.options == ["-c", "model_reasoning_effort=low", "--enable", "x", "--strict-config"]
    assert args.thread == {"model": "gpt-5.5", "sandbox": "read-only"}
    assert args.prompt == "fix the tests"


@pytest.mark.parametrize("words, error", [
    (["-m", "gpt-5.5"], "no prompt"),
    (["-c"], "needs a value"),
    ([], "no prompt"),
    (["--full-auto", "go"], "does not take '--full-auto'"),
])
def test_unusable_words_are_one_line_errors(words: list[str], error: str, tmp_path: Path) -> None:
    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    with pytest.raises(ValueError, match=error) as info:
        launch_command(words, {"LOOPWARDEN_CODEX": str(fake), "PATH": ""})
    assert "\n" not in str(info.value)


def test_no_binary_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("loopwarden.sessions.codex_app.bundled_binary", lambda: None)
    with pytest.raises(ValueError, match="cannot find Codex"):
        launch_command(["go"], {"PATH": "/nonexistent"})


def test_the_binary_comes_from_the_environment_then_path_then_the_wheel(tmp_path: Path) -> None:
    assert launch_command(["go"], {"LOOPWARDEN_CODEX": "/x/codex"}) == ["/x/codex", "go"]
    found = launch_command(["go"], {"PATH": os.devnull})[0]
    assert found.endswith("/bin/codex")  # the wheel's, installed by the test extra


def test_registered_with_its_capabilities() -> None:
    cls = registry.adapters()["codex"]
    assert cls is CodexAppServerAdapter and cls.agent == "codex"
    assert capability_names(cls().capabilities) == ["veto", "hold", "inject", "steer", "interrupt", "rewind"]
    assert Capability.REWIND in cls.declared  # thread/revert


def started() -> CodexAppServerAdapter:
    adapter = CodexAppServerAdapter()
    assert adapter.command(["/bin/codex", "-c", "a=1", "-C", "/w", "go"]) == ["/bin/codex", "app-server", "-c", "a=1"]
    sent = [json.loads(x) for x in adapter.start_lines()]
    assert [m.get("method") for m in sent] == ["initialize", "initialized", "thread/start"]
    assert sent[2]["params"] == {"approvalPolicy": "untrusted", "cwd": "/w"}
    adapter.parse_stdout(json.dumps({"id": sent[2]["id"], "result": {"thread": {"id": "t1"}}}).encode(), 1)
    turn = json_lines(b"".join(adapter.replies(False)))
    assert turn[0]["method"] == "turn/start" and turn[0]["params"]["input"][0]["text"] == "go"
    adapter.parse_stdout(b'{"method":"turn/started","params":{"turn":{"id":"u1"}}}', 2)
    return adapter


def approval(adapter: CodexAppServerAdapter, request_id: int, seq: int) -> ev.ToolCall:
    line = {"method": "item/commandExecution/requestApproval", "id": request_id,
            "params": {"itemId": f"call_{request_id}", "command": "rm -rf /"}}
    events = adapter.parse_stdout(json.dumps(line).encode(), seq)
    assert len(events) == 1 and type(events[0]) is ev.ToolCall
    return events[0]


def test_a_block_steers_its_reason_then_declines_and_never_persists_a_rule() -> None:
    adapter = started()
    call = approval(adapter, 0, 3)
    verdict = Verdict(Action.BLOCK, "repetition", "same call", message="REASON-1")
    steer, answer = json_lines(adapter.verdict_line(call, verdict))
    assert steer["method"] == "turn/steer" and "REASON-1" in json.dumps(steer)
    assert steer["params"]["expectedTurnId"] == "u1"
    assert answer == {"id": 0, "result": {"decision": "decline"}}
    allowed = adapter.verdict_line(approval(adapter, 1, 4), None)
    assert json_lines(allowed) == [{"id": 1, "result": {"decision": "accept"}}]


def test_a_held_approval_keeps_stdin_open_and_a_finished_turn_closes_it() -> None:
    adapter = started()
    call = approval(adapter, 0, 3)
    adapter.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"completed"}}}', 4)
    assert adapter.replies(True) == []  # a gate is open
    assert adapter.verdict_line(call, None) is None  # the turn's end resolved it
    assert adapter.replies(False) == [b""]


def test_text_between_turns_starts_the_next_turn_on_the_escalated_model() -> None:
    adapter = started()
    adapter.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"failed"}}}', 3)
    data = adapter.inject_line("try harder", "escalate", "iterations", "gpt-5.4")
    (turn,) = json_lines(data)
    assert turn["method"] == "turn/start" and turn["params"]["model"] == "gpt-5.4"
    assert adapter.replies(False) == []  # the turn is starting: stdin stays open


def test_stop_declines_what_is_open_and_interrupts_the_turn() -> None:
    adapter = started()
    approval(adapter, 5, 3)
    decline, interrupt = json_lines(adapter.stop_line("operator", "bye"))
    assert decline == {"id": 5, "result": {"decision": "decline"}}
    assert interrupt["method"] == "turn/interrupt" and interrupt["params"] == {"threadId": "t1", "turnId": "u1"}
    assert adapter.stop_line("operator", "again") is None


def test_a_rewind_reverts_the_turn_then_retries_its_input_with_the_guidance() -> None:
    adapter = CodexAppServerAdapter()
    with pytest.raises(ValueError, match="has not started a turn yet"):
        adapter.rewind_line(1, "GUIDE")
    adapter = started()
    approval(adapter, 0, 3)
    with pytest.raises(ValueError, match=r"cannot rewind 2 turns: this thread has 1 turn$"):
        adapter.rewind_line(2, "GUIDE")
    (revert,) = json_lines(adapter.rewind_line(1, "GUIDE"))
    assert revert["method"] == "thread/revert" and revert["params"] == {"threadId": "t1", "beforeTurnId": "u1"}
    with pytest.raises(ValueError, match="already under way"):
        adapter.rewind_line(1, "again")
    assert adapter.inject_line("a nudge", "nudge", "repetition") is None  # held for the retry
    ended = adapter.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"interrupted"}}}',
                                 4)
    assert ended == []  # the dropped turn is no failed iteration
    assert adapter.replies(False) == []  # the turn ended, but the revert is not answered yet: stdin stays open
    adapter.parse_stdout(json.dumps({"id": revert["id"], "result": {"thread": {"id": "t1"}}}).encode(), 5)
    (retry,) = json_lines(b"".join(adapter.replies(False)))
    assert retry["method"] == "turn/start"
    assert [i["text"] for i in retry["params"]["input"]] == [
        "go", "GUIDE", "Message from the supervisor (loopwarden): a nudge"]
    adapter.parse_stdout(b'{"method":"turn/started","params":{"turn":{"id":"u2"}}}', 6)
    assert adapter.turn_inputs == [("u2", ["go"])]  # a second rewind retries the task, not the old guidance


def test_a_failed_rewind_reports_why_and_sends_the_guidance_anyway() -> None:
    adapter = started()
    (revert,) = json_lines(adapter.rewind_line(1, "GUIDE"))
    adapter.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"interrupted"}}}', 3)
    events = adapter.parse_stdout(json.dumps({"id": revert["id"], "error": {"message": "no such turn"}}).encode(), 4)
    assert [type(e) for e in events] == [ev.Error] and "thread/revert failed: no such turn" in events[0].message
    (turn,) = json_lines(b"".join(adapter.replies(False)))
    assert turn["method"] == "turn/start" and [i["text"] for i in turn["params"]["input"]] == ["GUIDE"]


def test_a_restart_summary_goes_before_the_prompt() -> None:
    adapter = CodexAppServerAdapter()
    assert adapter.preface("SUMMARY")
    adapter.command(["/bin/codex", "go"])
    sent = [json.loads(x) for x in adapter.start_lines()]
    adapter.parse_stdout(json.dumps({"id": sent[2]["id"], "result": {"thread": {"id": "t1"}}}).encode(), 1)
    (turn,) = json_lines(b"".join(adapter.replies(False)))
    assert [i["text"] for i in turn["params"]["input"]] == ["SUMMARY", "go"]


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=10), inner, max_size=4),
                     max_leaves=20)
_METHODS = st.sampled_from(["item/commandExecution/requestApproval", "item/fileChange/requestApproval",
                            "item/started", "item/completed", "turn/started", "turn/completed", "error",
                            "thread/tokenUsage/updated", "serverRequest/resolved", "item/tool/call", "x"])


def _beyond_64_bits(value: object) -> bool:
    if isinstance(value, dict):
        return any(_beyond_64_bits(v) for v in value.values())
    if isinstance(value, list):
        return any(_beyond_64_bits(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and not -(1 << 63) <= value < (1 << 64)


@settings(max_examples=300, deadline=None)
@example(raws=[b'{"method":"","id":-9223372036854775809,"":null}'])  # an id past 64 bits: unreadable
@given(st.lists(st.one_of(
    st.binary(max_size=200),
    st.builds(lambda m, i, p: json.dumps({"method": m, "id": i, "params": p}).encode(), _METHODS, _JSON, _JSON),
    st.builds(lambda m, p: json.dumps({"method": m, "params": p}).encode(), _METHODS, _JSON),
    st.builds(lambda i, r: json.dumps({"id": i, "result": r}).encode(), _JSON, _JSON),
), max_size=12))
def test_no_line_crashes_the_adapter_and_every_request_is_answered(raws: list[bytes]) -> None:
    """Each request is answered once, at once; a line that is not one gets no answer, and an unreadable
    line at most one (found by its id, when it has one)."""
    adapter = started()
    for seq, raw in enumerate(raws, 10):
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        if _beyond_64_bits(obj):  # orjson (and Codex, whose ids are i64) cannot read it: an unreadable line
            obj = None
        answered: list[object] = []
        for event in adapter.parse_stdout(raw, seq):
            assert isinstance(event, ev.Event)
            if type(event) is ev.ToolCall:
                answered += [m["id"] for m in json_lines(adapter.verdict_line(event, None)) if "method" not in m]
        for data in adapter.replies(False):
            answered += [m["id"] for m in json_lines(data) if "method" not in m]
        if not isinstance(obj, dict):
            assert len(answered) <= 1
        elif isinstance(obj.get("method"), str) and type(obj.get("id")) in (int, str):
            assert answered == [obj["id"]]
        else:
            assert answered == []
