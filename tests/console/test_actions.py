"""Every console action against a real daemon with scripted sessions, driven by Textual's Pilot."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.binding import Binding
from textual.command import CommandList, CommandPalette
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, Static

from loopwarden.runtime.client import DaemonError
from loopwarden.supervisor.config import LIVE_KEYS, ConfigError, load_config, parse_set
from loopwarden.supervisor.health import SessionHealth
from loopwarden.widgets.counters import ChooseCounter
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.dialogs import AskText, Confirm, ConfirmWithReason, Launch, SetLimits, parse_settings
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.health import COUNTER_KEYS
from loopwarden.widgets.help import Help
from loopwarden.widgets.keybar import KeyBar
from tests.console.helpers import RecordingConsole, cell, key_of, sleeper, until
from tests.support.daemon import Harness
from tests.support.events import heard
from tests.support.waiting import wait_for

pytestmark = pytest.mark.anyio

SIZE = (160, 40)


def console_actions(lw: Harness, sid: str) -> list[dict]:
    return [a for a in lw.request("actions", session=sid) if a["client"].startswith("console pid ")]


def page_text(screen: Screen) -> str:
    """Everything a screen's text widgets say (a dialog's question and facts, the help), as plain text."""
    page = Console(width=120, record=True, file=io.StringIO())
    for widget in screen.query(Static):
        page.print(widget.content)
    return page.export_text()


async def select(pilot, app: RecordingConsole, sid: str) -> None:
    await until(pilot, lambda: sid in app.table.rows, what=f"the row of {sid}")
    app.table.move_cursor(row=app.table.get_row_index(sid))


async def open_gates(pilot, app: RecordingConsole, ref: str) -> GatesQueue:
    await until(pilot, lambda: ref in {g["ref"] for g in app.gates}, what=f"gate {ref} in the console")
    await pilot.press("g")
    screen = await until(pilot, lambda: app.screen if isinstance(app.screen, GatesQueue) else None, what="the queue")
    await until(pilot, lambda: ref in screen.query_one("#gates", DataTable).rows, what=f"{ref} in the queue")
    return screen


async def test_gates_queue_shows_the_evidence_and_approve_with_guidance_reaches_the_agent(lw: Harness) -> None:
    sid = lw.scenario("loop_gate")
    lw.wait_state(sid, "gated")
    ref = f"{sid}:{lw.status(sid)['pending_gates'][0]}"
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_gates(pilot, app, ref)
        evidence = str(screen.query_one("#evidence", Static).render())
        assert ref in evidence and "loop_counter" in evidence and "T-3" in evidence
        await pilot.press("w")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, AskText) else None,
                             what="the guidance dialog")
        said = page_text(dialog)  # what is approved, before approving it
        assert ref in said and "loop_counter" in said and "T-3" in said
        await pilot.press(*"seed the users table first")
        await pilot.press("enter")
        await until(pilot, lambda: ref not in screen.query_one("#gates", DataTable).rows, what="the gate to go")
    [approve] = console_actions(lw, sid)
    assert (approve["action"], approve["target"], approve["note"]) == ("approve", ref, "seed the users table first")
    guidance = [v for v in lw.verdicts(sid) if v["rule"] == "operator"]
    assert guidance and "seed the users table first" in guidance[0]["message"]


async def test_deny_shows_the_evidence_asks_first_and_its_reason_reaches_the_audit_and_the_agent(
        lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    ref = f"{sid}:{lw.status(sid)['pending_gates'][0]}"
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_gates(pilot, app, ref)
        reason = next(g for g in app.gates if g["ref"] == ref)["reason"]
        await pilot.press("d")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="the confirmation")
        assert ref in page_text(dialog) and reason in page_text(dialog)  # what is decided, before deciding
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="back to the queue")
        assert lw.status(sid)["state"] == "gated" and console_actions(lw, sid) == []
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmWithReason), what="the confirmation")
        await pilot.press(*"prod data, never drop", "enter")
        await until(pilot, lambda: lw.status(sid)["state"] == "terminated", what="the denial")
    assert lw.status(sid)["termination"] == "loop_gate_denied"
    [deny] = console_actions(lw, sid)
    assert (deny["action"], deny["note"]) == ("deny", "prod data, never drop")
    [told] = [v for v in lw.verdicts(sid) if v["action"] == "terminate"]
    assert "prod data, never drop" in told["message"]  # the text the agent is sent as it is stopped


async def test_approve_shows_the_gates_reason_and_evidence_and_asks_first(lw: Harness) -> None:
    sid = lw.scenario("loop_gate")
    lw.wait_state(sid, "gated")
    ref = f"{sid}:{lw.status(sid)['pending_gates'][0]}"
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)  # from the sessions table: the same question as in the queue
        await until(pilot, lambda: ref in {g["ref"] for g in app.gates}, what="the gate's evidence")
        await pilot.press(key_of(app, "approve"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Confirm) else None,
                             what="the approval question")
        said = page_text(dialog)
        assert f"Approve {ref}" in said and "loop_counter" in said and "T-3" in said
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, Confirm), what="the question to close")
        assert lw.status(sid)["state"] == "gated" and console_actions(lw, sid) == []
        await pilot.press(key_of(app, "approve"))
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the approval question")
        await pilot.press("y")
        await until(pilot, lambda: lw.status(sid)["pending_gates"] == [], what="the approval")
    [approve] = console_actions(lw, sid)
    assert approve["action"] == "approve" and approve["target"].split(":")[-1] == ref.split(":")[1]


async def test_grant_reset_and_inject_reach_the_session_and_the_audit_log(lw: Harness) -> None:
    sid = lw.scenario("loop_gate")
    lw.wait_state(sid, "gated")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the grant confirmation")
        await pilot.press("y")
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ChooseCounter), what="the reset dialog")
        await pilot.press("y")  # all, the first choice
        await until(pilot, lambda: len(console_actions(lw, sid)) == 2, what="grant and reset")
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, AskText), what="the inject dialog")
        await pilot.press(*"look at the seed data", "enter")
        await until(pilot, lambda: len(console_actions(lw, sid)) == 3, what="the injection")
    assert [a["action"] for a in console_actions(lw, sid)] == ["grant", "reset", "inject"]
    assert lw.status(sid)["counters"]["loop"][0] == 0
    wait_for(lambda: heard(lw, sid, "look at the seed data") and heard(lw, sid, "authority"),
             what="the agent to read the injected lines")


async def test_pause_then_resume_the_selected_session(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press("p")
        await until(pilot, lambda: cell(app, sid, "state") == "paused", what="the pause")
        await pilot.press("r")
        await until(pilot, lambda: cell(app, sid, "state") == "running", what="the resume")
    assert [a["action"] for a in console_actions(lw, sid)] == ["pause", "resume"]
    lw.request("kill", session=sid)


async def test_launch_starts_a_session_from_the_modal(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        dialog.query_one("#command", Input).value = f"{sys.executable} -m loopwarden.sessions.scripted healthy"
        dialog.query_one("#name", Input).value = "from-the-console"
        await pilot.press("enter")
        row = await until(pilot, lambda: next((s for s, snap in app.snapshots.items()
                                               if snap.get("name") == "from-the-console"), None), what="the row")
        await until(pilot, lambda: cell(app, row, "state") == "exited", what="the healthy run to end")
    [run] = console_actions(lw, row)
    assert run["action"] == "run"


async def test_launch_refuses_an_empty_command_with_a_message(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")  # launching is refused before the link
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        await pilot.press("enter")
        assert isinstance(app.screen, Launch)
        assert "command" in str(dialog.query_one("#error").render())
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, Launch), what="the dialog to close")
    assert lw.request("list") == []


async def test_launch_from_a_removed_directory_says_so_in_the_dialog(lw: Harness, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # the console's directory removed under it: launching says so instead of crashing the console
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        await pilot.press("n")
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        dialog.query_one("#command", Input).value = "true"
        await pilot.press("enter")
        await until(pilot, lambda: "current directory cannot be read" in str(dialog.query_one("#error").render()),
                    what="the error in the dialog")
        assert isinstance(app.screen, Launch)
    assert lw.request("list") == []


async def test_filter_keeps_matching_rows_and_escape_brings_all_back(lw: Harness) -> None:
    first = lw.scenario("healthy")
    second = lw.scenario("repetition")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: {first, second} <= set(app.table.rows), what="both rows")
        await pilot.press("slash", *"repet")
        await until(pilot, lambda: set(app.table.rows) == {second}, what="the filter")
        await pilot.press("escape")
        await until(pilot, lambda: set(app.table.rows) == {first, second}, what="every row again")


async def test_sort_by_attention_puts_the_session_waiting_for_a_human_first(lw: Harness) -> None:
    healthy = lw.scenario("healthy")
    gated = lw.scenario("gate_request")
    lw.wait_state(gated, "gated")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: {healthy, gated} <= set(app.table.rows), what="both rows")
        assert app.table.get_row_index(healthy) < app.table.get_row_index(gated)
        await pilot.press("s")
        await until(pilot, lambda: app.table.sort_by == "attention", what="the sort")
        assert app.table.get_row_index(gated) == 0
        assert cell(app, gated, "id").startswith("!")


async def test_help_lists_every_key(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        screen = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None, what="help")
        page = Console(width=120, record=True, file=io.StringIO())
        for widget in screen.query(Static):
            page.print(widget.content)
        text = page.export_text()
        for binding in app.BINDINGS:
            assert binding.description in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, Help), what="help to close")


async def test_a_new_gate_anywhere_shows_a_toast_and_rings_the_bell(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the feed")
        sid = lw.scenario("gate_request")
        await until(pilot, lambda: any(f"gate {sid}:g1 opened" in n for n in app.notices), what="the toast")
        assert app.bells == 1


async def test_two_consoles_stay_live_and_a_gate_decided_in_one_leaves_the_other(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    ref = f"{sid}:g1"
    one, two = RecordingConsole(lw.paths, autostart=False), RecordingConsole(lw.paths, autostart=False)
    async with one.run_test(size=SIZE) as p1, two.run_test(size=SIZE) as p2:
        await until(p2, lambda: ref in {g["ref"] for g in two.gates}, what="the gate in the second console")
        await open_gates(p1, one, ref)
        await p1.press("a")
        await until(p1, lambda: isinstance(one.screen, Confirm), what="the approval question")
        await p1.press("y")
        await until(p2, lambda: cell(two, sid, "state") == "exited", what="the second console to see the end")
        # the queue reloads in a worker once the pending gates change: a moment after the row
        await until(p2, lambda: two.gates == [] and cell(two, sid, "gates") == "0",
                    what="the gate to leave the second console")


async def test_the_command_palette_runs_an_action_by_name(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press("ctrl+p")
        await pilot.press(*"Kill")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette)
                    and app.screen.query_one(CommandList).option_count, what="the palette's matches")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmWithReason), what="the kill confirmation")
        await pilot.press(*"runaway", "enter")
        await until(pilot, lambda: cell(app, sid, "state") == "terminated", what="the kill")
    assert [(a["action"], a["note"]) for a in console_actions(lw, sid)] == [("kill", "runaway")]


async def test_enter_opens_the_detail_and_keys_there_act_on_its_session(lw: Harness) -> None:
    sid = sleeper(lw)
    other = sleeper(lw)
    lw.wait_state(other, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press("enter")
        detail = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                             what="the detail")
        assert detail.session_id == sid
        await pilot.press("p")
        await until(pilot, lambda: lw.status(sid)["state"] == "paused", what="the pause from the detail")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionDetail), what="back to the table")
    assert lw.status(other)["state"] == "running"
    for s in (sid, other):
        lw.request("kill", session=s)


async def test_markup_in_names_and_reasons_is_shown_as_text_never_parsed(lw: Harness) -> None:
    odd = "[/]fix [red]it[/red] [b"
    sid = sleeper(lw, name=odd)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        assert cell(app, sid, "name") == odd
        await pilot.press("slash", *"[/]fix", "enter")  # the filter is shown in the status line too
        await until(pilot, lambda: set(app.table.rows) == {sid}, what="the filter on the odd name")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionDetail), what="the detail")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SessionDetail), what="back to the table")
        await pilot.press(key_of(app, "kill"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="confirm")
        assert odd in str(dialog.query_one(Label).render())
        await pilot.press("enter")
        await until(pilot, lambda: cell(app, sid, "state") == "terminated", what="the kill")


async def test_keys_a_session_cannot_use_are_greyed_out_and_refused(lw: Harness) -> None:
    """A plain command cannot receive text: its inject and grant keys are dimmed; a native agent's are not."""
    plain = sleeper(lw)
    native = lw.scenario("gate_request")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, plain)
        await until(pilot, lambda: app.check_action("inject", ()) is None, what="inject greyed out for plain")
        assert app.check_action("grant", ()) is None and app.check_action("kill", ()) is True
        assert cell(app, plain, "agent") == "command" and cell(app, native, "agent") == "native"
        await pilot.press("i")  # a greyed key says why
        await until(pilot, lambda: any("cannot receive text" in n for n in app.notices), what="the refusal")
        assert not isinstance(app.screen, AskText)
        app.notices.clear()
        app.action_inject()  # the palette's path: refused with a reason, nothing sent
        await until(pilot, lambda: any("cannot receive text" in n for n in app.notices), what="the refusal again")
        assert not isinstance(app.screen, AskText)
        await select(pilot, app, native)
        await until(pilot, lambda: app.check_action("inject", ()) is True, what="inject enabled for native")
    assert not console_actions(lw, plain)
    with pytest.raises(DaemonError, match=r"\(plain\) cannot receive text"):
        lw.request("inject", session=plain, text="hello")
    lw.request("kill", session=plain)


