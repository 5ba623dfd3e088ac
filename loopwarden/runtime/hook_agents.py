"""The agent processes an attached (hook) session has claimed: what they make "inside", and how they stop.

Each is a process found by hook_claims.py to run the agent's own program above a hook that reported to this
session. A claim lasts while that very process lives (a ProcId never matches a newer process with its pid).
When the session is terminated, by a rule or by an operator's kill, the agent is stopped for real: SIGTERM to
each live claimed process, SIGKILL to those left after the grace. Codex, for one, ignores a hook's "stop";
only a signal ends a terminated Codex that would otherwise go on calling its model.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import anyio

from .principal import Claim
from .procfs import ProcId, alive, signal_exact

AGENTS_KEPT = 4  # processes claimed per session (the agent, and a few that ran its hooks with its program)
STOP_POLL = 0.05


class AgentProcesses:
    """The processes one attached session claims, newest last."""

    def __init__(self, what: str) -> None:
        self.what = what  # how a refusal names them: "the Claude Code process that ran its hook"
        self.procs: dict[int, ProcId] = {}
        self.stopping = False  # a stop is under way: another waits for nothing

    def add(self, proc: ProcId) -> None:
        """Another process that ran one of its hooks: claimed too, never instead of the ones before (a forged
        hook would otherwise move the claim off the agent)."""
        self.procs.pop(proc.pid, None)
        self.procs[proc.pid] = proc
        for pid in list(self.procs)[:-AGENTS_KEPT]:
            del self.procs[pid]

    def __contains__(self, proc: ProcId) -> bool:
        return self.procs.get(proc.pid) == proc

    def __bool__(self) -> bool:
        return bool(self.procs)

    def claims(self, session: str) -> list[Claim]:
        return [Claim(session, proc, self.what) for proc in self.procs.values()]

    def prune(self) -> bool:
        """Forget the claimed processes that have exited; True when some were claimed and none is left."""
        had = bool(self.procs)
        self.procs = {pid: proc for pid, proc in self.procs.items() if alive(proc)}
        return had and not self.procs

    def living(self) -> list[ProcId]:
        return [proc for proc in self.procs.values() if alive(proc)]

    async def stop(self, grace: float, report: Callable[[str], None]) -> list[int]:
        """SIGTERM to every living claimed process, SIGKILL to any left after `grace` seconds; each step said
        through `report`. The pids signalled (none: nothing was alive)."""
        if self.stopping:
            return []
        targets = [proc for proc in self.living() if signal_exact(proc, signal.SIGTERM)]
        if not targets:
            return []
        self.stopping = True
        try:
            pids = ", ".join(str(proc.pid) for proc in targets)
            report(f"sent SIGTERM to the agent process {pids}; SIGKILL follows in {grace:g}s if it is still running")
            with anyio.move_on_after(max(0.0, grace)):
                for proc in targets:
                    await _exited(proc)
            left = [proc for proc in targets if alive(proc) and signal_exact(proc, signal.SIGKILL)]
            if left:
                report(f"sent SIGKILL to the agent process {', '.join(str(p.pid) for p in left)}, still running "
                       f"{grace:g}s after SIGTERM")
            else:
                report(f"the agent process {pids} has exited")
        finally:
            self.stopping = False
        return [proc.pid for proc in targets]


async def _exited(proc: ProcId) -> None:
    """Return once this very process has exited (it is no child of ours: its pidfd says so)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        while alive(proc):  # noqa: ASYNC110 - without a pidfd, polling is all there is
            await anyio.sleep(STOP_POLL)
        return
    try:
        if alive(proc):  # the pidfd names this process, not a newer one with its pid
            await anyio.wait_readable(fd)
    finally:
        os.close(fd)
