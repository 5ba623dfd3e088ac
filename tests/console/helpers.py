"""Pilot helpers shared by the console tests: wait on a condition, read a table cell or the status line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.binding import Binding
from textual.widgets import Static

from loopwarden.widgets.app import ConsoleApp
from loopwarden.widgets.session_table import SessionTable
from tests.support import waiting
from tests.support.daemon import Harness
from tests.support.paths import PY


async def until(pilot: Any, condition: Callable[[], Any], timeout: float = 20.0,  # noqa: ASYNC109 - a poll's deadline
                what: str = "condition") -> Any:
    """Let the app run until `condition()` holds (never a fixed sleep standing in for it)."""
    return await waiting.until(condition, timeout, what, every=0.02, pause=pilot.pause)


def status_text(app: ConsoleApp) -> str:
    """What the sessions screen's status line says."""
    return str(app.main.query_one("#status", Static).render())


def sleeper(lw: Harness, **options: Any) -> str:
    """A plain session that sleeps for a minute: something live for the console to act on."""
    return lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", **options)


def key_of(app: ConsoleApp, action: str) -> str:
    """The key bound to an app action (the keys may move; the actions keep their names)."""
    return next(b.key.split(",")[0] for b in app.BINDINGS if isinstance(b, Binding) and b.action == action)


def cell(app: ConsoleApp, sid: str, column: str) -> str:
    """The text of one cell of the sessions table, or "" when the session has no row."""
    table = app.query_one("#sessions", SessionTable) if not app.screen_stack[1:] else app.table
    if sid not in table.rows:
        return ""
    return str(table.get_cell(sid, column))


class RecordingConsole(ConsoleApp):
    """The real console, also keeping every notification it showed and counting terminal bells."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.notices: list[str] = []
        self.bells = 0

    def notify(self, message: str, *, title: str = "", **kwargs: Any) -> None:  # type: ignore[override]
        self.notices.append(f"{title} {message}".strip())
        super().notify(message, title=title, **kwargs)

    def bell(self) -> None:
        self.bells += 1
        super().bell()
