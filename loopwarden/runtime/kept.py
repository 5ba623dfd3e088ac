"""One agent the keeper holds: its process, its output kept until the daemon has stored it, its stdin held until
what it answers is stored (keeper_wire.py says the protocol)."""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from .kept_output import Channel

KEEP_BYTES: Final = 8 << 20  # a stream's bytes not yet stored, at most: past this the agent waits in its write
# bytes for an agent's stdin held here, at most: past this the daemon's frames wait in its own buffer, where it sees
# an agent that does not read (limits.stdin_backlog)
STDIN_HELD: Final = 1 << 20
READ_SIZE: Final = 64 << 10
SEND_SIZE: Final = 256 << 10
SMALL_SEND: Final = 16 << 10


class OutStream:
    """stdout or stderr: read from the agent's pipe into `held` (bytes from offset `base` on, not yet stored), sent
    to the attached daemon connection, forgotten once the daemon says they are stored."""

    def __init__(self, fd: int, limit: int = KEEP_BYTES) -> None:
        self.fd: int | None = fd
        self.limit = limit
        self.held = bytearray()
        self.base = 0  # the stream's offset of held[0]
        self.sent = 0  # the offset up to which the attached connection has been sent
        self.conn: socket.socket | Channel | None = None  # the attached daemon's
        self.generation = 0  # of the daemon the connection is
        self.eof = False
        self.shut = False  # the attached connection was told EOF
        self.blocked = False  # the connection's buffer was full: the rest goes when it is writable again
        self.line_read: tuple[int, int] | None = None  # (start, end) of an unfinished line the daemon has read

    @property
    def end(self) -> int:
        return self.base + len(self.held)

    @property
    def readable(self) -> bool:
        """Whether to read the agent's pipe now: open, and room left for what the daemon has not stored."""
        return self.fd is not None and len(self.held) < self.limit

    def read_and_carry(self) -> bool:
        """The per-event path: read what the agent wrote and frame it on the output connection at once; False
        when the keeper has more to do (the pipe ended, the bound is reached, the carrier waits or is a socket)."""
        assert self.fd is not None
        try:
            chunk = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            chunk = b""
        if not chunk:
            os.close(self.fd)
            self.fd, self.eof = None, True
            return False
        held = self.held
        held += chunk
        conn = self.conn
        if type(conn) is not Channel or self.blocked or len(held) >= self.limit:
            return False
        size = len(chunk)
        if self.sent + size != self.base + len(held):  # older bytes wait to go first
            return False
        return conn.output.carry_chunk(conn.number, chunk, self)

    def stored(self, offset: int) -> None:
        """Everything before `offset` is stored: forget it."""
        drop = min(offset, self.end) - self.base
        if drop > 0:
            del self.held[:drop]
            self.base += drop
        line = self.line_read
        if line is not None and self.base >= line[0]:  # the unfinished line's start is stored now
            self.line_read = None
            self.stored(line[1])

    def read_of_line(self, line: int, upto: int) -> None:
        """The daemon read an unfinished line starting at `line` up to `upto`: forgotten once `line` is stored."""
        if self.line_read is None or line >= self.line_read[0]:
            self.line_read = (line, upto)
            self.stored(self.base)

    def attach(self, conn: socket.socket | Channel, start: int) -> int:
        """A daemon reads from `start` on; returns the bytes it asked for that were forgotten already (0 unless the
        store lost what it said it had stored)."""
        self.detach()
        self.stored(start)
        self.conn, self.sent, self.shut, self.blocked = conn, max(start, self.base), False, False
        return max(0, self.base - start)

    def detach(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None

    def send(self) -> bool:
        """Send what the connection has not had yet (never blocking), EOF once everything went; whether some is
        left to send when the connection can take it."""
        conn = self.conn
        assert conn is not None
        try:
            left = self.base + len(self.held) - self.sent
            if left > 0:
                start = self.sent - self.base
                if isinstance(conn, Channel):
                    sent = conn.output.carry(conn.number, self.held, start, min(left, SEND_SIZE))
                elif left <= SMALL_SEND:
                    sent = conn.send(self.held[start:])  # (a copy costs less than a view)
                else:
                    with memoryview(self.held) as view:
                        sent = conn.send(view[start:start + SEND_SIZE])
                self.sent += sent
                if sent < left:
                    return True
            if self.eof and not self.shut:
                conn.shutdown(socket.SHUT_WR)
                self.shut = True
        except BlockingIOError:
            return True
        except OSError:
            self.detach()  # the daemon went: what it had not stored waits for the next one
        return False

    @property
    def done(self) -> bool:
        """The agent's end is closed and the daemon has stored everything."""
        return self.eof and not self.held


class InStream:
    """The agent's stdin: frames from the daemon, each written once the line it answers is stored."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd
        self.waiting: deque[tuple[int, bytes]] = deque()  # (stdout line seq answered, data), in order
        self.ready = bytearray()  # released, not yet written
        self.closing = False  # a close frame was released: close once `ready` is written
        self.conn: socket.socket | None = None
        self.generation = 0  # of the daemon the connection is
        self.stored_seq = 0
        self.dropped = 0  # frames an earlier daemon queued for lines the store never took
        self.waiting_bytes = 0  # of the frames in `waiting`

    def queue(self, seq: int, data: bytes) -> None:
        self.waiting.append((seq, data))
        self.waiting_bytes += len(data)
        self.release()

    @property
    def wants_frames(self) -> bool:
        """Whether to read more frames from the daemon: less than STDIN_HELD waits here for the agent."""
        return self.waiting_bytes + len(self.ready) < STDIN_HELD

    def stored(self, seq: int) -> None:
        self.stored_seq = max(self.stored_seq, seq)
        self.release()

    def release(self) -> None:
        while self.waiting and self.waiting[0][0] <= self.stored_seq:
            data = self.waiting.popleft()[1]
            self.waiting_bytes -= len(data)
            if data and self.fd is not None:  # (once the agent closed its end, nothing reaches it)
                self.ready += data
            else:
                self.closing = True
                self.waiting.clear()
                self.waiting_bytes = 0

    def attach(self, conn: socket.socket) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = conn

    def taken(self, seq: int) -> None:
        """A new daemon has stored up to line `seq`: frames answering later lines are dropped (it reads and
        judges those lines again, and answers them itself)."""
        self.stored(seq)
        self.dropped += len(self.waiting)
        self.waiting.clear()
        self.waiting_bytes = 0

    @property
    def wants_write(self) -> bool:
        return self.fd is not None and (bool(self.ready) or self.closing)

    def write(self) -> None:
        assert self.fd is not None
        try:
            if self.ready:
                del self.ready[:os.write(self.fd, self.ready)]
        except BlockingIOError:
            return
        except OSError:  # the agent closed its end: what it did not read is lost with it
            self.ready.clear()
            self.closing = True
        if self.closing and not self.ready:
            os.close(self.fd)
            self.fd = None


class KeptAgent:
    """An agent the keeper started: its process group, streams, deadline and exit."""

    def __init__(self, sid: str, pid: int, out: int, err: int, stdin: int, *, max_runtime: float | None,
                 grace: float) -> None:
        self.sid = sid
        self.pid = pid
        self.started = time.time()
        self.streams = {"out": OutStream(out), "err": OutStream(err, KEEP_BYTES // 8)}
        self.stdin = InStream(stdin)
        self.deadline = time.monotonic() + max_runtime if max_runtime else None
        self.grace = grace
        self.code: int | None = None
        self.reason: str | None = None  # why the keeper itself ended it (its max_runtime, no daemon came back)
        self.term_sent: float | None = None  # monotonic time of the SIGTERM the keeper sent
        self.reported = False  # the daemon was told it exited

    def limit(self, max_runtime: object) -> None:
        """Its max_runtime (seconds from its start; none when not a positive number) is now `max_runtime`."""
        if isinstance(max_runtime, (int, float)) and not isinstance(max_runtime, bool) and max_runtime > 0:
            self.deadline = time.monotonic() + (self.started + max_runtime - time.time())
        else:
            self.deadline = None

    def signal(self, sig: int, group: bool = True) -> None:
        try:
            if group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def end(self, reason: str) -> None:
        """SIGTERM to the group; SIGKILL follows after the grace (`due`)."""
        if self.term_sent is None:
            self.reason = self.reason or reason
            self.term_sent = time.monotonic()
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)

    def due(self, now: float) -> None:
        """What comes due with time: the max_runtime, the SIGKILL after a SIGTERM's grace."""
        if self.code is not None:
            return
        if self.deadline is not None and now >= self.deadline:
            self.end("max_runtime")
        if self.term_sent is not None and now >= self.term_sent + self.grace:
            self.signal(signal.SIGKILL)

    def exited(self, status: int) -> None:
        self.code = os.waitstatus_to_exitcode(status)

    def describe(self) -> dict[str, Any]:
        out, err = self.streams["out"], self.streams["err"]
        return {"sid": self.sid, "pid": self.pid, "started": self.started, "code": self.code, "reason": self.reason,
                "out": [out.base, out.end], "err": [err.base, err.end], "stdin_dropped": self.stdin.dropped,
                "stdin_open": self.stdin.fd is not None, "stopped": stopped(self.pid)}

    @property
    def finished(self) -> bool:
        """Exited, and every byte it wrote is stored."""
        return self.code is not None and all(stream.done for stream in self.streams.values())

    def close(self) -> None:
        for stream in self.streams.values():
            stream.detach()
            if stream.fd is not None:
                os.close(stream.fd)
                stream.fd = None
        if self.stdin.fd is not None:
            os.close(self.stdin.fd)
            self.stdin.fd = None
        if self.stdin.conn is not None:
            self.stdin.conn.close()


def stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (SIGSTOP: a gate or an operator holds it), as its /proc stat says."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            line = stat.read()
    except OSError:
        return False
    return line[line.rfind(b")") + 2:][:1] in (b"T", b"t")


Handler = Callable[[int], None]


class Registrations:
    """The keeper's epoll, each descriptor's interest changed only when it changes (epoll_ctl is a system call;
    most passes change nothing), each with the handler it was first given. Masks are selectors' (EVENT_READ,
    EVENT_WRITE); epoll is used directly because the loop's cost per ready descriptor is the keeper's cost per
    event."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self._masks: dict[int, int] = {}
        self._handlers: dict[int, Handler] = {}
        self._forgotten: set[int] = set()  # descriptors forgotten during this round's handlers

    def want(self, fd: int, mask: int, handler: Handler | None = None) -> None:
        """Wait for `mask` on `fd` (0: for nothing), calling its handler (given once, kept until forgotten)."""
        if handler is not None and fd not in self._handlers:
            self._handlers[fd] = handler
        current = self._masks.get(fd, 0)
        if mask == current:
            return
        if not mask:
            self.epoll.unregister(fd)
            del self._masks[fd]
        elif current:
            self.epoll.modify(fd, _EPOLL[mask])
            self._masks[fd] = mask
        else:
            self.epoll.register(fd, _EPOLL[mask])
            self._masks[fd] = mask

    def forget(self, fd: int | None) -> None:
        """`fd` is closed, or about to be (epoll lets go of a closed one by itself)."""
        if fd is None:
            return
        if fd in self._masks:
            with contextlib.suppress(OSError):
                self.epoll.unregister(fd)
            del self._masks[fd]
        self._handlers.pop(fd, None)
        self._forgotten.add(fd)

    def wait(self, timeout: float) -> None:
        """Call the handler of every descriptor ready within `timeout`, but for one an earlier handler of the same
        round forgot (its descriptor closed, perhaps reused already: its readiness is the old one's)."""
        handlers = self._handlers
        forgotten = self._forgotten
        forgotten.clear()
        for fd, events in self.epoll.poll(timeout):
            handler = handlers.get(fd)
            if handler is not None and (not forgotten or fd not in forgotten):
                handler(_SELECTORS[events & _KNOWN] if events & _KNOWN else _BOTH)


_EPOLL: Final = {selectors.EVENT_READ: select.EPOLLIN, selectors.EVENT_WRITE: select.EPOLLOUT,
                 selectors.EVENT_READ | selectors.EVENT_WRITE: select.EPOLLIN | select.EPOLLOUT}
_BOTH: Final = selectors.EVENT_READ | selectors.EVENT_WRITE
_KNOWN: Final = select.EPOLLIN | select.EPOLLOUT
# an error or hang-up (epoll reports them unasked) wakes both sides, as selectors does
_SELECTORS: Final = {select.EPOLLIN: selectors.EVENT_READ, select.EPOLLOUT: selectors.EVENT_WRITE,
                     select.EPOLLIN | select.EPOLLOUT: _BOTH}


GATHER: Final = 0.004  # seconds the keeper's loop pauses after a pass while many agents write
GATHER_FROM: Final = 8  # agents that wrote within the last GATHER_WINDOW seconds, from which it pauses
GATHER_WINDOW: Final = 0.1


class Gathering:
    """While many agents write, the keeper's loop pauses GATHER after each pass, so that one pass reads many
    agents' writes and one send carries them, which the daemon reads in one wake-up (each pass costs a wake-up and
    cold caches, which many agents writing share then; their lines wait up to GATHER more per hop, one agent alone
    or a few never)."""

    def __init__(self) -> None:
        self.writers: set[str] = set()  # agents that wrote in this window
        self.window = 0.0  # when it began
        self.on = False  # many wrote in the last one

    def pause(self) -> None:
        now = time.monotonic()
        if now - self.window >= GATHER_WINDOW:
            self.on = len(self.writers) >= GATHER_FROM
            self.writers.clear()
            self.window = now
        if self.on:
            time.sleep(GATHER)