async def test_actions_on_an_ended_session_say_why_at_once(lw: Harness) -> None:
    sid = lw.scenario("healthy")
    lw.wait_state(sid, "exited")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await until(pilot, lambda: cell(app, sid, "state") == "exited", what="the ended row")
        for action, said in (("kill", "nothing to kill"), ("pause", "nothing to pause"),
                             ("approve", "no gate to approve")):
            await pilot.press(key_of(app, action))
            await until(pilot, lambda s=said: any(f"{sid} has ended; {s}" in n for n in app.notices),
                        what=f"the {action} refusal")
            assert not app.screen_stack[1:]  # no confirmation for something that cannot happen
    assert console_actions(lw, sid) == []


async def test_the_read_only_console_shows_no_action_keys(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    app = RecordingConsole(lw.paths, read_only=True, autostart=False)
    actions = {"approve", "approve_with_guidance", "deny", "grant", "reset", "inject", "pause", "resume", "kill",
               "launch", "limits"}
    names = {b.description for b in app.BINDINGS if isinstance(b, Binding) and b.action in actions}
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        footer = {description for _, _, description, _ in app.screen.query_one(KeyBar).shown_keys()}
        assert footer and not footer & names
        await pilot.press("question_mark")
        screen = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None, what="help")
        text = page_text(screen)
        assert "Gates" in text and not [n for n in names if re.search(rf"\b{re.escape(n)}\b", text)]
        await pilot.press("escape")
        await open_gates(pilot, app, f"{sid}:g1")
        footer = {description for _, _, description, _ in app.screen.query_one(KeyBar).shown_keys()}
        assert "Sessions" in footer and not footer & {"Approve", "Deny", "Guidance", "Grant", "Reset"}
        await pilot.press("a")  # a key still pressed out of habit says why nothing happens
        await until(pilot, lambda: any("read-only console" in n for n in app.notices), what="the refusal")
    assert console_actions(lw, sid) == []


