"""The console served to a browser hands nothing of textual-serve's environment to the sessions it launches."""

from __future__ import annotations

import os

import pytest

from loopwarden.web.console import SERVED_ENV, ServedConsole
from loopwarden.widgets.app import Sessions
from tests.support.daemon import Harness


@pytest.mark.anyio
async def test_the_served_console_drops_textual_serves_variables_once_mounted(lw: Harness,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SERVED_ENV:
        monkeypatch.setenv(name, "from-textual-serve")
    monkeypatch.setenv("LOOPWARDEN_KEEP_ME", "yes")  # the near miss: the rest of the environment stays
    app = ServedConsole(lw.paths, autostart=False, client="web", title="web")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, Sessions) and app.feed.client == "web"
        assert app.feed.wait_ready(15) and app.feed.connected  # the console's own on_mount ran too: it is fed
        assert [name for name in SERVED_ENV if name in os.environ] == []
        assert os.environ["LOOPWARDEN_KEEP_ME"] == "yes"
