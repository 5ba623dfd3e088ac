"""Claude Code kept by the keeper (`daemon.keep_agents`): the real CLI on the fake API outlives a SIGKILLed daemon,
and the daemon the keeper starts takes it up: a hook a gate held is answered once the gate is approved, an operator's
message reaches the model; and the adapter's memory, stored as JSON, brings back what it knew."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson
import pytest

from loopwarden.runtime.session import group_alive
from loopwarden.sessions.claude_live import CLOSE, ClaudeCodeAdapter
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.verdicts import Action, Verdict
from tests.claude_code.conftest import on_the_fake_api
from tests.claude_code.test_adapter import assistant_tool_use, dumps, hook, replay, response, tool_result
from tests.claude_code.test_launched import said, start, texts
from tests.fakes.anthropic_server import FakeAnthropic, Turn, assistant_turns, call, say
from tests.keeper.test_durable import kept, other_daemon  # noqa: F401 - `kept`: the keeping daemon
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.paths import PY
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(240)
# a turn that ends unfinished (claude's --max-turns) is a failed iteration; with one model it escalates to a human at
# once: a gate, whose text starts the next turn
GATED_AT_ONCE = ("escalation.models=sonnet", "escalation.failures_at_top=1")


@pytest.fixture
def kept_cc(kept: Harness, fake_api: FakeAnthropic, claude_bin: str,  # noqa: F811 - the fixture imported above
            tmp_path: Path) -> Iterator[Harness]:
    """A daemon whose agents the keeper holds, set up to run the real Claude Code CLI on the fake API."""
    fake_api.max_seconds = 180  # the fake's own bound, past the wait for a new daemon
    yield on_the_fake_api(kept, fake_api, claude_bin, tmp_path)


def kill_the_daemon(lw: Harness, sid: str) -> None:
    """SIGKILL the daemon; return once the one the keeper starts supervises session `sid` again."""
    assert lw.daemon is not None
    old = lw.daemon.pid
    os.kill(old, signal.SIGKILL)
    lw.daemon.wait()
    other_daemon(lw, old)
    wait_for(lambda: lw.request("ping")["keeper"]["holds"] == 1 and lw.status(sid).get("pid"), 60,
             f"session {sid} taken up")


def each_call_once_and_paired(lw: Harness, sid: str) -> list[dict[str, Any]]:
    """The session's stored tool calls, after checking each is stored once and each result follows its call."""
    calls = of_kind(lw, sid, "tool_call")
    ids = [c["call_id"] for c in calls]
    assert len(ids) == len(set(ids)), ids
    assert {r["call_id"] for r in of_kind(lw, sid, "tool_result")} <= set(ids)
    return calls


def _gated_then_guided(body: dict[str, Any]) -> Turn:
    """List the files for the 3 turns of the first run; then touch a marker; after the guidance, finish."""
    if any("KEPT-GUIDANCE" in t for t in texts(body)):
        return say("Understood. Done.")
    if assistant_turns(body) >= 3:
        return call("Bash", {"command": "touch kept-marker", "description": "mark"})
    return call("Bash", {"command": "ls", "description": "list the files"})


def test_a_hook_held_by_a_gate_is_answered_by_the_next_daemon(kept_cc: Harness, fake_api: FakeAnthropic) -> None:
    """A tool call whose hook a gate holds when the daemon is SIGKILLed: the next daemon has the gate open, and
    approving it there lets the call run; the turn ends and the CLI exits 0, every call stored once."""
    fake_api.play(_gated_then_guided, max_turns=40)
    # the escalation's text starts the second turn, whose call the gate holds
    sid = start(kept_cc, "--max-turns", "3", "--allowedTools=Bash", "list the files", sets=GATED_AT_ONCE)
    gate_id = kept_cc.wait_state(sid, "gated", timeout=60)["pending_gates"][0]
    held = wait_for(lambda: next((c for c in of_kind(kept_cc, sid, "tool_call") if "touch" in str(c["args"])), None),
                    60, "the held tool call")
    marker = kept_cc.work / "kept-marker"  # type: ignore[attr-defined]

    kill_the_daemon(kept_cc, sid)
    snap = kept_cc.wait_state(sid, "gated", timeout=30)
    assert snap["pending_gates"] == [gate_id] and snap["conversation"]
    assert not marker.exists()
    kept_cc.request("approve", gate=f"{sid}:{gate_id}", note="KEPT-GUIDANCE stop listing")
    snap = kept_cc.wait_state(sid, "exited", "terminated", timeout=90)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap  # the turn ended, stdin closed, claude exited
    assert marker.exists(), "the approved call ran"
    calls = each_call_once_and_paired(kept_cc, sid)
    assert [c["args"]["command"] for c in calls] == ["ls", "ls", "ls", "touch kept-marker"]
    assert held["call_id"] in {r.get("call_id") for r in of_kind(kept_cc, sid, "tool_result")}
    assert said(fake_api, "KEPT-GUIDANCE"), "the guidance never reached the model"
    assert of_kind(kept_cc, sid, "iteration")[-1]["status"] == "pass"


