"""The spill viewer keeps its keys to itself: typing a search never acts on a session, nor do R and K."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette

from loopwarden.widgets.dialogs import ConfirmWithReason
from loopwarden.widgets.spill_viewer import SpillViewer
from tests.console.helpers import RecordingConsole, sleeper, until
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio


async def open_viewer(pilot, app: RecordingConsole, sid: str, path: Path) -> SpillViewer:
    await until(pilot, lambda: sid in app.table.rows, what=f"the row of {sid}")
    app.table.move_cursor(row=app.table.get_row_index(sid))
    await until(pilot, lambda: app.feed.connected, what="the link")
    app.push_screen(SpillViewer(str(path)))
    return await until(pilot, lambda: isinstance(app.screen, SpillViewer) and app.screen.loaded and app.screen,
                       what="the spill viewer")


async def test_typing_a_search_in_the_spill_viewer_fires_no_action(lw: Harness, tmp_path: Path) -> None:
    sid = sleeper(lw)
    spill = tmp_path / "out.txt"
    spill.write_text("ok\nERROR one\nfine\n")
    app = RecordingConsole(lw.paths)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_viewer(pilot, app, sid, spill)
        await pilot.press("slash", *"ERROR", "enter", "enter")
        await pilot.pause()
        assert isinstance(app.screen, SpillViewer)
        assert lw.status(sid)["state"] == "running"
        assert not [a for a in lw.request("actions", session=sid) if a["action"] in ("restart", "kill")]


@pytest.mark.parametrize("key", ["R", "K"])
async def test_restart_and_kill_keys_do_nothing_unseen_in_the_spill_viewer(lw: Harness, tmp_path: Path,
                                                                            key: str) -> None:
    sid = sleeper(lw)
    spill = tmp_path / "out.txt"
    spill.write_text("some output\n")
    app = RecordingConsole(lw.paths)
    async with app.run_test(size=(160, 48)) as pilot:
        viewer = await open_viewer(pilot, app, sid, spill)
        await pilot.press(key)
        await pilot.pause()
        assert app.screen is viewer and not isinstance(app.screen, ConfirmWithReason)
        await pilot.press("enter")
        await pilot.pause()
        assert lw.status(sid)["state"] == "running"
        assert not [a for a in lw.request("actions", session=sid) if a["action"] in ("restart", "kill")]


async def test_the_command_palette_opened_in_the_spill_viewer_offers_no_action_on_a_session(
        lw: Harness, tmp_path: Path) -> None:
    sid = sleeper(lw)
    spill = tmp_path / "out.txt"
    spill.write_text("some output\n")
    app = RecordingConsole(lw.paths)
    async with app.run_test(size=(160, 48)) as pilot:
        viewer = await open_viewer(pilot, app, sid, spill)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the command palette")
        offered = [title for title, _, _ in app.palette_commands(viewer)]  # what the palette lists, as it asks
        assert "Help: every key and column" in offered
        assert not {"Kill", "Restart", "Pause", "Approve", "Deny", "Reset counters"} & set(offered)
