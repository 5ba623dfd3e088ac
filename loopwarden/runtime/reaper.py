"""Orphans of agents come back to the daemon (a child subreaper), which reaps them at once.

Without this, a grandchild killed with its group is reparented to pid 1 and stays a
zombie until pid 1 gets round to it (seconds, on some machines). Coming back to the
daemon also keeps a double-forked process findable (containment.py). Only zombies that
are not the daemon's own direct children (whose exit codes asyncio collects), nor children a thread of the
daemon waits for itself (`spawn_waited`: git), are reaped.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from typing import Any

from .procfs import children_of, read_stat

PR_SET_CHILD_SUBREAPER = 36
_WAITED: set[int] = set()  # children whose exit status a thread collects itself (spawn_waited)
_SPAWNING = threading.Lock()  # held while one starts and while orphans are reaped: none is reaped unregistered


def become_subreaper() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _zombie(pid: int) -> bool:
    info = read_stat(pid)
    return info is not None and info.state == "Z"


def _session_leader(pid: int) -> bool:
    try:
        return os.getsid(pid) == pid
    except OSError:
        return True  # unknown: leave it alone


def children_exited() -> bool:
    """Whether some child has exited and waits to be reaped, asked without reaping it (True where that
    cannot be asked): a round with none reads no children list."""
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return False
    except (AttributeError, OSError):
        return True


def spawn_waited(argv: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start a child whose exit status the caller collects itself (Popen.wait, communicate): never reaped by
    `reap_orphans`, which would leave Popen an exit code of 0 whatever the child's, until `release`d."""
    with _SPAWNING:
        proc: subprocess.Popen[bytes] = subprocess.Popen(argv, **popen)
        _WAITED.add(proc.pid)
    return proc


def release(pid: int) -> None:
    """A child of `spawn_waited` that was waited for: its pid may name an orphan again."""
    with _SPAWNING:
        _WAITED.discard(pid)


def reap_orphans(keep: set[int], leaders: bool = False) -> tuple[int, int]:
    """Reap zombie children that are not in `keep` (processes someone else waits for), nor started by
    `spawn_waited`. A session leader is reaped only with `leaders`: one may be an agent just started, whose
    exit code asyncio collects. Returns how many were reaped and how many zombie session leaders were passed
    over."""
    with _SPAWNING:
        return _reap(keep | _WAITED, leaders)


def _reap(keep: set[int], leaders: bool) -> tuple[int, int]:
    reaped = passed = 0
    for pid in children_of(os.getpid()) - keep:
        if not _zombie(pid):
            continue
        if not leaders and _session_leader(pid):
            passed += 1
            continue  # an orphan that called setsid() is reaped on a round with `leaders`
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue
        reaped += done == pid
    return reaped, passed
