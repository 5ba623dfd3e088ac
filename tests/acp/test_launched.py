"""The `acp` adapter with the scripted fake ACP agent (tests/agents/fake_acp_agent.py) through a real daemon.

Each test is bounded by the fake's own call limit, the session's limits and a pytest timeout; every wait
polls a condition with a deadline.
"""

from __future__ import annotations

import pytest

from loopwarden.runtime.session import group_alive
from tests.acp.helpers import answers, chosen, prompts, report, start
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.processes import gone, process_with
from tests.support.scenarios import assert_the_clock_alone_ends_it
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


def test_a_looping_call_is_rejected_once_with_its_reason_in_the_next_prompt_then_terminated(acp: Harness) -> None:
    sid = start(acp, "loop")
    snap = acp.wait_state(sid, "terminated", "exited", timeout=40)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop"), snap
    assert rules(acp.verdicts(sid)) == [("nudge", "repetition"), *[("block", "repetition")] * 3,
                                        ("terminate", "repetition")]
    picked = [chosen(a) for a in answers(acp).values()]
    assert "always-yes" not in picked and "never" not in picked, "an *_always option was chosen"
    assert picked[:5] == ["yes"] * 5 and picked[5] == "no"
    sent = prompts(acp)
    block = next(v for v in acp.verdicts(sid) if v["action"] == "block")
    assert sent[0] == "do the task"
    assert len(sent) >= 2 and "rejected" in sent[1] and block["message"] in sent[1]
    assert [m["text"] for m in of_kind(acp, sid, "user_message")] == ["do the task"]
    calls = of_kind(acp, sid, "tool_call")
    assert calls[0]["tool"] == "execute" and calls[0]["args"] == {"command": "echo looping"}
    assert of_kind(acp, sid, "tool_result")[0]["output"] == "looping\n"
    assert "Working on it." in [m["text"] for m in of_kind(acp, sid, "assistant_message")]
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_a_gate_holds_the_answer_and_its_guidance_is_the_next_prompt(acp: Harness) -> None:
    # the first turn ends `refusal`: with one model and failures_at_top=1 a human is called
    sid = start(acp, "loop", sets=("escalation.models=m1", "escalation.failures_at_top=1"),
                env={"FAKE_ACP_FAIL_FIRST": "1", "FAKE_ACP_CALLS": "1"})
    snap = acp.wait_state(sid, "gated", timeout=30)
    gate = f"{sid}:{snap['pending_gates'][0]}"
    held = wait_for(lambda: next((c for c in of_kind(acp, sid, "tool_call")), None), 20, "the held call")
    assert held["call_id"] == "t2-c0"
    assert acp.status(sid)["state"] == "gated" and "t2" not in str(list(answers(acp)))
    assert not any(a["id"] > 100 for a in answers(acp).values()), "the held request was answered"
    acp.request("approve", gate=gate, note="GUIDANCE-7 one echo is enough")
    snap = acp.wait_state(sid, "exited", "terminated", timeout=30)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert [chosen(a) for a in answers(acp).values()][-1] == "yes"
    assert any("GUIDANCE-7" in p for p in prompts(acp)), prompts(acp)


def test_kill_during_a_running_call_leaves_no_process(acp: Harness) -> None:
    sid = start(acp, "sleep")
    sleeper = wait_for(lambda: process_with("sleep 600.25"), 20, "the call's sleeping process")
    acp.request("kill", session=sid, note="test")
    snap = acp.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    assert wait_for(lambda: gone(sleeper.pid), 15, "the sleeper to be gone")
    assert not group_alive(snap["pid"]) and process_with("sleep 600.25") is None


def test_terminate_while_a_request_waits_answers_it_cancelled(acp: Harness) -> None:
    sid = start(acp, "loop", sets=("escalation.models=m1", "escalation.failures_at_top=1"),
                env={"FAKE_ACP_FAIL_FIRST": "1", "FAKE_ACP_CALLS": "1"})
    acp.wait_state(sid, "gated", timeout=30)
    wait_for(lambda: of_kind(acp, sid, "tool_call"), 20, "the held call")
    acp.request("kill", session=sid, note="test")
    snap = acp.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    wait_for(lambda: any(r.get("cancel") for r in report(acp)), 10, "the session/cancel")
    held = [a for a in answers(acp).values() if a["id"] > 100]
    assert [chosen(a) for a in held] == ["cancelled"]
    assert not group_alive(snap["pid"])


def test_the_wall_clock_limit_holds_while_the_agent_keeps_going(acp: Harness) -> None:
    sid = start(acp, "steps", sets=("repetition.max_identical_calls=1000",), env={"FAKE_ACP_CALLS": "100"})
    snap = assert_the_clock_alone_ends_it(acp, sid, timeout=30)
    assert not group_alive(snap["pid"])


def test_garbage_on_stdout_never_crashes_the_daemon_and_every_usable_request_is_answered(acp: Harness) -> None:
    sid = start(acp, "hostile", sets=("limits.max_line_bytes=1048576", "validation.max_consecutive=50"),
                env={"FAKE_ACP_BIG": str(2 << 20)})
    snap = acp.wait_state(sid, "exited", "terminated", timeout=30)
    got = answers(acp)
    assert {7, 8, 9, 10, "eleven", 12} <= set(got), got
    assert [chosen(got[i]) for i in (7, 8, 12)] == ["cancelled"] * 3
    assert all(got[i]["error"]["code"] == -32601 for i in (9, 10, "eleven"))
    assert chosen(got[101]) == "yes"
    assert of_kind(acp, sid, "invalid_line"), "the garbage was not reported"
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert acp.request("list") is not None  # the daemon still answers
    assert "after-garbage" in str(of_kind(acp, sid, "tool_result"))