def _steps_until_told(body: dict[str, Any]) -> Turn:
    """A different short command each turn (no guard stops it) until the operator's message comes."""
    if any("INJECT-31" in t for t in texts(body)):
        return say("Stopping as the operator asked.")
    n = assistant_turns(body)
    return call("Bash", {"command": f"{PY} -c 'import time; time.sleep(0.4); print({n})'", "description": f"step {n}"})


def test_a_taken_up_session_takes_an_operators_message(kept_cc: Harness, fake_api: FakeAnthropic) -> None:
    """A session taken up mid-run by the next daemon: an operator's `inject` reaches the model in its next
    request, and the session ends normally with every call stored once."""
    fake_api.play(_steps_until_told, max_turns=100)
    sid = start(kept_cc, "--max-turns", "80", "--allowedTools=Bash", "keep stepping")
    wait_for(lambda: len(of_kind(kept_cc, sid, "tool_call")) >= 3, 60, "three steps")

    kill_the_daemon(kept_cc, sid)
    asked = len(fake_api.messages)
    kept_cc.request("inject", session=sid, text="INJECT-31 stop stepping now")
    seen = wait_for(lambda: said(fake_api, "INJECT-31"), 60, "the message at the model")
    assert min(seen) <= asked + 1  # the request after the one the model was answering when it came
    snap = kept_cc.wait_state(sid, "exited", "terminated", timeout=90)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    calls = each_call_once_and_paired(kept_cc, sid)
    assert len(calls) >= 3 and len(of_kind(kept_cc, sid, "tool_result")) == len(calls)


def test_a_taken_up_session_is_killed_as_any_other(kept_cc: Harness, fake_api: FakeAnthropic) -> None:
    """An operator's kill of a session the next daemon took up: the interrupt ends the CLI's turn, the CLI exits
    by itself, and nothing of its group is left."""
    fake_api.play(_steps_until_told, max_turns=100)
    sid = start(kept_cc, "--max-turns", "80", "--allowedTools=Bash", "keep stepping")
    wait_for(lambda: len(of_kind(kept_cc, sid, "tool_call")) >= 2, 60, "two steps")

    kill_the_daemon(kept_cc, sid)
    kept_cc.request("kill", session=sid, note="test")
    snap = kept_cc.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    assert snap["exit_code"] == 1, "claude was signalled instead of winding down on the interrupt"
    assert of_kind(kept_cc, sid, "iteration")[-1]["status"] == "fail"
    assert not group_alive(snap["pid"])
    each_call_once_and_paired(kept_cc, sid)


def stored_memory(lw: Harness, sid: str) -> dict[str, Any]:
    """The adapter's memory stored with the session's last position, read from the store's file."""
    with closing(sqlite3.connect(f"file:{lw.paths.database}?mode=ro", uri=True)) as db:
        row = db.execute("SELECT memory FROM positions WHERE session_id = ?", [sid]).fetchone()
    return orjson.loads(row[0]) if row and row[0] else {}  # type: ignore[no-any-return]


