"""The real Gemini CLI launched by loopwarden over ACP, against the fake Gemini API, through a real daemon.

Gemini runs with a private HOME (offline settings), `GEMINI_API_KEY=dummy` and
`GOOGLE_GEMINI_BASE_URL` pointing at the fake, and with loopwarden's private layer, so every call
asks. Each test is bounded three ways: the fake server's reply limit, the session's limits, and a
pytest timeout; every wait polls a condition with a deadline.
"""

from __future__ import annotations

from typing import Any

import psutil
import pytest

from loopwarden.runtime.session import group_alive
from tests.gemini.fake_gemini import (
    FakeGemini,
    Reply,
    calls_made,
    function_calls,
    function_responses,
    http_error,
    run,
    say,
    user_texts,
)
from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.processes import gone, processes_with
from tests.support.scenarios import assert_the_clock_alone_ends_it
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

CANCELED = {"error": 'Tool "run_shell_command" was canceled by the user.'}


def start(gm: Harness, prompt: str, sets: tuple[str, ...] = ()) -> str:
    """`loopwarden run -d --agent gemini [--set ...] -- PROMPT` in the test's work dir."""
    return gm.run_detached(prompt, agent="gemini", name="gm", sets=sets, cwd=gm.work)  # type: ignore[attr-defined]


def rejected(fake: FakeGemini) -> list[int]:
    """Indexes of the chat requests whose newest function response is Gemini's text for a rejected call."""
    return [n for n, body in enumerate(fake.requests())
            if function_responses(body) and function_responses(body)[-1]["response"] == CANCELED]


