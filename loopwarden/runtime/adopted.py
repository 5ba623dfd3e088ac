"""A process started elsewhere, watched by pid: runtime limit (from adoption), resources, kill."""

from __future__ import annotations

from dataclasses import replace

import os
import signal
import time
from collections.abc import Callable
from typing import Any

import anyio
import psutil

from ..sessions.base import Capability
from ..supervisor.config import Config
from ..supervisor.gates import GateError
from ..supervisor.health import TERMINATED, SessionHealth
from ..supervisor.verdicts import FINAL_STATES, Action, SessionState, Termination, Verdict
from .contract import NotCapable
from .principal import Claim
from .procfs import ProcId, ProcTable, proc_id
from .session import Resources, SessionSpec, Sink, tree_pids
from .snapshot import build

POLL_SECONDS = 0.25


class AdoptedSession:
    """No pipes: only time and resources are judged; pause, resume and kill use signals."""

    adapter_name = "adopted"
    summary = "a process started elsewhere, watched by pid: time and resources judged; signals only"
    declared = Capability.NONE

    def __init__(self, sid: str, pid: int, config: Config, *, name: str | None, sink: Sink,
                 clock: Callable[[], float] = time.time) -> None:
        self.process = psutil.Process(pid)  # raises NoSuchProcess for a missing pid
        if self.process.uids().real != os.getuid() and os.getuid() != 0:
            raise PermissionError(pid)
        command = self.process.cmdline() or [self.process.name()]
        self.spec = SessionSpec(id=sid, name=name or self.process.name(), command=command, adapter="adopted")
        self.config = config
        self.sink = sink
        self.clock = clock
        self.pid = pid
        self.root: ProcId | None = proc_id(pid)  # with its start time: a reused pid is never taken for it
        self.created_at = clock()
        self.process_started_at = self.process.create_time()
        self.started_at = self.created_at  # limits count from adoption, not from the process's birth
        self.health = SessionHealth(_no_stall(config), started_at=self.started_at)
        self.state = SessionState.RUNNING
        self.ended_at: float | None = None
        self.exit_code: int | None = None
        self.paused = False
        self.operator_paused = False
        self.resources = Resources()
        self.stopping = False
        self.deadline: float | None = None  # monotonic; set when the daemon stops: the grace ends there
        self._procs: dict[int, psutil.Process] = {}

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    async def run(self) -> None:
        self._publish()
        while self.process.is_running() and self.process.status() != psutil.STATUS_ZOMBIE:
            verdicts = self.health.tick(self.clock())
            for verdict in verdicts:
                self.sink("verdict", self.spec.id, {**verdict.to_dict(), "ts": self.clock()})
                if verdict.action == Action.TERMINATE:
                    await self.stop(verdict.termination or Termination.OPERATOR)
            await anyio.sleep(POLL_SECONDS)
        self.ended_at = self.clock()
        self.state = SessionState.TERMINATED if self.health.state == TERMINATED else SessionState.EXITED
        self._publish()

    async def sample(self, children: dict[int, list[int]] | None = None) -> None:
        pids = tree_pids(self.pid, children) if children is not None else [self.pid]
        cpu = 0.0
        rss = 0
        for pid in pids:
            try:
                proc = self._procs.get(pid) or self._procs.setdefault(pid, psutil.Process(pid))
                cpu += proc.cpu_percent(None)
                rss += proc.memory_info().rss
            except psutil.Error:
                self._procs.pop(pid, None)
        self.resources = Resources(cpu, rss, len(pids))
        self._publish()

    def reconfigure(self, config: Config) -> None:
        """New limits from `loopwarden set`, taken on the next poll (still no stall: it has no events)."""
        self.config = config
        self.health.reconfigure(_no_stall(config))
        self._publish()

    def outside_budgets(self, reached: dict[str, dict[str, Any]]) -> None:
        """The daemon's budgets: an adopted process makes no calls to hold (its engine is told all the same)."""
        self.health.outside_budgets(reached, self.clock())

    def pause(self) -> None:
        if not self.paused:
            self._signal(signal.SIGSTOP)
            self.paused = self.operator_paused = True
            self._publish()

    def resume(self) -> None:
        if self.paused:
            self._signal(signal.SIGCONT)
            self.paused = self.operator_paused = False
            self._publish()

    async def kill(self, note: str | None = None, *, daemon_stopping: bool = False) -> None:
        verdicts = self.health.kill_terminate(self.clock(), note, daemon_stopping=daemon_stopping)
        for verdict in verdicts:
            self.sink("verdict", self.spec.id, {**verdict.to_dict(), "ts": self.clock()})
        await self.stop(self.health.termination_reason or Termination.OPERATOR)

    async def stop(self, reason: Termination) -> None:
        """SIGTERM to the process and its descendants, SIGKILL after the grace period."""
        if self.stopping:
            return
        self.stopping = True
        try:
            procs = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            return
        if self.paused:
            self._signal(signal.SIGCONT)
        for p in procs:
            _send(p, signal.SIGTERM)
        deadline = time.monotonic() + self.config.limits.kill_grace
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        while time.monotonic() < deadline and any(_alive(p) for p in procs):  # noqa: ASYNC110 - not our children: no exit to wait on
            await anyio.sleep(0.02)
        for p in procs:
            _send(p, signal.SIGKILL)

    def kill_soon(self, note: str | None = None) -> bool:
        """No ticker of its own: `kill` runs in a task."""
        return False

    def rewind(self, turns: int, note: str | None, *, by: str = "operator") -> Verdict:
        raise ValueError("an adopted session has no conversation to rewind")

    restartable = False  # started elsewhere

    def failed(self) -> tuple[str | None, str | None, list[str], int | None]:
        return None, None, [], None

    def kill_now(self) -> None:
        """SIGKILL the process and its descendants at once (the daemon's grace is over)."""
        try:
            procs = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            return
        for p in procs:
            _send(p, signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        _send(self.process, sig)

    def _publish(self) -> None:
        self.sink("session", self.spec.id, {})

    def claims(self) -> list[Claim]:
        """While it is watched, the adopted process and its descendants are this session's (not its group:
        it was started elsewhere, and its group may be the user's shell job)."""
        return [] if self.final or self.root is None else [Claim(self.spec.id, self.root, "the adopted process")]

    agent = "process"
    capabilities = declared
    spiller = None
    hook_key = None

    def observe(self, table: ProcTable) -> None:
        """Its processes are found from its pid at each sample."""

    counts_loops = False  # no events: time and resources only

    def reset(self, counter: str | None) -> None:
        raise NotCapable("an adopted session has no loop counters to reset")

    async def decide(self, gate_id: str, approve: bool, by: str, note: str | None) -> list[Verdict]:
        raise GateError("an adopted session has no gates")

    def grant(self, note: str | None) -> Verdict:
        raise NotCapable("an adopted session cannot receive text")

    def inject(self, text: str) -> bool:
        raise NotCapable("an adopted session cannot receive text")

    def snapshot(self) -> dict[str, Any]:
        r = self.resources
        return build(
            sid=self.spec.id, name=self.spec.name, command=self.spec.command, cwd=None, env_keys=[],
            config=self.config, health=self.health, state=self.state, paused=self.paused,
            adapter=self.adapter_name, agent=self.agent, caps=self.capabilities, pid=self.pid,
            created_at=self.created_at, started_at=self.started_at, ended_at=self.ended_at, now=self.clock(),
            exit_code=self.exit_code, handshake=False, tool_calls=0, gates_open=False,
            cpu_percent=round(r.cpu_percent, 1), rss=r.rss, processes=r.processes).to_dict()


def _no_stall(config: Config) -> Config:
    """The limits an adopted process is judged by: the operator's, without the stall (it has no events to be
    silent about)."""
    return replace(config, limits=replace(config.limits, stall_timeout=0.0))


def _send(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except psutil.Error:
        pass


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