def test_a_message_written_while_the_cli_waits_is_counted_by_the_next_daemon(
        kept_cc: Harness, fake_api: FakeAnthropic) -> None:
    """An operator's message written while a gate holds the CLI (it writes nothing then) is in the stored memory at
    once; the daemon SIGKILLed then, the next one counts it with the rest, and closes stdin once all are read."""
    fake_api.play(_gated_then_guided, max_turns=40)
    sid = start(kept_cc, "--max-turns", "3", "--allowedTools=Bash", "list the files",
                sets=(*GATED_AT_ONCE, "repetition.nudge_after=0"))  # no nudge: user lines are known
    gate_id = kept_cc.wait_state(sid, "gated", timeout=60)["pending_gates"][0]
    wait_for(lambda: any("touch" in str(c["args"]) for c in of_kind(kept_cc, sid, "tool_call")), 60,
             "the held tool call")
    kept_cc.request("inject", session=sid, text="INJECT-77 a message while you wait")
    # the prompt, the escalation's text and this message
    wait_for(lambda: stored_memory(kept_cc, sid).get("sent") == 3, 10, "the message counted in the stored memory")

    kill_the_daemon(kept_cc, sid)
    kept_cc.request("approve", gate=f"{sid}:{gate_id}", note="KEPT-GUIDANCE stop listing")
    snap = kept_cc.wait_state(sid, "exited", "terminated", timeout=90)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert said(fake_api, "INJECT-77") and said(fake_api, "KEPT-GUIDANCE")
    memory = stored_memory(kept_cc, sid)
    assert (memory["sent"], memory["echoed"], memory["closed"]) == (4, 4, True)


# ---- the adapter's memory, through JSON ---------------------------------------------------

def system(subtype: str, **fields: Any) -> bytes:
    return dumps({"type": "system", "subtype": subtype, **fields})


def result_line(cost: float) -> bytes:
    return dumps({"type": "result", "subtype": "success", "is_error": False, "total_cost_usd": cost,
                  "usage": {"input_tokens": 5, "output_tokens": 2}})


def fed(adapter: ClaudeCodeAdapter, *lines: bytes, first: int = 1) -> list[ev.Event]:
    events = []
    for seq, raw in enumerate(lines, first):
        events += adapter.parse_stdout(raw, seq)
        adapter.replies(False)
    return events


def through_json(memory: dict[str, Any] | None) -> dict[str, Any]:
    """As the store gives it back."""
    return orjson.loads(orjson.dumps(memory))  # type: ignore[no-any-return]


def mid_run() -> ClaudeCodeAdapter:
    """An adapter that has seen a conversation start, a blocked call, a call held at its hook, a tool_use whose
    hook has not come, and a background task still running."""
    adapter = ClaudeCodeAdapter()
    adapter.prompt = "go"
    adapter.start_lines()
    fed(adapter, system("init", session_id="conv-1"), replay("go"), assistant_tool_use("c0"),
        hook("r0", "c0"))  # seqs 1-4
    answer = adapter.verdict_line(ev.ToolCall(seq=4, tool="Bash", args={}, call_id="c0"),
                                  Verdict(Action.BLOCK, "repetition", "again", message="no"))
    assert answer is not None and "deny" in answer.decode()
    fed(adapter, system("task_started", task_id="t1", is_backgrounded=True), result_line(0.5),
        assistant_tool_use("c1"), hook("r1", "c1"), hook("r2", "c9"), assistant_tool_use("c2"), first=5)
    return adapter  # pending: seq 8 (r1) held by a gate, seq 9 (r2) answered meanwhile by a gate's end


def test_memory_comes_back_through_json() -> None:
    before = mid_run()
    after = ClaudeCodeAdapter()
    after.recall(through_json(before.memory()), {8})
    assert after.memory() == {**before.memory(), "pending": {"8": "r1"}}  # seq 9 was answered
    assert (after.conversation, after.handshake, after.sent, after.echoed) == ("conv-1", True, 1, 1)
    # the held hook is answered by the next daemon
    answer = after.verdict_line(ev.ToolCall(seq=8, tool="Bash", args={}, call_id="c1"), None)
    assert answer is not None and response(answer)["request_id"] == "r1"
    # the blocked call's error result is no event; the unhooked call's result brings its call; the turn count goes on
    events = fed(after, tool_result("c0", is_error=True), tool_result("c2"), result_line(0.75), first=20)
    assert [(type(e).__name__, getattr(e, "call_id", None)) for e in events][:2] == [
        ("ToolCall", "c2"), ("ToolResult", "c2")]
    usage, iteration = events[2:]
    assert isinstance(usage, ev.Usage) and usage.cost_usd == pytest.approx(0.25)
    assert isinstance(iteration, ev.Iteration) and iteration.n == 2
    assert after.replies(False) == []  # the background task still runs: stdin stays open
    after.parse_stdout(system("background_tasks_changed", tasks=[]), 30)
    assert after.replies(False) == [CLOSE]


