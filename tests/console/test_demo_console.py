"""The demo's console (`loopwarden demo`): its header counts the agents, ctrl+r restarts the demo."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static

from loopwarden.widgets.app import ConsoleApp
from loopwarden.widgets.demo_console import DemoConsole
from loopwarden.widgets.dialogs import Confirm
from loopwarden.widgets.help import Help
from loopwarden.widgets.keybar import KeyBar
from loopwarden.supervisor.verdicts import FINAL_STATES
from tests.console.helpers import RecordingConsole, until
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.anyio

SIZE = (160, 40)


def round_of_two(cwd: Path) -> list[dict[str, Any]]:
    """Two scripted agents that keep working until stopped (a round of the demo, small)."""
    return [{"name": f"busy{i}", "adapter": "native", "cwd": str(cwd), "env": {},
             "command": [PY, "-m", "loopwarden.sessions.scripted", "max_runtime", "--pace", "0.2"],
             "sets": ["limits.max_runtime=10m"], "config_env": {}} for i in (1, 2)]


class RecordingDemo(RecordingConsole, DemoConsole):
    """The demo's console, also keeping every notification it showed."""


def live_ids(app: ConsoleApp) -> set[str]:
    return {sid for sid, s in app.snapshots.items() if s.get("state") not in FINAL_STATES}


def shown_actions(app: ConsoleApp) -> set[str]:
    return {description for _, _, description, _ in app.screen.query_one(KeyBar).shown_keys()}


async def test_ctrl_r_starts_a_round_then_asks_before_stopping_the_live_one_for_a_new(lw: Harness,
                                                                                      tmp_path: Path) -> None:
    app = DemoConsole(lw.paths, autostart=False, agents=2, new_round=lambda: round_of_two(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        assert app.sub_title == "demo · 2 scripted agents"  # before the first data: the round it launched
        assert "Restart demo" in shown_actions(app)
        await until(pilot, lambda: app.feed.connected, what="the link")  # actions are refused before it
        await pilot.press("ctrl+r")  # nothing live: no question, a round starts
        first = await until(pilot, lambda: live_ids(app) if len(live_ids(app)) == 2 else None, what="a round")
        await until(pilot, lambda: app.sub_title == "demo · 2 scripted agents, 2 live", what="the header")

        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the question")
        assert app.screen.question == "Restart the demo? 2 live session(s) stop, a new round starts."
        await pilot.press("y")
        await until(pilot, lambda: len(app.snapshots) == 4 and live_ids(app).isdisjoint(first)
                    and len(live_ids(app)) == 2, what="the old round stopped, a new one live")
        await until(pilot, lambda: app.sub_title == "demo · 4 scripted agents, 2 live", what="the header")
        await until(pilot, lambda: {r.key.value for r in app.table.ordered_rows[:2]} == live_ids(app),
                    what="the new round on top, not below the ended one")
    for sid in first:
        [kill] = [a for a in lw.request("actions", session=sid) if a["action"] == "kill"]
        assert kill["note"] == "demo restarted from the console"


async def test_no_answers_no_and_nothing_is_stopped(lw: Harness, tmp_path: Path) -> None:
    started = [lw.request("run", spec=spec)["id"] for spec in round_of_two(tmp_path)]
    app = DemoConsole(lw.paths, autostart=False, agents=2, new_round=lambda: round_of_two(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: live_ids(app) == set(started), what="the live round")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the question")
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, Confirm), what="the question to close")
    assert [s["id"] for s in lw.request("list")] == started
    assert all(lw.status(sid)["state"] not in FINAL_STATES for sid in started)


async def test_the_help_lists_the_restart_key(lw: Harness, tmp_path: Path) -> None:
    app = DemoConsole(lw.paths, autostart=False, agents=11, new_round=lambda: round_of_two(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        shown = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None, what="the help")
        assert ("Demo", [b for b in DemoConsole.BINDINGS if getattr(b, "action", "") == "restart_demo"]) \
            in shown.sections
        await until(pilot, lambda: shown.query(Static), what="the help's text")
        page = Console(width=120, record=True, file=io.StringIO())
        for widget in shown.query(Static):
            page.print(widget.content)
        text = page.export_text()
        assert "Restart demo" in text, text


async def test_a_watch_only_demo_console_has_no_restart_key(lw: Harness, tmp_path: Path) -> None:
    rounds: list[int] = []
    app = DemoConsole(lw.paths, autostart=False, read_only=True, agents=11,
                      new_round=lambda: rounds.append(1) or round_of_two(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        assert "Restart demo" not in shown_actions(app)
        await pilot.press("ctrl+r")
        await pilot.press("question_mark")
        shown = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None, what="the help")
        assert "Demo" not in [title for title, _ in shown.sections]
    assert rounds == [] and lw.request("list") == []


async def test_the_consoles_own_profile_has_no_restart_key(lw: Harness) -> None:
    app = ConsoleApp(lw.paths, autostart=False)
    async with app.run_test(size=SIZE):
        assert "Restart demo" not in shown_actions(app)
        assert "restart_demo" not in {b.action for b in app._bindings.key_to_bindings.get("ctrl+r", [])}


async def test_ctrl_r_is_refused_while_the_daemon_is_gone(lw: Harness, tmp_path: Path) -> None:
    started = [lw.request("run", spec=spec)["id"] for spec in round_of_two(tmp_path)]
    rounds: list[int] = []
    app = RecordingDemo(lw.paths, autostart=False, agents=2,
                        new_round=lambda: rounds.append(1) or round_of_two(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: live_ids(app) == set(started), what="the live round")
        lw.stop()
        await until(pilot, lambda: not app.feed.connected, what="the link to go")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: any("not connected to the daemon: cannot restart the demo" in n
                                       for n in app.notices), what="the restart to be refused")
        assert not app.screen_stack[1:]  # refused at once: no question whose requests would go nowhere
    assert rounds == []


async def test_a_console_opened_after_earlier_rounds_shows_the_live_round_first(lw: Harness, tmp_path: Path) -> None:
    old = [lw.request("run", spec=spec)["id"] for spec in round_of_two(tmp_path)]
    for sid in old:
        lw.request("kill", session=sid)
        lw.wait_state(sid, "terminated")
    new = {lw.request("run", spec=spec)["id"] for spec in round_of_two(tmp_path)}
    app = DemoConsole(lw.paths, autostart=False, agents=2, new_round=lambda: round_of_two(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.table.ordered_rows) == 4, what="every row")
        await until(pilot, lambda: {r.key.value for r in app.table.ordered_rows[:2]} == new, what="newest first")
        # the selection moves with them: kept on an old row, it scrolled the view down to the ended rounds
        assert app.table.selected_id() == app.table.ordered_rows[0].key.value
        assert app.table.scroll_y == 0
    for sid in new:
        lw.request("kill", session=sid)
