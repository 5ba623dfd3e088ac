"""The sessions table on its own: markup-safe cells, cursor kept across sorts and filters, keys, click, enter."""

from __future__ import annotations

from typing import Any

import pytest
from textual import on
from textual.app import App, ComposeResult

from loopwarden.widgets.session_table import SessionTable, row_cells

pytestmark = pytest.mark.anyio

NOW = 1_000_000.0


def snap(sid: str, name: str = "job", **extra: Any) -> dict[str, Any]:
    return {"id": sid, "name": name, "state": "running", "adapter": "plain", "started_at": NOW - 10, **extra}


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.clock = lambda: NOW
        self.selected: list[str] = []

    def compose(self) -> ComposeResult:
        yield SessionTable(id="sessions")

    @on(SessionTable.RowSelected, "#sessions")
    def chosen(self, event: SessionTable.RowSelected) -> None:
        self.selected.append(str(event.row_key.value))


def screen_text(table: SessionTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.scrollable_content_region.height)]


def test_cells_are_text_never_markup() -> None:
    cells = row_cells(snap("s1", name="[/]fix [red]it", state="terminated", termination="[b"), NOW)
    assert str(cells["name"]) == "[/]fix [red]it" and not cells["name"].spans
    assert str(cells["reason"]) == "[b"  # a reason this version does not know is shown as it is


async def test_markup_in_a_name_is_shown_as_typed() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(SessionTable)
        snaps = {"s1": snap("s1", name="[/]fix [red]it", termination="[/b]x")}
        table.show(snaps, {"s1"})
        await pilot.pause()
        assert "[/]fix [red]it" in screen_text(table)[1]
        assert str(table.get_cell("s1", "name")) == "[/]fix [red]it"


async def test_cursor_follows_its_session_and_keys_move_it() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(SessionTable)
        table.focus()
        snaps = {f"s{i}": snap(f"s{i}", name=f"n{i}", tool_calls=i) for i in range(1, 21)}
        table.show(snaps, set(snaps))
        await pilot.pause()
        assert table.row_count == 20 and table.selected_id() == "s1"
        await pilot.press("down", "down")
        assert table.selected_id() == "s3"
        table.resort(snaps, "calls")  # most calls first
        assert table.get_row_index("s20") == 0 and table.selected_id() == "s3"
        table.filter_text = "n1"
        table.rebuild(snaps)
        assert set(table.rows) == {"s1", "s10", "s11", "s12", "s13", "s14", "s15", "s16", "s17", "s18", "s19"}
        assert table.selected_id() in table.rows
        table.filter_text = ""
        table.rebuild(snaps)
        table.move_cursor(row=table.get_row_index("s3"))
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 19, screen_text(table)
        assert str(table.selected_id()) in screen_text(table)[-1], (table.size, table.scroll_y, screen_text(table))
        await pilot.press("home")
        assert table.cursor_row == 0
        await pilot.press("pagedown")
        assert table.cursor_row > 1
        await pilot.press("enter")
        await pilot.pause()
        assert app.selected == [table.selected_id()]


async def test_click_selects_and_a_second_click_opens() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(SessionTable)
        snaps = {f"s{i}": snap(f"s{i}") for i in range(1, 4)}
        table.show(snaps, set(snaps))
        await pilot.pause()
        await pilot.click(SessionTable, offset=(5, 3))  # the header, then s1, s2: s3
        assert table.selected_id() == "s3" and not app.selected
        await pilot.click(SessionTable, offset=(5, 3))
        await pilot.pause()
        assert app.selected == ["s3"]


async def test_a_tick_renders_only_the_rows_that_changed() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 30)) as pilot:
        table = app.query_one(SessionTable)
        snaps = {f"s{i}": snap(f"s{i}", tool_calls=1) for i in range(1, 21)}
        table.show(snaps, set(snaps))
        await pilot.pause()
        before = {sid: strip for sid, (_, strip) in table._line_cache.items()}
        snaps["s5"] = {**snaps["s5"], "tool_calls": 2}
        table.show(snaps, {"s5"})
        await pilot.pause()
        after = {sid: strip for sid, (_, strip) in table._line_cache.items()}
        assert [sid for sid in before if after[sid] is not before[sid]] == ["s5"]
