"""The console's link to the daemon: lost, retried seconds apart at most, found again; actions refused meanwhile."""

from __future__ import annotations

import re
import sys
import time
from typing import Any

import pytest
from textual.widgets import Input, RichLog, Static

from loopwarden.paths import HOME_ENV, default_paths
from loopwarden.runtime import client
from loopwarden.runtime.store import Batch, Store
from loopwarden.widgets.feed import Feed
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.dialogs import Launch
from tests.console.helpers import RecordingConsole, cell, key_of, sleeper, until
from tests.support.daemon import Harness
from tests.support.waiting import wait_for

pytestmark = pytest.mark.anyio

SIZE = (160, 40)


def attempt(status: Static) -> int:
    """The attempt the status line counts (0 when it counts none)."""
    found = re.search(r"\(attempt (\d+)\)", str(status.render()))
    return int(found.group(1)) if found else 0


async def test_a_restarted_daemon_is_reconnected_and_actions_wait_for_it(lw: Harness) -> None:
    before = sleeper(lw)
    lw.wait_state(before, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        status = app.main.query_one("#status", Static)
        await until(pilot, lambda: app.feed.connected and cell(app, before, "state") == "running", what="the row")
        lw.stop()
        await until(pilot, lambda: "daemon gone — reconnecting (attempt" in str(status.render()),
                    what="the status line to say the daemon is gone")
        await pilot.press(key_of(app, "launch"))
        await until(pilot, lambda: any("not connected to the daemon" in n for n in app.notices),
                    what="the launch to be refused")
        assert not app.screen_stack[1:]  # refused at once: no dialog whose request would go nowhere
        await until(pilot, lambda: attempt(status) >= 3, timeout=10, what="three attempts within seconds")

        lw.start()
        await until(pilot, lambda: "reconnected" in str(status.render()), what="the status line to say reconnected")
        assert any("reconnected to the daemon" in n for n in app.notices)
        stopped = lw.status(before)["state"]  # what the new daemon knows of the old session
        await until(pilot, lambda: cell(app, before, "state") == stopped, what="the sessions to refresh")

        await pilot.press(key_of(app, "launch"))  # a session launched now appears in this console
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        dialog.query_one("#command", Input).value = f"{sys.executable} -m loopwarden.sessions.scripted healthy"
        dialog.query_one("#name", Input).value = "after-the-restart"
        await pilot.press("enter")
        await until(pilot, lambda: any(s.get("name") == "after-the-restart" for s in app.snapshots.values()),
                    what="the new session's row")


async def test_a_console_started_before_its_daemon_connects_once_it_runs(lw: Harness) -> None:
    lw.stop()
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        status = app.main.query_one("#status", Static)
        await until(pilot, lambda: "no daemon is running" in str(status.render())
                    and "retrying (attempt" in str(status.render()), what="the status line to say why")
        lw.start()
        sid = sleeper(lw)
        await until(pilot, lambda: cell(app, sid, "state") == "running", what="the session in the console")
        assert app.feed.connected
    lw.request("kill", session=sid)


async def open_detail(pilot: Any, app: RecordingConsole, sid: str) -> tuple[SessionDetail, RichLog]:
    """Enter on the session's row: its detail screen and the stream in it."""
    await until(pilot, lambda: sid in app.table.rows, what="the row")
    await pilot.press("enter")
    detail = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                         what="the detail")
    return detail, detail.query_one("#stream", RichLog)


async def test_an_open_detail_says_the_daemon_is_gone_and_follows_again_once_it_is_back(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        detail, stream = await open_detail(pilot, app, sid)
        await until(pilot, lambda: detail.feed is not None and detail.feed.connected, what="the detail's feed")
        lw.stop()
        await until(pilot, lambda: "daemon gone" in str(stream.border_subtitle), what="the detail to say so")
        lw.start()
        await until(pilot, lambda: "following" in str(stream.border_subtitle), what="the detail to follow again")


async def test_an_open_detail_reads_what_was_recorded_while_it_was_cut_off(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        detail, stream = await open_detail(pilot, app, sid)
        await until(pilot, lambda: detail.feed is not None and detail.feed.connected and detail.history_done,
                    what="the detail's history")
        lw.stop()
        await until(pilot, lambda: "daemon gone" in str(stream.border_subtitle), what="the detail to say so")
        with Store.open(lw.paths.database) as store:  # a record the live feed never carried: only the store has it
            store.write(Batch(actions=[{"ts": time.time(), "actor": "uid 0 (test)", "client": "cli pid 1",
                                        "session_id": sid, "action": "kill", "target": sid,
                                        "note": "written during the gap", "outcome": "ok"}]))
        lw.start()
        await until(pilot, lambda: any("written during the gap" in s.text for s in stream.lines),
                    what="the gap's record in the stream")
        assert any("reconnected to the daemon" in s.text for s in stream.lines)


def test_a_feed_starts_a_daemon_on_its_first_attempt_only(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    monkeypatch.setattr(client, "START_TIMEOUT", 0.5)  # the daemon below cannot start: give up on it soon
    paths = default_paths()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    paths.runtime.symlink_to(elsewhere)  # the daemon refuses a symlinked runtime directory and exits
    feed = Feed(paths, autostart=True)
    feed.start()
    try:
        wait_for(lambda: feed.attempt >= 3, what="three attempts")
        assert paths.daemon_log.exists()  # the first attempt did start one (its output goes there)
        assert feed.error is not None and "no daemon is running" in feed.error, feed.error  # not started again
    finally:
        feed.close()
