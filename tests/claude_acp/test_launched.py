"""Claude Code over ACP (`loopwarden run --agent claude-acp -- PROMPT`): the real claude-agent-acp under
node (its bundled Claude Code as a child), the fake Messages API, a real daemon.

Each test is bounded by the fake server's turn limit, the session's limits and a pytest timeout; every
wait polls a condition with a deadline.
"""

from __future__ import annotations

import json
from typing import Any

import psutil
import pytest

from loopwarden.runtime.session import group_alive
from tests.fakes.anthropic_server import FakeAnthropic, Turn, assistant_turns, call, say, tool_results
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.paths import PY
from tests.support.processes import gone, processes_with
from tests.support.scenarios import assert_the_clock_alone_ends_it
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)
SLEEP = {"command": "sleep 1", "description": "wait"}
REFUSED = "User refused permission to run tool"


def start(ca: Harness, prompt: str, sets: tuple[str, ...] = ()) -> str:
    """`loopwarden run -d --agent claude-acp [--set ...] -- PROMPT` in the work dir."""
    return ca.run_detached(prompt, agent="claude-acp", name="claude-acp", sets=sets,
                           cwd=ca.work)  # type: ignore[attr-defined]


def strings(value: Any) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def last_user_text(body: dict[str, Any]) -> str:
    """Everything the last user message says: its text blocks and its tool results' text."""
    return "\n".join(strings([m for m in body.get("messages") or [] if m.get("role") == "user"][-1:]))


def said(api: FakeAnthropic, text: str) -> list[int]:
    """Indexes of the conversation requests whose history holds `text` anywhere."""
    return [i for i, body in enumerate(api.messages) if any(text in s for s in strings(body.get("messages")))]