def test_a_looping_model_is_rejected_with_its_reason_then_terminated(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play(run("echo hi"), repeat=True, max_replies=40)
    sid = start(gm, "loop forever")
    snap = gm.wait_state(sid, "terminated", "exited", timeout=60)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop"), snap
    assert (snap["agent"], snap["adapter"]) == ("gemini", "acp"), snap  # the agent kind, shown in ls and the console
    verdicts = gm.verdicts(sid)
    got = rules(verdicts)
    assert got[0] == ("nudge", "repetition") and got[-1] == ("terminate", "repetition")
    assert got.count(("block", "repetition")) == 3
    calls = of_kind(gm, sid, "tool_call")
    assert {c["args"]["title"] for c in calls} == {"echo hi"}, "every echo asked, none ran unseen"
    ran = {r["call_id"] for r in of_kind(gm, sid, "tool_result")}
    blocked = [c for c in calls if any(v["seq"] == c["seq"] and v["action"] == "block" for v in verdicts)]
    assert blocked and not {c["call_id"] for c in blocked} & ran, "a rejected call has no result"
    # the model saw Gemini's own text for the rejection, then loopwarden's reason as the next prompt's text
    assert rejected(fake_gemini), "no request carried the rejection"
    block = next(v for v in verdicts if v["action"] == "block")
    reason_at = fake_gemini.received(block["message"])
    assert reason_at and reason_at[0] > rejected(fake_gemini)[0], "the reason never reached the model"
    assert any(t.startswith("Message from the supervisor (loopwarden): your tool call 'echo hi' was rejected.")
               for t in user_texts(fake_gemini.requests()[reason_at[0]]))
    nudge = next(v for v in verdicts if v["action"] == "nudge")
    assert fake_gemini.received(nudge["message"]), "the nudge never reached the model"
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def escalating_script(fake: FakeGemini) -> Any:
    """Loop on `echo hi` in the first turn; once loopwarden's text started a turn, `touch held-marker`;
    after it, finish; with GUIDANCE-7 in the prompt, say so and finish."""
    def script(body: dict[str, Any]) -> Reply:
        texts = user_texts(body)
        calls = function_calls(body)
        if any("GUIDANCE-7" in t for t in texts):
            return say("Understood. Done.")
        if calls and calls[-1].get("args", {}).get("command") == "touch held-marker":
            return say("Touched.")
        if any(t.startswith("Message from the supervisor") for t in texts):
            return run("touch held-marker")
        return run("echo hi")
    return script


GATING = ("repetition.max_identical_calls=3", "escalation.models=gemini-2.5-pro", "escalation.failures_at_top=1")


def held_call(gm: Harness, sid: str) -> dict[str, Any]:
    """Wait until the session is gated and the next turn's call is asked about and held."""
    gm.wait_state(sid, "gated", timeout=60)
    return dict(wait_for(lambda: next((c for c in of_kind(gm, sid, "tool_call")
                                       if c["args"]["title"] == "touch held-marker"), None), 30, "the held call"))


def test_a_looping_model_is_rejected_then_gated_and_the_gate_holds_the_answer(
        gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play(escalating_script(fake_gemini), max_replies=40)
    sid = start(gm, "loop please", sets=GATING)
    held = held_call(gm, sid)
    got = rules(gm.verdicts(sid))
    assert ("block", "repetition") in got and got[-1] == ("escalate", "model_escalation"), got
    assert rejected(fake_gemini), "the repeat was rejected before the gate"
    marker = gm.work / "held-marker"  # type: ignore[attr-defined]
    asked = len(fake_gemini.requests())
    last = fake_gemini.requests()[-1]
    assert function_calls(last)[-1:] != [{"name": "run_shell_command", "args": {"command": "touch held-marker"}}]
    assert gm.status(sid)["state"] == "gated" and not marker.exists()
    assert held["call_id"] not in {r["call_id"] for r in of_kind(gm, sid, "tool_result")}
    gate = f"{sid}:{gm.status(sid)['pending_gates'][0]}"
    gm.request("approve", gate=gate, note="GUIDANCE-7 the marker is enough")
    snap = gm.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert marker.exists(), "the approved call ran"
    assert len(fake_gemini.requests()) > asked
    assert fake_gemini.received("GUIDANCE-7"), "the guidance never reached the model"
    assert of_kind(gm, sid, "iteration")[-1]["status"] == "pass"
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_cancel_answers_the_held_request_and_gemini_does_not_hang(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play(escalating_script(fake_gemini), max_replies=40)
    sid = start(gm, "loop please", sets=GATING)
    held_call(gm, sid)
    gm.request("kill", session=sid, note="test")
    snap = gm.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    # Gemini answered the cancelled prompt (it waits forever on an unanswered permission request)
    # and exited by itself on the end of its stdin, before any signal
    assert of_kind(gm, sid, "iteration")[-1]["error"] == "stopReason cancelled"
    assert snap["exit_code"] == 0, snap
    assert not (gm.work / "held-marker").exists()  # type: ignore[attr-defined]
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_kill_during_a_running_command_leaves_no_process(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play(run("sleep 600.45"), repeat=True, max_replies=5)
    sid = start(gm, "wait a while")
    sleeper = wait_for(lambda: next(iter(processes_with("sleep 600.45")), None), 60, "the command's process")
    pid = gm.status(sid)["pid"]
    assert psutil.Process(pid).cmdline()[0].endswith("node"), "the session's pid is Gemini itself, no wrapper"
    gm.request("kill", session=sid, note="test")
    snap = gm.wait_state(sid, "terminated", timeout=30)
    assert snap["termination"] == "operator"
    assert wait_for(lambda: gone(sleeper.pid), 15, "the command's process to be gone")
    assert not group_alive(snap["pid"]) and not processes_with("sleep 600.45")
    assert not processes_with(str(gm.home)), "a Gemini process of this session is left"


def test_the_wall_clock_limit_holds_while_the_model_keeps_going(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play(lambda body: run(f"sleep 0.3; echo {calls_made(body)}"), max_replies=200)
    sid = start(gm, "keep going")
    snap = assert_the_clock_alone_ends_it(gm, sid)
    assert not group_alive(snap["pid"]) and not processes_with(str(gm.home))


def test_http_500_ends_the_session_with_its_reason(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play([http_error(500)])  # the test HOME allows one attempt: no retries with backoff
    sid = start(gm, "fail please")
    snap = gm.wait_state(sid, "exited", "terminated", timeout=30)
    assert (snap["state"], snap["exit_code"]) == ("exited", 1), snap
    assert "fake server error 500" in snap["failure"] and len(fake_gemini.requests()) == 1
    [error] = of_kind(gm, sid, "error")
    assert error["message"].startswith("acp: session/prompt failed:")
    assert not group_alive(snap["pid"])


def test_a_dead_model_server_is_ended_by_the_wall_clock_limit(gm: Harness, fake_gemini: FakeGemini) -> None:
    # Gemini keeps retrying a refused connection (past 45 s, even with one attempt allowed) and says
    # nothing meanwhile: no failure reaches loopwarden, so max_runtime ends the session
    fake_gemini.stop()
    sid = start(gm, "nobody answers", sets=("limits.max_runtime=3s",))
    snap = gm.wait_state(sid, "exited", "terminated", timeout=45)
    assert (snap["state"], snap["termination"]) == ("terminated", "max_runtime"), snap
    assert not of_kind(gm, sid, "tool_call")
    assert gone(snap["pid"]) and not group_alive(snap["pid"]) and not processes_with(str(gm.home))


def test_gemini_escalates_up_its_own_models_not_claudes(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play(run("echo hi"), repeat=True, max_replies=40)
    sid = start(gm, "loop forever", sets=("escalation.failures_per_model=1",))
    escalation = wait_for(lambda: next((v for v in gm.verdicts(sid) if v["action"] == "escalate"), None), 60,
                          "an escalation")
    assert escalation["reason"].endswith("gemini-3.5-flash-lite -> gemini-3.8-flash"), escalation
    assert escalation["target"] == "gemini-3.8-flash"
    gm.request("kill", session=sid, note="test")
    gm.wait_state(sid, "terminated", "exited", timeout=30)
