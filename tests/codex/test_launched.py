"""The real Codex CLI launched by loopwarden (`run --adapter codex`, i.e. `codex app-server`) against the
fake Responses API, through a real daemon.

Each test is bounded three ways: the fake server's reply limit, the session's limits, and a pytest
timeout; every wait polls a condition with a deadline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopwarden.runtime.session import group_alive
from tests.codex.fake_responses import (
    FakeResponses,
    Reply,
    add_file,
    calls_made,
    gated_until,
    http_error,
    outputs,
    run,
    say,
    stepping_until,
)
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.processes import gone, process_with
from tests.support.scenarios import assert_the_clock_alone_ends_it
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)


def start(cx: Harness, *codex_args: str, sets: tuple[str, ...] = ()) -> str:
    """`loopwarden run -d --adapter codex [--set ...] -- CODEX_ARGS` in the test's work dir."""
    return cx.run_detached(*codex_args, adapter="codex", name="cx", sets=sets, cwd=cx.work)  # type: ignore[attr-defined]


def test_a_healthy_run_maps_its_stream_and_exits(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play([run("echo healthy-12"), say("All done.")])
    sid = start(cx, "say hello")
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"], snap["termination"]) == ("exited", 0, None), snap
    kinds = [e["kind"] for e in cx.events(sid) if e["kind"] != "log"]
    assert kinds[0] == "user_message" and kinds.count("user_message") == 1
    assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1
    call, result = of_kind(cx, sid, "tool_call")[0], of_kind(cx, sid, "tool_result")[0]
    assert call["tool"] == "shell" and "echo healthy-12" in call["args"]["command"]
    assert result["call_id"] == call["call_id"] and result["output"] == "healthy-12\n"
    assert result["exit_code"] == 0
    assert [m["text"] for m in of_kind(cx, sid, "assistant_message")] == ["All done."]
    assert of_kind(cx, sid, "iteration")[-1]["status"] == "pass"
    assert sum(u["input_tokens"] for u in of_kind(cx, sid, "usage")) > 0
    assert cx.verdicts(sid) == []
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_a_looping_model_is_declined_with_its_reason_then_terminated(cx: Harness,
                                                                     fake_model: FakeResponses) -> None:
    fake_model.play(run("echo looping"), repeat=True, max_replies=30)
    sid = start(cx, "loop forever")
    snap = cx.wait_state(sid, "terminated", "exited", timeout=60)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop"), snap
    verdicts = cx.verdicts(sid)
    assert rules(verdicts) == [("nudge", "repetition"), *[("block", "repetition")] * 3,
                               ("terminate", "repetition")]
    calls = of_kind(cx, sid, "tool_call")
    assert len(calls) == 9 and {c["tool"] for c in calls} == {"shell"}
    ran = {r["call_id"] for r in of_kind(cx, sid, "tool_result")}
    assert {c["call_id"] for c in calls[:5]} <= ran and not {c["call_id"] for c in calls[5:]} & ran
    # each decline reached the model twice: the call's output says it was rejected, and the verdict's
    # message, steered in first, is in the very request that carries that output
    block = next(v for v in verdicts if v["action"] == "block")
    bodies = fake_model.requests()
    declined = [n for n, b in enumerate(bodies) if any(o["call_id"] == calls[5]["call_id"] for o in outputs(b))]
    first = bodies[declined[0]]
    assert "rejected" in next(o["output"] for o in outputs(first) if o["call_id"] == calls[5]["call_id"])
    assert declined[0] in fake_model.received(block["message"])
    nudge = next(v for v in verdicts if v["action"] == "nudge")
    assert fake_model.received(nudge["message"]), "the nudge never reached the model"
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_a_gate_holds_the_approval_and_its_guidance_reaches_the_model(cx: Harness,
                                                                      fake_model: FakeResponses) -> None:
    # the first turn fails: with failures_at_top=1 a human is called
    fake_model.play(gated_until(fake_model, "GUIDANCE-7", "touch held-marker"), max_replies=20)
    sid = start(cx, "make a marker", sets=("escalation.models=gpt-5.5", "escalation.failures_at_top=1"))
    snap = cx.wait_state(sid, "gated", timeout=60)
    gate = f"{sid}:{snap['pending_gates'][0]}"
    assert rules(cx.verdicts(sid))[-1] == ("escalate", "model_escalation")
    # the escalation's text started the next turn; its call is asked about, and the answer is held
    held = wait_for(lambda: next(iter(of_kind(cx, sid, "tool_call")), None), 30, "the held tool call")
    marker = cx.work / "held-marker"  # type: ignore[attr-defined]
    assert cx.status(sid)["state"] == "gated" and not marker.exists()
    assert not of_kind(cx, sid, "tool_result")
    cx.request("approve", gate=gate, note="GUIDANCE-7 the marker is enough")
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert marker.exists(), "the approved call ran"
    assert held["call_id"] in {r["call_id"] for r in of_kind(cx, sid, "tool_result")}
    assert fake_model.received("GUIDANCE-7"), "the guidance never reached the model"
    assert of_kind(cx, sid, "iteration")[-1]["status"] == "pass"


def test_operator_text_steers_the_running_turn(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play(stepping_until("STEER-5"), max_replies=40)
    sid = start(cx, "keep stepping")
    wait_for(lambda: of_kind(cx, sid, "tool_result"), 30, "the first result")
    cx.request("inject", session=sid, text="STEER-5 stop stepping")
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert fake_model.received("STEER-5")
    iterations = of_kind(cx, sid, "iteration")
    assert [i["status"] for i in iterations] == ["pass"], "the text was not steered into the running turn"


def test_kill_during_a_running_command_leaves_no_process(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play(run("sleep 600.35"), repeat=True, max_replies=5)
    sid = start(cx, "wait a while")
    sleeper = wait_for(lambda: process_with("sleep 600.35"), 60, "the command's sleeping process")
    cx.request("kill", session=sid, note="test")
    snap = cx.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    assert snap["exit_code"] == 0, "the app-server was signalled instead of ending on the interrupt and stdin's end"
    assert wait_for(lambda: gone(sleeper.pid), 15, "the command's process to be gone")
    assert not group_alive(snap["pid"]) and process_with("sleep 600.35") is None


def test_the_wall_clock_limit_holds_while_the_model_keeps_going(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play(lambda body: run(f"sleep 0.3; echo {calls_made(body)}"), max_replies=200)
    sid = start(cx, "keep going")
    snap = assert_the_clock_alone_ends_it(cx, sid)
    assert not group_alive(snap["pid"])


def test_http_500_ends_the_session_with_its_reason(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play([http_error(500)])
    sid = start(cx, "fail please")
    snap = cx.wait_state(sid, "exited", "terminated", timeout=30)
    assert (snap["state"], snap["exit_code"]) == ("exited", 1), snap  # codex exits 0; its work failed
    assert "internalServerError" in snap["failure"], snap
    assert "exited 1: codex: the turn failed" in cx.cli("status", sid).stdout
    errors = [e["message"] for e in of_kind(cx, sid, "error")]
    assert len(errors) == 1 and "(internalServerError)" in errors[0], errors  # one error, not one per layer
    assert of_kind(cx, sid, "iteration")[-1]["status"] == "fail"
    assert not group_alive(snap["pid"])


def test_a_dead_model_server_ends_the_session_with_its_reason(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.stop()
    sid = start(cx, "nobody answers")
    snap = cx.wait_state(sid, "exited", "terminated", timeout=45)
    assert (snap["state"], snap["exit_code"]) == ("exited", 1) and "httpConnectionFailed" in snap["failure"], snap
    errors = [e["message"] for e in of_kind(cx, sid, "error")]
    assert len(errors) == 1 and errors[0].startswith("codex: Connection failed") and "httpConnectionFailed" in errors[0]
    assert of_kind(cx, sid, "iteration")[-1]["status"] == "fail"
    assert not group_alive(snap["pid"])


def test_an_escalation_switches_the_model_on_the_next_turn(cx: Harness, fake_model: FakeResponses) -> None:
    def script(body: dict[str, Any]) -> Reply:
        return http_error(500) if len(fake_model.requests()) == 1 else say("done on the bigger model")

    fake_model.play(script, max_replies=10)
    sid = start(cx, "try", sets=("escalation.models=gpt-5.5,gpt-5.4", "escalation.failures_per_model=1"))
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert rules(cx.verdicts(sid)) == [("escalate", "model_escalation")]
    assert [b["model"] for b in fake_model.requests()] == ["gpt-5.5", "gpt-5.4"]
    assert [i["status"] for i in of_kind(cx, sid, "iteration")] == ["fail", "pass"]


def test_a_command_left_running_in_the_background_is_gone_when_the_session_ends(
        cx: Harness, fake_model: FakeResponses) -> None:
    # past yield_time_ms Codex answers the model and the command lives on as a background terminal
    fake_model.play([run("sleep 600.5", yield_ms=300), say("It runs in the background; done.")])
    sid = start(cx, "start a long job")
    sleeper = wait_for(lambda: process_with("sleep 600.5"), 60, "the background command")
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    [told] = outputs(fake_model.requests()[1])
    assert "Process running with session ID" in told["output"]
    assert not of_kind(cx, sid, "tool_result")  # its item never completed: no result, only the call
    assert wait_for(lambda: gone(sleeper.pid), 15, "the background command to be gone")
    assert process_with("sleep 600.5") is None and not group_alive(snap["pid"])


def test_file_changes_are_judged_with_their_diff_and_a_declined_one_is_not_written(
        cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play([add_file("kept.txt", "alpha"), add_file("kept.txt", "alpha"), add_file("kept.txt", "alpha"),
                     say("done")], max_replies=10)
    # the third identical patch is blocked (max_identical_calls=2): declined, so it has no result
    sid = start(cx, "write a file", sets=("repetition.max_identical_calls=2", "repetition.nudge_after=0"))
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert snap["state"] == "exited", snap
    calls = of_kind(cx, sid, "tool_call")
    assert len(calls) == 3 and {c["tool"] for c in calls} == {"apply_patch"}
    [change] = calls[0]["args"]["changes"]
    assert (Path(change["path"]).name, change["kind"], change["diff"]) == ("kept.txt", "add", "alpha\n")
    assert [r["call_id"] for r in of_kind(cx, sid, "tool_result")] == [c["call_id"] for c in calls[:2]]
    [block] = cx.verdicts(sid)
    assert block["action"] == "block" and block["seq"] == calls[2]["seq"]
    told = [o for b in fake_model.requests() for o in outputs(b) if o["call_id"] == calls[2]["call_id"]]
    assert told[0]["output"] == "patch rejected by user"
    assert fake_model.received(block["message"]), "the reason never reached the model"
    assert (cx.work / "kept.txt").read_text() == "alpha\n"  # type: ignore[attr-defined]


def test_the_same_failing_command_again_and_again_opens_the_loop_counters_gate(
        cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play(run("cat missing-notes.txt"), repeat=True, max_replies=30)
    sid = start(cx, "read the notes")
    cx.wait_state(sid, "gated", timeout=60)
    gate = next(v for v in cx.verdicts(sid) if v["action"] == "gate")
    assert gate["rule"] == "loop_counter", rules(cx.verdicts(sid))
    assert "No such file or directory" in str(gate["evidence"]["failures"][-1]["message"])
    cx.request("kill", session=sid, note="test")
    cx.wait_state(sid, "terminated", timeout=30)
