"""What earlier daemons left in the store, taken in when it opens: their sessions that were still running
marked lost (and said how they ended, once their guardian is done), the newest ended sessions, the next id."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

import anyio

from ..paths import Paths
from . import lost as lost_sessions
from .broadcast import Broadcaster
from .lifecycle import Tasks
from .pods.left_behind import pod_of
from .registry import RECENT_BYTES, SessionRegistry, row_snapshot
from .store import Store, StoreError, max_session_number_readonly

Found = tuple[list[str], list[dict[str, Any]], int]  # sessions marked lost, the newest ended ones, the highest id


class EarlierSessions:
    """Reads what the store holds when it opens (at the start, and again after it could not be written)."""

    def __init__(self, registry: SessionRegistry, broadcaster: Broadcaster, tasks: Tasks, paths: Paths, *,
                 instance: Callable[[], str], log: Callable[[str], None], clock: Callable[[], float]) -> None:
        self.registry = registry
        self.broadcaster = broadcaster
        self.tasks = tasks
        self.paths = paths
        self.instance = instance  # "PID.START" of this daemon, once its guardian started ("" before)
        self.log = log
        self.clock = clock
        self.pending: lost_sessions.Settled | None = None
        self.kept: set[str] = set()  # sessions whose agents the keeper held for us: running, not lost
        self.in_pods: dict[str, dict[str, Any]] = {}  # sessions left running in pods (each one's stored pod)
        self.taking_up: set[str] = set()  # ... of which those being taken up now (pods/take_up.py)
        self.on_in_pods: Callable[[dict[str, dict[str, Any]]], Coroutine[Any, Any, None]] | None = None  # takes them up

    def open(self) -> list[str]:
        """Open the store, mark the sessions of earlier daemons that were still running as lost, and
        load the newest ended sessions (bounded by bytes, so start-up does not grow with history); the
        sessions marked lost. Without a store (a full disk) the daemon still starts: ids continue from a
        read-only look."""
        recorder = self.registry.recorder
        recorder.on_open, recorder.after_open = self.read, self.took
        if not recorder.open():  # no store, or it cannot even be read and marked (a full disk)
            self.registry.ids_after(max_session_number_readonly(self.paths.database))
            return []
        lost: list[str] = recorder.found[0]
        self.took(recorder.found)
        return lost

    def read(self, store: Store) -> Found:
        """When the store has just been opened (in the opening thread): mark the sessions earlier daemons
        left running as lost, and read the newest ended ones and the highest id. Raises StoreError."""
        # (a copy at once: the event loop may add to it meanwhile)
        live = set(self.registry.sessions) | self.kept | set(self.taking_up)
        # in pods: their keepers may hold them still; taken up, or marked lost, by pods/take_up.py
        self.in_pods.update({row["id"]: pod for row in store.unended_in_pods() if row["id"] not in live
                             and (pod := pod_of(row)) is not None and pod.get("node")})
        lost = store.mark_lost(self.clock(), keep=live | set(self.in_pods))
        try:
            self.pending = lost_sessions.settle(store, lost, str(self.paths.data), self.instance())
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - a report that cannot be read never keeps the store closed
            self.log(f"cannot say how the lost sessions ended ({type(exc).__name__}: {exc}); they read as lost")
        return lost, store.recent_sessions(RECENT_BYTES), store.max_session_number()

    def took(self, found: Found) -> None:
        """What `read` found, taken in on the event loop."""
        _lost, rows, highest = found
        self.registry.took_history(rows, highest)
        if self.pending is not None and self.pending.sessions and self.tasks.running:
            self.tasks.start_soon(self.settle)  # (at the daemon's start, serve starts it)
        if self.in_pods and self.on_in_pods is not None and self.tasks.running:
            self.tasks.start_soon(self.on_in_pods, self.left_in_pods())  # (at the start, serve does)

    def left_in_pods(self) -> dict[str, dict[str, Any]]:
        """The sessions in pods found left running since the last call (each once), to take up."""
        left, self.in_pods = self.in_pods, {}
        self.taking_up.update(left)  # (live for a store opened again, from now on)
        return left

    async def lose(self, sid: str, why: str) -> bool:
        """A session left running in a pod that could not be taken up: marked lost now, saying why, in the store
        and to every console; whether it was."""
        store = self.registry.store
        if sid in self.registry.sessions:  # taken up after all
            return False
        if store is None:
            self.log(f"session {sid} is not taken up ({why}), and cannot be marked lost: no store")
            return False

        def mark() -> dict[str, Any] | None:
            if not store.mark_lost(self.clock(), only=[sid]):
                return None
            lost_sessions.record_in_pod(store, sid, pod_of(store.session(sid)) or {}, why)
            return store.session(sid)

        try:
            row = await anyio.to_thread.run_sync(mark)
        except StoreError as exc:
            self.log(f"session {sid} cannot be marked lost ({why}): {exc}")
            return False
        if row is None:
            return False
        snap = row_snapshot(row)
        self.registry.recent.add(sid, snap)
        self.broadcaster.broadcast("session", sid, snap, is_event=False)
        return True

    async def settle(self) -> None:
        """Sessions an earlier daemon lost while its guardian was still stopping them: once that guardian is
        done (at most lost.PENDING_WAIT), say again how they ended, in the store and to every console."""
        pending, self.pending = self.pending, None
        if pending is None or not pending.sessions:
            return
        with anyio.move_on_after(lost_sessions.PENDING_WAIT):
            for guardian in pending.guardians:
                await lost_sessions.gone(guardian)
        store = self.registry.store
        if store is None:
            return

        def again() -> list[dict[str, Any]]:
            lost_sessions.settle(store, pending.sessions, str(self.paths.data), self.instance())
            return [row for sid in pending.sessions if (row := store.session(sid)) is not None]

        try:
            rows = await anyio.to_thread.run_sync(again)
        except StoreError as exc:
            self.log(f"cannot say how the lost sessions {', '.join(pending.sessions)} ended: {exc}")
            return
        recent = self.registry.recent
        for row in rows:
            snap = row_snapshot(row)
            if row["id"] in recent:
                recent.replace(row["id"], snap)
            self.broadcaster.broadcast("session", row["id"], snap, is_event=False)
