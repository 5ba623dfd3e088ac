"""The sessions table on its own: markup-safe cells, cursor kept across sorts and filters, keys, click, enter."""

from __future__ import annotations

import time
from typing import Any

import pytest
from textual import on
from textual.app import App, ComposeResult

from loopwarden.widgets.session_table import COLUMN_HELP, COLUMNS, SORTS, SessionTable, matches, row_cells

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


def test_interventions_say_what_was_done_and_a_session_left_alone_shows_a_dash() -> None:
    cells = row_cells(snap("s1", interventions={"spill": 1, "nudge": 2, "block": 1, "gate": 1}), NOW)
    assert str(cells["interventions"]) == "nudged 2 blocked 1 gated 1 spilled 1"
    assert str(row_cells(snap("s2"), NOW)["interventions"]) == "-"


def test_ended_is_told_in_words_and_an_ended_session_has_no_memory_figure() -> None:
    exited = row_cells(snap("s1", state="exited", exit_code=-9, rss=40 << 20), NOW)
    assert str(exited["reason"]) == "killed by SIGKILL"
    assert str(exited["mem"]) == "-"  # the last sample of a process that is gone
    assert str(row_cells(snap("s2", state="exited", exit_code=0), NOW)["reason"]) == "exited 0"
    lost = row_cells(snap("s3", state="lost", termination="lost"), NOW)
    assert str(lost["reason"]) == "daemon restarted"  # STATE already says lost
    assert str(row_cells(snap("s4", rss=40 << 20), NOW)["mem"]) == "40M"


async def test_sort_direction_is_in_the_header_and_reverses() -> None:
    app = TableApp()
    async with app.run_test(size=(160, 14)) as pilot:
        table = app.query_one(SessionTable)
        snaps = {f"s{i}": snap(f"s{i}", name=f"job{i}", tool_calls=i % 4) for i in range(1, 12)}
        table.show(snaps, set(snaps))
        await pilot.pause()
        assert screen_text(table)[0].split()[0] == "ID" and "ID ▲" in screen_text(table)[0]
        table.resort(snaps, "calls")
        await pilot.pause()
        assert "CALLS ▼" in screen_text(table)[0] and "ID ▲" not in screen_text(table)[0]
        assert table.sort_text == "calls ▼"
        table.resort(snaps, "calls", reverse=True)
        await pilot.pause()
        assert "CALLS ▲" in screen_text(table)[0]
        assert [snaps[sid]["tool_calls"] for sid in table._order] == sorted(s["tool_calls"] for s in snaps.values())
        table.resort(snaps, "name", reverse=False)  # natural: job2 before job10
        assert [r.key.value for r in table.ordered_rows][:3] == ["s1", "s2", "s3"]
        assert table.get_row_index("s10") == 9
        table.resort(snaps, "id", reverse=True)
        assert table.selected_id() is not None and table.ordered_rows[0].key.value == "s11"


async def test_hide_ended_leaves_out_the_sessions_that_ended() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(SessionTable)
        snaps = {"s1": snap("s1"), "s2": snap("s2", state="exited", exit_code=0),
                 "s3": snap("s3", state="terminated", termination="operator"), "s4": snap("s4", state="gated")}
        table.show(snaps, set(snaps))
        table.hide_ended = True
        table.rebuild(snaps)
        await pilot.pause()
        assert set(table.rows) == {"s1", "s4"}
        snaps["s1"] = {**snaps["s1"], "state": "exited", "exit_code": 1}  # ends while hidden ones are hidden
        table.show(snaps, {"s1"})
        assert set(table.rows) == {"s4"}
        table.hide_ended = False
        table.rebuild(snaps)
        assert set(table.rows) == {"s1", "s2", "s3", "s4"}


async def test_j_and_k_move_the_cursor() -> None:
    app = TableApp()
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(SessionTable)
        table.focus()
        snaps = {f"s{i}": snap(f"s{i}") for i in range(1, 5)}
        table.show(snaps, set(snaps))
        await pilot.pause()
        await pilot.press("j", "j")
        assert table.selected_id() == "s3"
        await pilot.press("k")
        assert table.selected_id() == "s2"


def test_every_column_is_explained_in_the_help() -> None:
    assert [key for key, _ in COLUMNS] == list(COLUMN_HELP)


def test_the_runtime_sort_counts_on_for_a_quiet_live_session() -> None:
    now = time.time()
    old_quiet = snap("s1", started_at=now - 100, runtime=5.0)  # gated: no snapshot since 5 s in
    young_busy = snap("s2", started_at=now - 10, runtime=9.0)
    ended = snap("s3", state="exited", exit_code=0, started_at=now - 500, runtime=50.0)
    assert sorted([young_busy, ended, old_quiet], key=SORTS["runtime"]) == [old_quiet, ended, young_busy]


def test_the_memory_sort_puts_ended_sessions_with_the_idle_ones() -> None:
    ended = snap("s1", state="exited", exit_code=0, rss=900 << 20)  # its MEM cell says -
    live = snap("s2", rss=40 << 20)
    assert sorted([ended, live], key=SORTS["mem"]) == [live, ended]


def test_the_filter_finds_the_words_the_ended_column_shows() -> None:
    signalled = snap("s1", state="exited", exit_code=-9)
    timed_out = snap("s2", state="terminated", termination="max_runtime")
    assert matches(signalled, "SIGKILL") and matches(signalled, "killed") and not matches(timed_out, "sigkill")
    assert matches(timed_out, "max runtime") and matches(timed_out, "max_runtime")
