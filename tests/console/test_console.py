"""The console, driven by Textual's Pilot, against a real daemon with scripted sessions."""

from __future__ import annotations

import pytest

from loopwarden.widgets.app import ACTION_KEYS, ConsoleApp
from loopwarden.widgets.dialogs import Confirm, ConfirmWithReason
from loopwarden.widgets.session_table import SessionTable
from tests.console.helpers import cell, key_of, sleeper, until
from tests.live.live_harness import Harness

pytestmark = pytest.mark.anyio  # async tests run on anyio's pytest plugin (asyncio backend)


async def test_sessions_appear_live_with_their_state(lw: Harness) -> None:
    sid = lw.scenario("repetition")
    app = ConsoleApp(lw.paths, autostart=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: sid in app.query_one("#sessions", SessionTable).rows, what="the session's row")
        await until(pilot, lambda: cell(app, sid, "state") == "terminated", what="the final state")
        assert cell(app, sid, "reason") == "repetition_loop"
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
        for key in (b.key for b in ACTION_KEYS if hasattr(b, "key")):
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

