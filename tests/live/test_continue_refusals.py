"""`continue` refused in one line through a real daemon, each refusal audited, nothing started: a running
session, an agent that reports no conversation (a plain command, a native agent), an unknown session."""

from __future__ import annotations

from tests.live.test_recovery import audit
from tests.support.daemon import Harness
from tests.support.paths import PY


def refused(lw: Harness, *args: str) -> str:
    """`loopwarden continue ARGS` refused: its one line of stderr."""
    done = lw.cli("continue", *args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    return lines[0]


def test_a_running_session_is_refused_and_keeps_running(lw: Harness) -> None:
    plain = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(plain, "running")
    assert f"session {plain} is running; only an ended or lost session continues" in refused(lw, plain)
    assert lw.status(plain)["state"] == "running"
    assert "only an ended or lost session continues" in audit(lw, plain, "continue")[0]["outcome"]
    lw.request("kill", session=plain)


def test_an_agent_without_a_conversation_is_refused(lw: Harness) -> None:
    plain = lw.run_detached(PY, "-c", "print('hi')", adapter="plain")
    native = lw.scenario("repetition")
    for sid in (plain, native):
        snap = lw.wait_state(sid, "exited", "terminated")
        assert (snap["conversation"], snap["resumable"]) == (None, False)
        assert f"session {sid} has no stored conversation id" in refused(lw, sid)
    listed = {s["id"] for s in lw.request("list")}
    assert listed == {plain, native}  # nothing was started


def test_an_unknown_session_is_refused(lw: Harness) -> None:
    assert "no session 's99'" in refused(lw, "s99")
