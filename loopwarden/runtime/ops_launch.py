"""The operations that start sessions: `run`, `adopt` and `restart`, each audited before it starts anything."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import psutil

from ..paths import Paths
from ..supervisor.config import Config, ConfigError, load_config
from . import worktrees
from .audit import AuditLog, warned
from .commands import default_name, missing_program
from .launcher import Launcher
from .lifecycle import Shutdown, Tasks
from .pods.placement import Placement, PlacementError, agent_env, placement
from .principal import Principal, agent_environment
from .processes import adoption_refusal
from .registry import SessionRegistry
from .requests import (AlreadyAudited, BadRequest, RequestError, RunRequest, adopt_request, request_note,
                       run_request)
from .restarts import Restartable
from .session import SessionSpec, minimal_env
from .session_runs import SessionStarter


class LaunchOperations:
    """`op_run`, `op_adopt`, `op_restart`: checked, audited, then started (never once the daemon is stopping)."""

    def __init__(self, paths: Paths, registry: SessionRegistry, launcher: Launcher, starter: SessionStarter,
                 audit: AuditLog, shutdown: Shutdown, tasks: Tasks) -> None:
        self.paths = paths
        self.registry = registry
        self.launcher = launcher
        self.starter = starter
        self.audit = audit
        self.shutdown = shutdown
        self.tasks = tasks

    def _refuse_after_audit(self, who: Principal, sid: str, op: str) -> None:
        """A shutdown that began while the audit row was written: the session never starts, and says so."""
        if self.shutdown.begun:
            self.audit.record(who, sid, op, None, None, "failed: the daemon began shutting down")
            try:
                self.shutdown.refuse_starts(op)
            except RequestError as exc:
                raise AlreadyAudited(str(exc), kind="daemon") from None

    async def op_run(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        self.shutdown.refuse_starts("run")
        from ..sessions.registry import adapters

        try:
            spec_in = run_request(req.get("spec"), adapters())
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        command, env = spec_in.command, spec_in.env
        try:
            config = load_config(preset=spec_in.preset, file=spec_in.config_file, env=spec_in.config_env,
                                 sets=spec_in.sets)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        pod = _placement(spec_in, config)
        if pod is not None:
            return await self._run_in_pod(spec_in, config, pod, who)
        missing = missing_program(command[0], env.get("PATH"), spec_in.cwd)
        if missing:
            raise RequestError(missing)
        place = await self._origin(spec_in.cwd) if _wants_worktree(spec_in.worktree, config) else None
        sid = self.registry.new_id()
        env = {**(env or minimal_env()), **agent_environment(self.paths.socket)}  # its own CLI calls refuse early
        await self.audit.before(who, sid, "run", " ".join(command)[:200], None, "started")
        self._refuse_after_audit(who, sid, "run")
        cwd, tree = spec_in.cwd, None
        if place is not None:
            tree = await self._worktree(who, sid, place)
            cwd, env = tree.cwd, worktrees.agent_env(env, tree.cwd)
        # named after the last await, so that two runs at once never both take a free name
        asked = spec_in.name or default_name(command)[:80]
        spec = SessionSpec(id=sid, name=asked, command=command, adapter=spec_in.adapter, cwd=cwd, env=env,
                           preset=config.preset, sets=spec_in.sets, task=spec_in.task,
                           worktree=tree.to_dict() if tree else None, tags=spec_in.tags)
        started = self.launcher.launch(spec, config, adapters()[spec_in.adapter]())
        if tree is not None:
            started = {**started, "worktree": {**tree.to_dict(), "checkout_dirty": place is not None and place.dirty}}
        return started

    async def _run_in_pod(self, spec_in: RunRequest, config: Config, pod: Placement,
                          who: Principal) -> dict[str, Any]:
        """A session in a pod of its own: its program is the image's, its directory the pod's volume, its
        environment only what kubernetes.pass_env names."""
        if spec_in.worktree:
            raise RequestError("--worktree makes a worktree on this machine; a session on kubernetes works in its "
                               "pod's volume (kubernetes.volume)")
        from ..sessions.registry import adapters

        sid = self.registry.new_id()
        await self.audit.before(who, sid, "run", " ".join(spec_in.command)[:200], pod.where, "started")
        self._refuse_after_audit(who, sid, "run")
        asked = spec_in.name or default_name(spec_in.command)[:80]
        spec = SessionSpec(id=sid, name=asked, command=spec_in.command, adapter=spec_in.adapter, cwd=pod.workdir,
                           env=agent_env(spec_in.env, config, pod.workdir), preset=config.preset,
                           sets=spec_in.sets, task=spec_in.task, tags=spec_in.tags)
        return self.launcher.launch(spec, config, adapters()[spec_in.adapter](), place=pod)

    @staticmethod
    async def _origin(cwd: str | None) -> worktrees.Origin:
        """Where the session's worktree comes from, or its one-line refusal (before anything is audited)."""
        if cwd is None:
            raise RequestError("a worktree needs the session's directory (cwd) in the run spec")
        try:
            return await anyio.to_thread.run_sync(worktrees.origin, cwd)
        except worktrees.WorktreeError as exc:
            raise RequestError(f"refused: {exc}") from None

    async def _worktree(self, who: Principal, sid: str, place: worktrees.Origin) -> worktrees.Worktree:
        """The session's worktree made (in a worker thread); a failure is audited and ends the run there."""
        try:
            return await anyio.to_thread.run_sync(worktrees.create, place, sid, self.paths.data / "worktrees")
        except (worktrees.WorktreeError, OSError) as exc:
            message = f"the worktree could not be made: {exc}"
            self.audit.record(who, sid, "run", None, None, f"failed: {message}")
            raise AlreadyAudited(message) from None

    async def op_adopt(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        self.shutdown.refuse_starts("adopt")
        try:
            checked = adopt_request(req)
        except BadRequest as exc:
            raise RequestError(str(exc)) from None
        pid = checked.pid
        refusal = adoption_refusal(pid, peer_pid=who.pid)
        if refusal:
            raise RequestError(refusal)
        try:
            config = load_config(preset=checked.preset, env={}, sets=checked.sets)
        except ConfigError as exc:
            raise RequestError(str(exc)) from None
        try:
            session = self.launcher.adopted(pid, config, checked.name)
        except (ProcessLookupError, psutil.NoSuchProcess):
            raise RequestError(f"no process {pid}") from None
        except (PermissionError, psutil.AccessDenied):
            raise RequestError(f"process {pid} belongs to another user") from None
        sid = session.spec.id = self.registry.new_id()
        await self.audit.before(who, sid, "adopt", str(pid), None, "watching")
        self._refuse_after_audit(who, sid, "adopt")
        asked = session.spec.name  # named after the last await, as in op_run
        session.spec.name, renamed = self.registry.unique_name(asked)
        self.starter.start(session)
        return {"id": sid, "name": session.spec.name, **({"renamed_from": asked} if renamed else {})}

    async def op_restart(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Start the task of a launched session again, as a new session whose first message is a summary of
        what failed; a session still running is stopped first."""
        self.shutdown.refuse_starts("restart")
        sid = await self.registry.resolve(req.get("session"))
        old = self.registry.sessions.get(sid)
        if old is not None:
            task = Restartable(old.spec, old.config, *old.failed()) if old.restartable else None
        else:
            task = self.registry.restartable.get(sid)
        task = self._task(sid, task, in_memory=old is not None)
        from ..sessions.registry import adapters

        note = request_note(req)
        summary = task.summary(note)
        adapter = adapters()[task.spec.adapter]()
        if not adapter.preface(summary):
            raise RequestError(f"session {sid} ({task.spec.adapter}) cannot take a first message, so a restart could "
                               "not tell it what failed; start it again with 'loopwarden run' (see 'loopwarden "
                               "adapters')")
        new = self.registry.new_id()
        warning = await self.audit.before(who, sid, "restart", new, summary[:500], "restarting", stops=True)
        self._refuse_after_audit(who, new, "restart")
        if old is not None and not old.final:
            self.tasks.start_soon(old.kill, f"restarted as {new}" + (f": {note}" if note else ""))
        spec = replace(task.spec, id=new, env=dict(task.spec.env), sets=list(task.spec.sets), tags=list(task.spec.tags))
        started = self.launcher.launch(spec, task.config, adapter)
        return warned({**started, "restarted": sid, "summary": summary}, warning)

    @staticmethod
    def _task(sid: str, task: Restartable | None, *, in_memory: bool) -> Restartable:
        """What a restart starts again, or why it cannot."""
        if task is not None:
            return task
        why = ("was not launched by loopwarden" if in_memory else
               "is no longer in this daemon's memory (its environment is never stored)")
        raise RequestError(f"session {sid} {why}; start its task again with 'loopwarden run'")


def _wants_worktree(asked: bool | None, config: Config) -> bool:
    """--worktree or --no-worktree when given, else the setting sessions.worktree."""
    return config.sessions.worktree if asked is None else asked


def _placement(spec_in: RunRequest, config: Config) -> Placement | None:
    """Where the run goes: None here, else its pod; RequestError (one line) when it cannot go there."""
    try:
        return placement(spec_in.on, spec_in.image, config, spec_in.env)
    except PlacementError as exc:
        raise RequestError(str(exc)) from None
