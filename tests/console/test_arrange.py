"""Arranging the sessions table: grouped by project or tag (G), tags from `run --tag` and `set`, the saved view."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from loopwarden.widgets.app import ConsoleApp
from loopwarden.widgets.saved_view import View, save
from tests.console.helpers import RecordingConsole, cell, sleeper, status_text, until
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.anyio

SIZES = [(160, 48), (80, 24)]
SLEEP = (PY, "-c", "import time; time.sleep(60)")


def drawn(app: ConsoleApp, sid: str) -> str:
    """The row of `sid` as the table draws it (the GROUP cell is drawn, not kept in the row)."""
    table = app.table
    return table.render_line(1 + table.get_row_index(sid) - int(table.scroll_y)).text


async def press_until_grouped(pilot: Any, app: ConsoleApp, by: str | None) -> None:
    for _ in range(6):
        if app.table.group_by == by:
            return
        await pilot.press("G")
    raise AssertionError(f"G never grouped by {by}")


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
async def test_grouped_by_project_the_rows_of_each_working_directory_go_together(
        lw: Harness, tmp_path: Path, size: tuple[int, int]) -> None:
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    a1 = sleeper(lw, cwd=alpha)
    b1 = sleeper(lw, cwd=beta)
    a2 = sleeper(lw, cwd=alpha)  # by id, the two of alpha are apart
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: all(s in app.table.rows for s in (a1, b1, a2)), what="every row")
        assert [r.key.value for r in app.table.ordered_rows] == [a1, b1, a2]
        await press_until_grouped(pilot, app, "project")
        await until(pilot, lambda: "group: project (G)" in status_text(app), what="the status line")
        assert [r.key.value for r in app.table.ordered_rows] == [a1, a2, b1]
        assert "alpha (2)" in drawn(app, a1) and "beta (1)" in drawn(app, b1)
        assert "alpha" not in drawn(app, a2)  # the group is named on its first row only
        await press_until_grouped(pilot, app, None)  # round the cycle: no grouping, no GROUP column
        assert [r.key.value for r in app.table.ordered_rows] == [a1, b1, a2] and "(2)" not in drawn(app, a1)
    for sid in (a1, b1, a2):
        lw.request("kill", session=sid)


async def test_tags_from_run_and_set_show_and_group_the_rows(lw: Harness) -> None:
    tagged = lw.cli("run", "--detach", "--adapter", "plain", "--tag", "team-a", "--", *SLEEP).stdout.strip()
    other = lw.cli("run", "--detach", "--adapter", "plain", "--", *SLEEP).stdout.strip()
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: cell(app, tagged, "tags") == "team-a", what="the tag in the TAGS column")
        assert cell(app, other, "tags") == "-"
        assert lw.cli("set", other, "tag=team-a", "tag=urgent").returncode == 0
        await until(pilot, lambda: cell(app, other, "tags") == "team-a,urgent", what="the tags set live")
        await press_until_grouped(pilot, app, "tag")
        await until(pilot, lambda: "team-a (1)" in drawn(app, tagged) and "team-a,urgent (1)" in drawn(app, other),
                    what="a group per set of tags")
        await pilot.press("slash", *"urgent", "enter")  # the filter matches tags too
        await until(pilot, lambda: tagged not in app.table.rows and other in app.table.rows, what="the filter")
    for sid in (tagged, other):
        lw.request("kill", session=sid)


async def test_the_view_is_restored_in_a_new_console_and_a_corrupt_file_gives_the_defaults(lw: Harness) -> None:
    sid = sleeper(lw, name="kept-view")
    first = RecordingConsole(lw.paths, autostart=False)
    async with first.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: sid in first.table.rows, what="the row")
        await press_until_grouped(pilot, first, "project")
        await pilot.press("s", "S", "h", "slash", *"kept", "enter")
        saved = lw.paths.console_view
        await until(pilot, lambda: saved.exists() and json.loads(saved.read_text())["filter_text"] == "kept",
                    what="the view saved")
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600 and stat.S_IMODE(saved.parent.stat().st_mode) == 0o700
    assert json.loads(saved.read_text()) == {"group_by": "project", "sort_by": "attention", "sort_reverse": True,
                                             "filter_text": "kept", "hide_ended": True}

    second = RecordingConsole(lw.paths, autostart=False)
    async with second.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: sid in second.table.rows, what="the row")
        table = second.table
        assert (table.group_by, table.sort_by, table.sort_reverse, table.filter_text, table.hide_ended) == \
               ("project", "attention", True, "kept", True)
        await until(pilot, lambda: "group: project (G)" in status_text(second) and "filter: 'kept'" in
                    status_text(second), what="the status line to say so")

    saved.write_text('{"group_by": "planet", ')
    third = RecordingConsole(lw.paths, autostart=False)
    async with third.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: sid in third.table.rows, what="the row")
        assert (third.table.group_by, third.table.sort_by, third.table.filter_text) == (None, "id", "")
        [note] = [n for n in third.notices if "saved console view" in n]
        assert "is not usable" in note and "using the defaults" in note and "\n" not in note
    lw.request("kill", session=sid)


async def test_a_read_only_console_reads_the_saved_view_but_never_writes_it(lw: Harness) -> None:
    """`web --read-only` runs a read-only console as the operator: a viewer's arranging must not become the
    operator's saved view."""
    sid = sleeper(lw, name="watched")
    saved = lw.paths.console_view
    assert save(saved, View(sort_by="runtime")) is None
    before = saved.read_text()
    app = RecordingConsole(lw.paths, autostart=False, read_only=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: sid in app.table.rows, what="the row")
        assert app.table.sort_by == "runtime"  # read
        await press_until_grouped(pilot, app, "project")
        assert app.views is not None
        await until(pilot, lambda: app.views.saved == View.of(app.table), what="the view taken as kept")
    assert saved.read_text() == before
    lw.request("kill", session=sid)
