"""A kept Codex session: what its adapter remembers comes back through JSON whole and bounded, and a real `codex
app-server` whose daemon was SIGKILLed is taken up by the next one (its held approval answered after the gate, an
operator's text steered in, a kill)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.runtime.session import group_alive
from loopwarden.sessions.codex_app import CodexAppServerAdapter
from loopwarden.supervisor import events as ev
from tests.codex.fake_responses import FakeResponses, gated_until, run, stepping_until
from tests.keeper.test_durable import ended, other_daemon
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.jsonl import json_lines
from tests.support.processes import gone, process_with
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

TURN_STARTED = b'{"method":"turn/started","params":{"turn":{"id":"u1"}}}'


# ---- memory() and recall() -------------------------------------------------------------

def started() -> CodexAppServerAdapter:
    """An adapter whose thread t1 runs turn u1 (lines 1 and 2)."""
    adapter = CodexAppServerAdapter()
    adapter.command(["/bin/codex", "go"])
    opened = json.loads(adapter.start_lines()[2])
    adapter.parse_stdout(json.dumps({"id": opened["id"], "result": {"thread": {"id": "t1"}}}).encode(), 1)
    adapter.replies(False)
    adapter.parse_stdout(TURN_STARTED, 2)
    return adapter


def approval_line(request_id: int, item: str) -> bytes:
    return json.dumps({"method": "item/commandExecution/requestApproval", "id": request_id,
                       "params": {"itemId": item, "command": f"touch {item}"}}).encode()


def completed_line(item: str) -> bytes:
    return json.dumps({"method": "item/completed", "params": {"item": {
        "type": "commandExecution", "id": item, "command": f"touch {item}", "status": "completed",
        "aggregatedOutput": "", "exitCode": 0}}}).encode()


def through_json(adapter: CodexAppServerAdapter, held: set[int]) -> CodexAppServerAdapter:
    """A new adapter given `adapter`'s memory as the store gives it back (orjson both ways)."""
    memory = orjson.loads(orjson.dumps(adapter.memory()))
    again = CodexAppServerAdapter()
    again.command(["/bin/codex", "go"])
    again.recall(memory, held)
    return again


def test_memory_comes_back_through_json_with_only_the_held_approval_waiting() -> None:
    adapter = started()
    [held] = adapter.parse_stdout(approval_line(0, "call_a"), 3)
    [answered] = adapter.parse_stdout(approval_line(1, "call_b"), 4)  # a gate holds the first; the second is answered
    steer = json_lines(adapter.inject_line("STEER-1", "operator", "operator") or b"")
    assert [s["method"] for s in steer] == ["turn/steer"]
    again = through_json(adapter, held={3})
    assert (again.thread_id, again.turn_id, again.conversation) == ("t1", "u1", "t1")
    assert again.turn_inputs == adapter.turn_inputs == [("u1", ["go"])]
    assert again._requests == adapter._requests and again._ids == adapter._ids
    assert again._pending == {3: 0}  # the other approval was answered by the earlier daemon
    assert (again.starting, again.turn_over, again.closed, again.handshake) == (False, False, False, True)
    assert json_lines(again.verdict_line(held, None) or b"") == [{"id": 0, "result": {"decision": "accept"}}]
    assert again.verdict_line(answered, None) is None
    # the approved item's result follows its judged call, which is not emitted again
    events = again.parse_stdout(completed_line("call_a"), 5)
    assert [type(e) for e in events] == [ev.ToolResult]
    # a request of this daemon's never reuses an id the earlier one may have given out unremembered
    (new,) = json_lines(again.inject_line("STEER-2", "operator", "operator") or b"")
    assert new["id"] > adapter._ids + 100
    # the steer the earlier daemon sent is answered here: once answered, nothing waits, and the turn's end closes
    again.parse_stdout(json.dumps({"id": steer[0]["id"], "result": {}}).encode(), 6)
    again.parse_stdout(json.dumps({"id": new["id"], "result": {}}).encode(), 7)
    again.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"completed"}}}', 8)
    assert again.replies(False) == [b""]


