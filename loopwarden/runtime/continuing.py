"""`continue`: a new run of an ended or lost session in the same conversation, through the agent's own resume.

It works from what the store holds (after a reboot nothing else is left): the launch (adapter, command,
working directory, preset and settings, the environment's variable names) and the agent's own conversation
id. The environment's values are never stored: the new run takes the requesting client's, as `run` does, and
the reply names the stored variables it lacks. The new run records the same conversation id from its start,
so an attempt that fails keeps it, as does the old row.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import anyio

from ..paths import Paths
from ..sessions.base import Adapter
from ..supervisor.config import Config, ConfigError, from_stored
from ..supervisor.health import SessionHealth
from ..supervisor.verdicts import FINAL_STATES
from ..supervisor.tags import stored_tags
from .audit import AuditLog
from .commands import missing_program
from .launcher import Launcher
from .lifecycle import Shutdown
from .pods.placement import Placement, PlacementError, agent_env, placed_again
from .principal import Principal, agent_environment
from .rebuild import RebuildError, rebuilt_health
from .records import AUDIT
from .registry import SessionRegistry, row_snapshot
from .requests import AlreadyAudited, BadRequest, RequestError, environment, request_note
from .session import SessionSpec
from .store import StoreError
from .worktrees import stored_worktree

DEFAULT_NOTE = "Continue the task from where you left off."
LONGEST_WAIT = 65.0  # seconds a continue waits for an agent that may not resume sooner (Gemini: the next minute)


@dataclass(frozen=True)
class StoredLaunch:
    """What a session's stored snapshot says of its launch, enough to run it again in its conversation."""

    sid: str
    name: str
    adapter: str
    command: list[str]
    cwd: str | None
    env_keys: list[str]
    preset: str | None
    settings: dict[str, Any]
    conversation: str
    task: str | None
    ended_at: float
    worktree: dict[str, str] | None = None
    tags: tuple[str, ...] = ()
    pod: dict[str, Any] | None = None  # the pod it ran in (pods/pod_session.py: describe): the next run gets one too

    @classmethod
    def of(cls, snap: dict[str, Any]) -> StoredLaunch:
        """The launch in `snap`, or RequestError (one line) saying why this session cannot be continued."""
        sid = str(snap.get("id"))
        state = snap.get("state")
        if state not in FINAL_STATES:
            raise RequestError(f"session {sid} is {state or 'not known'}; only an ended or lost session continues "
                               f"(stop it first: 'loopwarden kill {sid}')")
        command, adapter = snap.get("command"), snap.get("adapter")
        if not isinstance(command, list) or not command or not isinstance(adapter, str):
            raise RequestError(f"session {sid} was not launched by loopwarden, so it has no launch to continue")
        conversation = snap.get("conversation")
        if not isinstance(conversation, str) or not conversation:
            raise RequestError(f"session {sid} has no stored conversation id (its agent never reported one, or "
                               "an older loopwarden ran it); start its task again with 'loopwarden restart'")
        settings = snap.get("config")
        return cls(sid=sid, name=str(snap.get("name") or sid), adapter=adapter, command=[str(w) for w in command],
                   cwd=snap.get("cwd") if isinstance(snap.get("cwd"), str) else None,
                   env_keys=[str(k) for k in snap.get("env_keys") or []], preset=snap.get("preset"),
                   settings=settings if isinstance(settings, dict) else {}, conversation=conversation,
                   task=snap.get("task") if isinstance(snap.get("task"), str) else None,
                   ended_at=float(snap.get("ended_at") or 0.0), worktree=stored_worktree(snap),
                   tags=tuple(stored_tags(snap)), pod=snap["pod"] if isinstance(snap.get("pod"), dict) else None)

    def config(self) -> Config:
        try:
            return from_stored(self.preset, self.settings)
        except ConfigError as exc:
            raise RequestError(f"session {self.sid}: its stored settings cannot be read ({exc})") from None


