"""The real Gemini CLI over ACP kept by the keeper (`[daemon] keep_agents = true`), on the fake Gemini API: the
daemon SIGKILLed while Gemini waits on a gate or runs a command, the keeper's next daemon takes the session up and
carries on the ACP conversation where the dead one left it (its ids, the permission request a gate holds, the text
queued for the next prompt), until the session ends by itself."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from loopwarden.runtime.session import group_alive
from tests.gemini.fake_gemini import FakeGemini, function_calls, run, say, user_texts
from tests.gemini.conftest import on_gemini
from tests.gemini.test_launched import GATING, escalating_script, held_call, start
from tests.keeper.test_durable import ended, kept  # noqa: F401 - a fixture, and a helper
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.keeping import killed_and_taken_up, stored_once
from tests.support.processes import gone, processes_with
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def kept_gm(kept: Harness, gemini_home: Path, gemini_bin: str, fake_gemini: FakeGemini,  # noqa: F811
            tmp_path: Path) -> Harness:
    """A daemon whose agents the keeper holds, on the real Gemini CLI (`on_gemini`)."""
    return on_gemini(kept, gemini_home, gemini_bin, fake_gemini, tmp_path)


@pytest.mark.parametrize("how", ["sigkill", "restart-daemon"])
def test_a_permission_request_held_by_a_gate_is_answered_by_the_next_daemon(
        kept_gm: Harness, fake_gemini: FakeGemini, how: str) -> None:
    """Gemini asks about `touch held-marker` while a gate is open; the daemon dies (or is restarted). The next one
    takes the session up with the gate still open and the request unanswered; approved, the call runs, the
    guidance reaches the model as the next prompt, and the session ends by itself, each call stored once."""
    fake_gemini.play(escalating_script(fake_gemini), max_replies=40)
    sid = start(kept_gm, "loop please", sets=GATING)
    held = held_call(kept_gm, sid)
    before = kept_gm.status(sid)
    marker = kept_gm.work / "held-marker"  # type: ignore[attr-defined]
    asked = len(fake_gemini.requests())
    snap = killed_and_taken_up(kept_gm, sid, how)
    assert snap["pid"] == before["pid"], "the same Gemini, kept"
    assert snap["state"] == "gated" and snap["pending_gates"] == before["pending_gates"]
    assert not marker.exists() and len(fake_gemini.requests()) == asked  # Gemini still waits for the answer
    approved = kept_gm.request("approve", gate=f"{sid}:{before['pending_gates'][0]}",
                               note="GUIDANCE-7 the marker is enough")
    assert approved
    snap = ended(kept_gm, [sid], timeout=90)[sid]
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap  # stdin closed once the last turn ended
    assert marker.exists(), "the approved call ran"
    assert fake_gemini.received("GUIDANCE-7"), "the guidance never reached the model"
    assert of_kind(kept_gm, sid, "iteration")[-1]["status"] == "pass"
    calls = stored_once(kept_gm, sid)
    assert [c["call_id"] for c in calls].count(held["call_id"]) == 1
    assert [r["call_id"] for r in of_kind(kept_gm, sid, "tool_result")].count(held["call_id"]) == 1
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


def test_a_session_taken_up_on_a_gate_is_stopped_and_its_held_request_answered(
        kept_gm: Harness, fake_gemini: FakeGemini) -> None:
    """Killed after take-up, the held permission request is answered `cancelled` with the turn's cancel, and
    Gemini ends the turn and exits by itself (it would wait forever on an unanswered request)."""
    fake_gemini.play(escalating_script(fake_gemini), max_replies=40)
    sid = start(kept_gm, "loop please", sets=GATING)
    held_call(kept_gm, sid)
    assert killed_and_taken_up(kept_gm, sid)["state"] == "gated"
    kept_gm.request("kill", session=sid, note="test")
    snap = ended(kept_gm, [sid], timeout=60)[sid]
    assert (snap["state"], snap["termination"]) == ("terminated", "operator"), snap
    assert snap["exit_code"] is not None, snap  # 0, or SIGTERM's when a loaded machine keeps it past the grace
    assert of_kind(kept_gm, sid, "iteration")[-1]["error"] == "stopReason cancelled"  # it answered the cancel
    assert not (kept_gm.work / "held-marker").exists()  # type: ignore[attr-defined]
    stored_once(kept_gm, sid)
    assert gone(snap["pid"]) and not group_alive(snap["pid"])


# long enough to kill the daemon and take the session up while it runs; its own among parallel test runs
SLEEP = f"sleep 8.{os.getpid()}"


def sleeping_script(body: dict[str, Any]) -> Any:
    """Run SLEEP, then say so; once the operator's note arrives, acknowledge it."""
    if any("NOTE-5" in text for text in user_texts(body)):
        return say("Noted.")
    calls = function_calls(body)
    if calls and calls[-1].get("args", {}).get("command") == SLEEP:
        return say("Slept.")
    return run(SLEEP)


def test_an_operator_note_reaches_gemini_through_the_daemon_that_took_it_up(
        kept_gm: Harness, fake_gemini: FakeGemini) -> None:
    """The daemon dies while Gemini's command runs; the next one takes the session up mid-turn, and the operator's
    note, given to it, goes to the model as the next prompt once the turn ends."""
    fake_gemini.play(sleeping_script, max_replies=10)
    sid = start(kept_gm, "sleep a while")
    sleeper = wait_for(lambda: next(iter(processes_with(SLEEP)), None), 60, "the command's process")
    snap = killed_and_taken_up(kept_gm, sid)
    assert snap["state"] == "running" and sleeper.is_running(), "taken up mid-turn"
    kept_gm.request("inject", session=sid, text="NOTE-5 keep the log short")
    assert sleeper.is_running(), "the note came while the turn ran"
    snap = ended(kept_gm, [sid], timeout=90)[sid]
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    noted = fake_gemini.received("NOTE-5")
    assert noted, "the note never reached the model"
    assert any(t.startswith("Message from an operator, through loopwarden: NOTE-5")
               for t in user_texts(fake_gemini.requests()[noted[0]]))
    assert [m["text"].strip() for m in of_kind(kept_gm, sid, "assistant_message")][-2:] == ["Slept.", "Noted."]
    assert [i["status"] for i in of_kind(kept_gm, sid, "iteration")] == ["pass", "pass"]
    stored_once(kept_gm, sid)


def test_a_session_whose_daemon_dies_as_it_starts_runs_to_its_end(kept_gm: Harness, fake_gemini: FakeGemini) -> None:
    """The daemon is killed as soon as the session is launched, before or after it stored what it read of the
    handshake: the next daemon starts the ACP session (or goes on with it) and the session ends by itself."""
    fake_gemini.play(lambda body: say("Hello there."), max_replies=5)
    sid = start(kept_gm, "say hello")
    killed_and_taken_up(kept_gm, sid)
    snap = ended(kept_gm, [sid], timeout=90)[sid]
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    assert [m["text"].strip() for m in of_kind(kept_gm, sid, "assistant_message")] == ["Hello there."]
    assert [e["text"] for e in of_kind(kept_gm, sid, "user_message")] == ["say hello"]  # one session, one prompt
    assert len(fake_gemini.received("say hello")) == 1