async def test_launch_keeps_what_was_typed_when_the_daemon_refuses_it(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.feed.connected, what="the feed")
        await pilot.press(key_of(app, "launch"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Launch) else None, what="launch")
        dialog.query_one("#command", Input).value = "no-such-agent-anywhere --task T-9"
        dialog.query_one("#name", Input).value = "keep-me"
        await pilot.press("enter")
        error = dialog.query_one("#error", Label)
        await until(pilot, lambda: "launch failed" in str(error.render()), what="the daemon's refusal")
        assert "no-such-agent-anywhere" in str(error.render())
        assert app.screen is dialog  # still open, with what was typed
        assert dialog.query_one("#command", Input).value == "no-such-agent-anywhere --task T-9"
        assert dialog.query_one("#name", Input).value == "keep-me"
        dialog.query_one("#command", Input).value = f"{sys.executable} -m loopwarden.sessions.scripted healthy"
        await pilot.press("enter")  # fixed in place, sent again
        await until(pilot, lambda: not isinstance(app.screen, Launch), what="the dialog to close")
        await until(pilot, lambda: any(s.get("name") == "keep-me" for s in app.snapshots.values()), what="the row")


async def test_enter_on_a_gate_opens_its_sessions_detail(lw: Harness) -> None:
    other = sleeper(lw)
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_gates(pilot, app, f"{sid}:g1")
        await pilot.press("enter")
        detail = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                             what="the detail")
        assert detail.session_id == sid
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="back to the queue")
    lw.request("kill", session=other)


