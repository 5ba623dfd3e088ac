"""The user config (config.toml in the profile's config directory) in the console: keys rebound, a theme, launch
defaults per project, and a file that cannot be taken said in one line while the console opens on its defaults."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Checkbox, DataTable, Input, Label, Select

from loopwarden.widgets.dialogs import Confirm, ConfirmWithReason, Launch
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.help import Help
from tests.console.helpers import RecordingConsole, sleeper, until
from tests.console.test_actions import page_text, select
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio

SIZES = [(160, 48), (80, 24)]


def write_config(lw: Harness, text: str) -> Path:
    path = lw.paths.config_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize("size", SIZES)
async def test_a_rebound_key_acts_and_the_old_one_no_longer_does(lw: Harness, size: tuple[int, int]) -> None:
    write_config(lw, '[console.keys]\nkill = "ctrl+x"\n')
    sid = sleeper(lw)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await select(pilot, app, sid)
        await pilot.press("K")  # kill's old key
        await pilot.pause()
        assert not app.screen_stack[1:], "the old key still opened a dialog"
        await pilot.press("ctrl+x")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="the kill dialog on the new key")
        assert f"Kill session {sid}" in page_text(dialog)
        await pilot.press("escape")
        await pilot.press("question_mark")  # the help names the key the user chose
        helped = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None, what="the help")
        kill_line = next(line for line in page_text(helped).splitlines() if line.rstrip().endswith("Kill"))
        assert "ctrl+x" in kill_line and "K" not in kill_line.replace("Kill", "")
        assert not [n for n in app.notices if "user config" in n]
    assert lw.status(sid)["state"] == "running"
    lw.request("kill", session=sid)


async def test_a_rebound_key_moves_in_the_gates_queue_too(lw: Harness) -> None:
    write_config(lw, '[console.keys]\napprove = "ctrl+a"\n')
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZES[0]) as pilot:
        await until(pilot, lambda: f"{sid}:g1" in {g["ref"] for g in app.gates}, what="the gate")
        await pilot.press("g")
        queue = await until(pilot, lambda: app.screen if isinstance(app.screen, GatesQueue) else None, what="queue")
        await until(pilot, lambda: f"{sid}:g1" in queue.query_one("#gates", DataTable).rows, what="the gate row")
        await pilot.press("a")
        await pilot.pause()
        assert app.screen is queue, "the old key still asked to approve"
        await pilot.press("ctrl+a")
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the approval question on the new key")
        await pilot.press("escape")
    lw.request("kill", session=sid)


@pytest.mark.parametrize("size", SIZES)
async def test_the_theme_is_applied(lw: Harness, size: tuple[int, int]) -> None:
    write_config(lw, '[console]\ntheme = "nord"\n')
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.feed.connected, what="the feed")
        assert app.theme == "nord"


async def test_what_cannot_be_taken_warns_in_one_line_each_and_keeps_the_default(lw: Harness) -> None:
    write_config(lw, '[console]\ntheme = "nordd"\n[console.keys]\napprove = "q"\nkil = "ctrl+x"\n')
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZES[1]) as pilot:
        await until(pilot, lambda: len([n for n in app.notices if n.startswith("user config")]) == 3,
                    what="three warnings")
        said = [n for n in app.notices if n.startswith("user config")]
        assert all("\n" not in n for n in said)
        assert any("console.theme: unknown theme 'nordd' (did you mean nord?)" in n for n in said)
        assert any("console.keys.approve: 'q' is already quit's key; the default is kept" in n for n in said)
        assert any("console.keys.kil: unknown action (did you mean kill?)" in n for n in said)
        assert app.theme == "textual-dark" and app.keymap == {}


@pytest.mark.parametrize("size", SIZES)
async def test_a_bad_toml_file_is_one_line_naming_file_and_line_and_the_console_opens(
        lw: Harness, size: tuple[int, int]) -> None:
    path = write_config(lw, '[console]\ntheme = "nord\n')
    sid = sleeper(lw)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await select(pilot, app, sid)  # the table is there, with the session
        error = next(n for n in app.notices if n.startswith("user config"))
        assert str(path) in error and "line 2" in error and "\n" not in error
        assert app.theme == "textual-dark"
    lw.request("kill", session=sid)


@pytest.mark.parametrize("size", SIZES)
async def test_the_launch_dialog_starts_from_the_deepest_projects_defaults(lw: Harness, size: tuple[int, int]) -> None:
    here = Path.cwd()
    write_config(lw, f'[projects."{here.parent}"]\nadapter = "native"\nlimits.max_runtime = "3h"\n\n'
                     f'[projects."{here}"]\nadapter = "plain"\nworktree = false\nlimits.max_runtime = "2h"\n')
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.feed.connected, what="the feed")
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        assert dialog.query_one("#adapter", Select).value == "plain"
        assert dialog.query_one("#worktree", Checkbox).value is False
        said = str(dialog.query_one("#project", Label).render())
        box = dialog.query_one(".dialog")
        for line in ("#project", ".keys"):  # shown, at 80x24 too
            assert box.region.contains_region(dialog.query_one(line).region), line
        assert said == f"project defaults from {here}: adapter plain, worktree off, limits.max_runtime=2h"
        dialog.query_one("#command", Input).value = f"{sys.executable} -c 'import time; time.sleep(60)'"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, Launch), what="the dialog to close")
        snap = await until(pilot, lambda: next(iter(app.snapshots.values()), None), what="the session")
    status = lw.status(snap["id"])
    assert status["max_runtime"] == 7200 and status["adapter"] == "plain"
    lw.request("kill", session=snap["id"])
