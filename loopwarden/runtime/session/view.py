"""What a console or `status` shows of a live session: its snapshot, cached between changes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..snapshot import build

if TYPE_CHECKING:
    from .live import LiveSession


class SnapshotView:
    """A session's snapshot, built once per change and cached (a `list` of 200 sessions built each one whole:
    110 us apiece); what moves with the clock alone (runtime, the runtime and silence counters, the rate) and the
    resources the sampler replaces are filled in fresh on every call."""

    def __init__(self, session: LiveSession) -> None:
        self.session = session
        self.cache: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    def snapshot(self) -> dict[str, Any]:
        """The key holds, beside the publish count, what can change without a publish."""
        s = self.session
        now = s.clock()
        h = s.health
        key = (s.journal.changes, h.events, s.state, s.pid, s.started_at, s.ended_at, s.exit_code, s.stopping,
               s.agent_process.operator_paused, s.tool_calls, s.stdin_dropped, s.spills.failures, s.config, s.adapter,
               s.agent.choice, s.adapter.conversation,
               s.adapter.resume_state, s.adapter.quota, (s.pod.name, s.pod.node, s.pod.lost) if s.pod else None)
        cached = self.cache
        if cached is None or cached[0] != key:
            cached = self.cache = (key, self.build(now))
        snap = dict(cached[1])
        if s.ended_at is None:
            snap["runtime"] = round(now - (s.started_at or s.created_at), 3)
            counters = snap["counters"] = dict(snap["counters"])
            for c in h.clock_counters(now):
                if c.name in counters:
                    counters[c.name] = [c.value, c.limit]
        r = s.resources
        snap["cpu_percent"], snap["rss"] = round(r.cpu_percent, 1), r.rss
        snap["processes"], snap["open_files"] = r.processes, r.open_files
        snap["rate"] = s.judge.rate_view(now)
        return snap

    def build(self, now: float) -> dict[str, Any]:
        """The snapshot built whole (its rate is filled in by `snapshot`)."""
        s = self.session
        r = s.resources
        adapter = s.adapter
        spiller = s.spiller
        return build(
            sid=s.spec.id, name=s.spec.name, command=s.spec.command, cwd=s.spec.cwd,
            env_keys=sorted(s.spec.env), config=s.config, health=s.health, state=s.state,
            paused=s.agent_process.operator_paused, adapter=adapter.name, agent=adapter.agent, caps=s.capabilities,
            pid=s.pid, created_at=s.created_at, started_at=s.started_at, ended_at=s.ended_at, now=now,
            exit_code=s.exit_code, handshake=adapter.handshake, tool_calls=s.tool_calls,
            gates_open=not (s.final or s.stopping), cpu_percent=round(r.cpu_percent, 1), rss=r.rss,
            processes=r.processes, open_files=r.open_files, stdin_dropped=s.stdin_dropped,
            rate=[], validation_failures=s.health.validation_total, conversation=adapter.conversation,
            resumes=adapter.resumes, task=s.spec.task,
            extra={"spill_failures": s.spills.failures, "failure": adapter.failure, "resume": adapter.resume_state,
                   "kept": s.keeper is not None and s.pod is None, "quota": adapter.quota, "worktree": s.spec.worktree,
                   **_pod(s),
                   "adapter_reason": s.agent.choice.why if s.agent.choice else None,
                   "spill": {"dir": spiller.directory, "retention": spiller.retention,
                             **spiller.bounds.to_dict()} if spiller else None}).to_dict()


def _pod(s: LiveSession) -> dict[str, Any]:
    """A pod session's pod (its node, namespace, name), and how its host was lost."""
    if s.pod is None:
        return {}
    pod = s.pod.describe()
    return {"pod": pod, **({"lost": {"how": "host", "text": pod["lost"]}} if pod.get("lost") else {})}
