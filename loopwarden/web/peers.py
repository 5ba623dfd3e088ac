"""Who opened a websocket on this machine: a supervised agent is refused a console, whatever token it holds.

Agents run as the operator's uid and can read the token file, so the token alone would let one drive a
console that the daemon counts as the operator's (it runs under `loopwarden web`, outside every session).
A connection is from this machine when its peer address is one of this machine's (loopback or any
interface's: with `--host 0.0.0.0` an agent can come in through the machine's own address) or when its
TCP socket is found among this machine's. Its process is then found from that socket and judged by the
daemon, as the daemon judges its own clients (runtime/doors.py): launched, adopted and hook-attached
sessions alike, and a process that cannot be seen is refused. Only a peer on another machine is let
through unjudged.
"""

from __future__ import annotations

import psutil

from ..paths import Paths
from ..runtime.doors import operator_refusal
from .addresses import same_address, this_machine


def peer_pid(peer: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The pid of this machine's process whose TCP socket is `peer` connected to `server`, when it can be seen."""
    try:
        connections = psutil.net_connections("tcp")
    except (psutil.Error, OSError):
        return None
    want = (same_address(str(peer[0])), peer[1], same_address(str(server[0])), server[1])
    for conn in connections:
        if conn.pid and conn.laddr and conn.raddr and (same_address(conn.laddr.ip), conn.laddr.port,
                                                        same_address(conn.raddr.ip), conn.raddr.port) == want:
            return int(conn.pid)
    return None


def refusal(paths: Paths, peer: tuple[str, int] | None, server: tuple[str, int] | None) -> str | None:
    """Why the process at `peer` may not have a console (one line, beginning "refused:"), or None (also for
    a peer on another machine, which cannot be judged here)."""
    if not peer or not server:
        return "refused: a connection whose ends cannot be seen"
    pid = peer_pid(peer, server)
    if pid is None:
        if this_machine(str(peer[0])):
            return f"refused: a process of this machine at {peer[0]} port {peer[1]} that cannot be identified"
        return None
    return operator_refusal(paths, pid)
