"""The console lets go of what it no longer shows: memory stays flat however long it runs.

Counted as live widgets no longer in the DOM (or style caches) after a sweep and a garbage
collection. Textual 8.2.8 keeps some of what is gone: a method cache keyed by each widget's
style cache, and toast holders left in the rack; ConsoleApp.prune_dead_widgets sweeps them
every two seconds. Textual's Footer, rebuilt widget by widget on each screen switch and kept
alive by reactive watchers, lost about 220 KiB per g/escape; the console's KeyBar is one widget.
"""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest
from textual import events
from textual._styles_cache import StylesCache
from textual.widget import Widget

from loopwarden.widgets.app import ConsoleApp, Sessions
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.gates import GatesQueue
from tests.console.frozen import NOW, SESSIONS, FrozenFeed
from tests.console.helpers import until
from tests.support.daemon import Harness

pytestmark = pytest.mark.anyio

# What is left after a sweep is what Textual is still delivering messages to, whatever the count.
SLACK = 40


def dead_widgets(app: ConsoleApp) -> int:
    app.prune_dead_widgets()
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, Widget) and not o.is_attached)


async def test_screen_switches_leave_no_dead_widgets_behind() -> None:
    app = ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(), clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")

        async def switch(times: int) -> int:
            for _ in range(times):
                await pilot.press("g")
                await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="the gates queue")
                await pilot.press("escape")
                await until(pilot, lambda: isinstance(app.screen, Sessions), what="the sessions screen")
            await pilot.pause()
            return dead_widgets(app)

        before = await switch(3)
        after = await switch(10)
        assert after <= before + SLACK, f"{after - before} more dead widgets after 10 more g/escape"

        # keys faster than the console draws: the hidden screen collects footers it never paints
        for _ in range(60):
            for key in ("g", "escape"):
                app.post_message(events.Key(key, None))
        await until(pilot, lambda: isinstance(app.screen, Sessions) and not app._message_queue.qsize(),
                    what="the burst of keys to be handled")
        await pilot.pause()
        burst = dead_widgets(app)
        assert burst <= before + SLACK, f"{burst - before} more dead widgets after a burst of 60 g/escape"


def count(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


async def test_toasts_leave_nothing_behind() -> None:
    app = ConsoleApp(Path("/nonexistent"), feed=FrozenFeed(), clock=lambda: NOW)  # type: ignore[arg-type]
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await until(pilot, lambda: app.table.row_count == len(SESSIONS), what="the sessions")
        rack = app.screen.query_one("ToastRack")

        # A busy console: a toast's notification expires while the loop is blocked, before the
        # toast's own timer fires; the next toast finds it stale. Textual removed the toast
        # and left its holder in the rack.
        for i in range(8):
            app.notify(f"toast {i}", timeout=0.5)
            await until(pilot, lambda: rack.query("Toast"), what="the toast on screen")
            time.sleep(0.6)  # noqa: ASYNC251 - a busy event loop is the condition under test, not a wait
        await until(pilot, lambda: not app._notifications and not rack.query("Toast"), what="the toasts to go")
        app.prune_dead_widgets()
        await until(pilot, lambda: not rack.children, what="the empty holders to go")

        # A toast's style cache (with its rendered lines) must not outlive it.
        for i in range(100):
            app.notify(f"toast {i}", timeout=0.2)
            await pilot.pause()  # drawn: a toast is cached when it is drawn
        await until(pilot, lambda: not app._notifications and not rack.query("Toast"), what="100 toasts to go")
        app.prune_dead_widgets()
        await until(pilot, lambda: not rack.children, what="the empty holders to go")
        gc.collect()
        live = sum(1 for _ in app.screen.walk_children(with_self=True)) + len(app.screen_stack) + 10
        assert count(StylesCache) - live <= SLACK, f"{count(StylesCache)} style caches for {live} widgets"


async def test_opening_and_closing_the_detail_leaves_no_dead_widgets_behind(lw: Harness) -> None:
    sid = lw.scenario("repetition")
    app = ConsoleApp(lw.paths, autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: sid in app.table.rows, what="the session's row")

        async def open_and_close(times: int) -> int:
            for _ in range(times):
                await pilot.press("enter")
                detail = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDetail) else None,
                                     what="the detail")
                await until(pilot, lambda detail=detail: detail.history_done, what="the detail's history")
                await pilot.press("escape")
                await until(pilot, lambda: isinstance(app.screen, Sessions), what="the sessions screen")
            await pilot.pause()
            return dead_widgets(app)

        before = await open_and_close(2)
        await open_and_close(8)
        # a closed detail stays reachable until its timers' last sleeps end (a second or two)
        await until(pilot, lambda: dead_widgets(app) <= before + SLACK, timeout=10,
                    what=f"the dead widgets of 8 more enter/escape to go (they were {before} after 2)")
