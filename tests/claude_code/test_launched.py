"""The real Claude Code CLI launched by loopwarden (`run --adapter claude-code`) against the fake API.

Each test is bounded three ways: claude's `--max-turns`, the fake server's turn limit, and a
pytest timeout; every wait polls a condition with a deadline.
"""

from __future__ import annotations

from typing import Any

import pytest

from loopwarden.runtime.session import group_alive
from tests.fakes.anthropic_server import (
    FakeAnthropic,
    Turn,
    assistant_turns,
    call,
    say,
    tool_results,
)
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.paths import PY
from tests.support.processes import gone, process_with
from tests.support.scenarios import assert_the_clock_alone_ends_it
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)
LS = {"command": "ls", "description": "list the files"}


def start(cc: Harness, *claude_args: str, sets: tuple[str, ...] = ()) -> str:
    """`loopwarden run -d --adapter claude-code [--set ...] -- CLAUDE_ARGS` in the test's work dir."""
    return cc.run_detached(*claude_args, adapter="claude-code", name="cc", sets=sets,
                           cwd=cc.work)  # type: ignore[attr-defined]


def texts(body: dict[str, Any]) -> list[str]:
    """Every text the client sent in one request: user and system turns, and tool results."""
    out: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            inner = block.get("content")
            if block.get("type") == "tool_result":
                blocks_in = [{"text": inner}] if isinstance(inner, str) else inner or []
                out.extend(str(b.get("text", "")) for b in blocks_in if isinstance(b, dict))
            elif block.get("type") == "text":
                out.append(str(block.get("text", "")))
    return out


def said(api: FakeAnthropic, text: str) -> list[int]:
    """Indexes of the conversation requests in which the client sent `text`."""
    return [i for i, body in enumerate(api.messages) if any(text in t for t in texts(body))]


def test_a_looping_model_is_nudged_blocked_then_terminated(cc: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: call("Bash", LS), max_turns=40)
    sid = start(cc, "--max-turns", "30", "--allowedTools=Bash", "list the files")
    snap = cc.wait_state(sid, "terminated", "exited", timeout=90)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop")
    verdicts = cc.verdicts(sid)
    assert rules(verdicts) == [("nudge", "repetition"), *[("block", "repetition")] * 3,
                               ("terminate", "repetition")]
    calls = of_kind(cc, sid, "tool_call")
    assert len(calls) == 9 and {c["tool"] for c in calls} == {"Bash"}
    assert all(c["call_id"].startswith("toolu_fake") for c in calls)
    # the veto reached the model as the call's error result, and the blocked calls never ran
    block = next(v for v in verdicts if v["action"] == "block")
    denied = [r for body in fake_api.messages for r in tool_results(body, last_only=True)
              if r.get("is_error") and block["message"] in str(r.get("content"))]
    assert denied and str(denied[0]["content"]).startswith("PreToolUse:Bash hook error")
    blocked_ids = {c["call_id"] for c in calls[5:8]}
    assert not blocked_ids & {r.get("call_id") for r in of_kind(cc, sid, "tool_result")}
    nudge = next(v for v in verdicts if v["action"] == "nudge")
    assert said(fake_api, nudge["message"]), "the nudge never reached the model"
    # terminate interrupted the CLI, which ended its turn and exited by itself; nothing is left
    assert snap["exit_code"] == 1
    assert of_kind(cc, sid, "iteration")[-1]["status"] == "fail"
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def _guided(body: dict[str, Any]) -> Turn:
    """Loop on `ls` for the 3 calls of the first turn; then touch a marker; after the guidance, finish."""
    if any("GUIDANCE-7" in t for t in texts(body)):
        return say("Understood: I stopped listing. Done.")
    if assistant_turns(body) >= 3:
        return call("Bash", {"command": "touch held-marker", "description": "mark"})
    return call("Bash", LS)


