"""Acting on many: rows marked with space, shift+arrows, V and *, one confirmation listing them, a real daemon."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from loopwarden.widgets.dialogs import AskText, Confirm, ConfirmWithReason
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.selection import MARK
from tests.console.helpers import RecordingConsole, cell, sleeper, status_text, until
from tests.console.test_actions import console_actions, open_gates, page_text, select
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio

SIZES = [(160, 48), (80, 24)]


def gated(lw: Harness, count: int) -> list[str]:
    sids = [lw.scenario("gate_request") for _ in range(count)]
    for sid in sids:
        lw.wait_state(sid, "gated")
    return sids


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
async def test_marked_sessions_are_approved_after_one_confirmation_that_lists_them(
        lw: Harness, size: tuple[int, int]) -> None:
    first, second, third = gated(lw, 3)
    idle = sleeper(lw)  # marked too: it has no gate, so it is skipped, and the report says so
    refs = {sid: f"{sid}:{lw.status(sid)['pending_gates'][0]}" for sid in (first, second, third)}
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: idle in app.table.rows, what="every row")
        await select(pilot, app, first)
        await pilot.press("space")  # first marked; the anchor of a range
        await select(pilot, app, third)
        await pilot.press("V")  # first to third, in the table's order (by id)
        await pilot.press("shift+down")  # third and the sleeper below it
        assert app.table.marked == [first, second, third, idle]
        drawn = app.table.render_line(1 + app.table.get_row_index(first) - int(app.table.scroll_y)).text
        assert f"!{MARK}{first}" in drawn  # the mark beside the id, after the ! of a session waiting
        await until(pilot, lambda: "4 marked" in status_text(app), what="the count in the status line")
        await pilot.press("a")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Confirm) else None,
                             what="one confirmation")
        said = page_text(dialog)
        assert all(ref in said for ref in refs.values()) and f"skipped {idle}: no gate to approve" in said
        await pilot.press("y")
        await until(pilot, lambda: all(not lw.status(sid)["pending_gates"] for sid in refs), what="three approvals")
        await until(pilot, lambda: any(n.startswith("approve on 3 of 4") for n in app.notices), what="the report")
        [note] = [n for n in app.notices if n.startswith("approve on 3 of 4")]
        assert f"skipped {idle}: no gate to approve" in note and all(ref in note for ref in refs.values())
        await until(pilot, lambda: not app.table.marked, what="the marks to go after the action")
    assert not any(isinstance(s, Confirm) for s in app.screen_stack)
    for sid, ref in refs.items():  # each one audited as the single key audits it
        assert [(a["action"], a["target"]) for a in console_actions(lw, sid)] == [("approve", ref)]
    assert console_actions(lw, idle) == []
    lw.request("kill", session=idle)


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
async def test_every_row_the_filter_shows_is_killed_after_one_confirmation(lw: Harness, size: tuple[int, int]) -> None:
    doomed = [sleeper(lw, name=f"doomed-{n}") for n in range(2)]
    kept = sleeper(lw, name="kept")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: all(sid in app.table.rows for sid in [*doomed, kept]), what="every row")
        await pilot.press("slash", *"doomed", "enter")
        await until(pilot, lambda: kept not in app.table.rows, what="the filter")
        await pilot.press("asterisk")
        assert app.table.marked == doomed
        await pilot.press("ctrl+k")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="one kill confirmation")
        said = page_text(dialog)
        assert all(sid in said for sid in doomed) and "Kill 2 sessions" in said and kept not in said
        await pilot.press(*"runaway batch", "enter")
        await until(pilot, lambda: all(lw.status(sid)["state"] == "terminated" for sid in doomed), what="two kills")
    assert lw.status(kept)["state"] == "running"
    for sid in doomed:
        assert [(a["action"], a["note"]) for a in console_actions(lw, sid)] == [("kill", "runaway batch")]
    lw.request("kill", session=kept)


async def test_escape_unmarks_before_it_clears_the_filter(lw: Harness) -> None:
    sid = sleeper(lw)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await select(pilot, app, sid)
        await pilot.press("space")
        assert app.table.marked == [sid]
        await pilot.press("escape")
        assert app.table.marked == []
        await pilot.press("p")  # nothing marked: the cursor's session, as before
        await until(pilot, lambda: cell(app, sid, "state") == "paused", what="the single pause")
    lw.request("kill", session=sid)


@pytest.mark.parametrize("size", SIZES, ids=["160x48", "80x24"])
async def test_marked_gates_in_the_queue_are_denied_after_one_confirmation(lw: Harness, size: tuple[int, int]) -> None:
    sids = gated(lw, 3)
    refs = [f"{sid}:{lw.status(sid)['pending_gates'][0]}" for sid in sids]
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        queue = await open_gates(pilot, app, refs[-1])
        await until(pilot, lambda: len(queue.query_one("#gates", DataTable).rows) == 3, what="three gates")
        table = queue.query_one("#gates", DataTable)
        table.move_cursor(row=table.get_row_index(refs[0]))
        await pilot.press("shift+down")  # the first two
        assert [g["ref"] for g in queue.marked] == refs[:2]
        widest = max(len(f"{MARK} {ref}") for ref in refs[:2])  # the mark widens the GATE column, cutting no id
        assert table.columns[ColumnKey("ref")].content_width >= widest
        await pilot.press("d")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="one denial question")
        said = page_text(dialog)
        assert "Deny 2 gates" in said and refs[0] in said and refs[1] in said and refs[2] not in said
        await pilot.press("enter")
        await until(pilot, lambda: all(lw.status(sid)["state"] == "terminated" for sid in sids[:2]), what="denials")
        await until(pilot, lambda: isinstance(app.screen, GatesQueue) and not queue.marked, what="marks gone")
    assert lw.status(sids[2])["state"] == "gated"
    for sid, ref in zip(sids[:2], refs, strict=False):
        assert [(a["action"], a["target"]) for a in console_actions(lw, sid)] == [("deny", ref)]
    lw.request("kill", session=sids[2])


async def test_marked_sessions_are_paused_resumed_and_reset_together_and_a_skip_is_said(lw: Harness) -> None:
    sids = [sleeper(lw, name=f"pair-{n}") for n in range(2)]
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: all(cell(app, sid, "state") == "running" for sid in sids), what="both running")

        async def on_both(*keys: str) -> None:
            await select(pilot, app, sids[0])
            await pilot.press("shift+down", *keys)

        await on_both("p")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Confirm) else None, what="question")
        assert dialog.question == "Pause 2 sessions?" and all(sid in page_text(dialog) for sid in sids)
        await pilot.press("y")
        await until(pilot, lambda: all(cell(app, sid, "state") == "paused" for sid in sids), what="both paused")
        await on_both("r", "y")
        await until(pilot, lambda: all(cell(app, sid, "state") == "running" for sid in sids), what="both resumed")
        await on_both("x", "y")
        await until(pilot, lambda: all(len(console_actions(lw, sid)) == 3 for sid in sids), what="both reset")
        await on_both("i")  # plain sessions take no text: nothing is asked, one line says why for each
        note = await until(pilot, lambda: next((n for n in app.notices if n.startswith("inject on 0 of 2")), None),
                           what="the refusal")
        assert all(f"skipped {sid}: session {sid} (plain) cannot receive text" in note for sid in sids)
        assert not isinstance(app.screen, AskText)
    for sid in sids:
        assert [a["action"] for a in console_actions(lw, sid)] == ["pause", "resume", "reset"]
        lw.request("kill", session=sid)


async def test_with_rows_marked_a_key_with_no_bulk_form_stays_greyed_for_the_cursor_session(lw: Harness) -> None:
    """Marks make each marked session answer for approve, kill, ...; a one-session key (grant, rewind) still asks
    the cursor's session, and is greyed out when it cannot."""
    sid = sleeper(lw)  # plain: it takes no text (so no grant) and cannot rewind
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await select(pilot, app, sid)
        await pilot.press("space")
        assert app.table.marked == [sid]
        assert app.check_action("approve", ()) is True  # each marked session is asked, and skipped if it cannot
        assert app.check_action("grant", ()) is None
        assert app.check_action("rewind", ()) is None
    lw.request("kill", session=sid)


