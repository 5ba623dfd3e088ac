"""A session without a worktree shows the changes its calls made (the `diff` op's "calls" source), and a gate shows
the change its held call would make: a real daemon, a real store, the scripted agent."""

from __future__ import annotations

from typing import Any

import pytest

from loopwarden.runtime.call_changes import SessionChanges
from loopwarden.runtime.client import DaemonError
from loopwarden.runtime.principal import READ_ONLY_OPS
from tests.support.daemon import Harness
from tests.support.waiting import wait_for

CONTRACT = {"session", "source", "worktree", "branch", "base", "files", "added", "removed", "patch", "truncated"}


def call(n: int, tool: str, **args: Any) -> dict[str, Any]:
    return {"id": 2 * n, "kind": "tool_call", "data": {"type": "tool_call", "tool": tool, "args": args,
                                                        "call_id": f"c{n}"}}


def result(n: int, **fields: Any) -> dict[str, Any]:
    return {"id": 2 * n + 1, "kind": "tool_result", "data": {"type": "tool_result", "call_id": f"c{n}",
                                                              "output": "ok", **fields}}


def test_a_call_counts_once_it_succeeded() -> None:
    """A failed call, and one with no result yet, changed nothing; a write then an edit of the file it made
    shows the file as it is now, whole."""
    changes = SessionChanges()
    rows = [call(1, "Write", file_path="/w/new.py", content="a = 1\nb = 2\n"), result(1),
            call(2, "Edit", file_path="/w/new.py", old_string="b = 2", new_string="b = 3"), result(2),
            call(3, "Edit", file_path="/w/old.py", old_string="x", new_string="y"), result(3, is_error=True),
            call(4, "Bash", command="ls"), result(4),
            call(5, "Edit", file_path="/w/old.py", old_string="p\nq", new_string="p\nr"), result(5, exit_code=0),
            call(6, "Edit", file_path="/w/held.py", old_string="1", new_string="2")]
    for row in rows:
        changes.fold(row)
    reply = changes.reply("s1", "/w")
    assert set(reply) == CONTRACT and reply["source"] == "calls"
    assert reply["files"] == [{"path": "new.py", "status": "added", "added": 2, "removed": 0},
                              {"path": "old.py", "status": "modified", "added": 1, "removed": 1}]
    assert (reply["added"], reply["removed"]) == (3, 1)
    assert reply["patch"] == ("--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a = 1\n+b = 3\n"
                              "--- a/old.py\n+++ b/old.py\n@@ -1,2 +1,2 @@\n p\n-q\n+r\n")
    assert changes.reply("s1", None)["files"][0]["path"] == "/w/new.py"  # outside any directory: as given


def test_no_change_yet_is_source_none() -> None:
    assert SessionChanges().reply("s2", None) | {"patch": ""} == {
        "session": "s2", "source": "none", "worktree": None, "branch": None, "base": None, "files": [], "added": 0,
        "removed": 0, "patch": "", "truncated": False}


def gate_with_changes(lw: Harness) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        gates = lw.request("gates")
        return gates[0] if gates and "changes" in gates[0] else None
    return wait_for(found, 30, "the gate with its held call's change")


def test_a_scripted_session_edits_show_in_diff_and_the_gate_shows_the_held_edit(lw: Harness) -> None:
    """loop_gate edits a migration four times, then a gate holds its edit of the seed data: `diff` has the four
    edits (and not the held one); the gate carries the held edit's change; once approved, `diff` has it too."""
    sid = lw.scenario("loop_gate")
    lw.wait_state(sid, "gated")
    gate = gate_with_changes(lw)
    changes = gate["changes"]
    [held] = changes["files"]
    assert (held["path"], held["status"], held["added"], held["removed"]) == ("migrations/seed_users.json",
                                                                              "modified", 0, 1)
    assert held["patch"][-1] == '-{"email": "ann@example.com", "id": 2}'

    diff = lw.request("diff", session=sid)
    assert set(diff) == CONTRACT and (diff["session"], diff["source"], diff["worktree"]) == (sid, "calls", None)
    assert diff["files"] == [{"path": "migrations/0007_users.py", "status": "modified", "added": 4, "removed": 4}]
    assert "-unique=True\n+unique=False\n" in diff["patch"]
    assert diff["patch"].count("@@") == 8  # one hunk header a call, each `@@ ... @@`

    lw.request("approve", gate=gate["ref"])
    lw.wait_state(sid, "exited")
    after = lw.request("diff", session=sid)
    assert [f["path"] for f in after["files"]] == ["migrations/0007_users.py", "migrations/seed_users.json"]
    assert (after["added"], after["removed"]) == (4, 5)
    assert lw.request("diff", session=sid) == after  # read again: nothing new, the same reply


def test_diff_is_read_only_and_refuses_an_unknown_session_in_one_line(lw: Harness) -> None:
    assert "diff" in READ_ONLY_OPS
    with lw.client() as client, pytest.raises(DaemonError) as refused:
        client.request("diff", session="s999")
    assert "no session 's999'" in str(refused.value) and "\n" not in str(refused.value)



def test_diff_of_a_session_without_a_worktree_says_its_changes_come_from_its_calls(lw: Harness) -> None:
    """`loopwarden diff` heads the calls' changes as such (not "worktree None, branch None"), as --help says."""
    sid = lw.scenario("loop_gate")
    lw.wait_state(sid, "gated")
    shown = lw.cli("diff", sid, "--stat")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        f"session {sid}: no worktree; the changes its calls made (each edit's lines are numbered within the edit)",
        " M migrations/0007_users.py  +4 -4", "1 file changed, +4 -4"]
    helped = " ".join(lw.cli("diff", "--help").stdout.split())
    assert "shows the changes its calls made instead" in helped and "no worktree to show" not in helped
