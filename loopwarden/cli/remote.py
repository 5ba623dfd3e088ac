"""`--host`: the CLI's commands on another machine's daemon, through a forwarded socket (runtime/hosts.py).

The group option (`loopwarden --host box ls`) chooses the host for the whole invocation; a reference
that begins with a host of the hosts file (`loopwarden approve box:s3:g1`) chooses it for that command.
`where` is the plumbing the other side of a host answers: where its daemon's socket is.
"""

from __future__ import annotations

import atexit
import signal
import sys
import threading
from types import FrameType

import click

from ..runtime.client import Client, DaemonError, DaemonTimeout
from ..runtime.hosts import (LOCAL, HostError, Tunnel, check_name, listed_hosts, split_ref, unreachable_daemon,
                             where_main)

# the commands --host reaches: those that read or decide; the others act on this machine (its files, its shell)
REMOTE_COMMANDS = frozenset({"ls", "status", "logs", "gates", "approve", "deny", "grant", "reset", "set", "inject",
                             "pause", "resume", "kill", "rewind", "restart", "audit", "explain", "prune", "diff",
                             "worktree"})
_chosen: dict[str, Tunnel] = {}  # the host of this invocation (one at most), by name


def choose(host: str | None, command: str | None) -> None:
    """Send this invocation's requests to `host` (None or `local`: this machine); HostError when it cannot."""
    if host is None or host == LOCAL:
        return
    check_name(host)
    if command not in REMOTE_COMMANDS:
        raise HostError(f"--host works with {', '.join(sorted(REMOTE_COMMANDS))} and console; "
                        f"run '{command}' there: ssh {host} loopwarden {command}")
    _use(host)


def _use(host: str) -> None:
    if host not in _chosen:
        _chosen.clear()
        tunnel = _chosen[host] = Tunnel(host)
        atexit.register(tunnel.close)
        _exit_on_signals()


def _exit_on_signals() -> None:
    """SIGTERM and SIGHUP end this process through SystemExit, so atexit ends the forward and removes its
    socket (the forward also dies with us however we die: PR_SET_PDEATHSIG, runtime/hosts.py)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, _exit)


def _exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def chosen() -> str | None:
    return next(iter(_chosen), None)


def route(ref: str) -> str:
    """A reference with a hosts-file host first (`box:s3:g1`): that host chosen, the rest returned."""
    if _chosen:  # --host was given: references are that host's own
        return ref
    try:
        host, rest = split_ref(ref, listed_hosts())
    except HostError:
        return ref  # an unreadable hosts file names no host here; `console` says what is wrong with it
    if host != LOCAL:
        _use(host)
    return rest


def remote_client(name: str) -> Client | None:
    """A connection to the chosen host's daemon, or None when this invocation is local. Never starts a
    daemon there; a host that cannot be reached, or runs none, is a HostError naming it."""
    if not _chosen:
        return None
    host, tunnel = next(iter(_chosen.items()))
    paths = tunnel.ensure()
    if tunnel.daemon_running is False:
        raise HostError(unreachable_daemon(host, tunnel))
    try:
        return Client.connect(paths, autostart=False, name=name, host=host)
    except DaemonTimeout as exc:  # names the host already
        raise HostError(str(exc)) from None
    except (DaemonError, OSError) as exc:
        raise HostError(f"host {host}: {exc}") from None


def closed_early(exc: DaemonError) -> str | None:
    """A remote request cut before any reply: the daemon there is gone (said so with the host)."""
    if not _chosen or "closed the connection" not in str(exc):
        return None
    host, tunnel = next(iter(_chosen.items()))
    return unreachable_daemon(host, tunnel)


@click.command(hidden=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON line: socket, daemon (running or not), version.")
def where(as_json: bool) -> None:
    """Where this profile's daemon socket is, and whether a daemon answers on it (for --host over ssh).

    Starts nothing. Another machine runs it over ssh before forwarding the socket
    (entry.py runs it without loading the command line, as it does hooks).

    \b
    Examples:
      loopwarden where
      ssh box loopwarden where --json
    """
    sys.exit(where_main(as_json))


def host_names(given: tuple[str, ...] | list[str], *, with_file: bool = True) -> list[str]:
    """The hosts a console attaches to: the hosts file's, then those given, each once; HostError when bad."""
    names = listed_hosts() if with_file else []
    for name in given:
        if name != LOCAL and check_name(name) not in names:
            names.append(name)
    return names
