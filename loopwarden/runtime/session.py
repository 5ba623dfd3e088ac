"""A live session: the agent process, its pumps, and carrying out the engine's verdicts."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, Protocol

import anyio
import anyio.lowlevel
import psutil
from anyio.abc import Process, TaskGroup

from ..sessions import detect
from ..sessions.base import Adapter, Capability
from ..sessions.native import NativeAdapter
from ..sessions.registry import adapters
from ..supervisor import kinds, messages
from ..supervisor.config import Config
from ..supervisor.events import Event, Hello, ResourceSample, ToolCall, ToolResult
from ..supervisor.gates import GateError
from ..supervisor.health import GATED, TERMINATED, SessionHealth
from ..supervisor.lines import LineSplitter, LongLine, Oversized, TextSink, line_limit, oversized_line
from ..supervisor.longline import PREFIX_CHARS, STREAM_FROM, line_event
from ..supervisor.opinion import askable
from ..supervisor.typed import EVENT_OF, REFUSED, decode_record, stored_json
from ..supervisor.verdicts import FINAL_STATES, Action, SessionState, Termination, Verdict, terminate
from .containment import Containment
from .opinion import Outcome, SecondOpinion
from .pipes import InputPipe, Item, Later, OutputPipe, Take
from .principal import Claim
from .procfs import CLOCK_TICKS, PAGE_BYTES, STATUS, ProcTable, open_fds
from .snapshot import build
from .spill import Spiller, SpillStream, spill_event, spill_streamed
from .store import EventRow

# typed decoding's per-line functions as final names: compiled, each is then a C static, not a lookup in this
# module's dict per line (supervisor/kinds.py)
_DECODE: Final = decode_record
_EVENT_OF: Final = EVENT_OF
_STORED_JSON: Final = stored_json
IDLE_TICK: Final = 60.0  # the ticker sleeps until the engine's next deadline, or this long at most
DRAIN_STALLED: Final = 5.0  # after exit and leftovers killed, stop reading when no byte came for this long
YIELD_EVERY: Final = 32  # lines: a flooding agent must not starve the other sessions or the socket
YIELD_BYTES: Final = 256 << 10  # ... nor may a few huge lines pass the store's byte budget unchecked
PROGRESS_SECONDS: Final = 1.0  # a session whose lines only moved its counts (no verdict): published at most this often
STDIN_OPTIONAL: Final = 64 << 10  # bytes queued for the agent past which nudges are dropped (and counted)
STDERR_LINE: Final = 64 << 10  # bytes of an stderr line kept; a longer one is logged by its length
OVERSIZED_COST: Final = 256  # bytes an over-long line costs once read: only its head is kept
ERRORS_KEPT: Final = 3  # the agent's last errors, for a restart's summary
# verdicts that tell what a loop did (a rewind's guidance and a restart's summary quote the last one)
EVIDENCE: Final = frozenset({Action.NUDGE, Action.BLOCK, Action.GATE, Action.FORCE_NEXT, Action.ESCALATE})


@dataclass
class SessionSpec:
    """What to run. `env` is passed to the process and never stored (only its keys are)."""

    id: str
    name: str
    command: list[str]
    adapter: str = "native"
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    preset: str | None = None
    sets: list[str] = field(default_factory=list)
    task: str | None = None


class Sink(Protocol):
    """Where a session reports: the daemon stores and broadcasts each record (`size`: the bytes it came from)."""

    def __call__(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0) -> None: ...


class RowsSink(Protocol):
    """Where events whose records are JSON already (`typed.stored_json`) go instead of the sink: a chunk's rows at
    once, with their events (for subscribers), read from `size` bytes."""

    def __call__(self, session_id: str, rows: list[EventRow], events: list[Event], size: int) -> None: ...


class Records(Protocol):
    """The daemon's record path as a session sees it (runtime/records.py)."""

    @property
    def over_backlog(self) -> bool: ...
    def mark(self, lane: str) -> int: ...
    async def durable(self, lane: str, mark: int) -> bool: ...
    async def backpressure(self) -> None: ...


@dataclass
class Resources:
    cpu_percent: float = 0.0
    rss: int = 0
    processes: int = 0
    open_files: int = 0
    tree: list[dict[str, Any]] = field(default_factory=list)


class LiveSession:
    """Runs one agent process and drives a SessionHealth with its output, live."""

    def __init__(self, spec: SessionSpec, config: Config, adapter: Adapter, *, sink: Sink,
                 spiller: Spiller | None = None, on_group: Callable[[int, bool], None] | None = None,
                 clock: Callable[[], float] = time.time, records: Records | None = None,
                 containment: Containment | None = None, sink_rows: RowsSink | None = None) -> None:
        self.spec = spec
        self.config = config
        self.adapter = adapter
        self.sink = sink
        self.sink_rows = sink_rows
        self._rows: list[EventRow] = []  # the rows of the lines judged since the last _flush_rows
        self._row_events: list[Event] = []  # ... their events
        self._rows_size = 0  # ... the bytes they were read from
        self.spiller = spiller
        self.on_group = on_group or (lambda pgid, alive: None)
        self.containment = containment or Containment(spec.id)
        self.deadline: float | None = None  # monotonic; set when the daemon stops: every wait ends there
        self.clock = clock
        self.records = records
        self.health = SessionHealth(config, started_at=clock())
        self.state = SessionState.STARTING
        self.created_at = clock()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.pid: int | None = None
        self.process: Process | None = None
        self.paused = False  # the group is stopped (by an operator or by a gate)
        self.operator_paused = False
        self.stopping = False
        self.held: deque[tuple[ToolCall, Verdict | None]] = deque()
        self.stdin_dropped = 0  # optional lines (nudges) not sent because the agent reads too slowly
        self.spill_failures = 0
        self.resources = Resources()
        self.tool_calls = 0
        self.rate: deque[int] = deque([0] * 60, maxlen=60)  # events per second, last minute
        self._rate_second = 0
        self._psutil: psutil.Process | None = None
        self._procs: dict[int, psutil.Process] = {}
        self._table: ProcTable | None = None  # the sampler's table, from observe() to sample()
        self._ticks: dict[int, tuple[int, int]] = {}  # pid -> (start, CPU ticks) at the previous sample
        self._sampled_at = time.monotonic()
        self._stderr_seq = 0
        self._wake = anyio.Event()  # a gate opened or was decided: deadlines may have moved
        self._kill_requested: str | None = None
        self._gates_stored: set[str] = set()
        self._out: deque[tuple[int, bytes]] = deque()  # (durability mark, line) for the agent's stdin
        self._out_bytes = 0
        self._out_ready: anyio.Event | None = None
        self._stdin_closed = False
        self._deaf: str | None = None  # why the agent is being stopped for not reading its input
        self._sampled: list[Verdict] = []  # verdicts on resources, for the ticker to carry out
        self._waiting_for_store = False
        self._finishing = False  # the agent and its output are gone: the stdin writer and the ticker return
        self._writer_idle = True  # the stdin writer waits for nothing but its wake-up, returned, or never started
        self._ticker_idle = False  # ... and the ticker
        self._writer_started = False  # the stdin writer runs from the first line queued (most agents get none)
        self._others = 0  # other tasks of the session running (_other)
        self._kill_asked: tuple[str | None] | None = None  # (note,) of a kill the ticker is to carry out
        self.drain_abandoned = False
        self.choice: detect.Choice | None = None  # how the adapter was chosen, when the user did not name one
        self._choosing = adapter.name == detect.AUTO  # until the first stdout line names the adapter
        self._typed_lines = self._reads_typed()  # stdout's native lines taken by _take's typed path: its adapter
        # reading the output (_pump_output): each pipe's fd until a reader takes it, then the reader
        self._stdout_fd: int | None = None
        self._stderr_fd: int | None = None
        self._stdin_fd: int | None = None  # our end of the agent's stdin until the writer takes it
        self._stdout: OutputPipe | None = None
        self._stderr: OutputPipe | None = None
        self._stdout_seq = 0
        self._output_wake = anyio.Event()
        self._noteworthy = False  # a line judged since the last publish had a verdict or a hello (see _progress)
        self._progressed = 0.0  # loop time of the last publish for progress
        self._progress_timer: asyncio.TimerHandle | None = None
        self.rewinds = 0  # conversations rewound (recovery.on_loop and operators), for recovery.max_rewinds
        self.last_intervention: Verdict | None = None  # the last verdict short of an end: a loop's evidence
        self.errors: deque[str] = deque(maxlen=ERRORS_KEPT)
        # the daemon's environment holds the API key; secrets of both environments are kept out of prompts
        self.opinion, self._opinion_off = SecondOpinion.create(config.opinion, os.environ, spec.env)
        self._tasks: TaskGroup | None = None  # where second opinions are asked, while the session runs
        self._opinions_spent = False  # said once that opinion.max_calls is reached

    # ---- lifecycle --------------------------------------------------------
    async def run(self) -> None:
        """Start the process and supervise it until it ends; never raises for the agent's faults."""
        self.adapter.cwd = self.spec.cwd or os.getcwd()  # the agent's, absolute (the CLI sends its own cwd)
        by_command = detect.by_command(self.spec.command, self.spec.env) if self._choosing else None
        if by_command is not None:  # it waits for its client to speak first: no line will tell
            self._choose(by_command, final=True, announce=False)
        no_stdin = detect.stdin_unused(self.spec.command) if self._choosing else None
        argv = self.adapter.command(self.spec.command)
        env = self.spec.env or minimal_env()  # the client's environment only, never the daemon's
        writers: list[int] = []  # the agent's ends of its pipes, closed here once it has them
        try:
            # stdout and stderr are pipes of our own, read through Protocols (_pump_output), not anyio streams;
            # stdin too, written through a transport made with the first line (_write_lines)
            self._stdout_fd, stdout = os.pipe()
            writers.append(stdout)
            self._stderr_fd, stderr = os.pipe()
            writers.append(stderr)
            stdin, self._stdin_fd = os.pipe()
            writers.append(stdin)
            self.process = await anyio.open_process(
                self.containment.command(argv), stdin=stdin, stdout=stdout,
                stderr=stderr, cwd=self.spec.cwd or None, env=self.containment.environment(env),
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            self._close_pipes()
            self.state, self.ended_at = SessionState.EXITED, self.clock()
            self.exit_code = 127
            self.health.termination = None
            self._report_error(f"cannot start {argv[0]!r}: {getattr(exc, 'strerror', None) or exc}")
            self.containment.release()
            self._publish()
            return
        finally:
            for fd in writers:  # EOF comes when the agent and its children are done
                os.close(fd)
        self.pid = self.process.pid
        self.containment.started(self.pid, os.fstat(self._stdout_fd).st_ino)
        self.on_group(self.pid, True)
        try:
            self._psutil = psutil.Process(self.pid)
        except psutil.Error:
            self._psutil = None
        self.state, self.started_at = SessionState.RUNNING, self.clock()
        self.health.runtime.started_at = self.health.runtime.last_activity = self.started_at
        if by_command is not None:
            self._report(by_command.line())
        if no_stdin is not None:
            self._report(f"stdin closed: {no_stdin}")
        if self._opinion_off:
            self._report(self._opinion_off)
        self._publish()
        try:
            await self._supervise(close_stdin=no_stdin is not None)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: stop the agent, never leave it unwatched
            self._report_error(f"supervision failed ({type(exc).__name__}: {exc}); stopping the agent")
            self.health.state, self.health.termination = TERMINATED, terminate(
                "supervisor", Termination.CRASHED, f"session terminated: the supervisor failed ({exc})")
            with anyio.CancelScope(shield=True):
                self.stopping = False
                await self.stop(Termination.CRASHED, "the supervisor failed")
                await self.process.wait()
        finally:
            self._close_pipes()  # those never handed to the readers (supervision failed first)
            if self._progress_timer is not None:  # the final publish below tells everything
                self._progress_timer.cancel()
                self._progress_timer = None
            if self.containment.emptied and self.opinion is None:  # the usual end: nothing left to wait for
                self.containment.release()
                self.on_group(self.pid, False)
            else:
                with anyio.CancelScope(shield=True):
                    await self._kill_leftovers()
                    self.on_group(self.pid, False)
                    if self.opinion is not None:
                        await self.opinion.aclose()
        self.ended_at = self.clock()
        if self._choosing:
            self._choose(detect.QUIET, final=True)
        if self.health.state != TERMINATED:
            self.state = SessionState.EXITED
            if self.adapter.failure and not self.exit_code:  # its process ended well, its work did not
                self.exit_code = 1
        else:
            self.state = SessionState.TERMINATED
        self._publish()

    async def _supervise(self, close_stdin: bool = False) -> None:
        assert self.process is not None
        self._out_ready = anyio.Event()
        try:
            await self._supervise_in_group(close_stdin)
        finally:
            self._tasks = None  # closed: nothing may be started in it (a stop line queued on a crash)

    async def _supervise_in_group(self, close_stdin: bool) -> None:
        assert self.process is not None and self._out_ready is not None
        async with anyio.create_task_group() as tg:
            self._tasks = tg
            for data in self.adapter.start_lines():
                self._send(data)
            if close_stdin:
                self._send(b"")
            tg.start_soon(self._ticker, name=f"{self.spec.id} _ticker")  # named: compiled methods have no __qualname__
            if self._choosing:
                tg.start_soon(self._other, self._choose_if_silent, name=f"{self.spec.id} _choose_if_silent")
            pumps_done = asyncio.get_running_loop().create_future()
            tg.start_soon(self._pumps, pumps_done, name=f"{self.spec.id} _pumps")
            if self._kill_requested is not None:  # a kill that came while the process was starting
                tg.start_soon(self._other, self.stop, self.health.termination_reason or Termination.OPERATOR,
                              self._kill_requested, name=f"{self.spec.id} stop")
            self.exit_code = await self.process.wait()
            await self._kill_leftovers()  # nothing the agent started writes on after it, so EOF comes
            await self._drain(pumps_done)
            self._finishing = True
            # the stdin writer and the ticker, when they wait for nothing but a wake-up, return by themselves
            # and the task group ends without a cancellation to deliver; a drain given up leaves the pumps
            # waiting for an EOF that may never come: they are cancelled
            if pumps_done.done() and self._writer_idle and self._ticker_idle and not self._others:
                self._out_ready.set()
                self._wake.set()
            else:
                tg.cancel_scope.cancel()
        if self._kill_asked is not None:  # asked of the ticker, which was cancelled before it got to it
            (note,), self._kill_asked = self._kill_asked, None
            await self.kill(note)

    async def _other(self, job: Callable[..., Awaitable[None]], *args: Any) -> None:
        """A task of the session's besides the stdin writer, the ticker and the pumps, counted: while one
        runs, the end of the session cancels them all."""
        self._others += 1
        try:
            await job(*args)
        finally:
            self._others -= 1

    async def _drain(self, pumps_done: asyncio.Future[None]) -> None:
        """After the agent and its leftovers are gone, read what they wrote until EOF, however far
        behind the store is. Only a pipe held open by a process outside the session, with no byte for
        DRAIN_STALLED, ends the reading early; that is logged, never silent."""
        while not pumps_done.done():
            before = self._bytes_read(), self._stdout_seq
            await asyncio.wait((pumps_done,), timeout=DRAIN_STALLED)  # (a future and a timer: no cancel scope)
            # reading paused while held lines are judged, or the store is behind, is progress, not a stall
            busy = any(pipe.held for pipe in self._pipes()) or self._waiting_for_store
            if not pumps_done.done() and (self._bytes_read(), self._stdout_seq) == before and not busy:
                self.drain_abandoned = True
                self._report_error(f"stopped reading the agent's output {DRAIN_STALLED:.0f} s after it ended: "
                                   "a process outside the session still holds its pipe open")
                return

    async def _pumps(self, done: asyncio.Future[None]) -> None:
        await self._pump_output()
        done.set_result(None)

    # ---- reading stdout and stderr --------------------------------------------
    # Both pipes are read through the loop's callbacks (runtime/pipes.py): each chunk's lines are
    # judged and carried out in the read callback, with no task switch per line. Only what must wait
    # (a stop, the store's backpressure, a bug of ours) pauses a pipe and hands the rest to this task,
    # which takes the held lines in order (_catch_up) and resumes the reading. stdout's lines are
    # judged (_take); stderr's logged, or judged when the adapter makes events of them (_take_stderr).
    async def _pump_output(self) -> None:
        assert self._stdout_fd is not None and self._stderr_fd is not None
        self._output_wake = anyio.Event()
        pipes = [self._read_stdout(), self._read_stderr()]
        files = [os.fdopen(self._stdout_fd, "rb", buffering=0), os.fdopen(self._stderr_fd, "rb", buffering=0)]
        self._stdout_fd = self._stderr_fd = None
        try:
            for pipe, file in zip(pipes, list(files), strict=True):
                await pipe.connect(file)
                files.remove(file)  # the transport owns it now
            reading = list(pipes)
            while reading:
                await self._output_wake.wait()
                self._output_wake = anyio.Event()
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
        finally:
            for file in files:
                file.close()  # never connected (cancelled first)
            for pipe in pipes:
                if pipe.transport is not None:
                    pipe.transport.close()
            for seq in list(self._streams or ()):
                self._drop_stream(seq)  # a long line cut short (the reading stopped or failed): its file goes

    def _read_stdout(self) -> OutputPipe:
        """stdout's reader, not yet connected: its lines judged (_take), the session published per chunk."""
        self._stdout = OutputPipe(LineSplitter(self._max_line(), self._open_long, STREAM_FROM), self._take,
                                  self._wake_pump, self.records, self._progress)
        return self._stdout

    def _read_stderr(self) -> OutputPipe:
        """stderr's reader, not yet connected: its lines logged, or judged (_take_stderr)."""
        self._stderr = OutputPipe(LineSplitter(STDERR_LINE), self._take_stderr, self._wake_pump, self.records)
        return self._stderr

    async def _finish_pipe(self, pipe: OutputPipe) -> None:
        """A pipe's end: its last line, if it had no newline; stdout publishes after each."""
        for item in pipe.splitter.finish():
            later = pipe.take(item)
            if pipe is self._stdout:
                self._publish()
            if later is not None:
                await later()

    def _pipes(self) -> tuple[OutputPipe, ...]:
        return tuple(pipe for pipe in (self._stdout, self._stderr) if pipe is not None)

    def _bytes_read(self) -> int:
        return sum(pipe.bytes_read for pipe in self._pipes())

    def _wake_pump(self) -> None:
        self._output_wake.set()

    def _close_pipes(self) -> None:
        """Our ends of the pipes that no reader or writer took (the agent did not start, supervision failed,
        or nothing was written to its stdin)."""
        for fd in (self._stdout_fd, self._stderr_fd, self._stdin_fd):
            if fd is not None:
                os.close(fd)
        self._stdout_fd = self._stderr_fd = self._stdin_fd = None

    def _sink(self, kind: str, session_id: str, data: dict[str, Any], size: int = 0) -> None:
        """Every other record of the session, after the rows of the lines judged before it."""
        self._flush_rows()
        self.sink(kind, session_id, data, size)

    def _flush_rows(self) -> None:
        """The rows of the lines judged since the last call, queued for the store in one entry (once per chunk:
        one call and one entry instead of one per event), before anything that must follow them: a record of
        the session (_sink), a line for the agent (_send: it waits for them to be stored), an await (_progress
        precedes each, in the read callback and in the pump task). Nothing when there are none."""
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        events, self._row_events = self._row_events, []
        size, self._rows_size = self._rows_size, 0
        assert self.sink_rows is not None  # rows are made only with it
        self.sink_rows(self.spec.id, rows, events, size)

    def _progress(self) -> None:
        """Lines were judged: their rows queued for the store, and the session published now when one had a
        verdict (or a hello), else at most every PROGRESS_SECONDS (a timer publishes the last of it). Counts
        moving alone were published per chunk, so 200 sessions at 20 events/s had their snapshots built and
        stored 800 times a second. While the timer is set, the counts' publish is due already (called once
        per chunk)."""
        self._flush_rows()
        if self._progress_timer is not None and not self._noteworthy:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._noteworthy or now - self._progressed >= PROGRESS_SECONDS:
            self._noteworthy = False
            self._progressed = now
            self._publish()
        elif self._progress_timer is None:
            self._progress_timer = loop.call_at(self._progressed + PROGRESS_SECONDS, self._progress_due)

    def _progress_due(self) -> None:
        self._progress_timer = None
        self._progressed = asyncio.get_running_loop().time()
        self._publish()

    async def _catch_up(self, items: deque[Item], take: Take, later: Later | None) -> None:
        """While a pipe's reading is paused: what had to wait (`later`), the held `items` in order (each
        taken by `take`), the store's backpressure. (Nothing is held meanwhile but more `items`.)"""
        taken = 0
        while True:
            if later is not None:
                self._progress()  # the lines before it (_progress asks little of an unchanged session)
                done, later = later, None
                await done()
            elif items:
                later = take(items.popleft())
                taken += 1
                if taken % YIELD_EVERY == 0:
                    self._progress()  # once per batch, as per chunk in the read callback
                    await self._yield()
            else:
                self._progress()
                await self._yield()
                if not items:
                    return

    def _take(self, line: Item) -> Later | None:
        """One item from the splitter, dispatched by type: judged and carried out now; or, when something
        must be awaited first (a stop), what to await, and the reading waits for it. A native line the
        typed decoder reads (the common case) is judged here, its row stored from its record."""
        seq = self._stdout_seq = self._stdout_seq + 1
        if type(line) is bytes:
            native = self._typed_lines
            if native is not None and line:
                try:  # typed.typed_event written out, keeping the record: the stored JSON is encoded from it
                    record = _DECODE(line)
                    event = _EVENT_OF[type(record)](record, seq)
                except REFUSED:
                    event = None
                if event is not None:  # one event, its row stored from its record
                    kind = type(event)
                    if kind is kinds.HELLO:
                        native.parsed(event, line)  # (what else `parsed` looks at, the typed decoder refuses)
                    verdicts = self._judge(event, len(line), record)
                    if verdicts or kind in _ANSWERED or self.health.state == GATED:
                        end = self._act(verdicts, event, publish=False)
                        if end is not None:
                            return partial(self._finish_line, end, [])
                    if native.owed:  # (native lines owe a reply rarely)
                        self._send_replies()
                    return None
            held = self._take_line(line, seq, len(line))
        elif type(line) is LongLine:  # decoded and spilled as it came: judged by the task (_long_line)
            return partial(self._long_line, line, seq)
        else:
            held = self._take_line(line, seq, OVERSIZED_COST)
        return None if held is None else partial(self._finish_line, *held)

    async def _yield(self) -> None:
        """Let other sessions run, and wait while the store is behind (the agent's pipe fills meanwhile)."""
        records = self.records
        if records is not None and records.over_backlog:
            self._waiting_for_store = True
            try:
                await records.backpressure()
            finally:
                self._waiting_for_store = False
        await anyio.lowlevel.checkpoint()

    def _take_line(self, line: bytes | Oversized, seq: int, size: int) -> tuple[Verdict, list[Event]] | None:
        """Judge one line and carry out its verdicts; when one ends the session, the stop is left to await
        (`_finish_line`): (its verdict, the line's events not judged yet)."""
        if self._choosing and line:
            self._choose(detect.by_first_line(line.head if type(line) is Oversized else line), final=True)
            if type(line) is bytes and len(line) > self._max_line():  # read under auto's limit, over the chosen one's
                line = Oversized(len(line), line[:256])
        reply = None
        if type(line) is Oversized:
            limit = self._max_line()
            events: list[Event] = [oversized_line(seq, line, limit)]
            reply = self.adapter.oversized_reply(line.head, line.length, seq, limit)
        elif not line:
            return None
        else:  # (a native line the typed decoder reads is taken by _take)
            events = self.adapter.parse_stdout(line, seq)
        for i, event in enumerate(events):
            verdicts = self._judge(event, size)
            size = 0  # the line's bytes are counted once
            if reply:  # queued after its event is recorded: write ahead, as for every verdict
                self._send(reply)
                reply = None
            # most lines have no verdict and nothing to answer: _act would do nothing for them
            if verdicts or type(event) in _ANSWERED or self.health.state == GATED:
                end = self._act(verdicts, event, publish=False)
                if end is not None:
                    return end, events[i + 1:]
        adapter = self.adapter
        if type(adapter) is not NativeAdapter or adapter.owed:  # (native lines owe a reply rarely)
            self._send_replies()
        return None

    async def _finish_line(self, end: Verdict, rest: list[Event]) -> None:
        """The stop a line's verdict asked for, then the rest of that line."""
        await self._end(end)
        for event in rest:
            await self.handle(event)
        self._send_replies()

    # ---- long outputs, streamed (supervisor/longline.py) ---------------------------
    _streams: dict[int, SpillStream] | None = None  # line -> the spill file its long output is written to

    def _open_long(self, seq: int) -> TextSink | None:
        """Where the output of native line `seq`, still open past STREAM_FROM bytes, goes as it arrives: a spill
        file, kept if the engine spills it. None for other adapters: they read every line whole."""
        if not isinstance(self.adapter, NativeAdapter):
            return None
        if self.spiller is None:
            return _ignore_text
        if self._streams is None:
            self._streams = {}
        stream = self._streams[seq] = self.spiller.stream(tool=None, seq=seq)
        return stream.write

    async def _long_line(self, line: LongLine, seq: int) -> None:
        """A long native line, decoded (and written to its spill file) as it came: the engine judges it by its
        output's first part, length and digest, as replay does; the event and its record stay bounded."""
        if line.over:
            self._drop_stream(seq)
            held = self._take_line(Oversized(line.length, line.head[:256]), seq, OVERSIZED_COST)
            if held is not None:
                await self._finish_line(*held)
            return
        assert line.text is not None  # the splitter streams a line only into a decoder
        event = line_event(seq, line, line.text)
        adapter = self.adapter
        try:
            for each in adapter.parsed(event, line.head) if isinstance(adapter, NativeAdapter) else [event]:
                await self.handle(each, PREFIX_CHARS)
        finally:
            self._drop_stream(seq)  # not spilled (or not a tool_result): the file goes
        self._send_replies()

    def _drop_stream(self, seq: int) -> None:
        stream = self._streams.pop(seq, None) if self._streams else None
        if stream is not None:
            stream.discard()

    # ---- choosing the adapter (sessions/detect.py) ------------------------------
    async def _choose_if_silent(self) -> None:
        """An agent silent on stdout shows as plain meanwhile; its first line still decides."""
        await anyio.sleep(detect.SILENCE)
        if self._choosing and self.adapter.name == detect.AUTO:
            self._choose(detect.silent(), final=False)

    def _choose(self, choice: detect.Choice, *, final: bool, announce: bool = True) -> None:
        """Hand the session to the chosen adapter. Nothing was read with the one it replaces: the auto
        adapter reads nothing, and a provisional plain one (chosen for silence) had no stdout line yet."""
        self._choosing = not final
        self.choice = choice
        if choice.adapter != self.adapter.name:
            adapter = adapters()[choice.adapter]()
            adapter.cwd = self.adapter.cwd
            self.adapter = adapter
            self.spec.adapter = adapter.name
            if self._stdout is not None:
                self._stdout.splitter.max_bytes = self._max_line()  # the next lines are read at the new adapter's limit
            if announce:
                self._report(choice.line())
        self._typed_lines = self._reads_typed()
        self._publish()

    def _reads_typed(self) -> NativeAdapter | None:
        """The adapter when stdout's lines are read by the typed decoder (the native adapter, chosen), their
        rows stored from their records; else None."""
        adapter = self.adapter
        if type(adapter) is NativeAdapter and self.sink_rows is not None and not self._choosing:
            return adapter
        return None

    def _send_replies(self) -> None:
        adapter = self.adapter
        if type(adapter).replies is Adapter.replies:  # the base never owes a reply: not asked after every line
            return
        for data in adapter.replies(self.health.state == GATED):
            self._send(data)

    # ---- stderr's lines (see _pump_output) ------------------------------------------
    def _take_stderr(self, line: Item) -> Later | None:
        """One stderr line logged, or judged and carried out (an adapter that makes events of it); when a
        verdict ends the session, the stop is left to await, with the line's other events."""
        self._stderr_seq += 1
        if isinstance(line, bytes):
            if not line:
                return None
            events = self.adapter.parse_stderr(line, self._stderr_seq)
            if events:
                for i, event in enumerate(events):
                    end = self._act(self._judge(event), event)
                    if end is not None:
                        return partial(self._finish_line, end, events[i + 1:])
                return None
            text = self.adapter.stderr_text(line)
        else:  # Oversized (stderr's splitter streams no long line)
            text = f"[stderr line of {line.length:,} bytes, not kept]"
        self._sink("log", self.spec.id, {"stream": "stderr", "text": text[:4000], "ts": self.clock()})
        return None

    async def _ticker(self) -> None:
        """Sleep until the engine's next deadline (runtime, stall, gate expiry), then tick."""
        while True:
            deadline = self.health.next_deadline()
            now = self.clock()
            delay = IDLE_TICK if deadline is None else min(IDLE_TICK, max(0.0, deadline - now))
            self._ticker_idle = True
            with anyio.move_on_after(delay + 0.001):
                await self._wake.wait()
            self._ticker_idle = False
            if self._kill_asked is not None:  # (even at the end: the operator's kill is recorded as asked)
                (note,), self._kill_asked = self._kill_asked, None
                await self.kill(note)
                if self.containment.emptied:  # nothing of the session runs, nor can again: nothing left to tick for
                    self._ticker_idle = True  # (returned)
                    return
            if self._finishing:  # the agent and its output are gone (_supervise)
                return
            if self._wake.is_set():
                self._wake = anyio.Event()
            if self._out and not self._writer_started:  # queued by a read callback
                self._start_writer()
            if self._deaf is not None and not self.stopping:
                await self._stop_deaf(self._deaf)
            if self._sampled:
                sampled, self._sampled = self._sampled, []
                await self._carry_out(sampled, None)
            had_gates = self.health.state == GATED
            verdicts = self.health.tick(self.clock())
            if verdicts:
                self._record(verdicts)
                await self._carry_out(verdicts, None)
            if verdicts or had_gates:
                self._after_gates()  # an expiry policy may have decided a gate
                self._publish()

    def _count_rate(self, now: float, add: int = 1) -> None:
        second = int(now)
        if second != self._rate_second:
            for _ in range(min(max(second - self._rate_second, 0), 60)):
                self.rate.append(0)
            self._rate_second = second
        self.rate[-1] += add

    # ---- the event path ---------------------------------------------------
    async def handle(self, event: Event, size: int = 0) -> None:
        """Judge one event (read from `size` bytes) and carry out its verdicts."""
        await self._carry_out(self._judge(event, size), event)

    def _judge(self, event: Event, size: int = 0, typed: Any = None) -> list[Verdict]:
        """The engine's verdicts on `event`, the event and the verdicts recorded. `typed`: the typed record the
        event was built from; the event's row is then encoded from it when nothing changed the event."""
        now = self.clock()
        if int(now) == self._rate_second:
            self.rate[-1] += 1
        else:
            self._count_rate(now)
        verdicts = self.health.observe(event, now)
        kind = type(event)
        if kind is kinds.TOOL_CALL:
            self.tool_calls += 1
        elif type(event) is kinds.TOOL_RESULT:
            for verdict in verdicts:
                if verdict.action == Action.SPILL:
                    self._spill(verdict, event, now)
        elif type(event) is kinds.ERROR:
            self.errors.append(event.message)
        if verdicts:
            if verdicts[-1].action == Action.TERMINATE:
                verdicts = self._recover(verdicts)
            self._noteworthy = True  # published at once (_progress), not with the next second's counts
        elif kind is kinds.HELLO:
            self._noteworthy = True
        elif typed is not None and self.opinion is None and self.sink_rows is not None:  # (a verdict may change it)
            data = _STORED_JSON(typed, event)
            if data is not None:  # stored with the chunk's other rows (_flush_rows)
                self._rows.append((self.spec.id, event.seq, now, event.kind, data.decode()))
                self._row_events.append(event)
                self._rows_size += size or len(data)
                return verdicts
        record = event.to_dict()
        record["seq"] = event.seq
        self._sink("event", self.spec.id, record, size)
        if self.opinion is not None:
            self.opinion.recent.add(record)
        if verdicts:
            self._record(verdicts)
        return verdicts

    def _record(self, verdicts: list[Verdict]) -> None:
        """Store and broadcast verdicts, and the gates they opened."""
        now = self.clock()
        for verdict in verdicts:
            self._sink("verdict", self.spec.id, {**verdict.to_dict(), "ts": now})
            if verdict.action in EVIDENCE and verdict.rule != "rewind":
                self.last_intervention = verdict
            if verdict.gate_id:
                gate = self.health.gates.gates.get(verdict.gate_id)
                if gate:
                    self._sink("gate", self.spec.id, gate.to_dict())

    def _spill(self, verdict: Verdict, event: ToolResult, now: float) -> None:
        stream = self._streams.pop(event.seq, None) if self._streams and event.size is not None else None
        if stream is not None:  # a long output, written as it came (_long_line)
            result = spill_streamed(event, verdict, stream, now=now)
        else:
            result = spill_event(event, verdict, self.spiller, threshold=self.config.spill.threshold_chars,
                                 preview_chars=self.config.spill.preview_chars, now=now)
        self._spill_result = result
        if result.warning and not result.path and self.spiller is not None:
            self.spill_failures += 1  # a full disk or an unusable directory: the agent got the truncated text
            self._report_error(result.warning)
        if result.path and result.saved:  # (an output cut whole has only the notice's path)
            self._sink("spill", self.spec.id, {"seq": event.seq, "ts": now, "tool": event.tool,
                                              "path": result.path, "size": result.size})

    async def _carry_out(self, verdicts: list[Verdict], event: Event | None) -> None:
        end = self._act(verdicts, event)
        if end is not None:
            await self._end(end)

    async def _end(self, verdict: Verdict) -> None:
        """A verdict that ends the session: the stop (its grace is awaited)."""
        await self.stop(verdict.termination or Termination.OPERATOR, verdict.reason)
        self._publish()

    def _act(self, verdicts: list[Verdict], event: Event | None, publish: bool = True) -> Verdict | None:
        """Carry out verdicts (second opinions asked first) up to one that ends the session, which is
        returned for the caller to await (`_end`); None when all were carried out. `publish=False`: the
        caller publishes the session's change (once per chunk of stdout, not per event)."""
        if self.opinion is not None and verdicts:
            verdicts = self._ask_opinions(verdicts)
        adapter = self.adapter
        if type(event) is kinds.HELLO:
            reply = adapter.hello_reply(event, self.spec.id, self.config.spill.threshold_chars)
            if reply:
                self._send(reply)
        block: Verdict | None = None
        for verdict in verdicts:
            action = verdict.action
            if action == Action.TERMINATE:
                return verdict
            if action == Action.BLOCK and type(event) is kinds.TOOL_CALL:
                block = verdict
                if not adapter.can_veto:
                    self._inject(verdict.message or verdict.reason, "nudge", verdict.rule)
            elif action == Action.SPILL and type(event) is kinds.TOOL_RESULT:
                result = getattr(self, "_spill_result", None)
                line = adapter.spill_line(event, result) if result is not None else None
                if line:
                    self._send(line)
            elif action in (Action.NUDGE, Action.UNBLOCK_AUTHORITY, Action.FORCE_NEXT) and verdict.message:
                self._inject(verdict.message, _inject_kind(verdict), verdict.rule)
            elif action == Action.ESCALATE and verdict.message:
                self._inject(verdict.message, "escalate", verdict.rule, verdict.target)
        if type(event) is kinds.TOOL_CALL:
            if self.health.state == GATED and adapter.can_veto:
                self.held.append((event, block))
            else:
                line = adapter.verdict_line(event, block)
                if line:
                    self._send(line)
        if self.health.state == GATED and not adapter.can_veto and not self.paused:
            self._signal_group(signal.SIGSTOP)
            self.paused = True
        if verdicts and any(v.gate_id for v in verdicts):
            self._wake.set()
        if publish:
            self._publish()
        return None

    # ---- second opinions (runtime/opinion.py) ------------------------------
    def _ask_opinions(self, verdicts: list[Verdict]) -> list[Verdict]:
        """Start a second opinion on each ambiguous verdict; the verdicts to carry out now. A nudge waits
        for the answer; a gate is open meanwhile (it holds the agent, as it would for a human)."""
        now: list[Verdict] = []
        for verdict in verdicts:
            kind = askable(verdict)
            if kind is None or self._tasks is None or self.opinion is None or not self.opinion.available():
                if kind is not None and self.opinion is not None and self.opinion.used_up and not self._opinions_spent:
                    self._opinions_spent = True
                    self._report(f"second opinion: the session's {self.opinion.cfg.max_calls} questions are "
                                 "asked (opinion.max_calls); the rules decide alone from now on")
                now.append(verdict)
                continue
            self.opinion.busy = True  # taken now: the next ambiguous verdict is carried out as the rule says
            self._tasks.start_soon(self._other, self._second_opinion, kind, verdict,
                                   name=f"{self.spec.id} _second_opinion")
            if verdict.gate_id:
                now.append(verdict)
        return now

    async def _second_opinion(self, kind: str, verdict: Verdict) -> None:
        """Ask, audit, then withhold the verdict (progress) or carry it out as the rule said."""
        assert self.opinion is not None
        try:
            out = await self.opinion.ask(kind, verdict)
        except anyio.get_cancelled_exc_class():  # the session ended first: the call is audited all the same
            ended = Outcome(self.opinion.cfg.model, failure="the session ended before the answer")
            self._sink("action", self.spec.id, self.opinion.audit(kind, verdict, ended, self.clock()))
            raise
        except Exception as exc:  # noqa: BLE001 - a bug of ours must not end supervision: the rule decides
            self.opinion.busy = False
            self._report_error(f"second opinion failed ({type(exc).__name__}); the rule's verdict stands")
            out = None
        if out is not None:
            self._sink("action", self.spec.id, self.opinion.audit(kind, verdict, out, self.clock()))
            self._report(f"second opinion on {verdict.rule} ({verdict.action}): {out.outcome}")
        if self.final or self.stopping:
            return
        if out is None or not out.overrules:
            if not verdict.gate_id:
                verdict.ask = None  # asked once: carried out now as the rule said
                await self._carry_out([verdict], None)
            return
        assert out.answer is not None
        self._record([Verdict(Action.ALLOW, "second-opinion", f"{verdict.rule} {verdict.action} withheld: "
                              f"progress at {out.answer.confidence:.2f}: {out.answer.reason}", seq=verdict.seq,
                              evidence={"withheld": verdict.to_dict()})])
        if verdict.gate_id:
            try:
                decided = self.health.decide(verdict.gate_id, True, self.clock(), by="second-opinion")
            except GateError:
                return  # a human (or an expiry) decided it first
            self._wake.set()
            self._record(decided)
            self._after_gates()
            self._publish()

    def _release_held(self) -> None:
        while self.held and self.health.state != GATED:
            call, block = self.held.popleft()
            line = self.adapter.verdict_line(call, block)
            if line:
                self._send(line)

    # ---- operator actions -------------------------------------------------
    def reconfigure(self, config: Config) -> None:
        """New limits from `loopwarden set`: the engine takes them, the ticker wakes (a deadline moved)."""
        self.config = config
        self.health.reconfigure(config)
        self._wake.set()
        self._publish()

    async def decide(self, gate_id: str, approve: bool, by: str, note: str | None) -> list[Verdict]:
        """Approve or deny a gate; raises GateError for an unknown or decided gate."""
        verdicts = self.health.decide(gate_id, approve, self.clock(), by=by, note=note)
        self._wake.set()
        self._record(verdicts)
        await self._carry_out(verdicts, None)
        self._after_gates()
        self._publish()
        return verdicts

    def _after_gates(self) -> None:
        """Gates decided by anyone (an operator, an expiry policy): store them, release what they held."""
        for gate in self.health.gates.gates.values():
            if not gate.pending and gate.id not in self._gates_stored:
                self._gates_stored.add(gate.id)
                self._sink("gate", self.spec.id, gate.to_dict())
        if self.health.state != GATED:
            self._release_held()
            self._send_replies()
            if self.paused and not self.operator_paused and self.health.state != TERMINATED:
                self._signal_group(signal.SIGCONT)
                self.paused = False

    def grant(self, note: str | None) -> Verdict:
        verdict = self.health.grant_authority(self.clock(), task=self.spec.task, note=note)
        self._record([verdict])
        self._inject(verdict.message or "", "authority", "operator")
        self._publish()
        return verdict

    # ---- recovery -------------------------------------------------------------
    def _recover(self, verdicts: list[Verdict]) -> list[Verdict]:
        """recovery.on_loop=rewind: a loop that would end a session that can rewind rewinds it instead, at
        most recovery.max_rewinds times; the terminate verdict gives way to the rewind's."""
        end = verdicts[-1]
        recovery = self.config.recovery
        if recovery.on_loop != "rewind" or end.termination != Termination.REPETITION_LOOP:
            return verdicts
        if Capability.REWIND not in self.capabilities or self.rewinds >= recovery.max_rewinds:
            n = self.rewinds
            why = (f"after {n} rewind{'s' if n != 1 else ''} (recovery.max_rewinds)"
                   if Capability.REWIND in self.capabilities else f"the {self.adapter.name} adapter cannot rewind")
            self._report(f"recovery.on_loop=rewind: the loop ends the session: {why}")
            return verdicts
        try:
            rewound = self.rewind(1, None, by="policy", instead_of=end)
        except ValueError as exc:
            self._report(f"recovery.on_loop=rewind could not rewind ({exc}); the session ends")
            return verdicts
        self.health.withdraw_termination()
        return [*verdicts[:-1], rewound]

    def rewind(self, turns: int, note: str | None, *, by: str = "operator",
               instead_of: Verdict | None = None) -> Verdict:
        """Drop the last `turns` turns from the agent's conversation and retry with guidance built from the
        loop's evidence (and `note`). Gates are settled, held calls dropped, loop counters reset. Returns the
        rewind's verdict (recorded; its guidance is sent by the adapter, not injected again). Raises ValueError
        (one line) when the adapter cannot rewind now."""
        evidence = self.last_intervention
        shown = (evidence.message or evidence.reason) if evidence else (instead_of.reason if instead_of else None)
        guidance = messages.rewind_guidance(turns, shown, note)
        line = self.adapter.rewind_line(turns, guidance)
        self.rewinds += 1
        self._send(line)
        self.held.clear()  # the adapter's agent resolves the calls of the turns it drops
        now = self.clock()
        for gate in self.health.pending_gates():
            self._record(self.health.decide(gate.id, True, now, by=by, note=None))
        self._after_gates()
        self.health.reset_counters()
        why = f"instead of terminating ({instead_of.reason})" if instead_of else f"by {by}"
        verdict = Verdict(Action.NUDGE, "rewind", f"rewound {turns} turn{'s' if turns != 1 else ''} {why}",
                          seq=instead_of.seq if instead_of else 0,
                          evidence={"turns": turns, "by": by, "rewinds": self.rewinds, "guidance": guidance})
        if instead_of is None:
            self._record([verdict])
        self._wake.set()
        self._publish()
        return verdict

    def failed(self) -> tuple[str | None, str | None, list[str]]:
        """How it failed, for a restart's summary: how it ended, its last intervention, its last errors."""
        ended = self.health.termination.reason if self.health.termination else self.adapter.failure
        last = self.last_intervention
        return ended, (last.message or last.reason) if last else None, list(self.errors)

    def reset(self, counter: str | None) -> None:
        self.health.reset_counters(counter)
        self._publish()

    def inject(self, text: str) -> bool:
        """Send operator text to the agent; False when this adapter cannot receive text."""
        if not self.adapter.can_inject:
            return False
        self._inject(text, "operator", "operator")
        return True

    def pause(self) -> None:
        if self.state == SessionState.RUNNING:
            if not self.paused:
                self._signal_group(signal.SIGSTOP)
            self.paused = self.operator_paused = True
            self._publish()

    def resume(self) -> None:
        """Undo an operator's pause; a session that waits on a gate stays stopped until it is decided."""
        if not self.operator_paused:
            return
        self.operator_paused = False
        if self.paused and not (self.health.state == GATED and not self.adapter.can_veto):
            self._signal_group(signal.SIGCONT)
            self.paused = False
        self._publish()

    def kill_soon(self, note: str | None = None) -> bool:
        """An operator's kill carried out by the session's ticker, woken for it, when the ticker waits for
        nothing else: no task of its own. False: the caller runs `kill` in a task."""
        if self.process is None or self._finishing or not self._ticker_idle or self.stopping or self.final:
            return False
        self._kill_asked = (note,)
        self._wake.set()
        return True

    async def kill(self, note: str | None = None, *, daemon_stopping: bool = False) -> None:
        """An operator's kill (or the daemon's stop); a session already stopping keeps the reason it is
        stopping for."""
        if self.stopping or self.final:
            return
        verdicts = self.health.kill_terminate(self.clock(), note, daemon_stopping=daemon_stopping)
        self._record(verdicts)
        reason = verdicts[0].reason if verdicts else "operator"
        if self.process is None:
            self._kill_requested = reason  # still starting: run() stops it as soon as it exists
            return
        await self.stop(self.health.termination_reason or Termination.OPERATOR, reason)
        self._publish()

    async def sample(self, children: dict[int, list[int]] | None = None) -> None:
        """Refresh CPU, memory and the process tree, and judge the resource limits.

        `children` maps a pid to its children's pids, built once per round for all
        sessions, so sampling never rescans /proc per session; when it is the map of
        the table `observe` was just given, the numbers come from that table too (no
        process is read again).
        """
        if self.pid is None or self.state in FINAL_STATES:
            return
        table, self._table = self._table, None
        if table is not None and children is table.children:
            cpu, rss, files, tree = self._measure(table)
        else:
            cpu, rss, files, tree = self._measure_psutil(children)
        old = self.resources
        self.resources = Resources(cpu, rss, len(tree), files, tree[:50])
        if abs(old.cpu_percent - cpu) >= 0.5 or abs(old.rss - rss) > old.rss // 100 or old.processes != len(tree):
            self._resources_moved()
        if self.config.limits.max_rss or self.config.limits.max_processes:
            sample = ResourceSample(cpu_percent=cpu, rss=rss, processes=len(tree), open_files=files)
            verdicts = self.health.observe(sample, self.clock())
            self._record(verdicts)
            if verdicts:  # carried out by the ticker: a stop's grace must not hold up the daemon's sampler
                self._sampled.extend(verdicts)
                self._wake.set()

    def _measure(self, table: ProcTable) -> tuple[float, int, int, list[dict[str, Any]]]:
        """The session's tree as `table` shows it; CPU from the ticks since the previous table."""
        assert self.pid is not None
        pids = tree_pids(self.pid, table.children)
        now = time.monotonic()
        elapsed, self._sampled_at = now - self._sampled_at, now
        before, ticks = self._ticks, {}
        cpu, rss, files = 0.0, 0, 0
        count_files = bool(self.config.limits.max_processes) or len(pids) < 8
        tree = []
        for pid in pids:
            info = table.procs.get(pid)
            if info is None:
                continue
            ticks[pid] = (info.start, info.cpu)
            was = before.get(pid)
            c = (100.0 * (info.cpu - was[1]) / CLOCK_TICKS / elapsed
                 if was is not None and was[0] == info.start and elapsed > 0 else 0.0)
            m = info.rss * PAGE_BYTES
            tree.append({"pid": pid, "ppid": info.ppid, "name": info.comm, "cpu": c, "rss": m,
                         "status": STATUS.get(info.state, info.state)})
            cpu += c
            rss += m
            files += open_fds(pid) if count_files else 0
        self._ticks = ticks
        return cpu, rss, files, tree

    def _measure_psutil(self, children: dict[int, list[int]] | None
                        ) -> tuple[float, int, int, list[dict[str, Any]]]:
        assert self.pid is not None
        pids = tree_pids(self.pid, children) if children is not None else _tree_from_psutil(self._psutil)
        cpu = 0.0
        rss = files = 0
        tree = []
        cache = self._procs
        for pid in pids:
            proc = cache.get(pid)
            try:
                if proc is None:
                    proc = cache[pid] = psutil.Process(pid)
                with proc.oneshot():  # one read of /proc/PID/stat (+ statm) for all of these
                    c = proc.cpu_percent(None)
                    m = proc.memory_info().rss
                    status = proc.status()
                    ppid = proc.ppid()
                n_files = _fds(proc) if self.config.limits.max_processes or len(pids) < 8 else 0
                tree.append({"pid": pid, "ppid": ppid, "name": proc.name(), "cpu": c, "rss": m, "status": status})
            except psutil.Error:
                cache.pop(pid, None)
                continue
            cpu += c
            rss += m
            files += n_files
        for pid in [p for p in cache if p not in pids]:
            del cache[pid]
        return cpu, rss, files, tree

    # ---- stopping ---------------------------------------------------------
    async def stop(self, reason: Termination, message: str) -> None:
        """A `stop` line, then SIGTERM to every process of the session (its group, its cgroup, whatever
        left them: see containment.py) and SIGKILL for those still there after `limits.kill_grace`. An
        adapter with a `stop_grace` also gets its stdin closed and that long to exit before the SIGTERM.
        When the daemon is stopping, every wait ends at its deadline."""
        if self.stopping or self.process is None:
            return
        self.stopping = True
        self.state = SessionState.STOPPING
        self._publish()
        line = self.adapter.stop_line(str(reason), message)
        if line:
            self._send(line)
        if self.paused:
            self._signal_group(signal.SIGCONT)
            self.paused = False
        if line and self.adapter.stop_grace:  # the agent may wind down by itself (Claude Code: interrupt)
            self._send(b"")
            with anyio.move_on_after(self._grace(self.adapter.stop_grace)):
                await self.process.wait()
        await self._end_all("after the stop")
        if self.pid is not None:
            self.on_group(self.pid, False)  # the daemon reaps what it can of the group now

    async def _kill_leftovers(self) -> None:
        """After the agent exits, end every process it started, wherever it went: its group, its cgroup,
        processes that left them (setsid, double fork). SIGTERM, up to `limits.kill_grace` (less when the
        daemon is stopping), then SIGKILL until none is left; then the session's cgroup is removed and the
        guardian forgets it. Returns once nothing of the session runs (or after SIGKILL + 1 s, with the
        survivors reported: a process in uninterruptible sleep)."""
        await self._end_all("after the agent exited")
        self.containment.release()

    async def _end_all(self, when: str) -> None:
        """SIGTERM, the grace, SIGKILL for every process of the session; survivors are reported."""
        survivors = await self.containment.end(self._grace(self.config.limits.kill_grace))
        if survivors:
            pids = ", ".join(str(p.pid) for p in sorted(survivors, key=lambda p: p.pid)[:10])
            self._report_error(f"{len(survivors)} processes of the session survived SIGKILL {when}: {pids}")

    def kill_now(self) -> None:
        """SIGKILL every process of the session at once (the daemon's grace is over)."""
        self.containment.kill_now()

    def _grace(self, seconds: float) -> float:
        """`seconds`, or what remains until the daemon's deadline when that is sooner."""
        if self.deadline is None:
            return seconds
        return max(0.0, min(seconds, self.deadline - time.monotonic()))

    def _signal_group(self, sig: int) -> None:
        if self.pid is None:
            return
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    # ---- stdin ------------------------------------------------------------
    def _inject(self, text: str, kind: str, rule: str, model: str | None = None) -> None:
        line = self.adapter.inject_line(text, kind, rule, model)
        if line:
            self._send(line, essential=kind in ("guidance", "operator", "authority"))

    def _send(self, data: bytes, *, essential: bool = True) -> None:
        """Queue a line for the agent's stdin, written once the records it answers are stored (write
        ahead: a verdict never reaches an agent before its event is durable). Verdict, spill and stop
        lines are never dropped (a handshake agent waits for them); optional ones (nudges) are, and
        counted, once STDIN_OPTIONAL bytes wait. An agent that leaves limits.stdin_backlog bytes
        unread is stopped. An empty line closes stdin."""
        if self._out_ready is None or self._stdin_closed:
            return
        self._flush_rows()  # the mark below must cover the events this line answers
        if data and not essential and self._out_bytes >= STDIN_OPTIONAL:
            self.stdin_dropped += 1
            return
        self._out.append((self.records.mark(self.spec.id) if self.records is not None else 0, data))
        self._out_bytes += len(data)
        self._out_ready.set()
        if not self._writer_started:
            self._start_writer()
        limit = self.config.limits.stdin_backlog
        if limit and self._out_bytes > limit and self._deaf is None and not self.stopping:
            self._deaf = messages.deaf_agent(self._out_bytes, limit)
            self._wake.set()

    async def _stop_deaf(self, text: str) -> None:
        """Stop an agent that stopped reading its input: what waits for it would only grow."""
        verdicts = self.health.supervisor_terminate(Termination.VALIDATION_FAILURE, text, self.clock())
        self._record(verdicts)
        await self.stop(Termination.VALIDATION_FAILURE, text)
        self._publish()

    def _start_writer(self) -> None:
        """The stdin writer, started with the first line queued: an agent that is never written to (a plain one,
        killed) has no task for it to start, wake and end. A line queued by a read callback (no task runs it,
        so none can be started there) has the ticker start it."""
        if self._tasks is None or self._finishing or self._writer_started:
            return
        if asyncio.current_task() is None:
            self._wake.set()  # (the ticker looks at _out)
            return
        self._writer_started, self._writer_idle = True, False
        self._tasks.start_soon(self._write_stdin, name=f"{self.spec.id} _write_stdin")

    async def _write_stdin(self) -> None:
        pipe: InputPipe | None = None
        try:
            assert self._stdin_fd is not None
            fd, self._stdin_fd = self._stdin_fd, None
            pipe = await InputPipe.open(fd)
            await self._write_lines(pipe)
        finally:
            self._writer_idle = True  # returned: nothing of it to cancel
            if pipe is not None:
                pipe.close()

    async def _write_lines(self, stdin: InputPipe) -> None:
        assert self._out_ready is not None
        records = self.records
        while True:
            self._writer_idle = True
            await self._out_ready.wait()
            self._writer_idle = False
            if self._finishing:  # the agent is gone (_supervise): what is left would not reach it
                return
            self._out_ready = anyio.Event()
            while self._out:
                mark, data = self._out[0]
                if records is not None:
                    # sent even if the write failed: a full disk never stops an agent
                    await records.durable(self.spec.id, mark)
                self._out.popleft()
                self._out_bytes -= len(data)
                if not data:
                    self._stdin_closed = True
                    self._out.clear()
                    self._out_bytes = 0
                    stdin.close()
                    await anyio.lowlevel.checkpoint()
                    return
                try:
                    await stdin.send(data)
                except OSError:  # (ConnectionResetError, BrokenPipeError: the agent closed it)
                    self.stdin_dropped += 1 + len(self._out)
                    self._out.clear()
                    self._out_bytes = 0
                    return

    # ---- reporting ----------------------------------------------------------
    def _max_line(self) -> int:
        return line_limit(self.config.limits.max_line_bytes, self.adapter.name)

    def _report_error(self, text: str) -> None:
        self._report(text)

    def _report(self, text: str) -> None:
        """A line from loopwarden in the session's log (shown by an attached run and by `logs`)."""
        self._sink("log", self.spec.id, {"stream": "loopwarden", "text": text, "ts": self.clock()})

    def _publish(self) -> None:
        """Tell the daemon this session changed; it builds the snapshot when it publishes."""
        self._changes += 1  # the cached snapshot is built again (see snapshot)
        self._sink("session", self.spec.id, {})

    def _resources_moved(self) -> None:
        """Only the sampled numbers moved: the session is published, its cached snapshot kept (snapshot() fills
        them in fresh), so 200 agents starting up are not rebuilt whole every sampler round."""
        self._sink("session", self.spec.id, {})

    def claims(self) -> list[Claim]:
        """While it runs, the agent's process group and session (it leads both) and its descendants are its."""
        root = self.containment.root
        if root is None or self.final:
            return []
        return [Claim(self.spec.id, root, "the agent", group=True)]

    hook_key: str | None = None  # launched, not attached by hooks
    restartable = True  # started by loopwarden: `restart` starts its task again
    counts_loops = True

    def observe(self, table: ProcTable) -> None:
        """Remember the processes that left the group (see containment.py); `sample` measures from `table`."""
        self.containment.observe(table)
        self._table = table

    @property
    def capabilities(self) -> Capability:
        """The adapter's, and its process group: loopwarden started the agent and leads its group."""
        return self.adapter.capabilities | _LAUNCHED  # SIGSTOP holds any agent

    _changes = 0  # bumped by every _publish: what the cached snapshot was built from may have moved
    _snap_cache: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    def snapshot(self) -> dict[str, Any]:
        """Everything a console or `status` shows about this session.

        Built once per change and cached (a `list` of 200 sessions built each one whole: 110 us apiece);
        what moves with the clock alone (runtime, the runtime and silence counters, the rate) and the
        resources the sampler replaces are filled in fresh on every call. The key holds, beside the
        publish count, what can change without a publish."""
        now = self.clock()
        h = self.health
        key = (self._changes, h.events, self.state, self.pid, self.started_at, self.ended_at, self.exit_code,
               self.stopping, self.operator_paused, self.tool_calls, self.stdin_dropped, self.spill_failures,
               self.config, self.adapter, self.choice)
        cached = self._snap_cache
        if cached is None or cached[0] != key:
            cached = self._snap_cache = (key, self._build_snapshot(now))
        snap = dict(cached[1])
        if self.ended_at is None:
            snap["runtime"] = round(now - (self.started_at or self.created_at), 3)
            counters = snap["counters"] = dict(snap["counters"])
            for c in h.runtime.counters(now):
                if c.name in counters:
                    counters[c.name] = [c.value, c.limit]
        r = self.resources
        snap["cpu_percent"], snap["rss"] = round(r.cpu_percent, 1), r.rss
        snap["processes"], snap["open_files"] = r.processes, r.open_files
        snap["rate"] = self._rate_view(now)
        return snap

    def _build_snapshot(self, now: float) -> dict[str, Any]:
        r = self.resources
        return build(
            sid=self.spec.id, name=self.spec.name, command=self.spec.command, cwd=self.spec.cwd,
            env_keys=sorted(self.spec.env), config=self.config, health=self.health, state=self.state,
            paused=self.operator_paused, adapter=self.adapter.name, agent=self.adapter.agent, caps=self.capabilities,
            pid=self.pid, created_at=self.created_at, started_at=self.started_at, ended_at=self.ended_at, now=now,
            exit_code=self.exit_code, handshake=self.adapter.handshake, tool_calls=self.tool_calls,
            gates_open=not (self.final or self.stopping), cpu_percent=round(r.cpu_percent, 1), rss=r.rss,
            processes=r.processes, open_files=r.open_files, stdin_dropped=self.stdin_dropped,
            rate=[], validation_failures=self.health.validation_total,
            extra={"spill_failures": self.spill_failures, "failure": self.adapter.failure,
                   "adapter_reason": self.choice.why if self.choice else None,
                   "spill": {"dir": self.spiller.directory, "retention": self.spiller.retention,
                             **self.spiller.bounds.to_dict()} if self.spiller else None}).to_dict()

    def _rate_view(self, now: float) -> list[int]:
        self._count_rate(now, 0)
        return list(self.rate)[-30:]

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


def _ignore_text(text: str) -> None:
    """A long output's text when there is no spill directory: only its first part is kept (in the event)."""


_ENV_KEEP: Final = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL", "TERM")


def minimal_env() -> dict[str, str]:
    """For a client that sent no environment: the basics, not the daemon's whole environment."""
    return {k: v for k in _ENV_KEEP if (v := os.environ.get(k)) is not None}


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs; zombies (dead, not yet reaped) do not count."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return bool(ProcTable.scan().group(pgid))


def tree_pids(root: int, children: dict[int, list[int]]) -> list[int]:
    """`root` and all its descendants, from a pid -> children map."""
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def children_map() -> dict[int, list[int]]:
    """pid -> child pids for every process, from one pass over /proc."""
    children: dict[int, list[int]] = {}
    for proc in psutil.process_iter(["ppid"]):
        ppid = proc.info.get("ppid")
        if ppid:
            children.setdefault(ppid, []).append(proc.pid)
    return children


def _fds(proc: psutil.Process) -> int:
    try:
        return proc.num_fds()
    except (psutil.Error, AttributeError):
        return 0


def _tree_from_psutil(proc: psutil.Process | None) -> list[int]:
    if proc is None:
        return []
    try:
        return [proc.pid, *(c.pid for c in proc.children(recursive=True))]
    except psutil.Error:
        return []


INJECT_KINDS: Final[dict[Action, str]] = {
    Action.NUDGE: "nudge",
    Action.UNBLOCK_AUTHORITY: "authority",
    Action.FORCE_NEXT: "force_next",
    Action.ESCALATE: "escalate",
}


_LAUNCHED: Final = Capability.PROCESS_GROUP | Capability.HOLD  # what every launched session can do (enum `|` is slow)
_ANSWERED: Final = (Hello, ToolCall)  # events _act answers even without a verdict (a welcome, a verdict line)


def _inject_kind(verdict: Verdict) -> str:
    return INJECT_KINDS.get(verdict.action, "nudge")