async def test_at_80x24_a_toast_covers_no_row_and_not_the_status_line(lw: Harness) -> None:
    for _ in range(12):  # more rows than fit: any toast over the table would hide one
        sleeper(lw)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(pilot, lambda: app.feed.connected and len(app.table.rows) == 12, what="the rows")
        sid = lw.scenario("gate_request")
        toast = await until(pilot, lambda: next(iter(app.screen.query("Toast")), None), what="the gate's toast")
        await until(pilot, lambda: toast.region.height > 0, what="the toast to be laid out")
        for part in (app.table, app.main.query_one("#status"), app.screen.query_one(KeyBar)):
            assert not toast.region.overlaps(part.region), part
        assert f"gate {sid}:g1 opened" in " ".join(app.notices)
    for snap in lw.request("list"):
        if snap["state"] not in ("exited", "terminated"):
            lw.request("kill", session=snap["id"])


async def test_limits_shows_the_current_ones_and_sets_new_values(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press(key_of(app, "limits"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, SetLimits) else None,
                             what="the limits dialog")
        said = page_text(dialog)
        assert "limits.max_runtime" in said and "4h" in said and "repetition.max_identical_calls" in said
        await pilot.press(*"max_runtime", "enter")  # not KEY=VALUE: said in the dialog, nothing sent
        with pytest.raises(ConfigError) as wrong:
            parse_set("max_runtime", "setting")
        await until(pilot, lambda: str(dialog.query_one("#error", Label).render()) == str(wrong.value),
                    what="the dialog's error, worded as loopwarden set words it")
        dialog.query_one("#values", Input).value = "limits.max_runtime=banana"
        await pilot.press("enter")  # the daemon refuses the value: said in the dialog, what was typed kept
        await until(pilot, lambda: "'banana' is not valid" in str(dialog.query_one("#error", Label).render()),
                    what="the daemon's refusal in the dialog")
        assert app.screen is dialog and dialog.query_one("#values", Input).value == "limits.max_runtime=banana"
        dialog.query_one("#values", Input).value = "limits.max_runtime=2h"
        await pilot.press("enter")
        await until(pilot, lambda: lw.status(sid)["max_runtime"] == 7200, what="the new limit")
        await until(pilot, lambda: not isinstance(app.screen, SetLimits), what="the dialog to close")
        await until(pilot, lambda: any(f"set {sid}: limits.max_runtime" in n for n in app.notices),
                    what="the change in a toast")
    sets = [(a["action"], a["outcome"].split(":")[0]) for a in console_actions(lw, sid)]
    assert sets == [("set", "refused"), ("set", "done")]  # the refusal is audited too
    lw.request("kill", session=sid)


def test_the_limits_dialog_names_settings_a_running_session_takes() -> None:
    assert set(COUNTER_KEYS.values()) <= LIVE_KEYS


def test_the_limits_dialog_names_the_setting_that_moves_every_counter_a_session_has() -> None:
    counters = {c.name for c in SessionHealth(load_config(env={}), started_at=0.0).counters(0.0)}
    assert counters - set(COUNTER_KEYS) == set()
    def limit(name: str, value: int) -> float:
        health = SessionHealth(load_config(env={}, sets=[f"{COUNTER_KEYS[name]}={value}"]), started_at=0.0)
        return {c.name: c.limit for c in health.counters(0.0)}[name]

    for name in counters:  # the setting named moves that counter's limit (chanting's strikes: on or off)
        assert limit(name, 7) != limit(name, 0), name


async def test_the_limits_dialog_offers_a_setting_on_every_counter_row(lw: Harness) -> None:
    sid = sleeper(lw)
    lw.wait_state(sid, "running")
    counters = lw.status(sid)["counters"]
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press(key_of(app, "limits"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, SetLimits) else None,
                             what="the limits dialog")
        rows = {line.split()[0]: line for line in page_text(dialog).splitlines() if line.strip()}
        for name in counters:
            assert re.search(r"\b[a-z_]+\.[a-z_]+\b", rows[name]), f"no setting offered for {name}: {rows[name]!r}"
    lw.request("kill", session=sid)


def test_the_limits_dialog_reads_each_word_as_loopwarden_set_does() -> None:
    typed = "limits.max_runtime=2h 'limits.stall_timeout=10 m' gates.timeout="
    assert parse_settings(typed) == dict(parse_set(w) for w in
                                         ("limits.max_runtime=2h", "limits.stall_timeout=10 m", "gates.timeout="))
    for wrong in ("", "=2h", "max_runtime", "'unclosed"):
        with pytest.raises(ValueError):
            parse_settings(wrong)


async def test_approve_from_the_detail_shows_the_same_question(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    lw.wait_state(sid, "gated")
    ref = f"{sid}:{lw.status(sid)['pending_gates'][0]}"
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, SessionDetail), what="the detail")
        await pilot.press(key_of(app, "approve"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Confirm) else None,
                             what="the approval question")
        assert f"Approve {ref}" in page_text(dialog) and "rule" in page_text(dialog)
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, SessionDetail), what="back to the detail")
        await until(pilot, lambda: lw.status(sid)["pending_gates"] == [], what="the approval")
    assert [a["action"] for a in console_actions(lw, sid)] == ["approve"]


