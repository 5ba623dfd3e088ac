"""The agent's stdin: lines for the agent, queued in order and written once what they answer is stored."""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable
from typing import Final

import anyio
import anyio.lowlevel

from ...sessions.base import Adapter
from ...supervisor import messages
from ...supervisor.health import GATED, SessionHealth
from ..keeper_link import KeeperLink
from ..keeper_wire import frame
from ..pipes import InputPipe
from .agent import Agent
from .journal import Journal
from .process import AgentProcess
from .spec import Records
from .tasks import Tasks, Wake

STDIN_OPTIONAL: Final = 64 << 10  # bytes queued for the agent past which nudges are dropped (and counted)
ESSENTIAL_KINDS: Final = frozenset({"guidance", "operator", "authority"})  # injected texts never dropped


class InputWriter:
    """Queues lines for the agent's stdin and writes them, by a task started with the first line (most agents are
    never written to), each once the records it answers are durable (write ahead: a verdict never reaches an agent
    before its event is stored). An empty line closes stdin."""

    def __init__(self, sid: str, agent: Agent, health: SessionHealth, journal: Journal, process: AgentProcess,
                 records: Records | None, tasks: Tasks, wake: Wake) -> None:
        self.sid = sid
        self.agent = agent
        self.health = health
        self.journal = journal
        self.process = process
        self.records = records
        self.tasks = tasks
        self.wake = wake
        self.fd: int | None = None  # our end of the agent's stdin until the writer task takes it
        self.out: deque[tuple[int, bytes]] = deque()  # (durability mark, line) for the agent's stdin
        self.out_bytes = 0
        self.ready: anyio.Event | None = None  # set when lines wait; None until supervision starts: nothing is sent
        self.closed = False
        self.dropped = 0  # optional lines (nudges) not sent because the agent reads too slowly, or at all
        self.deaf: str | None = None  # why the agent is being stopped for not reading its input
        self.started = False  # the writer task runs from the first line queued
        self.idle = True  # it waits for nothing but its wake-up, returned, or never started
        self.kept: InputPipe | None = None  # the keeper's frame connection, when the keeper holds the agent
        self.seq: Callable[[], int] = lambda: 0  # the stdout line a line queued now answers (the reader's)
        self.remember: Callable[[], None] = lambda: None  # store the adapter's memory before a kept agent's line
        self.keeper: KeeperLink | None = None
        self.due: tuple[int, int] | None = None  # (store mark, stdout line seq) to tell the keeper once stored

    def inject(self, text: str, kind: str, rule: str, model: str | None = None) -> None:
        """Text for the model, in the adapter's form (nothing for an adapter that cannot inject)."""
        line = self.agent.adapter.inject_line(text, kind, rule, model)
        if line:
            self.send(line, essential=kind in ESSENTIAL_KINDS)

    def send_replies(self) -> None:
        """Lines the adapter owes the agent after a line was read or a gate decided."""
        adapter = self.agent.adapter
        if type(adapter).replies is Adapter.replies:  # the base never owes one: not asked after every line
            return
        for data in adapter.replies(self.health.state == GATED):
            self.send(data)

    def send(self, data: bytes, *, essential: bool = True) -> None:
        """Queue a line for the agent's stdin. Verdict, spill and stop lines are never dropped (a handshake agent
        waits for them); optional ones (nudges) are, and counted, once STDIN_OPTIONAL bytes wait. An agent that
        leaves limits.stdin_backlog bytes unread is stopped. An empty line closes stdin."""
        if self.ready is None or self.closed:
            return
        self.journal.flush_rows()  # the mark below must cover the events this line answers
        if self.kept is not None:
            self.remember()  # what writing changed in the adapter is stored before the line may reach the agent
            self._send_kept(self.kept, data, essential)
            return
        if data and not essential and self.out_bytes >= STDIN_OPTIONAL:
            self.dropped += 1
            return
        self.out.append((self.records.mark(self.sid) if self.records is not None else 0, data))
        self.out_bytes += len(data)
        self.ready.set()
        if not self.started:
            self.start()
        limit = self.health.config.limits.stdin_backlog
        if limit and self.out_bytes > limit and self.deaf is None and not self.process.stopping:
            self.deaf = messages.deaf_agent(self.out_bytes, limit)
            self.wake.set()

    def _send_kept(self, pipe: InputPipe, data: bytes, essential: bool) -> None:
        """To the keeper at once, tagged with the line it answers: the keeper lets it through once that line is
        stored (write ahead, as below), and holds it across a daemon's death meanwhile."""
        waiting = pipe.buffered
        if data and not essential and waiting >= STDIN_OPTIONAL:
            self.dropped += 1
            return
        seq = self.seq()
        if not pipe.write_now(frame(seq, data)):
            self.dropped += 1
            return
        if not data:
            self.closed = True
        # the keeper is told as soon as the line it answers is stored (a small write of its own, as a handshake
        # verdict gets below), not at the next flush
        self.due = (self.records.mark(self.sid) if self.records is not None else 0, seq)
        assert self.ready is not None
        self.ready.set()
        if not self.started:
            self.start()
        limit = self.health.config.limits.stdin_backlog
        if limit and waiting > limit and self.deaf is None and not self.process.stopping:
            self.deaf = messages.deaf_agent(waiting, limit)
            self.wake.set()

    async def open_kept(self, keeper: KeeperLink) -> None:
        """The keeper holds the agent: its stdin is written through the keeper, from now on."""
        assert self.fd is not None
        fd, self.fd = self.fd, None
        self.keeper = keeper
        self.kept = await InputPipe.open(fd)

    async def _tell_keeper(self) -> None:
        """The writer task of a kept agent: each time lines went to the keeper, wait until what the last one answers
        is stored, and say so (the keeper then lets them through)."""
        assert self.ready is not None and self.keeper is not None
        while True:
            self.idle = True
            await self.ready.wait()
            self.idle = False
            if self.tasks.finishing:
                return
            self.ready = anyio.Event()
            due, self.due = self.due, None
            if due is None:
                continue
            mark, seq = due
            if self.records is not None:
                await self.records.durable(self.sid, mark)
            self.keeper.stored_lines(self.sid, seq)

    def start(self) -> None:
        """The writer task, started with the first line queued. A line queued by a read callback (no task runs it,
        so none can be started there) has the ticker start it."""
        if self.started or self.tasks.group is None or self.tasks.finishing:
            return
        if asyncio.current_task() is None:
            self.wake.set()  # (the ticker looks at `waiting`)
            return
        self.started, self.idle = True, False
        self.tasks.start(self._write_stdin if self.kept is None else self._tell_keeper, name=f"{self.sid} _write_stdin")

    @property
    def waiting(self) -> bool:
        """Lines wait for a writer task not started yet."""
        return (bool(self.out) or self.due is not None) and not self.started

    def close_fd(self) -> None:
        """Our end of stdin, when no writer task took it."""
        if self.kept is not None:
            self.kept.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    async def _write_stdin(self) -> None:
        pipe: InputPipe | None = None
        try:
            assert self.fd is not None
            fd, self.fd = self.fd, None
            pipe = await InputPipe.open(fd)
            await self._write_lines(pipe)
        finally:
            self.idle = True  # returned: nothing of it to cancel
            if pipe is not None:
                pipe.close()

    async def _write_lines(self, stdin: InputPipe) -> None:
        assert self.ready is not None
        while True:
            self.idle = True
            await self.ready.wait()
            self.idle = False
            if self.tasks.finishing:  # the agent is gone: what is left would not reach it
                return
            self.ready = anyio.Event()
            if not await self._write_queued(stdin):
                return

    async def _write_queued(self, stdin: InputPipe) -> bool:
        """Write what waits, each line once durable; False when stdin is closed (by us, or by the agent)."""
        records = self.records
        while self.out:
            mark, data = self.out[0]
            if records is not None:
                await records.durable(self.sid, mark)  # sent even if the write failed: a full disk never stops it
            self.out.popleft()
            self.out_bytes -= len(data)
            if not data:
                self.closed = True
                self._clear()
                stdin.close()
                await anyio.lowlevel.checkpoint()
                return False
            try:
                await stdin.send(data)
            except OSError:  # (ConnectionResetError, BrokenPipeError: the agent closed it)
                self.dropped += 1 + len(self.out)
                self._clear()
                return False
        return True

    def _clear(self) -> None:
        self.out.clear()
        self.out_bytes = 0