def test_a_continued_session_remembers_its_resumed_thread() -> None:
    adapter = CodexAppServerAdapter()
    adapter.resume("t0", "NOTE")
    adapter.command(["/bin/codex", "go"])
    opened = json.loads(adapter.start_lines()[2])
    assert opened["method"] == "thread/resume"
    adapter.parse_stdout(json.dumps({"id": opened["id"], "result": {"thread": {"id": "t0"}}}).encode(), 1)
    again = through_json(adapter, held=set())
    assert (again.resuming, again.resume_state, again.conversation, again.thread_id) == ("t0", "accepted", "t0", "t0")
    assert again.starting and again._starting_inputs == ["NOTE"]  # its turn/start is on its way


def test_lines_read_again_leave_waiting_only_the_approvals_a_gate_holds() -> None:
    adapter = started()
    again = through_json(adapter, held={4})
    again.reread(approval_line(0, "call_a"), 3)  # answered by the earlier daemon
    again.reread(approval_line(1, "call_b"), 4)  # held by a gate
    assert again._pending == {4: 1}
    assert again.replies(False) == []  # what a re-read line owed was sent by the earlier daemon


def test_a_memory_stays_a_few_kib_however_long_the_texts() -> None:
    adapter = started()
    adapter.turn_inputs = [(f"u{n}", ["x" * 3000]) for n in range(100)]
    adapter.queued = ["q" * 100] * 10
    adapter.parser._calls = {f"c{n}": ev.ToolCall(seq=n, tool="shell", args={"command": "y" * 5000})
                             for n in range(100)}
    memory = adapter.memory()
    assert len(orjson.dumps(memory)) < 10_000
    again = through_json(adapter, held=set())
    assert again.queued == adapter.queued  # owed to the model: first in the budget
    assert again.turn_inputs == adapter.turn_inputs[-1:]  # the newest turns whose input fits, whole
    assert all(len(t) == 3000 for _, inputs in again.turn_inputs for t in inputs)


def test_a_rewind_under_way_when_the_daemon_died_retries_the_turn_after_it() -> None:
    adapter = started()
    (revert,) = json_lines(adapter.rewind_line(1, "GUIDE"))
    adapter.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"interrupted"}}}', 3)
    again = through_json(adapter, held=set())
    assert again.replies(False) == []  # the revert is not answered yet: stdin stays open
    again.parse_stdout(json.dumps({"id": revert["id"], "result": {"thread": {"id": "t1"}}}).encode(), 4)
    (retry,) = json_lines(b"".join(again.replies(False)))
    assert retry["method"] == "turn/start" and [i["text"] for i in retry["params"]["input"]] == ["go", "GUIDE"]
    again.parse_stdout(b'{"method":"turn/started","params":{"turn":{"id":"u2"}}}', 5)
    (revert,) = json_lines(again.rewind_line(1, "AGAIN"))  # each turn's input came back: it can rewind again
    assert revert["params"] == {"threadId": "t1", "beforeTurnId": "u2"}


def test_a_turn_started_by_an_earlier_daemon_after_its_memory_keeps_stdin_open() -> None:
    adapter = started()
    adapter.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u1","status":"completed"}}}', 3)
    again = through_json(adapter, held=set())  # then the earlier daemon started a turn, and died
    again.parse_stdout(json.dumps({"id": adapter._ids + 1, "result": {"turn": {"id": "u2"}}}).encode(), 4)
    assert again.replies(False) == [] and again.turn_id == "u2"
    again.parse_stdout(b'{"method":"turn/completed","params":{"turn":{"id":"u2","status":"completed"}}}', 5)
    assert again.replies(False) == [b""]


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(1 << 63), (1 << 63) - 1) | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                 max_size=4),
                     max_leaves=20)
