"""After an operator's kill has ended every process of a session, its ticker returns at once
(runtime/session/ticker.py): nothing of the session runs or can start again, so there is no deadline left to tick
for, and no wake-up, timer and cancel scope for it to spend at the end. Real agent, real pipe held by this test."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import FINAL_STATES, SessionState
from tests.support.waiting import until

# the agent hands its stdout to whoever listens at argv[1] (a process outside the session holds it), then sleeps
HANDS_OVER = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
socket.send_fds(s, [b"x"], [1])
print("handed over", flush=True)
time.sleep(600)
"""


def ticker_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "_ticker" in t.get_name()]


def test_the_ticker_returns_once_a_kill_has_ended_everything(tmp_path: Path) -> None:
    """The ticker is gone while the session's output is still being read (held open by this test, so the reading
    lasts until the test lets go of the pipe), instead of waiting for the session's last wake-up."""
    async def go() -> None:
        records: list[tuple[str, dict[str, Any]]] = []

        def sink(kind: str, session_id: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
            records.append((kind, data))

        path = str(tmp_path / "fd.sock")
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(path)
        listener.listen(1)
        listener.setblocking(False)
        spec = SessionSpec(id="s1", name="held", command=[sys.executable, "-c", HANDS_OVER, path], adapter="plain")
        session = LiveSession(spec, load_config(env={}), adapters()["plain"](), sink=sink)
        task = asyncio.create_task(session.run())
        conn, _ = await asyncio.wait_for(asyncio.get_running_loop().sock_accept(listener), 20)
        conn.setblocking(True)
        _, fds, _, _ = socket.recv_fds(conn, 16, 1)
        held = fds[0]
        try:
            await until(lambda: any("handed over" in str(data) for kind, data in records if kind == "event"))
            await until(lambda: session.ticker.idle)
            assert len(ticker_tasks()) == 1
            assert session.kill_soon("test")
            await until(lambda: session.containment.emptied)
            await until(lambda: not ticker_tasks(), 2.0)  # the ticker has returned...
            assert session.state not in FINAL_STATES  # ... while the output is still being read (we hold the pipe)
        finally:
            os.close(held)
            conn.close()
            listener.close()
        await asyncio.wait_for(task, 20)
        assert session.state == SessionState.TERMINATED and not session.drain_abandoned

    asyncio.run(go())
