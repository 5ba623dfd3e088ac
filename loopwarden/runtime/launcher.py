"""Making the daemon's sessions: a launched agent wired to the daemon's records, spill bounds and containment,
and an adopted process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..paths import Paths
from ..sessions.base import Adapter
from ..supervisor.config import Config
from ..supervisor.health import SessionHealth
from .adopted import AdoptedSession
from .processes import ProcessWatch
from .records import Recorder
from .registry import SessionRegistry
from .routing import Router
from .session import LiveSession, SessionSpec
from .session_runs import SessionStarter
from .spill import Spiller
from .spill_bounds import SpillBounds, SpillLedger
from .upkeep import Upkeep


class Launcher:
    """Builds and starts launched sessions; builds adopted ones (started once their adoption is audited)."""

    def __init__(self, paths: Paths, registry: SessionRegistry, starter: SessionStarter, router: Router,
                 recorder: Recorder, watch: ProcessWatch, spill_ledger: SpillLedger, upkeep: Upkeep, *,
                 clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.starter = starter
        self.router = router
        self.recorder = recorder
        self.watch = watch
        self.spill_ledger = spill_ledger
        self.upkeep = upkeep
        self.clock = clock

    def launch(self, spec: SessionSpec, config: Config, adapter: Adapter, *,
               health: SessionHealth | None = None) -> dict[str, Any]:
        """Name `spec` (unique among live sessions), start it, and reply its id and name; `health`: the counters
        and state it starts with (None: fresh)."""
        asked = spec.name
        name, renamed = self.registry.unique_name(asked)  # a live session has it: name-2
        spec.name, sid = name, spec.id
        spiller = Spiller(config.spill.dir or self.paths.spill, preview_chars=config.spill.preview_chars,
                          truncate_chars=config.spill.threshold_chars, retention=config.spill.retention,
                          session=sid, bounds=SpillBounds.of(config.spill, self.spill_ledger))
        session = LiveSession(spec, config, adapter, sink=self.router.sink, spiller=spiller,
                              on_group=self.watch.guard_group, clock=self.clock, records=self.recorder,
                              containment=self.watch.containment(sid),  # its cgroup, once it is sure to start
                              sink_rows=self.router.sink_rows, health=health)
        self.starter.start(session)
        self.upkeep.wake_cleaner()  # its spill retention may be the shortest yet
        return {"id": sid, "name": name, **({"renamed_from": asked} if renamed else {})}

    def adopted(self, pid: int, config: Config, name: str | None) -> AdoptedSession:
        """A session watching process `pid`, not started yet (psutil's errors when the process cannot be watched)."""
        return AdoptedSession("pending", pid, config, name=name, sink=self.router.sink, clock=self.clock)
