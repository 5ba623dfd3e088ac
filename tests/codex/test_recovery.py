"""Recovery instead of killing, with the real Codex CLI (`codex app-server`) on the fake Responses API:
an operator's rewind (`thread/revert`) and the `recovery.on_loop = "rewind"` policy.

What the fake server receives is the proof: after a rewind the model is asked again with the task's
own prompt and loopwarden's guidance, and none of the looping calls are in its history any more.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.codex.fake_responses import FakeResponses, Reply, calls_made, run, say, user_texts
from tests.codex.test_launched import start
from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

GUIDED = "rewound this conversation"  # in every rewind's guidance (messages.rewind_guidance)


def guided(body: dict[str, Any]) -> bool:
    return any(GUIDED in t for t in user_texts(body))


def test_an_operator_rewinds_a_looping_turn_and_the_retry_carries_the_guidance(
        cx: Harness, fake_model: FakeResponses) -> None:
    held = threading.Event()  # the model's answer after the first blocked repeat waits here
    release = threading.Event()

    def script(body: dict[str, Any]) -> Reply:
        if guided(body):
            return say("Took another way. Done.")
        if calls_made(body) >= 6:  # the 6th identical call was declined: hold the loop where it is
            held.set()
            release.wait(60)
        return run("echo looping")

    fake_model.play(script, max_replies=40)
    sid = start(cx, "LOOP-TASK list the files")
    wait_for(held.is_set, 60, "the loop to be blocked")
    assert rules(cx.verdicts(sid)) == [("nudge", "repetition"), ("block", "repetition")]
    block = cx.verdicts(sid)[-1]
    answer = cx.request("rewind", session=sid, note="NOTE-42 read the directory once")
    release.set()
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"], snap["termination"]) == ("exited", 0, None), snap

    retried = [b for b in fake_model.requests() if guided(b)]
    assert retried, "the guidance never reached the model"
    first = retried[0]
    texts = user_texts(first)
    assert calls_made(first) == 0, "the looping calls are still in the model's history"
    assert any("LOOP-TASK list the files" in t for t in texts), "the task's own prompt was not retried"
    guidance = next(t for t in texts if GUIDED in t)
    assert guidance.endswith(answer["guidance"]) and "NOTE-42" in guidance
    assert block["message"][:60] in guidance  # the loop's evidence: the blocked call and its outcome
    assert rules(cx.verdicts(sid))[-1] == ("nudge", "rewind")
    iterations = [e["data"]["status"] for e in cx.events(sid) if e["kind"] == "iteration"]
    assert iterations == ["pass"]  # the dropped turn is not counted as a failed iteration
    audit = [a for a in cx.request("actions", session=sid) if a["action"] == "rewind"]
    assert [(a["target"], a["outcome"]) for a in audit] == [("1 turn", "rewinding")]
    assert "NOTE-42" in audit[0]["note"]


def test_the_rewind_policy_rewinds_a_loop_instead_of_ending_it_then_ends_the_next(
        cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play(run("echo looping"), repeat=True, max_replies=40)  # it loops again after the rewind
    sid = start(cx, "POLICY-TASK loop", sets=("recovery.on_loop=rewind", "recovery.max_rewinds=1"))
    snap = cx.wait_state(sid, "terminated", "exited", timeout=60)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop"), snap
    loop = [("nudge", "repetition"), *[("block", "repetition")] * 3]
    assert rules(cx.verdicts(sid)) == [*loop, ("nudge", "rewind"), *loop, ("terminate", "repetition")]
    rewind = next(v for v in cx.verdicts(sid) if v["rule"] == "rewind")
    assert rewind["evidence"]["by"] == "policy" and "instead of terminating" in rewind["reason"]
    retried = [b for b in fake_model.requests() if guided(b)]
    assert retried and calls_made(retried[0]) == 0
    assert any("POLICY-TASK loop" in t for t in user_texts(retried[0]))
    logs = [str(e["data"].get("text")) for e in cx.events(sid) if e["kind"] == "log"]
    assert "recovery.on_loop=rewind: the loop ends the session: after 1 rewind (recovery.max_rewinds)" in logs


def test_rewind_is_refused_before_codex_started_a_turn(cx: Harness, fake_model: FakeResponses) -> None:
    release = threading.Event()

    def script(body: dict[str, Any]) -> Reply:
        release.wait(60)
        return say("done")

    fake_model.play(script)
    sid = start(cx, "slow answer")
    wait_for(lambda: fake_model.requests(), 60, "the first model request")
    try:
        # the turn has started by now (its request reached the model): one turn to rewind, not two
        with pytest.raises(Exception, match="cannot rewind 2 turns: this thread has 1 turn"):
            cx.request("rewind", session=sid, turns=2)
    finally:
        release.set()
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    assert snap["state"] == "exited"
    assert ("rewind", "failed: cannot rewind 2 turns: this thread has 1 turn") in [
        (a["action"], a["outcome"]) for a in cx.request("actions", session=sid)]


def test_a_codex_session_ended_by_its_loop_restarts_told_what_failed(cx: Harness, fake_model: FakeResponses) -> None:
    def script(body: dict[str, Any]) -> Reply:
        if any("restarted by a supervisor" in t for t in user_texts(body)):
            return say("Starting over differently. Done.")
        return run("echo looping")

    fake_model.play(script, max_replies=40)
    old = start(cx, "RESTART-TASK list the files")
    assert cx.wait_state(old, "terminated", timeout=60)["termination"] == "repetition_loop"
    new = cx.request("restart", session=old, note="NOTE-11")["id"]
    snap = cx.wait_state(new, "exited", "terminated", timeout=60)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    first = next(b for b in fake_model.requests() if any("restarted by a supervisor" in t for t in user_texts(b)))
    texts = user_texts(first)
    summary = next(n for n, t in enumerate(texts) if "restarted by a supervisor" in t)
    prompt = next(n for n, t in enumerate(texts) if "RESTART-TASK list the files" in t)
    assert summary < prompt and calls_made(first) == 0  # a new thread: the summary, then the task
    assert "repetition loop" in texts[summary] and "NOTE-11" in texts[summary]
