"""`loopwarden continue` with the real Gemini CLI over ACP on the fake Gemini API: the session id recorded,
and after a simulated reboot the conversation loaded again (`session/load`, the only way Gemini advertises)
with its history and the note, under settings that keep Gemini from deleting it."""

from __future__ import annotations

import re

import pytest

from tests.gemini.fake_gemini import FakeGemini, say, user_texts
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.reboot import reboot, stored
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(240)


def test_an_ended_session_continues_in_its_conversation_after_a_reboot(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play([say("FIRST ANSWER"), say("CONTINUED FINE")])
    sid = gm.run_detached("ALPHAZULU: say something", agent="gemini", name="gm",
                          cwd=gm.work)  # type: ignore[attr-defined]
    snap = gm.wait_state(sid, "exited", "terminated", timeout=60)
    conversation = snap["conversation"]
    assert conversation and snap["resumable"] is True

    wait_for(lambda: stored(gm, sid).get("state") == snap["state"], 10, "the ended session stored")
    reboot(gm)
    assert gm.status(sid)["conversation"] == conversation
    asked = len(fake_gemini.requests())
    # Gemini names a session's file by its minute: the continue waits for the next one (at most a minute)
    done = gm.cli("continue", sid, "--note", "BRAVOYANKEE: carry on", cwd=gm.work,  # type: ignore[attr-defined]
                  timeout=150)
    assert done.returncode == 0, done.stderr
    new = re.search(r"continued as (s\d+)", done.stdout).group(1)  # type: ignore[union-attr]
    snap = gm.wait_state(new, "exited", "terminated", timeout=60)
    assert (snap["conversation"], snap["resume"]) == (conversation, "accepted")
    later = [user_texts(body) for body in fake_gemini.requests()[asked:]]
    carried = [t for t in later if any("BRAVOYANKEE" in x for x in t)]
    assert carried and any("ALPHAZULU" in x for x in carried[0])  # the earlier turn came along
    assert [m["text"] for m in of_kind(gm, new, "assistant_message")] == ["CONTINUED FINE"]
    assert [m["text"] for m in of_kind(gm, new, "user_message")] == ["BRAVOYANKEE: carry on"]  # no replayed history
