"""The keeper's handling of the daemon's stdin connections, one per agent: taking one, reading its frames into the
agent's stdin queue (keeper_wire.FrameReader), taking what a daemon that went had sent, and closing it."""

from __future__ import annotations

import selectors
import socket
from collections.abc import Callable
from functools import partial

from . import keeper_wire as wire
from .kept import KeptAgent, Registrations


class InputSide:
    """The agents' stdin connections and their frame readers; `pump` moves what the frames let through."""

    def __init__(self, fds: Registrations, receive: Callable[[socket.socket], bytes | None],
                 pump: Callable[[KeptAgent], None]) -> None:
        self.fds = fds
        self.receive = receive
        self.pump = pump
        self._frames: dict[socket.socket, wire.FrameReader] = {}

    def attach(self, agent: KeptAgent, conn: socket.socket, generation: int, rest: bytes) -> None:
        """The daemon of `generation` opened `agent`'s stdin connection (in place of an earlier one)."""
        old = agent.stdin.conn
        if old is not None:
            self.fds.forget(old.fileno())
        agent.stdin.attach(conn)
        agent.stdin.generation = generation
        self._frames[conn] = wire.FrameReader()
        self.fds.want(conn.fileno(), selectors.EVENT_READ, partial(self._readable, agent))
        if rest:
            self._take_frames(agent, rest)

    def drain(self, agent: KeptAgent) -> None:
        """Frames the daemon sent before it went are taken, whichever connection the keeper happened to read first:
        one may answer a line the store has (then it must reach the agent), or one it has not (dropped at `take`)."""
        conn = agent.stdin.conn
        if conn is None:
            return
        while data := self.receive(conn):
            self._take_frames(agent, data)
            if agent.stdin.conn is None:
                return

    def close(self, agent: KeptAgent) -> None:
        conn = agent.stdin.conn
        if conn is not None:
            self.fds.forget(conn.fileno())
            self._frames.pop(conn, None)
            conn.close()
            agent.stdin.conn = None

    def _readable(self, agent: KeptAgent, _mask: int) -> None:
        conn = agent.stdin.conn
        if conn is None:
            return
        data = self.receive(conn)
        if data is None:
            return
        if not data:
            self.close(agent)
            return
        self._take_frames(agent, data)

    def _take_frames(self, agent: KeptAgent, data: bytes) -> None:
        conn = agent.stdin.conn
        assert conn is not None
        reader = self._frames[conn]
        for seq, payload in reader.feed(data):
            agent.stdin.queue(seq, payload)
        if reader.bad:
            self.close(agent)
        self.pump(agent)
