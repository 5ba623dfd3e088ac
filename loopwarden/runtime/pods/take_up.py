"""Sessions an earlier daemon left running in pods, taken up by the next daemon: each pod's keeper is reached again
through the API and its agent supervised from where the store ends, judged as it was, as a local keeper's agents
are. A session that cannot be taken up (its pod gone, the API out of reach, the agent no longer held) is marked lost
then, saying why, and its pod deleted (left_behind.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import anyio

from ...supervisor.config import Config, ConfigError, from_stored
from ..store import Store, StoreError
from .cluster import ClusterError, context_named
from .placement import Placement, PlacementError, placed_again
from .pod_session import RETRY, PodSession

if TYPE_CHECKING:
    from ..keeping import Keeping, Revived, TakeUpInPod

REACH_WAIT: Final = 60.0  # seconds to reach one pod's keeper again before its session is marked lost
Lose = Callable[[str, str], Awaitable[None]]  # (session, why it was not taken up): marked lost, its pod deleted


class PodTakeUp:
    """Takes up the sessions in pods a dead daemon left (`run`), all at once, each within REACH_WAIT."""

    def __init__(self, keeping: Keeping, take_up: TakeUpInPod, lose: Lose, log: Callable[[str], None], *,
                 taking: set[str], stopping: Callable[[], bool], handover: Callable[[], bool]) -> None:
        self.keeping = keeping
        self.take_up = take_up
        self.lose = lose
        self.log = log
        self.taking = taking  # the sessions being taken up now (a store opened again meanwhile leaves them be)
        self.stopping = stopping  # the daemon is stopping: nothing more is taken up ...
        self.handover = handover  # ... and unless it hands over (restart-daemon), what it reached is stopped

    async def run(self, store: Store | None, left: dict[str, dict[str, Any]]) -> None:
        """Take up each of `left` (session: its stored pod) or mark it lost."""
        if store is None or not left:
            self.taking.difference_update(left)
            return
        async with anyio.create_task_group() as tg:
            for sid, pod in left.items():
                tg.start_soon(self._one, store, sid, pod)

    async def _one(self, store: Store, sid: str, stored: dict[str, Any]) -> None:
        self.taking.add(sid)
        try:
            await self._take_up(store, sid, stored)
        except Exception as exc:  # noqa: BLE001 - a bug of ours never stops the daemon: the session is lost, said so
            self.log(f"session {sid}: taking it up in its pod failed ({type(exc).__name__}: {str(exc)[:200]})")
            await self.lose(sid, f"taking it up failed ({type(exc).__name__})")
        finally:
            self.taking.discard(sid)

    async def _take_up(self, store: Store, sid: str, stored: dict[str, Any]) -> None:
        name = str(stored["pod"])
        try:
            place = await anyio.to_thread.run_sync(_placement, store, sid, stored)
        except (StoreError, ConfigError, PlacementError) as exc:
            await self.lose(sid, f"its pod's placement cannot be read again ({str(exc)[:160]})")
            return
        pod = PodSession(sid, place, self.log)
        try:
            revived = await self._reached(store, pod, name)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._leave(pod)
            raise
        if isinstance(revived, str):
            await pod.close()
            await self.lose(sid, revived)
            return
        if self.stopping():
            await self._leave(pod)
            return
        try:
            self.take_up(*revived, pod)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await pod.close()
            raise
        self.log(f"session {sid}: taken up again in pod {name}" + (f" on node {pod.node}" if pod.node else ""))

    async def _leave(self, pod: PodSession) -> None:
        """The daemon stops before the session is taken up: restart-daemon leaves its pod to the next daemon,
        stop-daemon deletes it (the next daemon finds the session's pod gone, and says it is lost)."""
        if self.handover():
            await pod.close()
        else:
            await pod.delete()

    async def _reached(self, store: Store, pod: PodSession, name: str) -> Revived | str:
        """The session as the launcher takes it up, its pod's keeper reached again; or why it cannot be."""
        try:
            with anyio.fail_after(REACH_WAIT):
                kept = await pod.reach_again(name, within=REACH_WAIT - RETRY)
        except (ClusterError, TimeoutError) as exc:
            return str(exc)[:200] or f"its pod {name} did not answer within {REACH_WAIT:g}s"
        try:
            found = await anyio.to_thread.run_sync(partial(self.keeping.found, store, kept, local=False))
        except (KeyError, TypeError, ValueError, OverflowError):  # what the pod's keeper said cannot be read
            found = None
        if found is None:
            return f"what the keeper in pod {name} said of its agent cannot be used"
        spec, config, adapter, taken, health = await self.keeping.revived(store, found)
        # a pod's pid is not this machine's: an older keeper that does not say whether it is stopped, says running
        return spec, config, adapter, replace(taken, paused=bool(taken.paused)), health


def _placement(store: Store, sid: str, stored: dict[str, Any]) -> Placement:
    """The session's placement as it was made (its stored settings, where and what it ran), to reach its pod
    again and, once it ends, delete it. Runs in a worker thread."""
    row = store.session(sid) or {}
    snapshot = row.get("snapshot")
    settings = snapshot.get("config") if isinstance(snapshot, dict) else None
    config: Config = from_stored(row.get("preset"), settings if isinstance(settings, dict) else {})
    place = placed_again(stored, config, {})
    if place is None:
        raise PlacementError("it names no cluster")
    namespace = stored.get("namespace")
    # the context and namespace it was made in, whatever the kubeconfig's current ones are now
    return replace(place, context=context_named(stored.get("context")),
                   namespace=namespace if isinstance(namespace, str) else place.namespace)
