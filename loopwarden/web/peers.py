"""Who opened a websocket on loopback: a supervised agent is refused a console, whatever token it holds.

Agents run as the operator's uid and can read the token file, so the token alone would let one drive a
console that the daemon counts as the operator's (it runs under `loopwarden web`, outside every session).
For a connection from this machine the peer's process is found from its TCP socket and judged as the
daemon judges its own clients (runtime/principal.py): a descendant of the daemon (a launched agent, or its
orphan) or a process whose environment marks it as inside one of its sessions is refused.
"""

from __future__ import annotations

import ipaddress

import psutil

from ..paths import Paths
from ..runtime.client import Client, DaemonError
from ..runtime.principal import DAEMON_ENV, SESSION_ENV, descends_from, env_claim
from ..runtime.procfs import ancestry, environment_value


def peer_pid(peer: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The pid of this machine's process whose TCP socket is `peer` connected to `server`, when it can be seen."""
    try:
        connections = psutil.net_connections("tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.pid and conn.laddr and conn.raddr and (conn.laddr.ip, conn.laddr.port) == peer[:2] \
                and (conn.raddr.ip, conn.raddr.port) == server[:2]:
            return int(conn.pid)
    return None


def refusal(paths: Paths, peer: tuple[str, int] | None, server: tuple[str, int] | None) -> str | None:
    """Why the process at `peer` may not have a console (one line), or None (also for a remote peer, which
    is not on this machine, or a local one that cannot be told)."""
    if not peer or not server or not _loopback(peer[0]):
        return None
    pid = peer_pid(peer, server)
    if pid is None:
        return None
    environ = {name: value for name in (SESSION_ENV, DAEMON_ENV) if (value := environment_value(pid, name))}
    claimed = env_claim(environ, paths.socket)
    if claimed:
        return f"pid {pid} runs inside session {claimed} ({SESSION_ENV} says so)"
    daemon = _daemon_pid(paths)
    inside = descends_from(daemon, ())(ancestry(pid)) if daemon else None
    return inside.refusal(pid).removeprefix("refused: ") if inside else None


def _daemon_pid(paths: Paths) -> int | None:
    try:
        with Client.connect(paths, autostart=False, name="web") as client:
            pid = client.request("ping").get("pid")
    except (DaemonError, OSError, ValueError, AttributeError):
        return None  # no daemon: it has no agents either
    return pid if isinstance(pid, int) else None


def _loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback
