"""The console's launch dialog gives a session its own worktree when its box is ticked, and shows the refusal
outside a git repository in the dialog."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input

from loopwarden.widgets.dialogs import Launch
from tests.console.helpers import RecordingConsole, until
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.worktree.test_worktree import EDITOR, hashes, make_repo

pytestmark = pytest.mark.anyio
SIZE = (120, 36)


async def test_the_launch_dialog_box_gives_the_session_a_worktree(lw: Harness, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    before = hashes(repo)
    monkeypatch.chdir(repo)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        box = dialog.query_one("#worktree", Checkbox)
        assert box.value is False  # sessions.worktree is off by default
        dialog.query_one("#command", Input).value = shlex.join([PY, EDITOR, "write:a.txt:changed\n"])
        dialog.query_one("#name", Input).value = "in-a-worktree"
        await pilot.click("#worktree")
        assert box.value is True
        dialog.query_one("#command", Input).focus()
        await pilot.press("enter")
        sid = await until(pilot, lambda: next((s for s, snap in app.snapshots.items()
                                               if snap.get("name") == "in-a-worktree"), None), what="the row")
    snap = lw.wait_state(sid, "exited")
    assert snap["worktree"]["path"] == str(lw.paths.data / "worktrees" / sid)
    assert (Path(snap["worktree"]["path"]) / "a.txt").read_text() == "changed\n"
    assert hashes(repo) == before


async def test_the_launch_dialog_shows_a_worktree_refused_outside_git(lw: Harness, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    monkeypatch.setenv("LOOPWARDEN_SESSIONS_WORKTREE", "true")  # the box starts as the setting says
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        assert dialog.query_one("#worktree", Checkbox).value is True
        dialog.query_one("#command", Input).value = shlex.join([PY, EDITOR])
        await pilot.press("enter")
        error = dialog.query_one("#error")
        await until(pilot, lambda: "is not inside a git repository" in str(error.render()), what="the refusal")
        assert isinstance(app.screen, Launch)
    assert lw.request("list") == []
