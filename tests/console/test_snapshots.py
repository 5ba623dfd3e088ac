"""Each console screen at a fixed size, compared with its SVG snapshot (pytest-textual-snapshot).

The data is a fixed state (tests/console/frozen.py) so a picture changes only when the
console's look does; the behaviour is tested against a real daemon in test_actions.py.
Update the pictures on purpose with `pytest tests/console/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from loopwarden.widgets.app import ConsoleApp
from loopwarden.widgets.dialogs import AskText, Confirm, ConfirmWithReason, SetLimits
from loopwarden.widgets.gates import evidence_text
from loopwarden.widgets.health import limits_view
from loopwarden.widgets.session_table import row_cells
from tests.console.frozen import GATES, NOW, POD_SESSIONS, SESSIONS, FrozenFeed
from tests.console.helpers import until


def frozen_app(**kwargs: Any) -> ConsoleApp:
    return ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(), clock=lambda: NOW, **kwargs)  # type: ignore[arg-type]


def measured(app: ConsoleApp, sessions: list[dict[str, Any]] = SESSIONS) -> bool:
    """Every column is as wide as its widest cell (the table measures new rows when idle)."""
    cells = [row_cells(snap, NOW) for snap in sessions]
    return all(column.content_width >= max(len(str(c[key])) for c in cells)
               for key, column in ((str(k.value), col) for k, col in app.table.columns.items())
               if key in cells[0])  # not the GROUP column: drawn from the order, not a row's cell


def settled(app: ConsoleApp, *keys: str, sessions: list[dict[str, Any]] = SESSIONS) -> Any:
    """Wait for every row and the gates, press `keys`, stop cursors blinking."""

    async def run_before(pilot: Any) -> None:
        await until(pilot, lambda: app.table.row_count == len(sessions) and app.gates and measured(app, sessions),
                    what="the frozen state")
        app.main.refresh(repaint=True, layout=True)  # paint the measured table before a dialog covers it
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause()
        for box in app.screen.query(Input):
            box.cursor_blink = False
        app.screen.refresh(repaint=True, layout=True)  # one full repaint, so partial updates leave no trace
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80x24", "160x40"])
def test_sessions_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    app = frozen_app()
    assert snap_compare(app, terminal_size=size, run_before=settled(app))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_sessions_screen_with_pod_sessions(snap_compare: Any, size: tuple[int, int]) -> None:
    """A WHERE column (node/pod) once a session runs on a cluster; `-` for the one here."""
    app = ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(POD_SESSIONS), clock=lambda: NOW)  # type: ignore[arg-type]
    assert snap_compare(app, terminal_size=size, run_before=settled(app, sessions=POD_SESSIONS))


def test_gates_queue_with_evidence(snap_compare: Any) -> None:
    app = frozen_app()
    assert snap_compare(app, terminal_size=(100, 30), run_before=settled(app, "g"))


def dialog(app: ConsoleApp, screen: Any = None, *keys: str) -> Any:
    """A dialog over an empty console: the table behind a dialog is a frame Textual may or may not
    have repainted yet, so dialogs are pictured alone."""

    async def run_before(pilot: Any) -> None:
        await until(pilot, lambda: app.feed.ready, what="the frozen feed")
        await until(pilot, lambda: "0 sessions" in str(app.main.query_one("#status").render()), what="the status line")
        if screen is not None:
            app.push_screen(screen)
        await pilot.press(*keys)
        await pilot.pause()
        for box in app.screen.query(Input):
            box.cursor_blink = False
        await pilot.pause()

    return run_before


def empty_app() -> ConsoleApp:
    return ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(sessions=[]), clock=lambda: NOW)  # type: ignore[arg-type]


def test_help(snap_compare: Any) -> None:
    app = empty_app()
    assert snap_compare(app, terminal_size=(100, 40), run_before=dialog(app, None, "question_mark"))


def test_kill_confirmation(snap_compare: Any) -> None:
    app = empty_app()
    ask = ConfirmWithReason("Kill session s1 (refactor-all)?", "why, for the audit log (optional)")
    assert snap_compare(app, terminal_size=(80, 24), run_before=dialog(app, ask))


def test_guidance_dialog(snap_compare: Any) -> None:
    app = empty_app()
    ask = AskText("Approve s3:g1 (migrations) with guidance for the agent:", "what the agent should do next",
                  detail=evidence_text(GATES[0]))
    assert snap_compare(app, terminal_size=(80, 24), run_before=dialog(app, ask))


def test_launch_dialog(snap_compare: Any) -> None:
    app = empty_app()
    assert snap_compare(app, terminal_size=(80, 24), run_before=dialog(app, None, "n"))


def test_filter_and_read_only(snap_compare: Any) -> None:
    app = frozen_app(read_only=True)
    assert snap_compare(app, terminal_size=(100, 24), run_before=settled(app, "slash", *"term"))


def test_approve_shows_the_evidence(snap_compare: Any) -> None:
    app = empty_app()
    ask = Confirm("Approve s3:g1 (migrations)? The call it holds goes ahead.", evidence_text(GATES[0]))
    assert snap_compare(app, terminal_size=(80, 24), run_before=dialog(app, ask))


def test_deny_with_a_reason(snap_compare: Any) -> None:
    app = empty_app()
    ask = ConfirmWithReason("Deny s3:g1 (migrations)? The session will be terminated (loop_gate_denied).",
                            "why, for the agent and the audit log (optional)", evidence_text(GATES[0]))
    assert snap_compare(app, terminal_size=(80, 24), run_before=dialog(app, ask))


def test_limits_dialog(snap_compare: Any) -> None:
    app = empty_app()
    ask = SetLimits("Limits of session s1 (refactor-all): type KEY=VALUE", limits_view(SESSIONS[0], NOW))
    assert snap_compare(app, terminal_size=(80, 24), run_before=dialog(app, ask))
