"""`loopwarden continue` with the real Codex (`codex app-server`) on the fake Responses API: the thread id
recorded, and a session lost in a simulated reboot continued in its thread (`thread/resume`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.codex.fake_responses import FakeResponses, run, say, user_texts
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.reboot import reboot, stored
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(150)


def rollout(cx: Harness, thread: str) -> str:
    """Codex's own record of the thread ("" until it wrote one)."""
    return "".join(p.read_text() for p in Path(cx.env["CODEX_HOME"], "sessions").rglob(f"rollout-*-{thread}.jsonl"))


def test_a_lost_session_continues_in_its_thread_with_the_note(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play([run("python3 -c 'import time; time.sleep(120)'"), say("CONTINUED FINE")])
    sid = cx.run_detached("ALPHAZULU: run the slow command", adapter="codex", name="cx",
                          cwd=cx.work)  # type: ignore[attr-defined]
    wait_for(lambda: of_kind(cx, sid, "tool_call"), 60, "the slow call")
    thread = cx.status(sid)["conversation"]
    assert thread and cx.status(sid)["resumable"] is True
    wait_for(lambda: "function_call" in rollout(cx, thread), 30, "Codex to write the call in its rollout")
    wait_for(lambda: stored(cx, sid).get("conversation") == thread, 10, "the thread id stored")

    reboot(cx)
    assert (cx.status(sid)["state"], cx.status(sid)["conversation"]) == ("lost", thread)
    asked = len(fake_model.bodies)
    done = cx.cli("continue", sid, "--note", "BRAVOYANKEE: carry on", cwd=cx.work)  # type: ignore[attr-defined]
    assert done.returncode == 0, done.stderr
    new = re.search(r"continued as (s\d+)", done.stdout).group(1)  # type: ignore[union-attr]
    snap = cx.wait_state(new, "exited", "terminated", timeout=60)
    assert (snap["conversation"], snap["resume"]) == (thread, "accepted")
    texts = [user_texts(body) for body in fake_model.bodies[asked:]]
    carried = [t for t in texts if any("BRAVOYANKEE" in x for x in t)]
    assert carried and any("ALPHAZULU" in x for x in carried[0])  # the thread's history came along
    assert [m["text"] for m in of_kind(cx, new, "assistant_message")] == ["CONTINUED FINE"]
    # the counters came along, rebuilt from the store: the new run's engine counts the lost run's events too
    assert "start fresh" not in done.stdout
    own = [e for e in cx.events(new) if e["kind"] != "log"]
    assert snap["events"] >= len(own) + len(of_kind(cx, sid, "tool_call")) > len(own)


def test_an_unknown_thread_is_refused_in_one_line_and_the_id_is_kept(cx: Harness, fake_model: FakeResponses) -> None:
    fake_model.play([say("done")])
    sid = cx.run_detached("hello", adapter="codex", name="cx", cwd=cx.work)  # type: ignore[attr-defined]
    cx.wait_state(sid, "exited", timeout=60)
    thread = cx.status(sid)["conversation"]
    for path in Path(cx.env["CODEX_HOME"], "sessions").rglob(f"rollout-*-{thread}.jsonl"):
        path.unlink()  # Codex no longer has the thread
    done = cx.cli("continue", sid, cwd=cx.work)  # type: ignore[attr-defined]
    error = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(error) == 1, done.stderr
    assert f"did not continue conversation {thread}" in error[0] and "thread/resume failed" in error[0]
    new = re.search(r"continued as (s\d+)", done.stdout).group(1)  # type: ignore[union-attr]
    assert cx.status(new)["conversation"] == thread == cx.status(sid)["conversation"]


def test_continue_after_reboot_continues_the_lost_sessions_by_itself(cx: Harness, fake_model: FakeResponses) -> None:
    """With sessions.continue_after_reboot the next daemon continues every lost session that can be, audited
    as its own action; a session whose agent reported no conversation stays lost."""
    slow = "python3 -c 'import time; time.sleep(120)'"
    fake_model.play([run(slow), run(slow), say("CONTINUED ONE"), say("CONTINUED TWO")])
    sids = []
    for prompt in ("ALPHAZULU one", "ALPHAZULU two"):
        sid = cx.run_detached(prompt, adapter="codex", cwd=cx.work)  # type: ignore[attr-defined]
        wait_for(lambda sid=sid: of_kind(cx, sid, "tool_call"), 60, "the slow call")
        thread = cx.status(sid)["conversation"]
        wait_for(lambda thread=thread: "function_call" in rollout(cx, thread), 30, "the call in Codex's rollout")
        wait_for(lambda sid=sid, thread=thread: stored(cx, sid).get("conversation") == thread, 10, "the id stored")
        sids.append(sid)
    plain = cx.run_detached("python3", "-c", "import time; time.sleep(120)", adapter="plain")
    cx.wait_state(plain, "running")
    wait_for(lambda: stored(cx, plain).get("state") == "running", 10, "the plain session stored")

    cx.env.update({"LOOPWARDEN_SESSIONS_CONTINUE_AFTER_REBOOT": "true", "LOOPWARDEN_SESSIONS_CONTINUE_AT_ONCE": "1"})
    reboot(cx)

    def continued(sid: str) -> dict | None:
        rows = [a for a in cx.request("actions", session=sid) if a["action"] == "continue"]
        return rows[0] if rows else None

    for sid in sids:
        row = wait_for(lambda sid=sid: continued(sid), 30, f"{sid} continued by the daemon")
        assert (row["actor"], row["client"]) == ("loopwarden", "daemon")
        snap = cx.wait_state(row["target"], "exited", "terminated", timeout=60)
        assert (snap["conversation"], snap["resume"]) == (cx.status(sid)["conversation"], "accepted")
    assert cx.status(plain)["state"] == "lost" and continued(plain) is None
    answers = sorted(m["text"] for sid in sids for m in of_kind(cx, continued(sid)["target"], "assistant_message"))
    assert answers == ["CONTINUED ONE", "CONTINUED TWO"]


def test_codex_is_taken_over_in_its_own_program_without_a_daemon_left_behind() -> None:
    from loopwarden.sessions.codex_app import CodexAppServerAdapter

    handover = CodexAppServerAdapter.handover(["/bin/codex", "app-server"], "T1", "/w", {})
    assert handover.argv == ["/bin/codex", "resume", "T1", "-c", "features.daemon_auto_start=false"]
