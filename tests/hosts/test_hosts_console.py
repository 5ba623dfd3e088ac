"""The console on two daemons at once, this machine's and one across a real sshd, driven by Pilot."""

from __future__ import annotations

import time

import pytest
from textual.widgets import DataTable

from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.dialogs import Confirm
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.hosts_feed import GONE, HostsFeed
from tests.console.helpers import RecordingConsole, cell, key_of, sleeper, status_text, until
from tests.hosts.sshd_harness import DEAD, Box
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio

SIZE = (180, 40)


def console(lw: Harness, *hosts: str) -> RecordingConsole:
    return RecordingConsole(lw.paths, autostart=False, feed=HostsFeed.attach(lw.paths, list(hosts), autostart=False))


async def test_sessions_of_both_hosts_by_host_and_a_gate_approved_on_the_remote(lw: Harness, box: Box) -> None:
    mine = sleeper(lw)
    theirs = box.remote.scenario("gate_request")
    box.remote.wait_state(theirs, "gated")
    gate = box.remote.status(theirs)["pending_gates"][0]
    key, ref = f"{box.host}:{theirs}", f"{box.host}:{theirs}:{gate}"
    assert mine == theirs  # both daemons number their own: the console's keys keep them apart
    started = time.monotonic()
    app = console(lw, box.host)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: key in app.table.rows and mine in app.table.rows, what="both hosts' sessions")
        print(f"\nboth hosts on screen {time.monotonic() - started:.2f}s after the console started")
        assert (cell(app, mine, "host"), cell(app, key, "host")) == ("local", box.host)
        assert cell(app, key, "id") == f"! {key}" and cell(app, key, "state") == "gated"
        assert cell(app, mine, "state") == "running"

        await until(pilot, lambda: ref in {g["ref"] for g in app.gates}, what="the remote gate in the queue")
        await pilot.press("g")
        queue = await until(pilot, lambda: app.screen if isinstance(app.screen, GatesQueue) else None, what="queue")
        await until(pilot, lambda: ref in queue.query_one("#gates", DataTable).rows, what=f"{ref} in the queue")
        await pilot.press(key_of(app, "approve"))
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the approval question")
        await pilot.press("y")
        await until(pilot, lambda: box.remote.status(theirs)["pending_gates"] == [], what="the remote approval")
        await until(pilot, lambda: cell(app, key, "id") == f"  {key}", what="the row to stop asking for a human")
    [approve] = [a for a in box.remote.request("actions", session=theirs) if a["action"] == "approve"]
    assert approve["target"] == f"{theirs}:{gate}" and approve["client"].startswith("console pid ")
    assert [a["action"] for a in lw.request("actions", session=mine)] == ["run"]  # nothing decided here
    assert lw.status(mine)["state"] == "running"


async def test_a_remote_daemon_restarted_shows_its_host_gone_then_its_new_state(lw: Harness, box: Box) -> None:
    mine = sleeper(lw)
    before = sleeper(box.remote)
    key = f"{box.host}:{before}"
    app = console(lw, box.host)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: cell(app, key, "state") == "running", what="the remote session")
        assert box.remote.cli("stop-daemon", "--yes").returncode == 0
        await until(pilot, lambda: "· stale, host lost" in cell(app, key, "state"),
                    what="its row: last state, stale")
        await until(pilot, lambda: f"{box.host}: {GONE} (attempt" in status_text(app), what="the status line")
        assert cell(app, mine, "state") == "running" and app.feed.connected  # this machine's stays live
        assert f"host {box.host}: {GONE}" in app.notices

        box.remote.start()  # returns once its socket answers
        back = time.monotonic()
        await until(pilot, lambda: app.feed.feeds[box.host].connected, what="the host to be reconnected")
        print(f"\nremote host reconnected {time.monotonic() - back:.2f}s after its daemon answered again")
        after = sleeper(box.remote, name="after-the-restart")
        await until(pilot, lambda: cell(app, f"{box.host}:{after}", "state") == "running", what="the new session")
        assert cell(app, key, "state") not in ("", "running") and "stale" not in cell(app, key, "state")
        assert GONE not in status_text(app)
        await until(pilot, lambda: f"host {box.host} reconnected: its sessions and gates are current" in app.notices,
                    what="the toast that says it is back")

        app.table.move_cursor(row=app.table.get_row_index(f"{box.host}:{after}"))
        await pilot.press("enter")  # the detail view reads the remote session through its host
        detail = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                             what="the detail")
        assert (detail.session_id, detail.session_key) == (after, f"{box.host}:{after}")
        await until(pilot, lambda: detail.history_done and detail.feed is not None and detail.feed.connected,
                    what="the remote session's history and stream")
        assert app.target() is not None and app.target()["id"] == f"{box.host}:{after}"


async def test_a_host_that_cannot_be_reached_is_said_and_the_others_work(lw: Harness, box: Box) -> None:
    mine = sleeper(lw)
    app = console(lw, DEAD)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: cell(app, mine, "state") == "running", what="this machine's session")
        await until(pilot, lambda: f"{DEAD}: ssh: connect to host" in status_text(app),
                    what="the status line to say why the host is not there, naming it once")