class ContinueOperations:
    """`op_continue`: checked, audited, then started in the stored conversation (never once the daemon stops)."""

    def __init__(self, paths: Paths, registry: SessionRegistry, launcher: Launcher, audit: AuditLog,
                 shutdown: Shutdown) -> None:
        self.paths = paths
        self.registry = registry
        self.launcher = launcher
        self.audit = audit
        self.shutdown = shutdown
        self.starting: set[str] = set()  # conversations a continue is starting in (audited, not launched yet)

    async def op_continue(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        try:
            env = environment(req)
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        sid = await self.registry.resolve(req.get("session"))
        return await self.start(sid, request_note(req), env, fresh=req.get("fresh_counters") is True, who=who)

    async def start(self, sid: str, note: str | None, env: dict[str, str], *, fresh: bool,
                    who: Principal | None) -> dict[str, Any]:
        """Continue session `sid` with `env` (the client's; `who` None: the daemon's own continue after a
        reboot), audited before it starts; RequestError (one line) when it cannot."""
        self.shutdown.refuse_starts("continue")
        launch = StoredLaunch.of(await self.stored_snapshot(sid))
        self._refuse_a_second_writer(launch)
        self.starting.add(launch.conversation)
        try:
            return await self._start(launch, note or DEFAULT_NOTE, env, fresh=fresh, who=who)
        finally:
            self.starting.discard(launch.conversation)

    async def _start(self, launch: StoredLaunch, note: str, env: dict[str, str], *, fresh: bool,
                     who: Principal | None) -> dict[str, Any]:
        sid = launch.sid
        adapter = self._resuming(launch, note)
        config = launch.config()
        env = {**env, **type(adapter).launch_env(launch.command, env, launch.cwd or "/"), **adapter.resume_env(env)}
        pod = _placement(launch, config, env)
        missing = None if pod else missing_program(launch.command[0], env.get("PATH"), launch.cwd)
        if missing:
            raise RequestError(missing)
        new = self.registry.new_id()
        await self._audited(who, sid, new, note[:500], f"continuing {launch.conversation}")
        await self._wait_for(adapter.resume_not_before(launch.ended_at))
        self._refuse_after_audit(who, new)
        spec = SessionSpec(id=new, name=launch.name, command=launch.command, adapter=launch.adapter, cwd=launch.cwd,
                           env={**env, **agent_environment(self.paths.socket)}, preset=config.preset,
                           task=launch.task, worktree=launch.worktree, tags=list(launch.tags))
        if pod is not None:  # a new pod, on the same volume: the conversation is there
            spec.cwd, spec.env = pod.workdir, agent_env(env, config, pod.workdir)
        earlier = await self.carried_health(sid, config)
        if earlier is not None:  # what the conversation cost so far: an agent's running total may count it again
            adapter.spent_before(earlier.cost.cost_usd)
        health = None if fresh else earlier
        started = self.launcher.launch(spec, config, adapter, health=health, place=pod)
        lacking = sorted(set(launch.env_keys) - set(spec.env))
        return {**started, "continued": sid, "conversation": launch.conversation, "missing_env": lacking,
                "fresh_counters": health is None}

    async def carried_health(self, sid: str, config: Config) -> SessionHealth | None:
        """The counters session `sid` ended with, rebuilt from its stored events, for the run that continues it
        (None: it starts them fresh, when they cannot be rebuilt). The end it came to is not carried: the new run
        starts running (or gated, if a gate was left open)."""
        store = self.registry.store
        if store is None:
            return None
        try:
            health = await anyio.to_thread.run_sync(rebuilt_health, store, sid, config)
        except (StoreError, RebuildError):
            return None
        health.carried_over()
        return health

    async def stored_snapshot(self, sid: str) -> dict[str, Any]:
        """The session's last snapshot: in memory when it is there, else its stored row."""
        snap = self.registry.snapshot(sid)
        if isinstance(snap.get("command"), list):
            return snap
        store = self.registry.store
        row = await anyio.to_thread.run_sync(store.session, sid) if store is not None else None
        if row is None:
            raise RequestError(f"session {sid} is not in the store (it cannot be read now, or was pruned)")
        return row_snapshot(row)

    def _refuse_a_second_writer(self, launch: StoredLaunch) -> None:
        """Two runs writing one conversation would interleave its transcript: one runs at a time."""
        if launch.conversation in self.starting:
            raise RequestError(f"another continue of conversation {launch.conversation} is starting; see "
                               "'loopwarden ls'")
        for session in list(self.registry.sessions.values()):
            if not session.final and session.snapshot().get("conversation") == launch.conversation:
                raise RequestError(f"session {session.spec.id} runs in that conversation already; stop it first "
                                   f"('loopwarden kill {session.spec.id}')")

    @staticmethod
    def _resuming(launch: StoredLaunch, note: str) -> Adapter:
        from ..sessions.registry import adapters

        cls = adapters().get(launch.adapter)
        if cls is None:
            raise RequestError(f"session {launch.sid} ran under the adapter {launch.adapter!r}, which this "
                               "loopwarden does not have (see 'loopwarden adapters')")
        adapter = cls()
        try:
            adapter.resume(launch.conversation, note)
        except ValueError as exc:
            raise RequestError(f"session {launch.sid} cannot continue: {exc}") from None
        adapter.command(list(launch.command))  # what the agent is decides how it resumes (resume_not_before)
        return adapter

    async def _wait_for(self, not_before: float) -> None:
        wait = not_before - time.time()
        if wait > 0:
            await anyio.sleep(min(wait, LONGEST_WAIT))

    async def _audited(self, who: Principal | None, sid: str, new: str, note: str, outcome: str) -> None:
        """The audit row, durable before the new run starts: the operator's, or the daemon's own."""
        if who is not None:
            await self.audit.before(who, sid, "continue", new, note, outcome)
            return
        self._daemon_row(sid, new, note, outcome)
        if not await self.audit.durably(self.audit.recorder.mark(AUDIT)):
            raise RequestError("the audit log could not be written; nothing was started")

    def _daemon_row(self, sid: str, target: str | None, note: str | None, outcome: str) -> None:
        self.audit.row(sid, {"ts": time.time(), "actor": "loopwarden", "client": "daemon", "action": "continue",
                             "target": target, "note": note, "outcome": outcome[:300]})

    def _refuse_after_audit(self, who: Principal | None, sid: str) -> None:
        """A shutdown that began while the audit row was written: the session never starts, and says so."""
        if self.shutdown.begun:
            if who is None:
                self._daemon_row(sid, None, None, "failed: the daemon began shutting down")
            else:
                self.audit.record(who, sid, "continue", None, None, "failed: the daemon began shutting down")
            try:
                self.shutdown.refuse_starts("continue")
            except RequestError as exc:
                raise AlreadyAudited(str(exc), kind="daemon") from None


def _placement(launch: StoredLaunch, config: Config, env: dict[str, str]) -> Placement | None:
    """The pod the next run goes to, where the last one ran in a pod (its place and image, the kubeconfig it
    used); None: here."""
    if launch.pod is None:
        return None
    try:
        place = placed_again(launch.pod, config, env)
    except PlacementError as exc:
        raise RequestError(f"session {launch.sid} ran in a pod and cannot be placed again: {exc}") from None
    earlier = launch.pod.get("pod")
    # two agents must never write one conversation: a pod its host's loss left holding the agent is deleted first
    return replace(place, replaces=earlier) if place is not None and isinstance(earlier, str) else place