_KEYS = st.sampled_from(["thread", "turn", "conversation", "resuming", "resume_state", "model", "failure",
                         "handshake", "starting", "turn_over", "closed", "queued", "rewinding", "starting_inputs",
                         "turn_inputs", "ids", "requests", "pending", "parser", "truncated", "preview"])


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, _JSON | st.fixed_dictionaries(
    {}, optional={"calls": _JSON, "judged": _JSON, "prompted": _JSON, "turns": _JSON, "reported": _JSON})),
    st.sets(st.integers(0, 10)))
def test_a_memory_of_the_wrong_shape_is_recalled_without_raising(memory: dict[str, Any], held: set[int]) -> None:
    """Any JSON under any key (the store's {"truncated": ...} replacement among them): recall takes what it can
    read and the adapter goes on answering."""
    adapter = CodexAppServerAdapter()
    adapter.recall(memory, held)
    orjson.dumps(adapter.memory())
    adapter.reread(approval_line(0, "call_a"), 11)
    assert 11 not in adapter._pending
    adapter.parse_stdout(approval_line(1, "call_b"), 12)
    adapter.replies(False)


def test_wrong_typed_values_fall_back_to_their_defaults() -> None:
    adapter = CodexAppServerAdapter()
    adapter.recall({"thread": 5, "turn": ["u1"], "ids": "12", "handshake": "no", "closed": 1,
                    "pending": {"x": 1, "3": True, "4": 9}, "requests": [[2, 5, None], [3, "turn/steer", 7]],
                    "turn_inputs": [["u1", "go"], [1, ["go"]]], "queued": ["ok", 3], "rewinding": ["go", "x"],
                    "parser": {"calls": [["c", "1", "shell", []]], "judged": "call_a", "turns": -3}}, {3, 4})
    assert (adapter.thread_id, adapter.turn_id, adapter._ids, adapter.handshake, adapter.closed) == (
        None, None, 3, True, False)
    assert adapter._pending == {4: 9} and adapter._requests == {3: ("turn/steer", None)}
    assert adapter.turn_inputs == [("u1", [])] and adapter.queued == ["ok"] and adapter.rewinding == ([], "x")
    assert (adapter.parser._calls, adapter.parser._judged, adapter.parser.turns) == ({}, {}, 0)


# ---- a real Codex taken up by the next daemon ---------------------------------------------

@pytest.fixture
def kept_cx(tmp_path: Path, codex_home: Path, codex_bin: str) -> Iterator[Harness]:
    """A daemon whose agents the keeper holds (daemon.keep_agents), set up as `cx` is to run the real Codex on
    the fake model."""
    harness = Harness(tmp_path)
    harness.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    harness.paths.config_file.write_text("[daemon]\nkeep_agents = true\n")
    work = tmp_path / "work"
    work.mkdir()
    with harness:
        harness.env.update({"HOME": str(codex_home), "CODEX_HOME": str(codex_home), "LOOPWARDEN_CODEX": codex_bin})
        harness.work = work  # type: ignore[attr-defined]
        yield harness
    harness.cli("stop-daemon", "--yes")  # a daemon the keeper started is not the harness's own


def start(lw: Harness, *codex_args: str, sets: tuple[str, ...] = ()) -> str:
    return lw.run_detached(*codex_args, adapter="codex", name="cx", sets=sets, cwd=lw.work)  # type: ignore[attr-defined]


def kill_the_daemon(lw: Harness) -> None:
    """SIGKILL the daemon, and wait for the one the keeper starts in its place."""
    assert lw.daemon is not None
    old = lw.daemon.pid
    os.kill(old, signal.SIGKILL)
    lw.daemon.wait()
    other_daemon(lw, old)


