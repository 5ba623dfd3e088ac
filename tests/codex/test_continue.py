"""`loopwarden continue` with the real Codex (`codex app-server`) on the fake Responses API: the thread id
recorded, and a session lost in a simulated reboot continued in its thread (`thread/resume`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.codex.fake_responses import FakeResponses, run, say, user_texts
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.reboot import reboot
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
