"""A live session: one launched agent, supervised by a few parts that each do one job."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import anyio
from anyio.abc import Process

from ...sessions import detect
from ...sessions.base import Adapter, Capability
from ...supervisor.config import Config
from ...supervisor.events import ToolCall
from ...supervisor.health import GATED, TERMINATED, SessionHealth
from ...supervisor.verdicts import SessionState, Termination, Verdict
from ..containment import Containment
from ..keeper_link import KeeperError, KeeperLink
from ..opinion import SecondOpinion
from ..pods.pod_session import HOST_LOST, PodSession
from ..principal import Claim
from ..procfs import ProcTable
from ..spill import Spiller
from .agent import Agent
from .controls import OperatorControls
from .interventions import Interventions
from .journal import Journal
from .judge import Judge
from .process import AgentProcess, KeptProcess, Pipes, keeper_deadline
from .reader import OutputReader
from .recovery import Recovery
from .sampling import Sampler
from .spec import Records, Resources, RowsSink, SessionSpec, Sink, minimal_env
from .spills import Spills
from .tasks import Tasks, Wake
from .ticker import Ticker
from .view import SnapshotView
from .writer import InputWriter

POD_MARGIN = 30.0  # seconds past the keeper's own deadline the cluster ends a session's pod (activeDeadlineSeconds)


@dataclass(frozen=True)
class TakenUp:
    """A kept agent an earlier daemon launched: its pid and start, and where its stored output ends (the stdout
    offset, that line's seq, the last line judged and stored, the stderr offset)."""

    pid: int
    started_at: float | None
    out: int
    seq: int
    judged: int
    err: int
    held: tuple[tuple[ToolCall, Verdict | None], ...] = ()  # calls a pending gate holds, with their block
    remembered: int = 0  # the last line seq its adapter's stored memory covers (`Adapter.recall`)
    mid_line: bool = False  # `out` is inside the line after `seq` (the keeper forgot that line's start)
    tool_calls: int = 0  # its tool calls stored so far
    paused: bool | None = None  # stopped (SIGSTOP), as its keeper saw; None: looked up here by its pid


class LiveSession:
    """Runs one agent process and drives a SessionHealth with its output, live.

    The parts, each with one job: the process and its group (`agent_process`), the adapter it is spoken to through
    (`agent`), its output read and decoded (`reader`), each event judged and recorded (`judge`, `journal`), the
    verdicts carried out (`interventions`, `spills`, `recovery`), its stdin (`writer`), the clock (`ticker`), its
    resources (`sampler`), the operator's operations (`controls`) and its snapshot (`view`). This class starts
    them and is what the daemon holds."""

    hook_key: str | None = None  # launched, not attached by hooks
    restartable = True  # started by loopwarden: `restart` starts its task again
    counts_loops = True

    def __init__(self, spec: SessionSpec, config: Config, adapter: Adapter, *, sink: Sink,
                 spiller: Spiller | None = None, on_group: Callable[[int, bool], None] | None = None,
                 clock: Callable[[], float] = time.time, records: Records | None = None,
                 containment: Containment | None = None, sink_rows: RowsSink | None = None,
                 keeper: KeeperLink | None = None, taken: TakenUp | None = None,
                 health: SessionHealth | None = None, pod: PodSession | None = None) -> None:
        sid = spec.id
        self.spec = spec
        self.clock = clock
        self.spiller = spiller
        self.keeper = keeper  # the keeper holds the agent: it outlives this daemon
        self.taken = taken  # ... and an earlier daemon launched it: supervised again from where the store ends
        self.pod = pod  # the agent runs in a pod of its own on a cluster, held by the keeper there
        self.letting_go = False  # this daemon hands the kept agent over to the next: its end touches nothing
        # a run that continues an earlier one may start with its counters (None: fresh)
        self.health = health = health or SessionHealth(config, started_at=clock())
        self.journal = journal = Journal(sid, health, sink, sink_rows, clock)
        self.agent = agent = Agent(adapter, spec, rows=sink_rows is not None)
        self.agent_process = process = AgentProcess(sid, containment or Containment(sid), journal, clock,
                                                    on_group or (lambda pgid, alive: None))
        self.tasks = tasks = Tasks()
        self.wake = wake = Wake()
        # the daemon's environment holds the API key; secrets of both environments are kept out of prompts
        self.opinion, self._opinion_off = SecondOpinion.create(config.opinion, os.environ, spec.env)
        self.spills = spills = Spills(spiller, journal)
        self.writer = writer = InputWriter(sid, agent, health, journal, process, records, tasks, wake)
        self.interventions = interventions = Interventions(sid, agent, health, journal, writer, process, spills,
                                                           tasks, wake, self.opinion, clock)
        self.recovery = recovery = Recovery(agent, health, journal, writer, interventions, wake, clock)
        self.judge = judge = Judge(health, journal, agent, spills, recovery, self.opinion, clock)
        self.reader = reader = OutputReader(sid, agent, health, journal, judge, interventions, writer, spills, records)
        if keeper is not None:
            reader.kept = True
            reader.consumed = partial(keeper.consumed, sid)
            writer.seq = lambda: reader.seq
            writer.remember = reader.remember
        self.sampler = sampler = Sampler(process, health, journal, wake, clock)
        self.ticker = ticker = Ticker(health, journal, process, writer, sampler, interventions, tasks, wake, clock)
        self.controls = OperatorControls(spec, agent, health, journal, writer, process, interventions, ticker, tasks,
                                         wake, clock)
        self.view = SnapshotView(self)

    # ---- lifecycle --------------------------------------------------------
    async def run(self) -> None:
        """Start the process and supervise it until it ends; never raises for the agent's faults."""
        agent, spec, process = self.agent, self.spec, self.agent_process
        agent.adapter.cwd = spec.cwd or os.getcwd()  # the agent's, absolute (the CLI sends its own cwd)
        by_command = detect.by_command(spec.command, spec.env) if agent.choosing else None
        if by_command is not None:  # it waits for its client to speak first: no line will tell
            self.reader.choose(by_command, final=True, announce=False)
        no_stdin = detect.stdin_unused(spec.command) if agent.choosing else None
        argv = agent.adapter.command(spec.command)
        env = spec.env or minimal_env()  # the client's environment only, never the daemon's
        try:
            pipes = await self._start(argv, env)
        except (OSError, ValueError, KeeperError) as exc:
            process.not_started()
            self.health.never_started()
            how = "take up" if self.taken is not None else "start"  # (a kept agent's keeper that failed us)
            self.journal.report(f"cannot {how} {argv[0]!r}: {getattr(exc, 'strerror', None) or exc}", error=True)
            if self.pod is not None:  # placed (or reached again), its agent not started or taken up: nothing stays
                await self._pod_ended(HOST_LOST if self.taken is not None else None)
            self.journal.publish()
            return
        self.reader.stdout_fd, self.reader.stderr_fd, self.writer.fd = pipes.stdout, pipes.stderr, pipes.stdin
        assert process.pid is not None and process.started_at is not None
        if self.pod is None:  # a pod's pids are not this machine's: nothing of it is sampled here
            self.sampler.started(process.pid)
        if self.taken is None:
            self.health.started(process.started_at)
        for said in (by_command.line() if by_command else None, f"stdin closed: {no_stdin}" if no_stdin else None,
                     self._opinion_off):
            if said:
                self.journal.report(said)
        self.journal.publish()
        try:
            await self._supervise(close_stdin=no_stdin is not None)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: stop the agent, never leave it unwatched
            await self._crashed(exc)
        finally:
            await self._wind_up()
        process.gone()
        if agent.choosing:
            self.reader.choose(detect.QUIET, final=True)
        process.settle(terminated=self.health.state == TERMINATED, failed=agent.adapter.failure is not None)
        if self.pod is not None:
            await self._pod_ended()
        self.journal.publish()

    async def _pod_ended(self, link_lost: str | None = None) -> None:
        """The pod is deleted; a session whose pod went under it (deleted, its node or the API gone), or whose
        pod's keeper failed the next daemon taking it up (`link_lost`), ends as a host lost, which `continue`
        takes up on a new pod."""
        assert self.pod is not None
        kept = self.agent_process.process
        with anyio.CancelScope(shield=True):
            lost = await self.pod.end(link_lost or (kept.ended_by_keeper if isinstance(kept, KeptProcess) else None))
        if lost:
            self.agent_process.state, self.agent_process.exit_code = SessionState.LOST, None
            self.health.host_lost(lost)

    async def _start(self, argv: list[str], env: dict[str, str]) -> Pipes:
        """The agent started here, by the keeper, or taken up from the keeper where an earlier daemon left it."""
        process, keeper, taken = self.agent_process, self.keeper, self.taken
        if keeper is None:
            return await process.launch(argv, env, self.spec.cwd)
        if taken is not None:
            self.reader.resume_at(taken.out, taken.seq, taken.judged, taken.err, taken.remembered,
                                  taken.mid_line)
            pipes = await process.take_up(keeper, taken.pid, taken.started_at, taken.out, taken.judged, taken.err,
                                          paused=taken.paused)
            process.operator_paused = process.paused and self.health.state != GATED  # else a gate holds it
            self.reader.held_until_caught_up = list(taken.held)
            self.judge.tool_calls = taken.tool_calls
            return pipes
        records = self.writer.records
        if records is not None:  # the session is stored before the keeper starts its agent: a next daemon finds it
            await records.durable(self.spec.id, records.mark(self.spec.id))
        limits = self.config.limits
        if self.pod is not None:
            deadline = keeper_deadline(limits.max_runtime, limits.kill_grace)
            await self.pod.place_pod(deadline + POD_MARGIN if deadline else None)
            self.journal.publish()  # its pod stored before its agent starts: a next daemon finds it, and deletes it
            if records is not None:
                await records.durable(self.spec.id, records.mark(self.spec.id))
        return await process.launch_kept(keeper, argv, env, self.spec.cwd,
                                         max_runtime=keeper_deadline(limits.max_runtime, limits.kill_grace),
                                         grace=limits.kill_grace)

    async def _supervise(self, close_stdin: bool) -> None:
        self.writer.ready = anyio.Event()
        if self.keeper is not None:
            await self.writer.open_kept(self.keeper)
        try:
            await self._supervise_in_group(close_stdin)
        finally:
            self.tasks.group = None  # closed: nothing may be started in it (a stop line queued on a crash)

    async def _supervise_in_group(self, close_stdin: bool) -> None:
        sid, tasks, writer, process = self.spec.id, self.tasks, self.writer, self.agent_process
        async with anyio.create_task_group() as tg:
            tasks.group = tg
            for data in self.agent.adapter.start_lines() if self.taken is None else ():
                writer.send(data)
            if close_stdin:
                writer.send(b"")
            if self.reader.seq >= self.reader.skip_until:  # taken up with no stored line to read again
                self.reader.caught_up()
            tg.start_soon(self.ticker.run, name=f"{sid} _ticker")  # named: compiled methods have no __qualname__
            if self.agent.choosing:
                tasks.start_other(self.reader.choose_if_silent, name=f"{sid} _choose_if_silent")
            pumps_done = asyncio.get_running_loop().create_future()
            tg.start_soon(self.reader.pump, pumps_done, name=f"{sid} _pumps")
            kill = self.interventions.kill_requested
            if kill is not None:  # a kill that came while the process was starting
                tasks.start_other(self.interventions.stop, self.health.termination_reason or Termination.OPERATOR,
                                  kill, name=f"{sid} stop")
            await process.exited()
            await process.kill_leftovers(self.config.limits.kill_grace)  # nothing the agent started writes on
            await self.reader.drain(pumps_done)
            tasks.finishing = True
            # the stdin writer and the ticker, when they wait for nothing but a wake-up, return by themselves
            # and the task group ends without a cancellation to deliver; a drain given up leaves the pumps
            # waiting for an EOF that may never come: they are cancelled
            if pumps_done.done() and writer.idle and self.ticker.idle and not tasks.others:
                assert writer.ready is not None
                writer.ready.set()
                self.wake.set()
            else:
                tg.cancel_scope.cancel()
        await self.ticker.kill_if_asked()  # asked of the ticker, which was cancelled before it got to it

    async def _crashed(self, exc: Exception) -> None:
        """A bug of ours stopped supervision: the agent is stopped, never left unwatched."""
        self.journal.report(f"supervision failed ({type(exc).__name__}: {exc}); stopping the agent", error=True)
        self.health.supervisor_failed(f"session terminated: the supervisor failed ({exc})")
        with anyio.CancelScope(shield=True):
            await self.interventions.stop(Termination.CRASHED, "the supervisor failed", again=True)
            process = self.agent_process.process
            assert process is not None
            await process.wait()

    def let_go(self) -> None:
        """restart-daemon: supervision ends here (its task is cancelled next), the kept agent runs on untouched (in
        its pod, if it runs in one: the next daemon takes it up there)."""
        self.letting_go = True

    async def _wind_up(self) -> None:
        """The pipes no part took are closed, and whatever of the session still runs is ended (but for a kept
        agent handed over to the next daemon)."""
        process = self.agent_process
        self.reader.close_fds()
        self.writer.close_fd()
        if self.letting_go:
            return
        self.journal.stop_progress()  # the final publish tells everything
        if process.containment.emptied and self.opinion is None:  # the usual end: nothing left to wait for
            process.containment.release()
            process.group_done()
        else:
            with anyio.CancelScope(shield=True):
                await process.kill_leftovers(self.config.limits.kill_grace)
                process.group_done()
                if self.opinion is not None:
                    await self.opinion.aclose()

    # ---- what the daemon asks and does ------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """Everything a console or `status` shows about this session."""
        return self.view.snapshot()

    def claims(self) -> list[Claim]:
        """While it runs, the agent's process group and session (it leads both) and its descendants are its."""
        return self.agent_process.claims()

    def observe(self, table: ProcTable) -> None:
        """Remember the processes that left the group (see containment.py); `sample` measures from `table`."""
        self.agent_process.containment.observe(table)
        self.sampler.observe(table)

    async def sample(self, children: dict[int, list[int]] | None = None) -> None:
        """Refresh CPU, memory and the process tree, and judge the resource limits (Sampler.sample)."""
        if self.pid is None or self.final or self.pod is not None:
            return
        self.sampler.sample(children)

    def failed(self) -> tuple[str | None, str | None, list[str], int | None]:
        """How it failed, for a restart's summary: how it ended, its last intervention, its last errors, its
        agent's exit code."""
        ended = self.health.termination.reason if self.health.termination else self.adapter.failure
        last = self.journal.last_intervention
        return ended, (last.message or last.reason) if last else None, list(self.judge.errors), self.exit_code

    def reconfigure(self, config: Config) -> None:
        self.controls.reconfigure(config)

    def outside_budgets(self, reached: dict[str, dict[str, Any]]) -> None:
        self.controls.outside_budgets(reached)

    async def decide(self, gate_id: str, approve: bool, by: str, note: str | None) -> list[Verdict]:
        return await self.controls.decide(gate_id, approve, by, note)

    def grant(self, note: str | None) -> Verdict:
        return self.controls.grant(note)

    def reset(self, counter: str | None) -> None:
        self.controls.reset(counter)

    def inject(self, text: str) -> bool:
        return self.controls.inject(text)

    def pause(self) -> None:
        self.controls.pause()

    def resume(self) -> None:
        self.controls.resume()

    def rewind(self, turns: int, note: str | None, *, by: str = "operator") -> Verdict:
        return self.recovery.rewind(turns, note, by=by)

    def kill_soon(self, note: str | None = None) -> bool:
        return self.controls.kill_soon(note)

    async def kill(self, note: str | None = None, *, daemon_stopping: bool = False) -> None:
        await self.interventions.kill(note, daemon_stopping=daemon_stopping)

    def kill_now(self) -> None:
        self.agent_process.kill_now()

    # ---- what the daemon reads -------------------------------------------------------
    @property
    def capabilities(self) -> Capability:
        return self.agent.capabilities

    @property
    def final(self) -> bool:
        return self.agent_process.final

    @property
    def config(self) -> Config:
        """The session's settings, as the engine judges by them."""
        return self.health.config

    @config.setter
    def config(self, config: Config) -> None:
        self.controls.reconfigure(config)

    @property
    def adapter(self) -> Adapter:
        return self.agent.adapter

    @property
    def state(self) -> SessionState:
        return self.agent_process.state

    @state.setter
    def state(self, state: SessionState) -> None:
        self.agent_process.state = state

    @property
    def pid(self) -> int | None:
        return self.agent_process.pid

    @pid.setter
    def pid(self, pid: int | None) -> None:
        self.agent_process.pid = pid

    @property
    def process(self) -> Process | KeptProcess | None:
        return self.agent_process.process

    @property
    def containment(self) -> Containment:
        return self.agent_process.containment

    @property
    def created_at(self) -> float:
        return self.agent_process.created_at

    @property
    def started_at(self) -> float | None:
        return self.agent_process.started_at

    @started_at.setter
    def started_at(self, at: float | None) -> None:
        self.agent_process.started_at = at

    @property
    def ended_at(self) -> float | None:
        return self.agent_process.ended_at

    @ended_at.setter
    def ended_at(self, at: float | None) -> None:
        self.agent_process.ended_at = at

    @property
    def exit_code(self) -> int | None:
        return self.agent_process.exit_code

    @property
    def stopping(self) -> bool:
        return self.agent_process.stopping

    @stopping.setter
    def stopping(self, stopping: bool) -> None:
        self.agent_process.stopping = stopping

    @property
    def deadline(self) -> float | None:
        """Monotonic; set when the daemon stops: every wait ends there."""
        return self.agent_process.deadline

    @deadline.setter
    def deadline(self, at: float | None) -> None:
        self.agent_process.deadline = at

    @property
    def resources(self) -> Resources:
        return self.sampler.resources

    @resources.setter
    def resources(self, resources: Resources) -> None:
        self.sampler.resources = resources

    @property
    def tool_calls(self) -> int:
        return self.judge.tool_calls

    @property
    def stdin_dropped(self) -> int:
        return self.writer.dropped

    @property
    def drain_abandoned(self) -> bool:
        return self.reader.drain_abandoned
