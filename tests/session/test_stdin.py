"""A live session's stdin (runtime/session/writer.py): a pipe of the daemon's own, whose writer task starts with the
first line queued for the agent. An agent never written to (a plain agent, killed) has no writer task to start, wake and
end; lines reach the agent in order, an empty line closes its stdin, and a pipe the agent does not read waits
(flow control) without holding up the session's end. Real agents, real pipes."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

from loopwarden.runtime.pipes import InputPipe
from loopwarden.runtime.session import LiveSession, SessionSpec
from loopwarden.sessions.registry import adapters
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import SessionState, Termination
from tests.support.waiting import until


def plain_session(command: list[str], records: list[tuple[str, dict[str, Any]]]) -> LiveSession:
    def sink(kind: str, session_id: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
        records.append((kind, data))

    spec = SessionSpec(id="s1", name="stdin", command=command, adapter="plain")
    return LiveSession(spec, load_config(env={}), adapters()["plain"](), sink=sink)


def writer_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if "_write_stdin" in t.get_name()]


def running(session: LiveSession) -> Callable[[], bool]:
    return lambda: session.state == SessionState.RUNNING and session.ticker.idle


def test_an_agent_never_written_to_has_no_writer_task() -> None:
    """A plain agent, killed: no stdin writer task was started, woken or ended for it."""
    async def go() -> None:
        records: list[tuple[str, dict[str, Any]]] = []
        session = plain_session(["sleep", "600"], records)
        task = asyncio.create_task(session.run())
        await until(running(session))
        assert writer_tasks() == []
        assert session.kill_soon("test")
        await asyncio.wait_for(task, 20)
        assert session.state == SessionState.TERMINATED and session.containment.emptied

    asyncio.run(go())


def test_lines_reach_the_agent_in_order_and_an_empty_line_closes_its_stdin() -> None:
    async def go() -> None:
        records: list[tuple[str, dict[str, Any]]] = []
        echo = ("import sys\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n"
                "print('eof', flush=True)")
        session = plain_session([sys.executable, "-c", echo], records)
        task = asyncio.create_task(session.run())
        await until(running(session))
        for i in range(3):
            session.writer.send(f"line {i}\n".encode())
        assert len(writer_tasks()) == 1
        session.writer.send(b"")  # closes stdin: the agent reads EOF and exits by itself
        await asyncio.wait_for(task, 20)
        texts = [str(data.get("text") or data.get("line") or data) for kind, data in records if kind == "event"]
        shown = "\n".join(texts)
        assert shown.index("got line 0") < shown.index("got line 1") < shown.index("got line 2") < shown.index("eof")
        assert session.state == SessionState.EXITED and session.exit_code == 0 and session.stdin_dropped == 0
        assert writer_tasks() == []

    asyncio.run(go())


def test_a_full_stdin_waits_and_does_not_hold_up_the_end() -> None:
    """An agent that never reads: the pipe fills, the writer waits for room; a kill ends the session all the same."""
    async def go() -> None:
        records: list[tuple[str, dict[str, Any]]] = []
        session = plain_session(["sleep", "600"], records)
        task = asyncio.create_task(session.run())
        await until(running(session))
        line = b"x" * 1023 + b"\n"
        for _ in range(400):  # 400 KiB: far more than a pipe holds (and under limits.stdin_backlog)
            session.writer.send(line)
        await until(lambda: not session.writer.idle and len(session.writer.out) > 0)
        await asyncio.sleep(0.2)
        assert session.writer.out, "the agent reads nothing: lines must still be waiting"
        assert session.kill_soon("test")
        await asyncio.wait_for(task, 20)
        assert session.state == SessionState.TERMINATED and session.containment.emptied
        assert writer_tasks() == []

    asyncio.run(go())


def test_lines_for_an_agent_that_closed_its_stdin_are_dropped_and_counted() -> None:
    """The pipe's reader is gone: the first write fails, the transport is lost, later lines are dropped; the session
    runs on until it is killed (no failure of the supervisor's own)."""
    async def go() -> None:
        records: list[tuple[str, dict[str, Any]]] = []
        closer = "import os, time\nos.close(0)\nprint('closed', flush=True)\ntime.sleep(600)"
        session = plain_session([sys.executable, "-c", closer], records)
        task = asyncio.create_task(session.run())
        await until(lambda: any("closed" in str(data) for kind, data in records if kind == "event"))
        for i in range(5):
            session.writer.send(f"line {i}\n".encode())
            await asyncio.sleep(0.02)
        await until(lambda: session.stdin_dropped > 0 and session.writer.idle)
        assert session.state == SessionState.RUNNING
        assert session.kill_soon("test")
        await asyncio.wait_for(task, 20)
        assert session.state == SessionState.TERMINATED
        assert session.health.termination_reason == Termination.OPERATOR

    asyncio.run(go())


def test_a_bug_in_judging_before_any_stdin_line_ends_the_session_as_crashed() -> None:
    """A bug of ours (judging raises) before anything was written to the agent: the crash path's stop line must not
    try to start the stdin writer in the task group that has just closed; run() waits for the agent and returns
    with the session crashed."""
    agent = "import time\nprint('{\"type\":\"message\",\"text\":\"hi\"}', flush=True)\ntime.sleep(600)"

    async def go() -> None:
        records: list[tuple[str, dict[str, Any]]] = []

        def sink(kind: str, session_id: str, data: dict[str, Any], size: int = 0, at: float | None = None) -> None:
            if kind == "event":  # the judged line's record: a bug of ours while judging it
                raise ValueError("a bug of ours")
            records.append((kind, data))

        spec = SessionSpec(id="s1", name="bug", command=[sys.executable, "-c", agent], adapter="native")
        session = LiveSession(spec, load_config(env={}), adapters()["native"](), sink=sink)
        await asyncio.wait_for(session.run(), 30)
        assert session.state == SessionState.TERMINATED
        assert session.health.termination_reason == Termination.CRASHED
        assert session.containment.emptied and session.process is not None
        assert session.process.returncode is not None
        assert any("supervision failed" in str(data.get("text")) for kind, data in records if kind == "log")

    asyncio.run(go())


def test_a_line_written_as_the_agent_closes_its_stdin_is_not_counted_as_sent() -> None:
    """The agent's end closed before the loop noticed: the write itself meets EPIPE, and the transport reports the
    loss only later. The line did not reach the agent, so sending it fails (and the writer counts it as dropped)."""
    async def go() -> None:
        read_end, write_end = os.pipe()
        pipe = await InputPipe.open(write_end)
        os.close(read_end)
        try:
            with pytest.raises(ConnectionResetError):
                await pipe.send(b'{"type":"verdict"}\n')
            with pytest.raises(ConnectionResetError):
                await pipe.send(b"the next line\n")
        finally:
            pipe.close()

    asyncio.run(go())
