"""Keys typed right after `/` (a paste, `tmux send-keys`, a fast typist) go into the search or the filter line,
never to the view's or the console's bindings (`/Kill` must not press `K`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.app import App
from textual.widgets import Input, RichLog

from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.help import Help
from loopwarden.widgets.search_bar import SearchBar
from loopwarden.widgets.spill_viewer import SpillViewer
from tests.console.helpers import RecordingConsole, sleeper, until
from tests.console.test_search import ScreenApp, spill_file
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio
SIZE = (160, 40)


def burst(app: App[Any], text: str) -> None:
    """`/` and `text` queued all at once, as the terminal hands over a paste or `tmux send-keys` (pilot.press
    lets the app settle after each key, which hides the race)."""
    app.post_message(events.Key("slash", "/"))
    for char in text:
        app.post_message(events.Key(char, char))


def query_of(screen: Any) -> str:
    return str(screen.query_one(SearchBar).input.value)


def console_actions(lw: Harness, sid: str) -> list[dict[str, Any]]:
    return [a for a in lw.request("actions", session=sid) if a["client"].startswith("console pid ")]


async def open_detail(pilot: Any, app: RecordingConsole, sid: str) -> SessionDetail:
    await until(pilot, lambda: sid in app.table.rows, what=f"the row of {sid}")
    app.table.move_cursor(row=app.table.get_row_index(sid))
    await pilot.press("enter")
    return await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                       what="the session detail")


@pytest.mark.parametrize("typed", ["FAILED", "Kill Restart limits"])
async def test_detail_search_takes_every_key_typed_right_after_the_slash(lw: Harness, typed: str) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        detail = await open_detail(pilot, app, sid)
        following = detail.query_one("#stream", RichLog).auto_scroll
        burst(app, typed)
        await until(pilot, lambda: query_of(detail) == typed, what=f"{typed!r} in the query line", timeout=5)
        assert app.screen is detail  # no limits, kill or restart dialog on top
        assert detail.query_one("#stream", RichLog).auto_scroll == following  # `f` did not toggle follow
        await pilot.press("enter")
        assert detail.search.active
    assert console_actions(lw, sid) == []
    assert lw.status(sid)["state"] == "running"
    lw.request("kill", session=sid)


async def test_sessions_filter_takes_every_key_typed_right_after_the_slash(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: sid in app.table.rows, what=f"the row of {sid}")
        sessions = app.screen
        burst(app, "Kill Restart limits")
        box = app.screen.query_one("#filter", Input)
        await until(pilot, lambda: box.value == "Kill Restart limits", what="the words in the filter", timeout=5)
        await until(pilot, lambda: app.table.filter_text == "Kill Restart limits", what="the table filtered")
        assert app.screen is sessions  # no kill, restart or limits dialog
    assert console_actions(lw, sid) == []
    lw.request("kill", session=sid)


async def test_spill_viewer_search_takes_every_key_typed_right_after_the_slash(tmp_path: Path) -> None:
    viewer = SpillViewer(str(spill_file(tmp_path)))
    async with ScreenApp(viewer).run_test(size=SIZE) as pilot:
        await until(pilot, lambda: viewer.loaded, what="the file read")
        burst(pilot.app, "Error yes")
        await until(pilot, lambda: query_of(viewer) == "Error yes", what="the words in the query line", timeout=5)
        assert pilot.app.screen is viewer


async def test_help_search_takes_every_key_typed_right_after_the_slash(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        help_screen = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None,
                                  what="the help")
        burst(app, "quit Kill")
        await until(pilot, lambda: query_of(help_screen) == "quit Kill", what="the words in the query line", timeout=5)
        assert app.screen is help_screen and app.is_running