async def test_rewind_is_greyed_out_without_the_capability_and_restart_starts_an_ended_task_again(
        lw: Harness) -> None:
    """A native agent cannot rewind: b is dimmed and says why. R restarts an ended session, confirmed."""
    sid = lw.scenario("repetition")
    lw.wait_state(sid, "terminated")
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await until(pilot, lambda: app.check_action("rewind", ()) is None, what="rewind greyed out for native")
        assert app.check_action("restart", ()) is True
        await pilot.press(key_of(app, "rewind"))
        await until(pilot, lambda: any("cannot rewind its conversation" in n for n in app.notices),
                    what="the refusal")
        assert not app.screen_stack[1:]
        await pilot.press(key_of(app, "restart"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="the restart confirmation")
        assert "Restart the task of session" in page_text(dialog)
        await pilot.press(*"NOTE-9", "enter")
        await until(pilot, lambda: console_actions(lw, sid), what="the restart")
    [row] = console_actions(lw, sid)
    assert row["action"] == "restart" and "NOTE-9" in row["note"]
    new = row["target"]
    wait_for(lambda: heard(lw, new, "restarted by a supervisor"), what="the summary to reach the new run")
    lw.request("kill", session=new)


def test_rewind_is_offered_for_a_session_that_can_rewind_and_says_why_for_one_that_cannot() -> None:
    from loopwarden.widgets.app import ConsoleApp

    codex = {"id": "s1", "adapter": "codex", "capabilities": ["veto", "hold", "inject", "steer", "interrupt", "rewind"]}
    native = {"id": "s2", "adapter": "native", "capabilities": ["veto", "hold", "inject"]}
    assert ConsoleApp._incapable(codex, "rewind") is None
    why = ConsoleApp._incapable(native, "rewind")
    assert why == "session s2 (native) cannot rewind its conversation (restart it: R)"
    assert ConsoleApp._incapable(native, "restart") is None  # restart needs no capability: the daemon decides
