"""The daemon's moderated event loop (runtime/eventloop.py): a busy loop wakes at most once per gap,
a quiet one at once, and a timer due sooner is never delayed."""

from __future__ import annotations

import asyncio
import os
import selectors
from collections.abc import Iterator
from contextlib import contextmanager

from loopwarden.runtime.eventloop import WAKE_GAP, ModeratedSelector, moderated_loop
from tests.support.clock import Clock


@contextmanager
def ready_pipe(t: Clock) -> Iterator[ModeratedSelector]:
    """A selector (1 ms gap, fake time) over a pipe with a byte waiting: select() returns it without blocking."""
    selector = ModeratedSelector(0.001, t, t.sleep)
    r, w = os.pipe()
    os.write(w, b"x")
    selector.register(r, selectors.EVENT_READ)
    try:
        yield selector
    finally:
        selector.close()
        os.close(r)
        os.close(w)


def test_a_loop_woken_again_within_the_gap_first_lets_the_rest_of_the_gap_pass() -> None:
    t = Clock(100.0)
    with ready_pipe(t) as selector:
        assert len(selector.select(None)) == 1 and t.slept == []  # quiet until now: at once
        t.now += 0.0004  # the loop ran for 0.4 ms and would wait again
        assert len(selector.select(None)) == 1
        assert len(t.slept) == 1 and abs(t.slept[0] - 0.0006) < 1e-9
        t.slept.clear()
        t.now += 0.002  # longer than the gap since the last wake-up: at once (near miss)
        assert len(selector.select(5.0)) == 1 and t.slept == []


def test_a_timer_due_sooner_and_a_loop_with_work_ready_are_never_held() -> None:
    t = Clock(100.0)
    with ready_pipe(t) as selector:
        selector.select(None)
        assert len(selector.select(0.0002)) == 1 and t.slept == []  # a timer due in 0.2 ms: not held for the gap
        assert len(selector.select(0)) == 1 and t.slept == []  # callbacks ready: the loop only polls


def test_a_loop_waiting_to_write_is_never_held() -> None:
    """A reply larger than the socket's buffer goes out a write per wake-up: none of them waits for the gap."""
    t = Clock(100.0)
    with ready_pipe(t) as selector:
        r, w = os.pipe()
        try:
            selector.register(w, selectors.EVENT_WRITE)
            selector.select(None)
            t.now += 0.0004
            assert selector.select(None) and t.slept == []  # would be held without the writer
            selector.modify(w, selectors.EVENT_READ)  # it wrote everything: moderated again (near miss)
            t.now += 0.0004
            selector.select(None)
            assert len(t.slept) == 1
            selector.modify(w, selectors.EVENT_WRITE)
            selector.unregister(w)
            t.now += 0.0004
            selector.select(None)
            assert len(t.slept) == 2
        finally:
            os.close(r)
            os.close(w)


def test_the_moderated_loop_runs_asyncio_as_usual() -> None:
    loop = moderated_loop()
    try:
        selector = loop._selector  # type: ignore[attr-defined]
        assert isinstance(selector, ModeratedSelector) and selector.gap == WAKE_GAP

        async def echo() -> bytes:
            r, w = os.pipe()
            reader = asyncio.StreamReader()
            await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                               os.fdopen(r, "rb", buffering=0))
            for _ in range(50):  # many wake-ups in a row, each within the gap of the last
                os.write(w, b"x")
                await reader.readexactly(1)
            os.close(w)
            return await reader.read()

        assert loop.run_until_complete(echo()) == b""
    finally:
        loop.close()
