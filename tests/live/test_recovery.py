"""Recovery through a real daemon: `restart` (a new run told first what failed) and the refusals of
`rewind` and `restart` for sessions that cannot carry them out, each audited."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from loopwarden.runtime.client import DaemonError
from tests.support.daemon import Harness
from tests.support.events import heard
from tests.support.paths import PY
from tests.support.waiting import wait_for

SUMMARY = "restarted by a supervisor (loopwarden)"  # in every restart's summary (messages.restart_summary)


def audit(lw: Harness, sid: str, action: str) -> list[dict[str, Any]]:
    return [a for a in lw.request("actions", session=sid) if a["action"] == action]


def test_restart_of_a_looping_native_session_starts_its_task_again_told_what_failed(lw: Harness) -> None:
    old = lw.scenario("repetition")
    assert lw.wait_state(old, "terminated")["termination"] == "repetition_loop"
    done = lw.cli("restart", old, "--note", "NOTE-7 read the file once")
    assert done.returncode == 0, done.stderr
    new = done.stdout.split("restarted as ", 1)[1].split()[0]
    assert new != old and lw.status(new)["command"] == lw.status(old)["command"]
    wait_for(lambda: heard(lw, new, SUMMARY), 30, "the summary to reach the new run")
    line = next(str(e["data"]["text"]) for e in lw.events(new) if e["kind"] == "log" and SUMMARY in
                str(e["data"].get("text", "")))
    assert "repetition loop" in line and "NOTE-7" in line and "Tool call blocked" in line, line
    assert '"kind": "guidance"' in line or '"kind":"guidance"' in line  # an inject right after the welcome
    [row] = audit(lw, old, "restart")
    assert (row["target"], row["outcome"]) == (new, "restarting") and "NOTE-7" in row["note"]
    assert not heard(lw, old, SUMMARY)


def test_restart_of_a_running_session_stops_it_first(lw: Harness) -> None:
    old = lw.scenario("gate_request")
    lw.wait_state(old, "gated")
    new = lw.request("restart", session=old)["id"]
    snap = lw.wait_state(old, "terminated")
    assert snap["termination"] == "operator"
    wait_for(lambda: heard(lw, new, SUMMARY), 30, "the summary to reach the new run")
    lw.request("kill", session=new)


def test_restart_is_refused_for_an_agent_that_cannot_take_a_first_message(lw: Harness) -> None:
    plain = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(plain, "running")
    done = lw.cli("restart", plain)
    assert done.returncode != 0 and "(plain) cannot take a first message" in done.stderr, done.stderr
    assert lw.status(plain)["state"] == "running"  # refused: nothing was stopped
    [row] = audit(lw, plain, "restart")
    assert "cannot take a first message" in row["outcome"]
    lw.request("kill", session=plain)


def test_rewind_is_refused_for_a_session_without_the_capability(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    assert "rewind" not in lw.status(sid)["capabilities"]
    done = lw.cli("rewind", sid, "--note", "try again")
    assert done.returncode != 0 and "(native) cannot rewind its conversation" in done.stderr, done.stderr
    with pytest.raises(DaemonError, match="cannot rewind its conversation"):
        lw.request("rewind", session=sid)
    assert [a["outcome"].startswith("refused") or "cannot rewind" in a["outcome"]
            for a in audit(lw, sid, "rewind")] == [True, True]
    assert lw.status(sid)["state"] == "gated"
    lw.request("kill", session=sid)


def test_rewind_turns_must_be_a_whole_number_in_range(lw: Harness) -> None:
    done = lw.cli("rewind", "s1", "--turns", "0")
    assert done.returncode == 2 and "--turns" in done.stderr


def test_the_rewind_policy_leaves_a_session_that_cannot_rewind_to_end_as_usual(lw: Harness) -> None:
    sid = lw.scenario("repetition", "recovery.on_loop=rewind")
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "repetition_loop"
    assert "rewind" not in {v["rule"] for v in lw.verdicts(sid)}
    wait_for(lambda: heard(lw, sid, "recovery.on_loop=rewind: the loop ends the session: the native adapter "
                                    "cannot rewind"), 10, "the line that says why")


def test_an_adopted_process_can_be_neither_rewound_nor_restarted(lw: Harness) -> None:
    victim = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        done = lw.cli("adopt", str(victim.pid))
        assert done.returncode == 0, done.stderr
        sid = done.stdout.strip()
        for args, refused in ((("rewind", sid), "(adopted) cannot rewind its conversation"),
                              (("restart", sid), f"session {sid} was not launched by loopwarden")):
            out = lw.cli(*args)
            assert out.returncode == 2 and refused in out.stderr, out.stderr
        assert victim.poll() is None and lw.status(sid)["state"] == "running"  # nothing was stopped
        lw.request("kill", session=sid)
    finally:
        if victim.poll() is None:
            victim.kill()
        victim.wait(10)


def test_restart_of_a_session_that_exited_0_does_not_tell_the_agent_it_failed(lw: Harness) -> None:
    old = lw.scenario("healthy")
    assert lw.wait_state(old, "exited")["exit_code"] == 0
    done = lw.cli("restart", old)
    assert done.returncode == 0, done.stderr
    new = done.stdout.split("restarted as ", 1)[1].split()[0]
    wait_for(lambda: heard(lw, new, SUMMARY), 30, "the summary to reach the new run")
    line = next(str(e["data"]["text"]) for e in lw.events(new) if e["kind"] == "log" and SUMMARY in
                str(e["data"].get("text", "")))
    assert "failed" not in line and "ended by itself (exit code 0)" in line, line
    assert "Check whether the task is really done" in line
