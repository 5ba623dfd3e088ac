"""The agent processes that hooks have claimed: what they make "inside", and how they are stopped.

An agent attached by its hooks (Claude Code, Codex) is a process of the user's, found by hook_claims.py.
Its claim makes it and everything below it inside its session (principal.py), for as long as that very
process lives: the daemon keeps claims in one register (HookClaims), apart from the session records, so a
session that ends (idle, SessionEnd, forged or not) or leaves memory takes no claim with it. A session
keeps the few processes it claimed (AgentProcesses), never dropping one for a newcomer.

When such an agent must stop for real, its whole process tree is stopped: SIGTERM to the agent and every
process below it, SIGKILL to those left after the grace. The processes below it are claimed too first, so a
tool that outlives the signals is still inside. Codex, for one, ignores a hook's "stop"; only a signal
ends a terminated Codex that would otherwise go on calling its model.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterable, Sequence

import anyio

from .principal import Claim
from .procfs import ProcId, ProcInfo, ProcTable, alive, signal_exact

AGENTS_KEPT = 4  # agent processes one session claims; past it, a newcomer is not claimed for it
CLAIMS_KEPT = 4096  # processes claimed daemon-wide; the dead are dropped first
STOP_POLL = 0.05


class HookClaims:
    """Every process claimed by a hook, daemon-wide, for as long as it lives."""

    def __init__(self) -> None:
        self.by_pid: dict[int, Claim] = {}
        self._added = 0

    def add(self, claim: Claim) -> bool:
        """Claim a process (a claim already held for it stays, unless it names no session yet: the first
        session keeps it); False when the register is full of living processes."""
        held = self.by_pid.get(claim.root.pid)
        if held is not None and held.root == claim.root and (held.session or not claim.session):
            return True  # a session's claim is never taken over by another's
        self._added += 1
        if len(self.by_pid) >= CLAIMS_KEPT or not self._added % 256:
            self.prune()
        if len(self.by_pid) >= CLAIMS_KEPT:
            return False
        self.by_pid[claim.root.pid] = claim
        return True

    def prune(self) -> None:
        """Forget the processes that have exited."""
        self.by_pid = {pid: claim for pid, claim in self.by_pid.items() if alive(claim.root)}

    def claims(self) -> list[Claim]:
        return list(self.by_pid.values())

    def covering(self, chain: Sequence[ProcInfo]) -> Claim | None:
        """The claim on the nearest of `chain` (a process and its ancestors) that is claimed, if any."""
        for stat in chain:
            claim = self.by_pid.get(stat.pid)
            if claim is not None and claim.root.matches(stat):
                return claim
        return None

    def of(self, session: str) -> list[ProcId]:
        """The living processes claimed for `session`."""
        return [c.root for c in self.by_pid.values() if c.session == session and alive(c.root)]

    def __bool__(self) -> bool:
        return bool(self.by_pid)


class AgentProcesses:
    """The agent processes one attached session claimed, oldest first; never one dropped for a newcomer."""

    def __init__(self) -> None:
        self.procs: dict[int, ProcId] = {}

    def add(self, proc: ProcId) -> bool:
        """Another agent process that ran one of its hooks; False when the session holds AGENTS_KEPT already."""
        if self.procs.get(proc.pid) == proc:
            return True
        if len(self.procs) >= AGENTS_KEPT:
            self.prune()
            if len(self.procs) >= AGENTS_KEPT:
                return False
        self.procs[proc.pid] = proc
        return True

    def __contains__(self, proc: ProcId) -> bool:
        return self.procs.get(proc.pid) == proc

    def __bool__(self) -> bool:
        return bool(self.procs)

    def prune(self) -> bool:
        """Forget the claimed processes that have exited; True when some were claimed and none is left."""
        had = bool(self.procs)
        self.procs = {pid: proc for pid, proc in self.procs.items() if alive(proc)}
        return had and not self.procs

    def living(self) -> list[ProcId]:
        return [proc for proc in self.procs.values() if alive(proc)]


class TreeStop:
    """Stops agent processes and everything below them; one stop at a time per session."""

    def __init__(self) -> None:
        self.running = False

    async def stop(self, roots: Iterable[ProcId], grace: float, report: Callable[[str], None],
                   keep: Callable[[ProcId], object]) -> list[int]:
        """SIGTERM to each living root and every process below it (each first given to `keep`, to be
        claimed), SIGKILL to those left after `grace` seconds; each step said through `report`. The pids
        signalled (none: nothing was alive, or a stop is under way)."""
        if self.running:
            return []
        self.running = True
        try:
            return await _stop_tree([root for root in roots if alive(root)], grace, report, keep)
        finally:
            self.running = False


async def _stop_tree(roots: list[ProcId], grace: float, report: Callable[[str], None],
                     keep: Callable[[ProcId], object]) -> list[int]:
    table = ProcTable.around(root.pid for root in roots)
    below = [info.id for info in table.procs.values() if not info.zombie and info.id not in roots]
    for proc in below:
        keep(proc)
    targets = [proc for proc in [*roots, *below] if signal_exact(proc, signal.SIGTERM)]
    if not targets:
        return []
    pids = ", ".join(str(proc.pid) for proc in roots)
    more = f" and {len(targets) - len(roots)} process(es) below it" if len(targets) > len(roots) else ""
    report(f"sent SIGTERM to the agent process {pids}{more}; SIGKILL follows in {grace:g}s for any still running")
    with anyio.move_on_after(max(0.0, grace)):
        for proc in targets:
            await _exited(proc)
    left = [proc for proc in targets if alive(proc) and signal_exact(proc, signal.SIGKILL)]
    if left:
        report(f"sent SIGKILL to {len(left)} process(es) still running {grace:g}s after SIGTERM "
               f"({', '.join(str(p.pid) for p in left[:10])})")
    else:
        report(f"the agent process {pids} has exited{' with everything below it' if more else ''}")
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
