"""The daemon's disk upkeep: spill files past their retention, history past the store's."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ..paths import Paths
from ..supervisor.config import ConfigError, Spill, load_config
from . import spill_cleaner
from .registry import SessionRegistry
from .spill_bounds import SpillLedger
from .store import StoreError


class Upkeep:
    """Spill files and history removed once past their retention."""

    def __init__(self, paths: Paths, registry: SessionRegistry, spill_ledger: SpillLedger, *,
                 log: Callable[[str], None], clock: Callable[[], float]) -> None:
        self.paths = paths
        self.registry = registry
        self.spill_ledger = spill_ledger
        self.log = log
        self.clock = clock
        self._cleaner_wake = anyio.Event()

    def wake_cleaner(self) -> None:
        """A new session's spill retention may be the shortest yet."""
        self._cleaner_wake.set()

    async def clean_spills(self) -> None:
        """Remove spill files past their retention in every spill directory in use, each session's with
        the session's own retention: at start, then when the next file expires (see spill_cleaner.interval)."""
        while True:
            config = load_config(env={}).spill
            default_dir = config.dir or str(self.paths.spill)
            uses = await anyio.to_thread.run_sync(self._spill_uses, default_dir, config.retention)
            plans = spill_cleaner.plan(default_dir, config.retention, uses)
            removed, freed = await anyio.to_thread.run_sync(spill_cleaner.clean, plans, self.clock())
            self.spill_ledger.release(freed)  # (here, on the event loop, where the sessions count what they write)
            if removed:
                self.log(f"removed {removed} spill files past their retention from {len(plans)} directories")
            sessions = self.registry.sessions.values()
            live = [s.spiller.retention for s in sessions if s.spiller is not None and not s.final]
            wait = await anyio.to_thread.run_sync(spill_cleaner.interval, plans, live, self.clock())
            self._cleaner_wake = anyio.Event()
            with anyio.move_on_after(wait):
                await self._cleaner_wake.wait()  # a new session may bring a shorter retention

    def measure_spills(self) -> None:
        """The bytes of the spill files already on disk, in every directory in use (the start of the count the
        total bound `spill.max_total_bytes` is held to; every byte written and file removed moves it after)."""
        try:
            config = load_config(env={}).spill
        except ConfigError as exc:
            self.log(f"spill bounds: the daemon's configuration cannot be read ({exc}); using the defaults")
            config = Spill()
        default_dir = config.dir or str(self.paths.spill)
        plans = spill_cleaner.plan(default_dir, config.retention, self._spill_uses(default_dir, config.retention))
        self.spill_ledger.limit = config.max_total_bytes
        found = self.spill_ledger.measure(plans)
        if found:
            self.log(f"spill files already on disk: {found:,} bytes in {len(plans)} directories")

    def _spill_uses(self, default_dir: str, default_retention: float) -> list[spill_cleaner.SessionSpill]:
        """Where each session, of this daemon or an earlier one, spills, and its retention (a worker thread)."""
        uses: dict[str, spill_cleaner.SessionSpill] = {}
        store = self.registry.store
        if store is not None:
            try:
                for sid, directory, retention in store.spill_settings(default_dir, default_retention):
                    uses[sid] = spill_cleaner.SessionSpill(sid, directory, retention)
            except StoreError as exc:
                self.log(f"spill cleaner: cannot read the sessions' spill settings ({exc})")
        for sid, session in list(self.registry.sessions.items()):
            spiller = session.spiller
            if spiller is not None:
                uses[sid] = spill_cleaner.SessionSpill(sid, spiller.directory, spiller.retention)
        return list(uses.values())

    async def prune(self, ended_before: float, audit_before: float | None) -> dict[str, int]:
        store = self.registry.store
        if store is None:
            return {}
        await self.registry.recorder.flush()
        deleted = await anyio.to_thread.run_sync(lambda: store.prune(ended_before, audit_before))
        recent, sessions = self.registry.recent, self.registry.sessions
        for sid in [sid for sid in recent if sid not in sessions]:
            snap = recent.get(sid) or {}
            if (snap.get("ended_at") or snap.get("created_at") or 0) < ended_before:
                recent.discard(sid)
        return deleted

    async def pruner(self) -> None:
        """Apply `store.retention` (and `store.audit_retention`) from the daemon's configuration, hourly."""
        while True:
            try:
                config = load_config()
            except ConfigError as exc:
                self.log(f"prune skipped: {exc}")
                config = load_config(env={})
            retention, audit = config.store.retention, config.store.audit_retention
            if retention or audit:
                now = self.clock()
                try:
                    deleted = await self.prune(now - retention if retention else 0.0,
                                               seconds_before(now, audit or None))
                except StoreError as exc:
                    self.log(f"prune failed: {exc}")
                else:
                    if any(deleted.values()):
                        self.log("pruned history: " + ", ".join(f"{n} {t}" for t, n in deleted.items() if n))
            await anyio.sleep(3600)


def seconds_before(now: float, seconds: float | None) -> float | None:
    return None if seconds is None else now - seconds
