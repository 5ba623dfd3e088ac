"""A host that goes away keeps its rows' last known state, marked stale and since when (not wiped).

Two real daemons on this machine: the second is attached as if it were another host, so the test needs
no sshd; its daemon is killed to make that host go away.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.runtime.hosts import LOCAL
from loopwarden.widgets.feed import Feed
from loopwarden.widgets.hosts_feed import HostsFeed
from tests.console.helpers import RecordingConsole, cell, sleeper, until
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio


async def test_a_lost_hosts_rows_keep_their_last_state_marked_stale(lw: Harness, tmp_path: Path) -> None:
    other = Harness(tmp_path / "other")
    other.home.mkdir()
    with other.not_keeping():
        theirs = sleeper(other)
        key = f"away:{theirs}"
        feed = HostsFeed({LOCAL: Feed(lw.paths, autostart=False), "away": Feed(other.paths, autostart=False)})
        app = RecordingConsole(lw.paths, autostart=False, feed=feed)
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: cell(app, key, "state") == "running", what="the other host's session")
            assert other.daemon is not None
            other.daemon.kill()  # gone at once, as a host whose link drops: no last word from it
            other.daemon.wait(10)
            await until(pilot, lambda: "stale" in cell(app, key, "state"), what="its row marked stale")
            state = app.table.get_cell(key, "state")
            assert state.plain.startswith("running"), state.plain  # the last known state, not replaced
            assert "host lost" in state.plain and "ago" in state.plain  # and since when
            name = app.table.get_cell(key, "name")
            assert any("dim" in str(span.style) for span in name.spans)  # the whole row is dimmed