def test_a_held_approval_is_answered_after_the_gate_by_the_daemon_that_took_it_up(
        kept_cx: Harness, fake_model: FakeResponses) -> None:
    lw = kept_cx

    # the first turn fails: with failures_at_top=1 a human is called, and the gate holds the next call
    fake_model.play(gated_until(fake_model, "GUIDANCE-9", "touch kept-marker"), max_replies=20)
    sid = start(lw, "make a marker", sets=("escalation.models=gpt-5.5", "escalation.failures_at_top=1"))
    snap = lw.wait_state(sid, "gated", timeout=60)
    gate = f"{sid}:{snap['pending_gates'][0]}"
    held = wait_for(lambda: next(iter(of_kind(lw, sid, "tool_call")), None), 60, "the held tool call")
    kill_the_daemon(lw)
    snap = lw.wait_state(sid, "gated", timeout=60)
    assert gate.split(":")[1] in snap["pending_gates"]
    marker = lw.work / "kept-marker"  # type: ignore[attr-defined]
    assert not marker.exists() and not of_kind(lw, sid, "tool_result")
    approved = lw.cli("approve", gate, "--note", "GUIDANCE-9 the marker is enough")
    assert approved.returncode == 0, approved.stderr
    snap = ended(lw, [sid], timeout=90)[sid]
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert marker.exists(), "the approved call ran"
    calls = [c["call_id"] for c in of_kind(lw, sid, "tool_call")]
    assert calls == [held["call_id"]], calls  # stored once, never judged again
    assert [r["call_id"] for r in of_kind(lw, sid, "tool_result")] == calls
    assert fake_model.received("GUIDANCE-9"), "the guidance never reached the model"
    assert of_kind(lw, sid, "iteration")[-1]["status"] == "pass"
    # judged once: the escalation that opened the gate, then the approval's note
    assert rules(lw.verdicts(sid)) == [("escalate", "model_escalation"), ("nudge", "operator")]
    assert not group_alive(snap["pid"])


def test_an_operators_text_steers_a_session_taken_up_mid_run(kept_cx: Harness, fake_model: FakeResponses) -> None:
    lw = kept_cx

    fake_model.play(stepping_until("STEER-8"), max_replies=60)
    sid = start(lw, "keep stepping")
    wait_for(lambda: len(of_kind(lw, sid, "tool_result")) >= 2, 60, "two results")
    kill_the_daemon(lw)
    lw.wait_state(sid, "running", timeout=60)
    before = len(of_kind(lw, sid, "tool_result"))
    wait_for(lambda: len(of_kind(lw, sid, "tool_result")) > before, 60, "a result read by the new daemon")
    lw.request("inject", session=sid, text="STEER-8 stop stepping")
    snap = ended(lw, [sid], timeout=90)[sid]
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert fake_model.received("STEER-8"), "the steer never reached the model"
    assert [i["status"] for i in of_kind(lw, sid, "iteration")] == ["pass"], "not steered into the running turn"
    calls = [c["call_id"] for c in of_kind(lw, sid, "tool_call")]
    assert len(calls) == len(set(calls)) and calls == [r["call_id"] for r in of_kind(lw, sid, "tool_result")]


def test_a_session_taken_up_during_a_command_is_killed_with_nothing_left(kept_cx: Harness,
                                                                        fake_model: FakeResponses) -> None:
    """The new daemon knows the thread it runs (its conversation, for a later `continue`), and an operator's kill
    ends the session with nothing of it left running."""
    lw = kept_cx
    fake_model.play(run("sleep 600.75"), repeat=True, max_replies=5)
    sid = start(lw, "wait a while")
    sleeper = wait_for(lambda: process_with("sleep 600.75"), 60, "the command's sleeping process")
    conversation = lw.status(sid)["conversation"]
    assert conversation
    kill_the_daemon(lw)
    # known from the stored memory, or from the lines stored after it once they are read again
    wait_for(lambda: lw.status(sid)["conversation"] == conversation, 30, "the conversation known again")
    lw.request("kill", session=sid, note="test")
    snap = ended(lw, [sid], timeout=60)[sid]
    assert (snap["state"], snap["termination"], snap["exit_code"]) == ("terminated", "operator", 0), snap
    assert wait_for(lambda: gone(sleeper.pid), 15, "the command's process to be gone")
    assert not group_alive(snap["pid"]) and process_with("sleep 600.75") is None