async def test_what_changes_while_the_confirmation_is_open_reaches_only_what_it_listed(lw: Harness) -> None:
    """A gate decided by another console meanwhile is refused, never replaced; a session gated meanwhile,
    though the filter shows it, is not touched: the action sends exactly what the dialog listed."""
    first, second = gated(lw, 2)
    refs = {sid: f"{sid}:{lw.status(sid)['pending_gates'][0]}" for sid in (first, second)}
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: second in app.table.rows, what="both rows")
        await pilot.press("asterisk", "a")
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the confirmation")
        lw.request("approve", gate=refs[second], note="by another console")
        late = gated(lw, 1)[0]
        await until(pilot, lambda: late in app.table.rows, what="the new gated row, shown while the dialog is open")
        await pilot.press("y")
        note = await until(pilot, lambda: next((n for n in app.notices if n.startswith("approve on 1 of 2")), None),
                           what="the report")
        assert f"done: {refs[first]}" in note and f"refused {refs[second]}: " in note
    assert lw.status(late)["pending_gates"]  # not listed, not approved
    assert [a["target"] for a in console_actions(lw, first)] == [refs[first]]
    [tried] = console_actions(lw, second)  # audited too, as refused: the other console's approval stands
    assert tried["target"] == refs[second] and tried["outcome"] != "done", tried
    lw.request("kill", session=late)  # the approved two end by themselves


async def test_a_mark_stays_on_its_session_when_the_rows_are_sorted_and_grouped(lw: Harness) -> None:
    """Marks are kept by session id, never by row number: re-sorting and grouping move them with their rows."""
    older, newer = sleeper(lw, name="b-older"), sleeper(lw, name="a-newer")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: newer in app.table.rows, what="both rows")
        await select(pilot, app, older)
        await pilot.press("space")
        app.table.resort(app.snapshots, "name")  # a-newer now first
        await pilot.press("G")  # grouped by project: both in one group, the GROUP column added
        await until(pilot, lambda: app.table.group_by == "project", what="grouped")
        assert app.table.get_row_index(older) == 1 and app.table.marked == [older]

        def drawn(sid: str) -> str:
            return app.table.render_line(1 + app.table.get_row_index(sid) - int(app.table.scroll_y)).text

        assert f"{MARK}{older}" in drawn(older) and MARK not in drawn(newer)
    for sid in (older, newer):
        lw.request("kill", session=sid)
