"""The agent's process and everything it started: its launch, its state, signals to its group, its end."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Final

import anyio
from anyio.abc import Process

from ...supervisor.verdicts import FINAL_STATES, SessionState
from ..containment import Containment
from ..principal import Claim
from ..keeper_channels import KeptStream, close_source
from ..keeper_link import KeeperLink
from ..procfs import ProcTable, read_stat
from .journal import Journal



KEEPER_MARGIN: Final = 30.0  # seconds past max_runtime and its grace the keeper ends the agent itself (no daemon)


def keeper_deadline(max_runtime: float, grace: float) -> float | None:
    """Seconds from a kept agent's start after which the keeper ends it even while no daemon watches; None: never."""
    return max_runtime + grace + KEEPER_MARGIN if max_runtime else None

class Pipes:
    """Our ends of the agent's pipes, until its reader and writer take them."""

    def __init__(self, stdout: int | KeptStream, stderr: int | KeptStream, stdin: int) -> None:
        self.stdout: int | KeptStream | None = stdout
        self.stderr: int | KeptStream | None = stderr
        self.stdin: int | None = stdin


class KeptProcess:
    """An agent the keeper started (keeper.py), as the session waits for it: its pid, and its exit as the keeper
    tells it (the keeper is its parent)."""

    def __init__(self, keeper: KeeperLink, sid: str, pid: int) -> None:
        self.keeper = keeper
        self.sid = sid
        self.pid = pid
        self.returncode: int | None = None
        self.ended_by_keeper: str | None = None  # why the keeper ended it itself (its max_runtime), if it did

    async def wait(self) -> int:
        if self.returncode is None:
            self.returncode, self.ended_by_keeper = await self.keeper.exit_code(self.sid)
        return self.returncode


