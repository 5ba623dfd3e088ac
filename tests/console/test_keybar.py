"""The footer (KeyBar): the keys of the screen on top, the palette key at the right, a click presses a key."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.command import CommandPalette

from loopwarden.widgets.app import ConsoleApp, Sessions
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.keybar import KeyBar
from tests.console.frozen import NOW, SESSIONS, FrozenFeed
from tests.console.helpers import until

pytestmark = pytest.mark.anyio

WIDTH = 160


def bar_text(app: ConsoleApp) -> str:
    return app.screen.query_one(KeyBar).render().plain


def x_of(app: ConsoleApp, item: str) -> int:
    """Where `item` (for example "g Gates") starts on the bar: the column of its key."""
    return bar_text(app).index(item)


async def test_keybar_follows_the_screen_and_a_click_presses_the_key() -> None:
    app = ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(), clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(WIDTH, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        text = bar_text(app)
        for item in ("g Gates", "/ Filter", "s Sort", "^k Kill", "? Help", "q Quit"):
            assert item in text, f"{item!r} missing from {text!r}"
        assert "Guidance" not in text  # a gates-queue key
        assert text.rstrip().endswith("^p palette") and len(text) == WIDTH

        await pilot.click(KeyBar, offset=(x_of(app, "g Gates"), 0))
        await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="the click on g to open the gates")
        await until(pilot, lambda: "w Guidance" in bar_text(app), what="the gates queue's keys")
        assert "/ Filter" not in bar_text(app)

        await pilot.click(KeyBar, offset=(x_of(app, "esc Sessions"), 0))
        await until(pilot, lambda: isinstance(app.screen, Sessions), what="the click on esc to go back")

        await pilot.click(KeyBar, offset=(WIDTH - 3, 0))
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the click on ^p")


async def test_keybar_click_between_keys_does_nothing() -> None:
    app = ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(), clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(WIDTH, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        text = bar_text(app)
        await pilot.click(KeyBar, offset=(len(text.rstrip()) - len("^p palette") - 10, 0))  # the empty middle
        await pilot.pause()
        assert isinstance(app.screen, Sessions)
        assert app.screen_stack == [app.main]


@pytest.mark.parametrize("width", [80, 100])
async def test_keybar_fits_a_narrow_terminal_and_keeps_help_and_quit(width: int) -> None:
    app = ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(), clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(width, 24)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        for screen_key in (None, "g"):
            if screen_key:
                await pilot.press(screen_key)
                await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="the gates queue")
            text = bar_text(app)
            assert len(text.rstrip()) <= width, text
            assert "? Help" in text and "q Quit" in text, text
        await pilot.click(KeyBar, offset=(x_of(app, "? Help"), 0))
        await until(pilot, lambda: type(app.screen).__name__ == "Help", what="the click on ? to open help")
