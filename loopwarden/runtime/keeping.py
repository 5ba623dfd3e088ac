"""The daemon's kept agents (keeper.py holds them): the keeper reached when the daemon starts, new agents started
there, what is stored told to it, ended sessions let go, and the agents an earlier daemon left taken up again."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import anyio

from ..paths import Paths
from ..sessions import detect
from ..sessions.base import Adapter
from ..sessions.registry import adapters
from ..supervisor.config import Config, ConfigError, from_stored
from ..supervisor.events import Event, ToolCall
from ..supervisor.health import SessionHealth
from ..supervisor.stored import stored_event, stored_verdict
from ..supervisor.verdicts import Action
from ..supervisor.tags import stored_tags
from .containment import Containment, daemon_instance
from .hook_intake import operator_config
from .keeper_link import KeeperError, KeeperLink, daemon_command
from .pods.pod_session import PodSession
from .processes import ProcessWatch
from .rebuild import RebuildError, pages, rebuilt_health
from .records import Recorder
from .registry import SessionRegistry
from .session import LiveSession, SessionSpec
from .session.live import TakenUp
from .store import Store, StoreError
from .worktrees import stored_worktree

# the launcher's take_up: (spec, config, adapter, where its output resumes, its rebuilt engine)
TakeUp = Callable[[SessionSpec, Config, Adapter, TakenUp, SessionHealth], None]
TakeUpInPod = Callable[[SessionSpec, Config, Adapter, TakenUp, SessionHealth, PodSession], None]  # ... in its pod
# what the store says of a kept agent: its spec, settings, adapter's name, where its output resumes, its first events
# and its adapter's memory
Found = tuple[SessionSpec, Config, str, TakenUp, list[Event], dict[str, Any]]
Revived = tuple[SessionSpec, Config, Adapter, TakenUp, SessionHealth]  # a kept agent's session, to take up
FIRST_EVENTS = 8  # a session's first stored events, what an adapter taken up learns again from
POD_CLOSE = 5.0  # seconds restart-daemon gives the links to its pods to close


class Keeping:
    """The keeper as the daemon uses it; every method is a no-op while agents are not kept."""

    def __init__(self, paths: Paths, registry: SessionRegistry, recorder: Recorder, watch: ProcessWatch, *,
                 log: Callable[[str], None]) -> None:
        self.paths = paths
        self.registry = registry
        self.recorder = recorder
        self.watch = watch
        self.log = log
        self.link: KeeperLink | None = None
        self.instance = ""  # the keeper's "PID.START": the end of its agents' marks
        self.enabled = False  # new agents are kept (daemon.keep_agents)
        self.held: dict[str, LiveSession | None] = {}  # sessions of this daemon whose agent the keeper holds
        # what taking up an earlier daemon's agents cost: output read again, output lost (the keeper had let go
        # of what the store never got), answers to lines the store never got (those lines are judged again)
        self.took = {"taken_up": 0, "resent_bytes": 0, "lost_bytes": 0}
        self.unknown: list[str] = []  # kept agents the store does not know (stopped)
        self.in_pods: dict[str, LiveSession] = {}  # sessions in pods, each held by its pod's keeper (pods/)
        recorder.on_positions = self._stored  # what the store has of a kept agent, told to whichever keeper holds it
        registry.on_release(self._released)

    async def open(self) -> None:
        """Reach the keeper when agents are to be kept, or when one runs (it holds an earlier daemon's agents)."""
        try:
            self.enabled = operator_config(self.paths).daemon.keep_agents
        except ConfigError as exc:
            self.log(f"keeper: the operator's configuration cannot be read ({exc}); agents are not kept")
        link = KeeperLink(self.paths.runtime, self.log)
        if not self.enabled and not link.path.exists():
            return
        try:
            await link.open(daemon_command(self.paths), start=self.enabled)
        except (OSError, KeeperError, TimeoutError) as exc:
            if self.enabled:
                self.log(f"keeper: cannot be reached ({exc}); agents are not kept")
            return
        self.link = link
        self.instance = daemon_instance(link.pid)
        self.log(f"keeper {link.pid}: holds {len(link.kept)} agents; new agents "
                 + ("are kept by it" if self.enabled else "are not (daemon.keep_agents is off)"))

    @property
    def kept_ids(self) -> set[str]:
        return {str(s["sid"]) for s in self.link.kept} if self.link is not None else set()

    def keeps(self, adapter: Adapter, spec: SessionSpec) -> bool:
        """Whether a new session's agent is kept: keeping is on, and what its adapter knows of it comes back from
        the store (`Adapter.keepable`; for `auto`, that of the adapter its command chooses, if any)."""
        if not self.enabled or self.link is None or self.link.lost:
            return False
        if adapter.name == detect.AUTO:
            choice = detect.by_command(spec.command, spec.env)
            return choice is None or adapters()[choice.adapter].keepable
        return type(adapter).keepable

    def containment(self, sid: str) -> Containment:
        """A kept session's containment; from now on the keeper is told when it may forget the session."""
        self.held[sid] = None
        return self.watch.containment(sid, keeper=self.instance)

    # ---- what the store has, told to the keeper ------------------------------------------
    def _stored(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            sid = str(row["session_id"])
            in_pod = self.in_pods.get(sid)
            link = in_pod.keeper if in_pod is not None else self.link
            if link is not None:
                link.stored(sid, int(row["out_offset"]), int(row["judged_seq"]), int(row["err_offset"]))

    def hold_in_pod(self, session: LiveSession) -> None:
        """A session whose agent a pod's keeper holds: what the store has of it is told to that keeper, which
        otherwise keeps the agent's output until it holds KEEP_BYTES, and then stops reading it; restart-daemon
        leaves it to that keeper for the next daemon."""
        self.in_pods[session.spec.id] = session

    def _released(self, sid: str, _session: object) -> None:
        """An ended session left the daemon's memory (its last records stored): its keeper forgets it."""
        self.in_pods.pop(sid, None)
        if self.link is not None and sid in self.held:
            del self.held[sid]
            self.link.release(sid)

    def hold(self, session: LiveSession) -> None:
        self.held[session.spec.id] = session

    @property
    def handed_over(self) -> set[str]:
        """The sessions restart-daemon leaves to their keepers for the next daemon: kept here, or in pods whose
        agent runs there (one still placing, or stopping, is stopped as any other)."""
        return set(self.held) | set(self._pods_running())

    def _pods_running(self) -> dict[str, LiveSession]:
        return {sid: s for sid, s in self.in_pods.items() if s.pod is not None and s.pod.node is not None
                and (s.pid is not None or s.taken is not None) and not s.final and not s.agent_process.stopping}

    def let_go(self) -> int:
        """restart-daemon: every kept session, here or in a pod, stops supervising without touching its agent; how
        many."""
        pods = self._pods_running()
        for session in [*self.held.values(), *pods.values()]:
            if session is not None:
                session.let_go()
        self.in_pods = pods
        return len(self.held) + len(pods)

    # ---- taking up what an earlier daemon left --------------------------------------------
    def taken_up(self, store: Store) -> list[Found]:
        """What each agent the keeper holds needs to be supervised again, read from the store. An agent the store
        does not know is stopped (nothing can say how to judge it)."""
        found = []
        for kept in self.link.kept if self.link is not None else []:
            one = self.found(store, kept)
            if one is not None:
                found.append(one)
        return found

    def found(self, store: Store, kept: dict[str, Any], *, local: bool = True) -> Found | None:
        """What one agent a keeper holds (`kept`: its hello's entry) needs to be supervised again, read from the
        store (runs in a worker thread); None when it cannot be (an agent of the local keeper the store does not
        know is in `unknown`)."""
        sid = str(kept["sid"])
        try:
            row = store.session(sid)
            position = store.position(sid) if row is not None else None
            first = store.events(sid, limit=FIRST_EVENTS) if row is not None else []
            memory = store.adapter_memory(sid) if row is not None else None
            tool_calls = store.tool_calls(sid) if row is not None else 0
        except StoreError as exc:
            self.log(f"keeper: session {sid} cannot be read ({exc}); its agent runs on unseen")
            return None
        if row is None or position is None:
            if local:  # (a pod's agent: its pod is deleted)
                self.log(f"keeper: session {sid} is not in the store; its agent is stopped")
                self.unknown.append(sid)
            return None
        stored = row.get("snapshot")
        snap: dict[str, Any] = stored if isinstance(stored, dict) else {}
        stored_config = snap.get("config")
        try:
            config = from_stored(row.get("preset"), stored_config if isinstance(stored_config, dict) else {})
        except ConfigError as exc:
            self.log(f"keeper: session {sid}'s settings cannot be read again ({exc}); the defaults judge it")
            config = from_stored(None, {})
        words = row.get("command")
        command: list[Any] = words if isinstance(words, list) else []
        spec = SessionSpec(id=sid, name=str(row.get("name") or sid), command=[str(w) for w in command],
                           adapter=str(row.get("adapter") or "plain"), cwd=row.get("cwd"),
                           preset=row.get("preset"), task=snap.get("task"),
                           worktree=stored_worktree(snap), tags=stored_tags(snap))
        out, seq, judged, err = position
        remembered, recalled = memory if memory is not None else (judged, {})
        forgot = (_held(kept, "out") or (0, 0))[0]  # past a stored line's start: its reader died inside it
        stopped = kept.get("stopped")
        taken = TakenUp(int(kept["pid"]), row.get("started_at"), max(out, forgot), seq, judged, err,
                        remembered=max(seq, min(remembered, judged)), mid_line=forgot > out,
                        tool_calls=tool_calls, paused=stopped if isinstance(stopped, bool) else None)
        self._count(kept, out)
        return spec, config, spec.adapter, taken, _events(first), recalled

    async def shutdown(self) -> None:
        """The daemon stops for good (its sessions were stopped): the keeper starts no daemon again."""
        if self.link is not None:
            with contextlib.suppress(KeeperError):
                await self.link.request("shutdown")
            await self.link.aclose()

    def describe(self) -> dict[str, Any] | None:
        """The keeper, for `ping` and `status`."""
        if self.link is None:
            return None
        return {"pid": self.link.pid, "holds": len(self.held), "connected": not self.link.lost,
                "keep_agents": self.enabled, **self.took, "answers_dropped": self.link.answers_dropped,
                "output_connection": self.link.channels is not None}

    async def take_up_all(self, store: Store | None, take_up: TakeUp) -> None:
        """Supervise again the agents the keeper held for an earlier daemon, each judged as it was (rebuilt off the
        event loop: the daemon serves meanwhile, and the keeper holds what the agents write)."""
        if store is None or self.link is None:
            return
        found = await anyio.to_thread.run_sync(self.taken_up, store)
        for sid in self.unknown:
            self.link.tell("signal", sid=sid, sig=15)
        for one in found:
            take_up(*await self.revived(store, one))
        if self.link.kept:
            self.log(f"took up {len(self.link.kept)} sessions the keeper held")

    async def revived(self, store: Store, found: Found) -> Revived:
        """A kept agent's session as the launcher takes it up: its adapter told what it knew, its engine rebuilt
        as it was (judged afresh when it cannot be)."""
        spec, config, name, taken, first, memory = found
        known = adapters()
        adapter = known.get(name, known["plain"])()
        adapter.taken_up(first)
        try:
            health, taken = await anyio.to_thread.run_sync(self.judged_again, store, spec, config, taken)
        except (StoreError, RebuildError) as exc:
            self.log(f"session {spec.id}: its judgement cannot be rebuilt ({exc}); judged afresh from now on")
            health = SessionHealth(config, started_at=taken.started_at)
        adapter.recall(memory, {call.seq for call, _ in taken.held})
        if not adapter.can_veto:
            taken = replace(taken, held=())
        return spec, config, adapter, taken, health

    def judged_again(self, store: Store, spec: SessionSpec, config: Any,
                     taken: TakenUp) -> tuple[SessionHealth, TakenUp]:
        """A taken-up session's engine, rebuilt from the store as the last daemon left it, and the calls its pending
        gates hold (the agent waits for their verdicts): each tool call since the first pending gate opened, with
        the block it was given."""
        health = rebuilt_health(store, spec.id, config)
        gates = health.pending_gates()
        if not gates:
            return health, taken
        since = min(gate.seq for gate in gates)
        blocks = {int(v["seq"]): stored_verdict(v) for v in pages(store.verdicts, spec.id)
                  if v.get("action") == Action.BLOCK and (v.get("seq") or 0) >= since}
        held = []
        for row in pages(store.events, spec.id):
            data = row.get("data")
            if row.get("kind") == "tool_call" and (row.get("seq") or 0) >= since and isinstance(data, dict):
                event = stored_event(data, row.get("seq"))
                if type(event) is ToolCall:
                    held.append((event, blocks.get(event.seq)))
        return health, replace(taken, held=tuple(held))

    def _count(self, kept: dict[str, Any], stored: int) -> None:
        """What taking this agent up costs: its output the keeper holds past what is stored is read again; any it
        let go of that the store never got is lost (counted, never silent)."""
        base, end = _held(kept, "out") or (stored, stored)
        self.took["taken_up"] += 1
        self.took["resent_bytes"] += max(0, end - max(stored, base))
        self.took["lost_bytes"] += max(0, base - stored)

    async def close_pods(self) -> None:
        """restart-daemon, once the sessions' tasks are over: each pod's link closed (its pod and agent left to
        the next daemon), so that its keeper takes the next daemon at once rather than refusing it as a second."""
        with anyio.move_on_after(POD_CLOSE, shield=True):
            async with anyio.create_task_group() as tg:
                for session in self.in_pods.values():
                    if session.pod is not None:
                        tg.start_soon(session.pod.close)

    async def handover(self) -> None:
        """This daemon leaves on purpose (`restart-daemon`): the keeper waits for the next one."""
        if self.link is not None:
            await self.link.bye()
            await self.link.aclose()


def _events(rows: list[dict[str, Any]]) -> list[Event]:
    """Stored event records as events again (those that cannot be read are left out)."""
    events = (stored_event(row["data"], row.get("seq")) for row in rows if isinstance(row.get("data"), dict))
    return [event for event in events if event is not None]


def _held(kept: dict[str, Any], stream: str) -> tuple[int, int] | None:
    """The offsets [first, end) of what the keeper holds of a stream, as its hello said (None when it does not)."""
    held = kept.get(stream)
    if isinstance(held, list) and len(held) == 2 and all(isinstance(n, int) for n in held):
        return held[0], held[1]
    return None
