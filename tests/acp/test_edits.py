"""An ACP agent's edits, carried as `diff` blocks in its calls, in the `diff` op: the fake ACP agent through a
real daemon."""

from __future__ import annotations

import pytest

from tests.acp.helpers import start
from tests.support.daemon import Harness

pytestmark = pytest.mark.timeout(60)


def test_an_acp_agents_edits_show_in_diff(acp: Harness) -> None:
    """The fake ACP agent edits as Gemini CLI does (a `diff` block in the call): `diff` has both files, named
    within the session's directory, the new file as added."""
    (acp.work / "notes.txt").write_text("alpha\nbeta\n")  # type: ignore[attr-defined]
    sid = start(acp, "edit")
    acp.wait_state(sid, "exited", "terminated")
    assert (acp.work / "new.txt").read_text() == "fresh\n"  # type: ignore[attr-defined]
    diff = acp.request("diff", session=sid)
    assert diff["source"] == "calls"
    assert diff["files"] == [{"path": "notes.txt", "status": "modified", "added": 2, "removed": 1},
                             {"path": "new.txt", "status": "added", "added": 1, "removed": 0}]
    assert diff["patch"] == ("--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,3 @@\n alpha\n-beta\n+BETA\n+gamma\n"
                             "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,1 @@\n+fresh\n")