class AgentProcess:
    """One agent process, the group it leads and whatever left that group (containment.py): its state from
    starting to its end, one method per transition, and the signals that pause, resume and end all of it."""

    def __init__(self, sid: str, containment: Containment, journal: Journal, clock: Callable[[], float],
                 on_group: Callable[[int, bool], None]) -> None:
        self.sid = sid
        self.containment = containment
        self.journal = journal
        self.clock = clock
        self.on_group = on_group  # (pgid, alive): the daemon watches the group while it lives
        self.state = SessionState.STARTING
        self.created_at = clock()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.pid: int | None = None
        self.process: Process | KeptProcess | None = None
        self.keeper: KeeperLink | None = None  # the agent is kept by the keeper: it outlives the daemon
        self.paused = False  # the group is stopped (by an operator or by a gate)
        self.operator_paused = False
        self.stopping = False
        self.deadline: float | None = None  # monotonic; set when the daemon stops: every wait ends there

    async def launch(self, argv: list[str], env: dict[str, str], cwd: str | None) -> Pipes:
        """Start the agent in a group of its own, its stdio pipes of our own; raises OSError or ValueError when it
        cannot start. Its ends of the pipes are closed here once it has them: EOF comes when it and its children
        are done."""
        writers: list[int] = []  # the agent's ends
        ours: list[int] = []
        try:
            stdout_r, stdout = os.pipe()
            ours.append(stdout_r)
            writers.append(stdout)
            stderr_r, stderr = os.pipe()
            ours.append(stderr_r)
            writers.append(stderr)
            stdin, stdin_w = os.pipe()
            writers.append(stdin)
            ours.append(stdin_w)
            self.process = await anyio.open_process(
                self.containment.command(argv), stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd or None,
                env=self.containment.environment(env), start_new_session=True)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in writers:
                os.close(fd)
        pipes = Pipes(stdout_r, stderr_r, stdin_w)
        self._running(self.process.pid, os.fstat(stdout_r).st_ino)
        return pipes

    async def launch_kept(self, keeper: KeeperLink, argv: list[str], env: dict[str, str], cwd: str | None, *,
                          max_runtime: float | None, grace: float) -> Pipes:
        """Have the keeper start the agent (it outlives the daemon); our ends are connections to the keeper."""
        self.keeper = keeper
        pid = await keeper.spawn(self.sid, self.containment.command(argv), self.containment.environment(env), cwd,
                                 max_runtime=max_runtime, grace=grace)
        self.process = KeptProcess(keeper, self.sid, pid)
        self._running(pid)
        return await self.attach_kept(keeper)

    def kept_limits(self, max_runtime: float, grace: float) -> None:
        """A kept agent's limits changed (`loopwarden set`): the keeper's own deadline for it follows."""
        if self.keeper is not None:
            self.keeper.tell("limit", sid=self.sid, max_runtime=keeper_deadline(max_runtime, grace))

    async def take_up(self, keeper: KeeperLink, pid: int, started_at: float | None, out: int, judged: int,
                      err: int, *, paused: bool | None = None) -> Pipes:
        """An agent an earlier daemon launched and the keeper held meanwhile: supervised again from where the store
        ends (its stdout from `out`, its stderr from `err`; what it is to be told about lines after `judged` is
        told again)."""
        self.keeper = keeper
        await keeper.take(self.sid, judged)
        self.process = KeptProcess(keeper, self.sid, pid)
        self._running(pid)
        self.started_at = started_at or self.started_at
        if paused is None:  # (a pod's pid is not this machine's: its keeper says)
            info = read_stat(pid)
            paused = info is not None and info.state in ("T", "t")
        self.paused = paused  # held by a gate or an operator: still
        return await self.attach_kept(keeper, out, err)

    async def attach_kept(self, keeper: KeeperLink, out: int = 0, err: int = 0) -> Pipes:
        streams: list[int | KeptStream] = []
        try:
            for stream, start in (("out", out), ("err", err)):
                streams.append(await keeper.attach(self.sid, stream, start))
            stdin = await keeper.attach(self.sid, "in")
        except BaseException:
            for opened in streams:
                close_source(opened)
            raise
        assert isinstance(stdin, int)
        return Pipes(streams[0], streams[1], stdin)

    def _running(self, pid: int, stdout_inode: int | None = None) -> None:
        self.pid = pid
        self.containment.started(pid, stdout_inode)
        self.on_group(pid, True)
        self.state, self.started_at = SessionState.RUNNING, self.clock()

    def not_started(self) -> None:
        """The launch failed: the session ends as a command that was not found would (127)."""
        self.state, self.ended_at = SessionState.EXITED, self.clock()
        self.exit_code = 127
        self.containment.release()

    def begin_stop(self, again: bool = False) -> bool:
        """The session starts stopping; False when it is stopping already (unless `again`: a failure of the
        supervisor's own stops it whatever it was doing) or has no process to stop."""
        if (self.stopping and not again) or self.process is None:
            return False
        self.stopping = True
        self.state = SessionState.STOPPING
        return True

    def gone(self) -> None:
        """Supervision is over: nothing of the session runs any more."""
        self.ended_at = self.clock()

    def settle(self, *, terminated: bool, failed: bool) -> None:
        """How it ended: terminated by a verdict (the engine's), or exited by itself; an agent whose work failed
        though its process exited 0 (its model died) exits 1."""
        if terminated:
            self.state = SessionState.TERMINATED
            return
        self.state = SessionState.EXITED
        if failed and not self.exit_code:
            self.exit_code = 1

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    async def exited(self) -> None:
        """Wait for the agent itself to exit, and keep its exit code."""
        assert self.process is not None
        self.exit_code = await self.process.wait()

    async def exit_within(self, seconds: float) -> None:
        """Give the agent up to `seconds` (less when the daemon is stopping) to exit by itself."""
        assert self.process is not None
        with anyio.move_on_after(self.grace(seconds)):
            await self.process.wait()

    # ---- signals ----------------------------------------------------------------
    def hold(self) -> None:
        """Stop the group (SIGSTOP), unless it is stopped already."""
        if not self.paused:
            self.signal(signal.SIGSTOP)
            self.paused = True

    def release(self) -> None:
        """Continue the group (SIGCONT), if it is stopped."""
        if self.paused:
            self.signal(signal.SIGCONT)
            self.paused = False

    def signal(self, sig: int) -> None:
        if self.pid is not None:
            self.containment.signal_leader(self.pid, sig)

    # ---- the end --------------------------------------------------------------------
    async def end_all(self, when: str, grace: float) -> None:
        """SIGTERM to every process of the session (its group, its cgroup, whatever left them: containment.py),
        `grace` seconds (less when the daemon is stopping), SIGKILL for those still there; survivors (a
        process in uninterruptible sleep, after SIGKILL + 1 s) are reported."""
        survivors = await self.containment.end(self.grace(grace))
        if survivors:
            pids = ", ".join(str(p.pid) for p in sorted(survivors, key=lambda p: p.pid)[:10])
            self.journal.report(f"{len(survivors)} processes of the session survived SIGKILL {when}: {pids}",
                                error=True)

    async def kill_leftovers(self, grace: float) -> None:
        """After the agent exits, end every process it started, wherever it went (processes that left its group:
        setsid, double fork); then the session's cgroup is removed and the guardian forgets it."""
        await self.end_all("after the agent exited", grace)
        self.containment.release()

    def kill_now(self) -> None:
        """SIGKILL every process of the session at once (the daemon's grace is over)."""
        self.containment.kill_now()

    def grace(self, seconds: float) -> float:
        """`seconds`, or what remains until the daemon's deadline when that is sooner."""
        if self.deadline is None:
            return seconds
        return max(0.0, min(seconds, self.deadline - time.monotonic()))

    def group_done(self) -> None:
        """The daemon reaps what it can of the group now."""
        if self.pid is not None:
            self.on_group(self.pid, False)

    def claims(self) -> list[Claim]:
        """While it runs, the agent's process group and session (it leads both) and its descendants are its."""
        root = self.containment.root
        if root is None or self.final:
            return []
        return [Claim(self.sid, root, "the agent", group=True)]


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs; zombies (dead, not yet reaped) do not count."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return bool(ProcTable.scan().group(pgid))
