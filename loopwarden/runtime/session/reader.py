"""The agent's stdout and stderr, read as they come: each line decoded by the adapter, judged and carried out.

Both pipes are read through the loop's callbacks (runtime/pipes.py): each chunk's lines are judged and carried out
in the read callback, with no task switch per line. Only what must wait (a stop, the store's backpressure, a bug of
ours) pauses a pipe and hands the rest to the pump task, which takes the held lines in order (`_catch_up`) and
resumes the reading. stdout's lines are judged (`take`); stderr's logged, or judged when the adapter makes events of
them (`take_stderr`).
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, BinaryIO, Final

import anyio
import anyio.lowlevel

from ...sessions import detect
from ...supervisor import kinds
from ...supervisor.events import Event, Hello, ToolCall
from ...supervisor.health import GATED, SessionHealth
from ...supervisor.lines import LineSplitter, LongLine, Oversized, TextSink, oversized_line
from ...supervisor.longline import PREFIX_CHARS, STREAM_FROM, line_event
from ...supervisor.verdicts import Verdict
from ..keeper_channels import KeptStream, close_source
from ..pipes import Item, Later, OutputPipe, Take
from .agent import Agent
from .interventions import Interventions
from .journal import Journal
from .judge import Judge
from .spec import Records
from .spills import Spills
from .writer import InputWriter

DRAIN_STALLED: Final = 5.0  # after exit and leftovers killed, stop reading when no byte came for this long
YIELD_EVERY: Final = 32  # lines: a flooding agent must not starve the other sessions or the socket
STDERR_LINE: Final = 64 << 10  # bytes of an stderr line kept; a longer one is logged by its length
POSITION_SECONDS: Final = 0.5  # a kept agent's position is stored at most this often (the keeper holds the rest)
FORGET_UNFINISHED: Final = 1 << 20  # bytes of an unfinished line read before the keeper is told to forget them
OVERSIZED_COST: Final = 256  # bytes an over-long line costs once read: only its head is kept
_ANSWERED: Final = (Hello, ToolCall)  # events carried out even without a verdict (a welcome, a verdict line)


class OutputReader:
    """Reads the agent's output and hands each line on: stdout's decoded by the adapter (its typed lines on the
    per-line path, else its parser), judged (Judge) and carried out (Interventions); stderr's logged. When the user
    named no adapter, the first stdout line chooses it (sessions/detect.py)."""

    def __init__(self, sid: str, agent: Agent, health: SessionHealth, journal: Journal, judge: Judge,
                 interventions: Interventions, writer: InputWriter, spills: Spills, records: Records | None) -> None:
        self.sid = sid
        self.agent = agent
        self.health = health
        self.journal = journal
        self.judge = judge
        self.interventions = interventions
        self.writer = writer
        self.spills = spills
        self.records = records
        self.stdout_fd: int | KeptStream | None = None  # each pipe's fd until the pump task connects it
        self.stderr_fd: int | KeptStream | None = None
        self._stdout: OutputPipe | None = None
        self._stderr: OutputPipe | None = None
        self.seq = 0  # stdout's lines so far
        self._stderr_seq = 0
        self._wake = anyio.Event()  # the pump task's
        self.waiting_for_store = False
        self.drain_abandoned = False
        self.kept = False  # the keeper holds the agent: how far its output is stored goes to the store too
        self.skip_until = 0  # stdout lines up to this one were judged and stored by an earlier daemon
        self.remembered = 0  # ... and the adapter's memory it stored covers those up to this one
        self._bases = (0, 0, 0)  # (stdout offset, stdout line seq, stderr offset) where this daemon's reading began
        self._position = (0, 0, 0)  # the last position stored: (stdout offset, its line seq, stderr offset)
        self._positioned = 0.0  # loop time it was queued
        self._memory: dict[str, Any] | None = None  # the adapter's memory stored with it
        self._later: asyncio.TimerHandle | None = None  # the position due at the end of the interval
        # the keeper may forget a kept agent's unfinished stdout line from (its start, up to here)
        self.consumed: Callable[[int, int], None] | None = None
        self.mid_line = False  # a taken-up agent's stdout starts inside a line (its start was forgotten)
        self.held_until_caught_up: list[tuple[ToolCall, Verdict | None]] = []  # (see caught_up)

    # ---- the pump task ----------------------------------------------------------
    async def pump(self, done: asyncio.Future[None]) -> None:
        """Read both pipes to their end; `done` is set then."""
        await self._pump_output()
        if self._later is not None:
            self._later.cancel()
        done.set_result(None)

    async def _pump_output(self) -> None:
        assert self.stdout_fd is not None and self.stderr_fd is not None
        self._wake = anyio.Event()
        pipes = [self.read_stdout(), self.read_stderr()]
        files = [_source(self.stdout_fd), _source(self.stderr_fd)]
        self.stdout_fd = self.stderr_fd = None
        try:
            for pipe, file in zip(pipes, list(files), strict=True):
                await pipe.connect(file)
                files.remove(file)  # the transport owns it now
            reading = list(pipes)
            while reading:
                await self._wake.wait()
                self._wake = anyio.Event()
                await self._serve(pipes, reading)
        finally:
            for file in files:
                file.close()  # never connected (cancelled first)
            for pipe in pipes:
                if pipe.transport is not None:
                    pipe.transport.close()
            self.spills.drop_streams()  # long lines cut short (the reading stopped or failed): their files go

    async def _serve(self, pipes: list[OutputPipe], reading: list[OutputPipe]) -> None:
        """What woke the pump task: a bug of ours raised, held lines taken, ended pipes finished."""
        for pipe in pipes:
            if pipe.failed is not None:
                raise pipe.failed
        for pipe in pipes:
            if pipe.held:
                later, pipe.later = pipe.later, None
                await self._catch_up(pipe.items, pipe.take, later)
                pipe.resume()
        for pipe in pipes:
            if pipe.done and pipe in reading:
                reading.remove(pipe)
                await self._finish_pipe(pipe)

    def read_stdout(self) -> OutputPipe:
        """stdout's reader, not yet connected: its lines judged (`take`), the session published per chunk."""
        progress = self._kept_progress if self.kept else self.journal.progress
        self._stdout = OutputPipe(LineSplitter(self.max_line(), self._open_long, STREAM_FROM), self.take,
                                  self._wake_pump, self.records, progress, self._kept_partial if self.kept else None)
        self._stdout.splitter.lines = self._bases[1]
        if self.mid_line:  # the rest of that line is passed over as one over-long line
            self._stdout.splitter.skipping = 1
        return self._stdout

    def read_stderr(self) -> OutputPipe:
        """stderr's reader, not yet connected: its lines logged, or judged (`take_stderr`)."""
        self._stderr = OutputPipe(LineSplitter(STDERR_LINE), self.take_stderr, self._wake_pump, self.records)
        return self._stderr

    async def _finish_pipe(self, pipe: OutputPipe) -> None:
        """A pipe's end: its last line, if it had no newline; stdout publishes after each."""
        for item in pipe.splitter.finish():
            later = pipe.take(item)
            if pipe is self._stdout:
                self.journal.publish()
            if later is not None:
                await later()

    def resume_at(self, out: int, seq: int, judged: int, err: int, remembered: int, mid_line: bool) -> None:
        """An earlier daemon stored this agent's output up to here: reading starts at stdout offset `out` (line
        `seq`), lines up to `judged` are passed over (stored already; those after line `remembered`, where the
        adapter's stored memory was taken, are read again by the adapter alone), stderr starts at `err`; `mid_line`:
        `out` is inside line `seq` + 1, whose start the keeper had forgotten."""
        self.seq, self.skip_until, self.remembered, self.mid_line = seq, judged, remembered, mid_line
        self._bases = self._position = (out, seq, err)

    def caught_up(self) -> None:
        """A taken-up agent's stored lines were all read again, so its adapter knows the requests the calls held by
        a pending gate wait on: they join the calls waiting for a gate now, and are answered at once if it was
        decided meanwhile."""
        held, self.held_until_caught_up = self.held_until_caught_up, []
        if held:
            self.interventions.held.extend(held)
            if self.health.state != GATED:
                self.interventions.after_gates()

    def _kept_progress(self) -> None:
        """Lines were judged: as for any session, and where the stored output ends goes to the store with them
        (`_kept_position`)."""
        self.journal.progress()
        self._kept_partial()

    def _kept_partial(self) -> None:
        """More of a kept agent's output was read: its position is stored at most every POSITION_SECONDS, and at
        the end of the interval for what was read meanwhile (an agent may wait in silence for its answer)."""
        if self._later is not None:  # (the per-chunk path: a store is due already)
            return
        loop = asyncio.get_running_loop()
        wait = self._positioned + POSITION_SECONDS - loop.time()
        if wait <= 0:
            self._kept_position()
        else:
            self._later = loop.call_later(wait, self._kept_position)

    def _kept_position(self) -> None:
        """Where the stored output ends goes to the store (a stdout offset after a whole line taken, with that
        line's seq, and the adapter's memory then), so the keeper can forget what precedes it and a next daemon
        knows where to begin. Of a line still unfinished, the keeper may forget what this daemon has read once
        the line's start is stored: a line longer than the keeper keeps would otherwise never end."""
        if self._later is not None:
            self._later.cancel()
            self._later = None
        self._positioned = asyncio.get_running_loop().time()
        out, seq, err = self._position
        base_out, _, base_err = self._bases
        pipe = self._stdout
        if pipe is not None:
            splitter = pipe.splitter
            read = base_out + pipe.bytes_read
            if splitter.lines == self.seq:  # every whole line read was taken: the position is the next one's start
                out, seq = read - splitter.unfinished, self.seq
                if splitter.unfinished >= FORGET_UNFINISHED and self.consumed is not None:
                    self.consumed(out, read)
        pipe = self._stderr
        if pipe is not None and not pipe.held and not pipe.splitter.skipping:
            err = base_err + pipe.bytes_read - len(pipe.splitter.buffer)
        memory = self.agent.adapter.memory()
        if (out, seq, err) != self._position or memory != self._memory:
            self._store_position(out, seq, err, memory)

    def remember(self) -> None:
        """A line is about to be written to a kept agent: what writing it changed in its adapter (a request id
        given out, an answer sent, a message counted) is stored first, with the position stored last, so that the
        next daemon recalls it even when the agent writes nothing more before this daemon dies."""
        memory = self.agent.adapter.memory()
        if memory != self._memory:
            self._store_position(*self._position, memory)

    def _store_position(self, out: int, seq: int, err: int, memory: dict[str, Any] | None) -> None:
        """A kept agent's position and its adapter's memory, which covers the lines taken so far."""
        self._position, self._memory = (out, seq, err), memory
        self.journal.sink("position", {"out_offset": out, "out_seq": seq, "judged_seq": self.seq,
                                       "err_offset": err, "memory": memory})

    def _wake_pump(self) -> None:
        self._wake.set()

    def close_fds(self) -> None:
        """The pipes no pump task took (the agent did not start, or supervision failed first)."""
        for fd in (self.stdout_fd, self.stderr_fd):
            if fd is not None:
                close_source(fd)
        self.stdout_fd = self.stderr_fd = None

    async def drain(self, pumps_done: asyncio.Future[None]) -> None:
        """After the agent and its leftovers are gone, read what they wrote until EOF, however far behind the
        store is. Only a pipe held open by a process outside the session, with no byte for DRAIN_STALLED, ends
        the reading early; that is logged, never silent."""
        while not pumps_done.done():
            before = self._bytes_read(), self.seq
            await asyncio.wait((pumps_done,), timeout=DRAIN_STALLED)  # (a future and a timer: no cancel scope)
            # reading paused while held lines are judged, or the store is behind, is progress, not a stall
            busy = any(pipe.held for pipe in self._pipes()) or self.waiting_for_store
            if not pumps_done.done() and (self._bytes_read(), self.seq) == before and not busy:
                self.drain_abandoned = True
                self.journal.report(f"stopped reading the agent's output {DRAIN_STALLED:.0f} s after it ended: "
                                    "a process outside the session still holds its pipe open", error=True)
                return

    def _pipes(self) -> tuple[OutputPipe, ...]:
        return tuple(pipe for pipe in (self._stdout, self._stderr) if pipe is not None)

    def _bytes_read(self) -> int:
        return sum(pipe.bytes_read for pipe in self._pipes())

    async def _catch_up(self, items: deque[Item], take: Take, later: Later | None) -> None:
        """While a pipe's reading is paused: what had to wait (`later`), the held `items` in order (each
        taken by `take`), the store's backpressure. (Nothing is held meanwhile but more `items`.)"""
        progress = self.journal.progress
        taken = 0
        while True:
            if later is not None:
                progress()  # the lines before it (progress asks little of an unchanged session)
                done, later = later, None
                await done()
            elif items:
                later = take(items.popleft())
                taken += 1
                if taken % YIELD_EVERY == 0:
                    progress()  # once per batch, as per chunk in the read callback
                    await self._yield()
            else:
                progress()
                await self._yield()
                if not items:
                    return

    async def _yield(self) -> None:
        """Let other sessions run, and wait while the store is behind (the agent's pipe fills meanwhile)."""
        records = self.records
        if records is not None and records.over_backlog:
            self.waiting_for_store = True
            try:
                await records.backpressure()
            finally:
                self.waiting_for_store = False
        await anyio.lowlevel.checkpoint()

    # ---- stdout's lines ---------------------------------------------------------
    def take(self, line: Item) -> Later | None:
        """One item from the splitter, dispatched by type: judged and carried out now; or, when something must be
        awaited first (a stop), what to await, and the reading waits for it. A line the adapter's typed lines
        read (the common case) is judged here, its row stored from its record."""
        seq = self.seq = self.seq + 1
        if seq <= self.skip_until:  # stored by an earlier daemon, and sent again by the keeper
            if seq > self.remembered and type(line) is bytes:  # ... after its adapter's memory: read, not judged
                self.agent.adapter.reread(line, seq)
            if seq == self.skip_until:
                self.caught_up()
            return None
        if type(line) is bytes:
            typed_read = self.agent.typed_read
            if typed_read is not None and line:
                read = typed_read(line, seq)
                if read is not None:  # one event, its row stored from its record; nothing owed for a valid line
                    event, record = read
                    kind = type(event)
                    if kind is kinds.HELLO:
                        self.agent.adapter.parsed(event, line)
                    verdicts = self.judge.judge(event, len(line), record)
                    if verdicts or kind in _ANSWERED or self.health.state == GATED:
                        end = self.interventions.act(verdicts, event, publish=False)
                        if end is not None:
                            return partial(self._finish_line, end, [])
                    return None
            held = self._take_line(line, seq, len(line))
        elif type(line) is LongLine:  # decoded and spilled as it came: judged by the task (_long_line)
            return partial(self._long_line, line, seq)
        else:
            held = self._take_line(line, seq, OVERSIZED_COST)
        return None if held is None else partial(self._finish_line, *held)

    def _take_line(self, line: bytes | Oversized, seq: int, size: int) -> tuple[Verdict, list[Event]] | None:
        """Judge one line and carry out its verdicts; when one ends the session, the stop is left to await
        (`_finish_line`): (its verdict, the line's events not judged yet)."""
        agent = self.agent
        if agent.choosing and line:
            self.choose(detect.by_first_line(line.head if type(line) is Oversized else line), final=True)
            if type(line) is bytes and len(line) > self.max_line():  # read under auto's limit, over the chosen one's
                line = Oversized(len(line), line[:256])
        adapter = agent.adapter
        reply = None
        if type(line) is Oversized:
            limit = self.max_line()
            events: list[Event] = [oversized_line(seq, line, limit)]
            reply = adapter.oversized_reply(line.head, line.length, seq, limit)
        elif not line:
            return None
        else:
            events = adapter.parse_stdout(line, seq)
        for i, event in enumerate(events):
            verdicts = self.judge.judge(event, size)
            size = 0  # the line's bytes are counted once
            if reply:  # queued after its event is recorded: write ahead, as for every verdict
                self.writer.send(reply)
                reply = None
            # most lines have no verdict and nothing to answer: act would do nothing for them
            if verdicts or type(event) in _ANSWERED or self.health.state == GATED:
                end = self.interventions.act(verdicts, event, publish=False)
                if end is not None:
                    return end, events[i + 1:]
        self.writer.send_replies()
        return None

    async def _finish_line(self, end: Verdict, rest: list[Event]) -> None:
        """The stop a line's verdict asked for, then the rest of that line."""
        await self.interventions.end(end)
        for event in rest:
            await self.handle(event)
        self.writer.send_replies()

    async def handle(self, event: Event, size: int = 0) -> None:
        """Judge one event (read from `size` bytes) and carry out its verdicts."""
        await self.interventions.carry_out(self.judge.judge(event, size), event)

    # ---- long outputs, streamed (supervisor/longline.py) ---------------------------
    def _open_long(self, seq: int) -> TextSink | None:
        """Where the output of line `seq`, still open past STREAM_FROM bytes, goes as it arrives: a spill file,
        kept if the engine spills it. None for an adapter that reads every line whole."""
        if not self.agent.adapter.streams_outputs:
            return None
        return self.spills.open_stream(seq)

    async def _long_line(self, line: LongLine, seq: int) -> None:
        """A long line, decoded (and written to its spill file) as it came: the engine judges it by its output's
        first part, length and digest, as replay does; the event and its record stay bounded."""
        if line.over:
            self.spills.drop_stream(seq)
            held = self._take_line(Oversized(line.length, line.head[:256]), seq, OVERSIZED_COST)
            if held is not None:
                await self._finish_line(*held)
            return
        assert line.text is not None  # the splitter streams a line only into a decoder
        event = line_event(seq, line, line.text)
        try:
            for each in self.agent.adapter.parsed(event, line.head):
                await self.handle(each, PREFIX_CHARS)
        finally:
            self.spills.drop_stream(seq)  # not spilled (or not a tool_result): the file goes
        self.writer.send_replies()

    # ---- choosing the adapter (sessions/detect.py) ------------------------------
    async def choose_if_silent(self) -> None:
        """An agent silent on stdout shows as plain meanwhile; its first line still decides."""
        await anyio.sleep(detect.SILENCE)
        if self.agent.choosing and self.agent.adapter.name == detect.AUTO:
            self.choose(detect.silent(), final=False)

    def choose(self, choice: detect.Choice, *, final: bool, announce: bool = True) -> None:
        """Hand the session to the chosen adapter: the next lines are read at its limit."""
        if self.agent.choose(choice, final=final):
            if self._stdout is not None:
                self._stdout.splitter.max_bytes = self.max_line()
            if announce:
                self.journal.report(choice.line())
        self.journal.publish()

    def max_line(self) -> int:
        return self.agent.max_line(self.health.config)

    # ---- stderr's lines ---------------------------------------------------------------
    def take_stderr(self, line: Item) -> Later | None:
        """One stderr line logged, or judged and carried out (an adapter that makes events of it); when a
        verdict ends the session, the stop is left to await, with the line's other events."""
        self._stderr_seq += 1
        if isinstance(line, bytes):
            if not line:
                return None
            events = self.agent.adapter.parse_stderr(line, self._stderr_seq)
            if events:
                for i, event in enumerate(events):
                    end = self.interventions.act(self.judge.judge(event), event)
                    if end is not None:
                        return partial(self._finish_line, end, events[i + 1:])
                return None
            text = self.agent.adapter.stderr_text(line)
        else:  # Oversized (stderr's splitter streams no long line)
            text = f"[stderr line of {line.length:,} bytes, not kept]"
        self.journal.sink("log", {"stream": "stderr", "text": text[:4000], "ts": self.journal.clock()})
        return None


def _source(fd: int | KeptStream) -> BinaryIO | KeptStream:
    """What a pipe's reader connects to: the pipe's file, or a kept agent's stream as the keeper sends it."""
    return fd if isinstance(fd, KeptStream) else os.fdopen(fd, "rb", buffering=0)
