"""The keeper's handling of the daemon's output connection (kept_output.py frames it): taking it, the streams it
carries, the credit that comes back, one send per pass of the loop, and its end."""

from __future__ import annotations

import contextlib
import selectors
import socket
from collections.abc import Callable, Mapping
from typing import Any

from . import keeper_wire as wire
from .kept import KeptAgent, Registrations
from .kept_output import Channel, Output


class OutputSide:
    """The attached daemon's output connection, if it opened one."""

    def __init__(self, fds: Registrations, agents: Mapping[str, KeptAgent], receive: Callable[[socket.socket],
                 bytes | None]) -> None:
        self.fds = fds
        self.agents = agents
        self.receive = receive
        self.output: Output | None = None

    @property
    def ready(self) -> bool:
        """Whether a channel that waited may send now (the loop then does not sleep)."""
        return self.output is not None and self.output.ready

    def carrier(self, conn: socket.socket, message: dict[str, Any]) -> socket.socket | Channel | None:
        """What carries an attached output stream: a channel of the output connection (this connection then
        closes), or the connection itself (a daemon that opened no output connection)."""
        if "channel" not in message:
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, wire.STREAM_BUFFER)
            return conn
        conn.close()
        output = self.output
        if output is None or output.generation != message.get("generation"):
            return None
        return output.channel(wire.count(message.get("channel")))

    def attach(self, conn: socket.socket, generation: int) -> None:
        """The daemon's output connection: a newline says it is taken (attaches may name its channels)."""
        self.closed()
        try:
            conn.send(b"\n")
        except OSError:
            conn.close()
            return
        self.output = Output(conn, generation)
        self.fds.want(conn.fileno(), selectors.EVENT_READ, self._on_readable)

    def _on_readable(self, mask: int) -> None:
        """Credit from the daemon (the channels it frees move in `flush`), or the connection's end."""
        output = self.output
        if output is None or not mask & selectors.EVENT_READ:
            return
        data = self.receive(output.conn)
        if data == b"":
            self.closed()
        elif data:
            output.read_credit(data)

    def flush(self) -> None:
        """Once per pass: what every channel put goes in one send; channels that waited for room or credit move."""
        output = self.output
        if output is None:
            return
        for _ in range(2):
            for pump in output.wake():
                pump()
            try:
                output.flush()
            except OSError:
                self.closed()
                return
        mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if output.pending else 0)
        self.fds.want(output.conn.fileno(), mask)

    def closed(self) -> None:
        """The output connection ends (its daemon went, or opened another): its channels' streams detach."""
        output, self.output = self.output, None
        if output is None:
            return
        self.fds.forget(output.conn.fileno())
        output.close()
        for agent in self.agents.values():
            for stream in agent.streams.values():
                if isinstance(stream.conn, Channel) and stream.conn.output is output:
                    stream.detach()