def test_a_call_open_across_many_others_is_recalled() -> None:
    """An Agent call waits for its result while its sub-agent makes many calls of its own: recalled, its result
    still has its tool's name, and its call (judged at its hook) is not made again."""
    before = ClaudeCodeAdapter()
    agent = dumps({"type": "assistant", "message": {"id": "m-task", "content": [
        {"type": "tool_use", "id": "task", "name": "Agent", "input": {"prompt": "sub"}}]}})
    fed(before, agent, hook("r-task", "task", tool="Agent"))
    before.verdict_line(ev.ToolCall(seq=2, tool="Agent", args={}, call_id="task"), None)
    for i in range(1, 41):
        sub = f"sub{i}"
        fed(before, assistant_tool_use(sub, parent="task"), hook(f"r{i}", sub), tool_result(sub), first=10 * i)
        before.verdict_line(ev.ToolCall(seq=10 * i + 1, tool="Bash", args={}, call_id=sub), None)
    after = ClaudeCodeAdapter()
    after.recall(through_json(before.memory()), set())
    [result] = after.parse_stdout(tool_result("task", "sub done"), 500)
    assert isinstance(result, ev.ToolResult) and (result.tool, result.call_id) == ("Agent", "task")
    assert before.memory()["open"] == ["task"]


def test_lines_read_again_after_the_memory_owe_only_what_a_gate_holds() -> None:
    adapter = ClaudeCodeAdapter()
    adapter.recall(through_json(ClaudeCodeAdapter().memory()), {12})
    for seq, raw in ((11, hook("r11", "c11")), (12, hook("r12", "c12")), (13, system("init", session_id="conv-2"))):
        adapter.reread(raw, seq)
    assert adapter.memory()["pending"] == {"12": "r12"} and adapter.conversation == "conv-2"


@pytest.mark.parametrize("memory", [
    {},
    {"truncated": "{...", "chars": 90_000, "preview": "{"},  # what the store keeps of a document too large
    {"conversation": 7, "resume_state": [], "handshake": "no", "ids": "3", "sent": -1, "echoed": 2.5,
     "turn_over": 1, "closed": "yes", "pending": [["8", "r"]], "running": {"t": 1}, "background": "t1",
     "judged": [1, None], "blocked": {}, "calls": [["c", "Bash"], 5, ["c", 1, None, "x", {}]], "interrupt_id": 3,
     "parser": {"tools": ["c"], "spoken": 4, "seen_assistant": "y", "results": True, "cost_total": "1"}},
    {"pending": {"x": "r", "-1": "r", "8": 5, "99999999999999999999999": "r"}, "parser": []},
])
def test_wrong_typed_memory_reads_as_nothing_known(memory: dict[str, Any]) -> None:
    adapter = ClaudeCodeAdapter()
    adapter.recall(through_json(memory), {8, -1})
    fresh = ClaudeCodeAdapter().memory()
    assert adapter.memory() == fresh
    assert adapter.verdict_line(ev.ToolCall(seq=8, tool="Bash", args={}), None) is None


def test_memory_stays_a_few_kib_however_long_the_session() -> None:
    adapter = ClaudeCodeAdapter()
    big = {"content": "x" * 1500}
    for i in range(3000):
        call_id = f"toolu_{i:024d}"
        fed(adapter, assistant_tool_use(call_id), hook(f"req_{i}", call_id, args=big), first=10 * i)
        adapter.verdict_line(ev.ToolCall(seq=10 * i + 1, tool="Bash", args={}, call_id=call_id), None)
    for i in range(40):  # tool_use blocks with large arguments whose hooks have not come
        fed(adapter, dumps({"type": "assistant", "message": {"id": f"m{i}", "content": [
            {"type": "tool_use", "id": f"open_{i}", "name": "Write", "input": big}]}}), first=50_000 + i)
    memory = adapter.memory()
    assert len(orjson.dumps(memory)) < 8192
    assert len(memory["calls"]) == 16 and memory["calls"][-1][0] == "open_39"
    assert memory["calls"][-1][4] == big and "bytes of arguments not kept" in str(memory["calls"][0][4])
