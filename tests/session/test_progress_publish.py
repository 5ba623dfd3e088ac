"""A live session publishes lines that only move its counts at most once per PROGRESS_SECONDS
(runtime/session/journal.py `Journal.progress`), the last of them by a timer; a line with a verdict or a hello is
published at once."""

from __future__ import annotations

import asyncio
from typing import Any

from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import SessionState
from tests.agents.paced_flood import event_line
from tests.support.waiting import until


def reading_session(published: list[str], sets: tuple[str, ...] = ()) -> LiveSession:
    def sink(kind: str, session_id: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
        published.append(kind)

    session = LiveSession(SessionSpec(id="s1", name="counts", command=["agent"]), load_config(env={}, sets=sets),
                          adapters()["native"](), sink=sink)
    session.pid, session.state = 4321, SessionState.RUNNING
    return session


def line(i: int) -> bytes:
    """paced_flood.py's cycle: varied events no guard fires on."""
    return event_line(i, 1.0).encode()


def test_counts_alone_are_published_once_then_by_a_timer() -> None:
    async def go() -> None:
        published: list[str] = []
        session = reading_session(published)
        stdout = session.reader.read_stdout()  # not connected: the test hands it chunks
        stdout.data_received(line(1))
        assert published.count("session") == 1  # the first: at once
        for i in range(2, 50):
            stdout.data_received(line(i))
        assert published.count("session") == 1 and "verdict" not in published  # counts alone, within the second
        assert session.journal.progress_timer is not None and session.health.events == 49
        await until(lambda: published.count("session") == 2, timeout=10)  # the timer tells the rest
        assert session.journal.progress_timer is None

    asyncio.run(go())


def test_a_hello_or_a_verdict_is_published_at_once() -> None:
    async def go() -> None:
        published: list[str] = []
        session = reading_session(published, ("repetition.max_identical_calls=1",))
        stdout = session.reader.read_stdout()  # not connected: the test hands it chunks
        stdout.data_received(line(1))
        stdout.data_received(b'{"type":"hello","name":"agent","handshake":false}\n')
        assert published.count("session") == 2  # a hello: at once
        call = b'{"type":"tool_call","tool":"read_file","args":{"path":"a.py"}}\n'
        stdout.data_received(call)
        assert published.count("session") == 2  # no verdict yet (near miss): held
        stdout.data_received(call)
        assert "verdict" in published and published.count("session") == 3  # blocked: at once
        if session.journal.progress_timer is not None:
            session.journal.progress_timer.cancel()

    asyncio.run(go())

