"""Making the daemon's sessions: a launched agent wired to the daemon's records, spill bounds and containment,
and an adopted process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..paths import Paths
from ..sessions.base import Adapter
from ..supervisor.ladders import for_agent
from ..supervisor.config import Config
from ..supervisor.health import SessionHealth
from .adopted import AdoptedSession
from .keeping import Keeping
from .pods.placement import Placement
from .pods.pod_session import PodContainment, PodSession
from .processes import ProcessWatch
from .records import Recorder
from .registry import SessionRegistry
from .routing import Router
from .session import LiveSession, SessionSpec
from .session.live import TakenUp
from .session_runs import SessionStarter
from .spill import Spiller
from .spill_bounds import SpillBounds, SpillLedger
from .upkeep import Upkeep


class Launcher:
    """Builds and starts launched sessions; builds adopted ones (started once their adoption is audited)."""

    def __init__(self, paths: Paths, registry: SessionRegistry, starter: SessionStarter, router: Router,
                 recorder: Recorder, watch: ProcessWatch, spill_ledger: SpillLedger, upkeep: Upkeep,
                 keeping: Keeping, *, clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.starter = starter
        self.router = router
        self.recorder = recorder
        self.watch = watch
        self.spill_ledger = spill_ledger
        self.upkeep = upkeep
        self.keeping = keeping
        self.clock = clock

    def launch(self, spec: SessionSpec, config: Config, adapter: Adapter, *,
               health: SessionHealth | None = None, place: Placement | None = None) -> dict[str, Any]:
        """Name `spec` (unique among live sessions), start it, and reply its id and name; `health`: the counters
        and state it starts with (None: fresh); `place`: the pod it runs in (None: here)."""
        asked = spec.name
        config = for_agent(config, *adapter.ladder_of(spec.command, spec.env))  # Gemini climbs Gemini's models
        name, renamed = self.registry.unique_name(asked)  # a live session has it: name-2
        spec.name, sid = name, spec.id
        if place is not None:
            self._launch_in_pod(spec, config, adapter, health, place)
            return {"id": sid, "name": name, **({"renamed_from": asked} if renamed else {})}
        kept = self.keeping.keeps(adapter, spec)
        session = LiveSession(spec, config, adapter, sink=self.router.sink, spiller=self._spiller(config, sid),
                              on_group=self.watch.guard_group, clock=self.clock, records=self.recorder,
                              # its cgroup, once it is sure to start
                              containment=self.keeping.containment(sid) if kept else self.watch.containment(sid),
                              sink_rows=self.router.sink_rows, keeper=self.keeping.link if kept else None,
                              health=health)
        if kept:
            self.keeping.hold(session)
        self.starter.start(session)
        if kept:
            self.router.publish_now(sid)  # stored before its agent starts (LiveSession._start waits for it)
        self.upkeep.wake_cleaner()  # its spill retention may be the shortest yet
        return {"id": sid, "name": name, **({"renamed_from": asked} if renamed else {})}

    def _launch_in_pod(self, spec: SessionSpec, config: Config, adapter: Adapter, health: SessionHealth | None,
                       place: Placement) -> None:
        """A session whose agent the keeper in a pod of its own holds (pods/pod_session.py)."""
        pod = PodSession(spec.id, place, self.watch.log)
        session = LiveSession(spec, config, adapter, sink=self.router.sink, spiller=self._spiller(config, spec.id),
                              on_group=lambda _pgid, _alive: None, clock=self.clock, records=self.recorder,
                              containment=PodContainment(spec.id, pod), sink_rows=self.router.sink_rows,
                              keeper=pod.link, health=health, pod=pod)
        self.keeping.hold_in_pod(session)
        self.starter.start(session)
        self.router.publish_now(spec.id)  # stored before its pod is made (LiveSession._start waits for it)
        self.upkeep.wake_cleaner()

    def take_up(self, spec: SessionSpec, config: Config, adapter: Adapter, taken: TakenUp,
                health: SessionHealth) -> None:
        """Supervise again an agent an earlier daemon launched and the keeper held, judged as it was (`health`)."""
        assert self.keeping.link is not None
        session = LiveSession(spec, config, adapter, sink=self.router.sink, spiller=self._spiller(config, spec.id),
                              on_group=self.watch.guard_group, clock=self.clock, records=self.recorder,
                              containment=self.keeping.containment(spec.id), sink_rows=self.router.sink_rows,
                              keeper=self.keeping.link, taken=taken, health=health)
        self.keeping.hold(session)
        self.starter.start(session)

    def take_up_in_pod(self, spec: SessionSpec, config: Config, adapter: Adapter, taken: TakenUp,
                       health: SessionHealth, pod: PodSession) -> None:
        """Supervise again an agent an earlier daemon placed in a pod, whose keeper `pod` has reached again."""
        session = LiveSession(spec, config, adapter, sink=self.router.sink, spiller=self._spiller(config, spec.id),
                              on_group=lambda _pgid, _alive: None, clock=self.clock, records=self.recorder,
                              containment=PodContainment(spec.id, pod), sink_rows=self.router.sink_rows,
                              keeper=pod.link, taken=taken, health=health, pod=pod)
        self.keeping.hold_in_pod(session)
        self.starter.start(session)

    def _spiller(self, config: Config, sid: str) -> Spiller:
        return Spiller(config.spill.dir or self.paths.spill, preview_chars=config.spill.preview_chars,
                       truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                       session=sid, bounds=SpillBounds.of(config.spill, self.spill_ledger))

    def adopted(self, pid: int, config: Config, name: str | None) -> AdoptedSession:
        """A session watching process `pid`, not started yet (psutil's errors when the process cannot be watched)."""
        return AdoptedSession("pending", pid, config, name=name, sink=self.router.sink, clock=self.clock)