def test_a_gate_holds_the_hook_answer_and_its_guidance_reaches_the_model(
        cc: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(_guided, max_turns=40)
    # a turn that ends unfinished (claude's --max-turns) is a failed iteration; with a one-model
    # ladder and failures_at_top=1 the first one escalates to a human: a gate. The supervisor's text
    # (its nudge, the escalation) starts the next turn.
    sid = start(cc, "--max-turns", "3", "--allowedTools=Bash", "list the files",
                sets=("escalation.models=sonnet", "escalation.failures_at_top=1"))
    snap = cc.wait_state(sid, "gated", timeout=60)
    gate = f"{sid}:{snap['pending_gates'][0]}"
    assert rules(cc.verdicts(sid))[-1] == ("escalate", "model_escalation")
    # the next call reaches the hook, and its answer is held while the gate is open
    held = wait_for(lambda: next((c for c in of_kind(cc, sid, "tool_call") if "touch" in str(c["args"])), None),
                    30, "the held tool call")
    marker = cc.work / "held-marker"  # type: ignore[attr-defined]
    assert cc.status(sid)["state"] == "gated" and not marker.exists()
    assert held["call_id"] not in {r.get("call_id") for r in of_kind(cc, sid, "tool_result")}
    cc.request("approve", gate=gate, note="GUIDANCE-7 stop listing the files")
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap  # the turn ended, stdin closed, claude exited
    assert marker.exists(), "the approved call ran"
    assert held["call_id"] in {r.get("call_id") for r in of_kind(cc, sid, "tool_result")}
    assert said(fake_api, "GUIDANCE-7"), "the guidance never reached the model"
    assert of_kind(cc, sid, "iteration")[-1]["status"] == "pass"


def test_kill_interrupts_the_cli_then_stops_its_group(cc: Harness, fake_api: FakeAnthropic) -> None:
    slow = f"{PY} -c 'import time; time.sleep(37.25)'"  # claude itself refuses a plain `sleep`
    fake_api.play(lambda body: call("Bash", {"command": slow, "description": "wait"}), max_turns=5)
    sid = start(cc, "--max-turns", "3", "--allowedTools=Bash", "wait a while")
    sleeper = wait_for(lambda: process_with("time.sleep(37.25)"), 60, "the tool's sleeping process")
    snap = cc.status(sid)
    assert snap["pid"] in [p.pid for p in sleeper.parents()]  # claude runs it in a group of its own
    cc.request("kill", session=sid, note="test")
    snap = cc.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    # the CLI handled the interrupt: it ended the turn (a failed iteration) and exited by itself
    assert snap["exit_code"] == 1, "claude was signalled instead of winding down on the interrupt"
    assert of_kind(cc, sid, "iteration")[-1]["status"] == "fail"
    assert wait_for(lambda: gone(sleeper.pid), 10, "the tool's process to be gone")
    assert not group_alive(snap["pid"])


def test_the_wall_clock_limit_holds_while_the_model_keeps_going(cc: Harness, fake_api: FakeAnthropic) -> None:
    def varied(body: dict[str, Any]) -> Turn:  # never the same call twice: only the clock can stop it
        n = assistant_turns(body)
        return call("Bash", {"command": f"{PY} -c 'import time; time.sleep(0.3); print({n})'",
                             "description": f"step {n}"})

    fake_api.play(varied, max_turns=200)
    sid = start(cc, "--max-turns", "150", "--allowedTools=Bash", "keep going")
    snap = assert_the_clock_alone_ends_it(cc, sid)
    assert not group_alive(snap["pid"])


def test_a_healthy_run_maps_its_stream_and_exits_0(cc: Harness, fake_api: FakeAnthropic) -> None:
    (cc.work / "notes.txt").write_text("alpha\nbeta\n")  # type: ignore[attr-defined]
    path = str(cc.work / "notes.txt")  # type: ignore[attr-defined]
    fake_api.play([call("Read", {"file_path": path}, text="Reading the notes."), say("The notes say alpha, beta.")])
    sid = start(cc, "--max-turns", "5", "summarise notes.txt")
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"], snap["termination"]) == ("exited", 0, None)
    kinds = [e["kind"] for e in cc.events(sid) if e["kind"] != "log"]
    assert kinds[0] == "user_message" and kinds.count("user_message") == 1
    assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1
    call_, result = of_kind(cc, sid, "tool_call")[0], of_kind(cc, sid, "tool_result")[0]
    assert (call_["tool"], call_["args"]["file_path"]) == ("Read", path)
    assert result["call_id"] == call_["call_id"] and "alpha" in result["output"]
    assert [m["text"] for m in of_kind(cc, sid, "assistant_message")] == [
        "Reading the notes.", "The notes say alpha, beta."]
    iteration, usages = of_kind(cc, sid, "iteration")[-1], of_kind(cc, sid, "usage")
    assert (iteration["n"], iteration["status"]) == (1, "pass")
    # each API call's usage as it came (priced from the table), then the turn's own figure settling the rest
    assert [u["cost_source"] for u in usages] == ["provisional", "provisional", "agent"]
    assert all(u["input_tokens"] > 0 and u["output_tokens"] > 0 for u in usages[:2])
    assert sum(u["cost_usd"] for u in usages) > 0
    assert cc.verdicts(sid) == []


def test_sub_agent_calls_keep_the_task_call_as_their_agent(cc: Harness, fake_api: FakeAnthropic) -> None:
    def script(body: dict[str, Any]) -> Turn:
        first = [m for m in body["messages"] if m.get("role") == "user"][:1]
        if any("SUBTASK-31" in t for t in texts({"messages": first})):  # the sub-agent's own conversation
            done = assistant_turns(body) > 0
            return say("sub done") if done else call("Bash", {"command": "echo from-sub", "description": "sub"})
        if assistant_turns(body):
            return say("all done")
        return call("Agent", {"description": "sub job", "prompt": "SUBTASK-31: echo",
                              "subagent_type": "general-purpose"})

    fake_api.play(script, max_turns=20)
    sid = start(cc, "--max-turns", "5", "--allowedTools=Bash,Agent", "delegate")
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    calls = of_kind(cc, sid, "tool_call")
    task = next(c for c in calls if c["tool"] == "Agent")
    sub = next(c for c in calls if c["tool"] == "Bash")
    assert "agent" not in task and sub["agent"] == task["call_id"]
    result = next(r for r in of_kind(cc, sid, "tool_result") if r.get("call_id") == sub["call_id"])
    assert (result["agent"], result["output"]) == (task["call_id"], "from-sub")


def test_an_escalation_switches_claudes_model(cc: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: say("done") if "sonnet" in str(body.get("model")) else call("Bash", LS),
                  max_turns=20)
    sid = start(cc, "--max-turns", "2", "--allowedTools=Bash", "list the files",
                sets=("escalation.models=haiku,sonnet", "escalation.failures_per_model=1",
                      "repetition.nudge_after=0"))  # no nudge: the escalation's own text starts turn 2
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert ("escalate", "model_escalation") in rules(cc.verdicts(sid))
    models = fake_api.models()
    assert "sonnet" not in models[0] and "sonnet" in models[-1]  # set_model, then the escalation text


def test_the_readmes_first_command_runs_its_prompt_with_the_tools_allowed(
        cc: Harness, fake_api: FakeAnthropic) -> None:
    """`--allowedTools "Bash,Read,Edit" "fix the failing test"`: claude's variadic option would take the prompt as a
    tool; loopwarden sends it as the first user line and the tools stay allowed."""
    fake_api.play(lambda body: call("Bash", LS) if assistant_turns(body) == 0 else say("Fixed."), max_turns=5)
    sid = start(cc, "--max-turns", "30", "--allowedTools", "Bash,Read,Edit", "fix the failing test")
    snap = cc.wait_state(sid, "exited", "terminated", timeout=90)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert said(fake_api, "fix the failing test") == [0, 1]
    [result] = of_kind(cc, sid, "tool_result")
    assert not result["is_error"], result  # Bash was allowed: it ran without asking


def test_the_same_failing_command_again_and_again_opens_the_loop_counters_gate(
        cc: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: call("Bash", {"command": "cat missing-notes.txt", "description": "read"}),
                  max_turns=30)
    sid = start(cc, "--max-turns", "30", "--allowedTools=Bash", "read the notes")
    cc.wait_state(sid, "gated", timeout=90)
    gate = next(v for v in cc.verdicts(sid) if v["action"] == "gate")
    assert gate["rule"] == "loop_counter", rules(cc.verdicts(sid))
    assert "No such file or directory" in str(gate["evidence"]["failures"][-1]["message"])
    cc.request("kill", session=sid, note="test")
    cc.wait_state(sid, "terminated", timeout=30)
