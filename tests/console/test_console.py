"""The console, driven by Textual's Pilot, against a real daemon with scripted sessions."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console as RichConsole
from textual.command import CommandList, CommandPalette
from textual.containers import VerticalScroll
from textual.widgets import Static

from loopwarden.widgets.app import ACTION_KEYS, ConsoleApp
from loopwarden.widgets.dialogs import Confirm, ConfirmWithReason
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.help import Help, key_names
from loopwarden.widgets.session_table import COLUMNS, SessionTable
from tests.console.frozen import GATES, NOW, SESSIONS, FrozenFeed, _snap
from tests.console.helpers import cell, key_of, sleeper, status_text, until
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio  # async tests run on anyio's pytest plugin (asyncio backend)


async def test_sessions_appear_live_with_their_state(lw: Harness) -> None:
    sid = lw.scenario("repetition")
    app = ConsoleApp(lw.paths, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: sid in app.query_one("#sessions", SessionTable).rows, what="the session's row")
        await until(pilot, lambda: cell(app, sid, "state") == "terminated", what="the final state")
        assert cell(app, sid, "reason") == "repeated calls"  # the state says terminated
        assert cell(app, sid, "interventions") == "nudged 1 blocked 3"
        assert cell(app, sid, "name") == "repetition"


async def test_approve_the_selected_sessions_gate(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    app = ConsoleApp(lw.paths, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: cell(app, sid, "gates") == "1", what="the gate in the table")
        await pilot.press(key_of(app, "approve"))
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the approval question")
        await pilot.press("y")
        await until(pilot, lambda: cell(app, sid, "state") in ("exited",), what="the session to finish")
    actions = lw.request("actions", session=sid)
    assert [a["action"] for a in actions if a["action"] == "approve"] == ["approve"]
    assert actions[-1]["client"].startswith("console pid ")


async def test_kill_asks_first_and_no_keeps_the_session(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = ConsoleApp(lw.paths, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: cell(app, sid, "state") == "running", what="the running row")
        await pilot.press(key_of(app, "kill"))
        await until(pilot, lambda: isinstance(app.screen, ConfirmWithReason), what="the kill question")
        await pilot.press("escape")
        await until(pilot, lambda: not app.screen_stack[1:], what="the question to close")
        assert lw.status(sid)["state"] == "running"
        await pilot.press(key_of(app, "kill"))
        await until(pilot, lambda: isinstance(app.screen, ConfirmWithReason), what="the kill question")
        await pilot.press("enter")
        await until(pilot, lambda: cell(app, sid, "state") == "terminated", what="the kill")
    assert lw.status(sid)["termination"] == "operator"


async def test_read_only_refuses_every_mutating_key(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = ConsoleApp(lw.paths, read_only=True, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: cell(app, sid, "state") == "running", what="the running row")
        for key in (k.strip() for b in ACTION_KEYS if hasattr(b, "key") for k in b.key.split(",")):
            await pilot.press(key)
        await pilot.pause(0.3)
        assert not app.screen_stack[1:]  # no confirmation was even offered
    assert lw.status(sid)["state"] == "running"
    assert [a["action"] for a in lw.request("actions", session=sid)] == ["run"]
    lw.request("kill", session=sid)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
def test_supervisor_never_imports_textual(anyio_backend: str) -> None:
    import subprocess
    import sys

    code = ("import sys, pkgutil, importlib, loopwarden.supervisor as s\n"
            "for m in pkgutil.walk_packages(s.__path__, 's.'.replace('s.', 'loopwarden.supervisor.')):\n"
            "    importlib.import_module(m.name)\n"
            "print(sorted(k for k in sys.modules if k == 'textual' or k.startswith('textual.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"



def frozen(sessions: list[dict[str, Any]] = SESSIONS) -> ConsoleApp:
    """The console on a fixed state, no daemon: for what the console does with what it was sent."""
    return ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(sessions), clock=lambda: NOW)  # type: ignore[arg-type]


async def test_escape_clears_the_filter_when_the_table_has_focus() -> None:
    app = frozen()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        await pilot.press("slash", *"fix", "enter")
        await until(pilot, lambda: set(app.table.rows) == {"s2"}, what="the filter")
        assert app.focused is app.table and "esc clears" in status_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the filter cleared")
        assert app.table.filter_text == "" and "filter" not in status_text(app)


async def test_a_draw_while_the_status_line_is_not_mounted_is_skipped_not_an_error() -> None:
    """The draw timer can fire between the table's mount and the status line's (or while closing): CI saw NoMatches."""
    app = frozen()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        line = app.main.query_one("#status", Static)
        await line.remove()
        app.draw()  # raised NoMatches before the fix
        assert app.table.row_count == len(SESSIONS)
        await app.main.mount(Static(id="status"), before=app.main.query_one("KeyBar"))
        await until(pilot, lambda: f"{len(SESSIONS)} sessions" in status_text(app), what="the status line again")


async def test_sort_reverses_and_ended_sessions_hide_with_the_count_in_the_status_line() -> None:
    app = frozen()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        assert "sort: id ▲" in status_text(app)
        await pilot.press("S")
        assert "sort: id ▼" in status_text(app) and app.table.ordered_rows[0].key.value == "s6"
        await pilot.press("s")  # the next order starts in its own direction
        assert "sort: attention ▲" in status_text(app) and app.table.ordered_rows[0].key.value == "s3"
        await pilot.press("h")
        ended = {s["id"] for s in SESSIONS if s["state"] in ("exited", "terminated", "lost")}
        assert set(app.table.rows) == {s["id"] for s in SESSIONS} - ended
        assert f"{len(ended)} ended hidden (h shows)" in status_text(app)
        await pilot.press("h")
        assert app.table.row_count == len(SESSIONS) and "hidden" not in status_text(app)


async def palette_lines(pilot: Any, app: ConsoleApp, at_least: int) -> list[str]:
    """Open the command palette and read the first line of each command it lists, once it lists `at_least`."""
    await pilot.press("ctrl+p")
    palette = await until(pilot, lambda: app.screen if isinstance(app.screen, CommandPalette) else None,
                          what="the palette")
    commands = palette.query_one(CommandList)
    await until(pilot, lambda: commands.option_count >= at_least, what="the palette's commands")
    return [str(commands.get_option_at_index(i).prompt).split("\n")[0] for i in range(commands.option_count)]


async def test_the_palette_offers_filter_sorts_help_and_sessions_in_numeric_order() -> None:
    many = [_snap(f"s{i}", f"job-{i}", "running") for i in range(1, 13)]
    app = frozen(many)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == 12, what="the sessions")
        titles = [title for title, _, _ in app.palette_commands(app.main)]
        for title in ("Filter the sessions", "Sort by runtime", "Sort by interventions", "Reverse the sort order",
                      "Hide ended sessions", "Help: every key and column", "Kill", "New"):
            assert title in titles, title
        opens = [t.split()[1] for t in titles if t.startswith("Open ")]
        assert opens == [f"s{i}" for i in range(1, 13)]
        shown = await palette_lines(pilot, app, len(titles))
        listed = [line.split()[1] for line in shown if line.startswith("Open ")]
        assert listed == opens, "s10 after s9, not after s1"
        await pilot.press(*"sort by calls", "enter")
        await until(pilot, lambda: app.table.sort_by == "calls", what="the sort chosen in the palette")


async def test_help_explains_every_column_and_the_detail_keys() -> None:
    app = frozen()
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        await pilot.press("question_mark")
        help_screen = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None,
                                  what="the help")
        console = RichConsole(width=200, record=True, file=io.StringIO())
        for static in help_screen.query(Static):
            console.print(static.content)
        text = console.export_text()
        for _, label in COLUMNS:
            assert label in text, label
        for words in ("Session detail", "Stderr", "Follow", "Open spill", "Gates queue", "ctrl+k, K",
                      "up, k", "down, j", "Reverse sort", "Hide ended", "esc"):
            assert words in text, words
        box = help_screen.query_one(VerticalScroll)
        await pilot.press("j", "j", "j")
        await until(pilot, lambda: box.scroll_y == 3, what="j to scroll the help")
        await pilot.press("k")
        await until(pilot, lambda: box.scroll_y == 2, what="k to scroll it back")


class TwoGates(FrozenFeed):
    def request(self, op: str, **fields: Any) -> Any:
        if op == "gates":
            return [{**GATES[0], "ref": "s3:g1"}, {**GATES[0], "ref": "s3:g2", "id": "g2", "opened_at": NOW - 5}]
        return super().request(op, **fields)


async def test_j_and_k_move_through_the_gates_queue() -> None:
    two = [{**s, "pending_gates": ["g1", "g2"]} if s["id"] == "s3" else s for s in SESSIONS]
    app = ConsoleApp(Path("/nonexistent"), feed=TwoGates(two), clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: len(app.gates) == 2, what="the gates")
        await pilot.press("g")
        queue = await until(pilot, lambda: app.screen if isinstance(app.screen, GatesQueue) else None,
                            what="the gates queue")
        await until(pilot, lambda: (queue.selected() or {}).get("ref") == "s3:g1", what="the first gate")
        await pilot.press("j")
        assert (queue.selected() or {}).get("ref") == "s3:g2"
        await pilot.press("k")
        assert (queue.selected() or {}).get("ref") == "s3:g1"


class GatesOnceTakenUp(FrozenFeed):
    """A daemon that lists a gate the first snapshot names only from its second answer on: the gate's session was
    still being taken up (the first snapshot is its stored row)."""

    answers = 0

    def request(self, op: str, **fields: Any) -> Any:
        if op == "gates":
            self.answers += 1
            return [{**GATES[0], "changes": None}] if self.answers > 1 else []
        return super().request(op, **fields)


async def test_a_gate_a_snapshot_names_that_the_daemon_does_not_list_yet_is_read_again() -> None:
    feed = GatesOnceTakenUp()
    app = ConsoleApp(Path("/nonexistent"), feed=feed, clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: feed.answers >= 1, what="the gates read once")
        await until(pilot, lambda: [g["ref"] for g in app.gates] == ["s3:g1"], timeout=10,
                    what="the gate read again, with no new snapshot")


async def test_the_palette_lists_the_consoles_commands_before_textuals() -> None:
    app = frozen()
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        shown = await palette_lines(pilot, app, 20)
        assert shown[0] == "Filter the sessions"
        assert shown.index("Theme") > shown.index("Open s6 nightly-build")


def test_the_help_and_the_palette_name_keys_the_same_way() -> None:
    assert key_names("escape,q,question_mark", ", ") == "esc, q, ?"  # the help's key column
    assert key_names("ctrl+k,K") == "ctrl+k or K" and key_names("slash") == "/" and key_names("escape") == "esc"