def test_a_looping_model_is_rejected_with_its_reason_then_terminated(ca: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(lambda body: call("Bash", SLEEP), max_turns=30)  # `sleep` asks only through loopwarden's layer
    sid = start(ca, "keep waiting", sets=("tools.waiting=",))  # sleep is waiting by default: judge it as any call
    snap = ca.wait_state(sid, "terminated", "exited", timeout=60)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop"), snap
    assert snap["agent"] == "claude-acp", snap
    verdicts = ca.verdicts(sid)
    assert rules(verdicts) == [("nudge", "repetition"), *[("block", "repetition")] * 3,
                               ("terminate", "repetition")]
    calls = of_kind(ca, sid, "tool_call")
    assert len(calls) == 9 and all(c["args"]["command"] == "sleep 1" for c in calls)
    results = {r["call_id"]: r for r in of_kind(ca, sid, "tool_result")}
    assert all(not results[c["call_id"]]["is_error"] for c in calls[:5]), "the first five calls ran"
    assert all(REFUSED in results[c["call_id"]]["output"] for c in calls[5:8]), "the next three were rejected"
    # the model read the refusal as the call's error result, and loopwarden's reason in the same user turn
    block = next(v for v in verdicts if v["action"] == "block")
    first = said(fake_api, block["message"])
    assert first, "the rejection's reason never reached the model"
    refused = [r for r in tool_results(fake_api.messages[first[0]], last_only=True) if r.get("is_error")]
    assert refused and block["message"] in last_user_text(fake_api.messages[first[0]])
    nudge = next(v for v in verdicts if v["action"] == "nudge")
    assert said(fake_api, nudge["message"]), "the nudge never reached the model"
    assert of_kind(ca, sid, "iteration")[-1]["status"] == "fail"
    assert snap["exit_code"] == 0, "the adapter was signalled instead of exiting after session/close"
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_kill_cancels_the_turn_and_leaves_no_process(ca: Harness, fake_api: FakeAnthropic) -> None:
    slow = f"{PY} -c 'import time; time.sleep(600.25)'"
    fake_api.play(lambda body: call("Bash", {"command": slow, "description": "wait"}), max_turns=5)
    sid = start(ca, "wait a while")
    sleeper = wait_for(lambda: next(iter(processes_with("time.sleep(600.25)")), None), 60, "the command's process")
    snap = ca.status(sid)
    tree = [p for p in psutil.Process(snap["pid"]).children(recursive=True)]
    assert any(p.cmdline()[:1] == ["claude"] for p in tree), "Claude Code (titled `claude`) is the adapter's child"
    ca.request("kill", session=sid, note="test")
    snap = ca.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    assert snap["exit_code"] == 0, "the adapter was signalled instead of exiting after session/close"
    iterations = of_kind(ca, sid, "iteration")
    assert iterations and iterations[-1]["error"] == "stopReason cancelled", "the turn was not cancelled"
    assert wait_for(lambda: gone(sleeper.pid), 15, "the command's process to be gone")
    assert all(gone(p.pid) for p in tree), "a node or Claude Code process was left"
    assert not group_alive(snap["pid"]) and not processes_with("time.sleep(600.25)")


def test_the_wall_clock_limit_holds_while_the_model_keeps_going(ca: Harness, fake_api: FakeAnthropic) -> None:
    def varied(body: dict[str, Any]) -> Turn:  # never the same call twice: only the clock can stop it
        return call("Bash", {"command": f"sleep 0.3; echo {assistant_turns(body)}", "description": "step"})

    fake_api.play(varied, max_turns=200)
    sid = start(ca, "keep going")
    snap = assert_the_clock_alone_ends_it(ca, sid)
    assert not group_alive(snap["pid"])


def test_every_bash_call_asks_under_the_users_own_settings(ca: Harness, fake_api: FakeAnthropic) -> None:
    # the user's settings allow `sleep` outright, pick a model, and start in dontAsk (which would deny
    # what is not pre-approved without asking): loopwarden's layer adds to them, and switches the mode
    settings = ca.home_dir / ".claude" / "settings.json"  # type: ignore[attr-defined]
    settings.parent.mkdir()
    mine = {"model": "claude-opus-5-5", "permissions": {"allow": ["Bash(sleep:*)"], "defaultMode": "dontAsk"}}
    settings.write_text(json.dumps(mine))
    fake_api.play([call("Bash", SLEEP, text="Waiting."), say("Waited.")])
    sid = start(ca, "wait once")
    snap = ca.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"], snap["termination"]) == ("exited", 0, None), snap
    kinds = [e["kind"] for e in ca.events(sid) if e["kind"] != "log"]
    assert kinds.count("user_message") == 1 and kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1
    assert [m["text"] for m in of_kind(ca, sid, "assistant_message")] == ["Waiting.", "Waited."]
    # asked: the call was judged at its permission request, before it ran (a call never asked about
    # is only seen with its result, at the same line)
    assert of_kind(ca, sid, "tool_call")[0]["seq"] < of_kind(ca, sid, "tool_result")[0]["seq"]
    assert of_kind(ca, sid, "iteration")[-1]["status"] == "pass"
    assert "opus" in fake_api.models()[0], "the user's own settings were not read"
    assert json.loads(settings.read_text()) == mine, "the user's file changed"
    assert not (ca.work / ".claude").exists(), "a project settings file was written"  # type: ignore[attr-defined]


TODO = {"todos": [{"content": "plan", "status": "pending", "activeForm": "planning"}]}
MONOLOGUE_GATE = ("repetition.max_monologue=2",)  # the third plan in a row opens a gate


def planning_script(body: dict[str, Any]) -> Turn:
    """Plans and no tool call between them (a monologue: TodoWrite is a plan), then `touch held-marker`; with
    GUIDANCE-7 in the conversation, done."""
    if any("GUIDANCE-7" in s for s in strings(body.get("messages"))):
        return say("Understood. Done.")
    if assistant_turns(body) < 4:
        return call("TodoWrite", TODO)
    return call("Bash", {"command": "touch held-marker", "description": "mark"})


def test_a_gate_holds_the_permission_answer_and_its_guidance_reaches_the_model(
        ca: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play(planning_script, max_turns=20)
    sid = start(ca, "make a marker", sets=MONOLOGUE_GATE)
    snap = ca.wait_state(sid, "gated", timeout=60)
    gate = f"{sid}:{snap['pending_gates'][0]}"
    assert rules(ca.verdicts(sid)) == [("nudge", "monologue"), ("gate", "monologue")]
    held = wait_for(lambda: next(iter(of_kind(ca, sid, "tool_call")), None), 30, "the held tool call")
    marker = ca.work / "held-marker"  # type: ignore[attr-defined]
    assert ca.status(sid)["state"] == "gated" and not marker.exists()
    assert not of_kind(ca, sid, "tool_result")
    ca.request("approve", gate=gate, note="GUIDANCE-7 the marker is enough")
    snap = ca.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap  # closed, the adapter exited by itself
    assert marker.exists(), "the approved call ran"
    assert held["call_id"] in {r["call_id"] for r in of_kind(ca, sid, "tool_result")}
    assert said(fake_api, "GUIDANCE-7"), "the guidance never reached the model"
    assert of_kind(ca, sid, "iteration")[-1]["status"] == "pass"


