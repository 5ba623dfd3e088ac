"""The console and a budget: the day's spend in the status line, and the limits dialog (L) raising a session's
budget continues its held run; the real console through its Pilot, against a real daemon and agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from loopwarden.widgets.dialogs import SetLimits
from tests.budgets.conftest import Start, budget_gate, calls, spender
from tests.console.helpers import RecordingConsole, key_of, status_text, until

pytestmark = pytest.mark.anyio


async def test_the_limits_dialog_raises_a_budget_and_the_status_line_shows_the_days_spend(
        daemon: Start, tmp_path: Path) -> None:
    lw = daemon(budgets={"day_usd": 10})
    out = tmp_path / "calls"
    sid = spender(lw, out, 0.25, sets=("limits.max_cost_usd=0.50",))
    budget_gate(lw, sid)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(180, 40)) as pilot:
        await until(pilot, lambda: "spent today $0.50 of $10.00" in status_text(app), what="the day's spend")
        await until(pilot, lambda: sid in app.table.rows, what="the session's row")
        app.table.move_cursor(row=app.table.get_row_index(sid))
        await pilot.press(key_of(app, "limits"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, SetLimits) else None,
                             what="the limits dialog")
        dialog.query_one("#values", Input).value = "limits.max_cost_usd=1"
        await pilot.press("enter")
        await until(pilot, lambda: "spent today $1.00 of $10.00" in status_text(app), what="the run going on")
    budget_gate(lw, sid, "g2")
    assert calls(out) == [(n, "allow") for n in range(1, 5)]
    lw.request("kill", session=sid)
