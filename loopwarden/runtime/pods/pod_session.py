"""A session's pod from creation to deletion: placed (the keeper's ConfigMap, the pod, its node, the link to its
keeper), watched (a link that breaks is a host lost, never an end), signalled through its keeper (a pod's pids
are not this machine's), and deleted when the session ends, so nothing is left behind."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio

from ..containment import Containment, daemon_instance
from ..keeper_link import KeeperError, KeeperLink
from ..procfs import ProcId, ProcTable
from . import manifest
from .cluster import Cluster, ClusterError, PodGone
from .forward import Forward
from .placement import Placement

HOST_LOST: Final = "host lost"  # the reason a pod session's exit is given when its link broke
TOLD_TO_STOP: Final = "the keeper was told to stop"  # keeper.py: its SIGTERM, which a pod's deletion sends
RETRY: Final = 2.0  # seconds between two tries at an earlier daemon's pod's keeper
LOOK_WAIT: Final = 10.0  # seconds the API is given to say what became of a pod whose link broke


class PodLink(KeeperLink):
    """The daemon's side of a pod's keeper: when the link breaks, every wait for an agent's exit ends (as a
    host lost), since the pod may be gone with the agent and no exit would ever be told. What comes over the link
    is the pod's, untrusted: only its own session's exit is heard."""

    def __init__(self, sid: str, runtime: Path, log: Callable[[str], None], agent_user: int = 0) -> None:
        super().__init__(runtime, log)
        self.sid = sid
        if agent_user:
            self.spawn_fields = {"user": agent_user}  # the keeper is root in its container; its agent is not

    def _exited(self, message: dict[str, Any]) -> None:
        """A pod's keeper is the agent's neighbour (the same container): only its own session's exit is
        heard, so that no number of claimed exits grows what the daemon remembers."""
        if message.get("sid") == self.sid:
            super()._exited(message)

    async def _read_replies(self) -> None:
        await super()._read_replies()
        for future in self._exits.values():
            if not future.done():
                future.set_result((-1, HOST_LOST))


class PodSession:
    """One session's pod. `place` makes it and opens the link; `end` says how it ended and deletes it."""

    def __init__(self, sid: str, place: Placement, log: Callable[[str], None]) -> None:
        self.sid = sid
        self.place = place
        self.log = log
        self.scratch = Path(tempfile.mkdtemp(prefix="lw-pod-"))  # 0700: the forward's socket, inline certificates
        self.link = self._new_link()
        self.cluster: Cluster | None = None
        self.forward: Forward | None = None
        self.name: str | None = None
        self.namespace = place.namespace
        self.node: str | None = None
        self.lost: str | None = None  # how the host was lost, in words; None: it was not
        self.kept = False  # the pod is left in place (the API could not be reached to delete it)
        self.deleted = False
        self._placing = anyio.CancelScope()

    async def place_pod(self, deadline: float | None) -> None:
        """Create the pod and reach its keeper; ClusterError (one line) when it cannot, or when the session is
        stopped meanwhile (`abandon`), with nothing left."""
        with self._placing:  # made at once: a kill before the placement begins cancels it as it begins
            await self._place(deadline)
        if self._placing.cancel_called:
            raise ClusterError("its start was called off (a kill, or the daemon stopping) while its pod was starting")

    def abandon(self) -> None:
        """A kill while the pod starts (it may wait for a node, an image): its start ends now, the pod deleted."""
        self._placing.cancel()

    async def _place(self, deadline: float | None) -> None:
        place = self.place
        try:
            self.cluster = cluster = await Cluster.connect(place.kubeconfig, place.context, place.namespace)
            self.namespace = cluster.namespace
            await cluster.ensure_config_map(manifest.keeper_map(cluster.namespace))
            if place.replaces:  # a pod left holding the conversation's agent (its host lost, the API out of reach)
                await cluster.delete_pod(place.replaces, grace=0)
            name = manifest.pod_name(self.sid)
            self.name = name  # before it is asked for: a create cut short may have made it
            with anyio.CancelScope(shield=True):  # a kill meanwhile deletes it after, never before, it is made
                await cluster.create_pod(manifest.pod(name, cluster.namespace, self.sid, daemon_instance(), place,
                                                      deadline=deadline))
            self.node = await cluster.wait_running(name, place.start_timeout)
            await self._reach_keeper(cluster, name)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._delete()
            raise

    async def reach_again(self, name: str, within: float) -> dict[str, Any]:
        """An earlier daemon's pod, its agent to be taken up: its keeper reached again; what the keeper says of the
        agent (its hello's entry). ClusterError (one line: why) when it cannot be: the pod gone or not running,
        the API out of reach, the keeper holding no such agent. Nothing is deleted here (`end` does that)."""
        place = self.place
        self.name = name
        self.cluster = cluster = await Cluster.connect(place.kubeconfig, place.context, place.namespace)
        self.namespace = cluster.namespace
        try:
            pod = await cluster.read_pod(name)
        except PodGone:
            raise PodGone(f"its pod {name} was deleted meanwhile") from None
        phase = pod.status.phase if pod.status else None
        if pod.metadata.deletion_timestamp is not None or phase != "Running":
            raise ClusterError(f"its pod {name} is " + ("being deleted" if pod.metadata.deletion_timestamp
                                                          else f"{phase or 'not running'}"))
        self.node = pod.spec.node_name
        deadline = time.monotonic() + within
        while True:  # its keeper refuses a second daemon while the last one's link lingers (a restart, a crash)
            try:
                await self._reach_keeper(cluster, name)
                break
            except ClusterError as exc:
                if time.monotonic() + RETRY > deadline:
                    raise
                self.log(f"{exc}; trying again in {RETRY:g}s")
                await self._drop_link()
                await anyio.sleep(RETRY)
        kept = next((k for k in self.link.kept if k.get("sid") == self.sid), None)
        if kept is None:
            raise ClusterError(f"the keeper in pod {name} no longer holds its agent")
        return kept

    async def _drop_link(self) -> None:
        """The link and forward of an attempt that failed closed; a new link to try again with."""
        with contextlib.suppress(Exception):
            await self.link.aclose()
        if self.forward is not None:
            await self.forward.aclose()
            self.forward = None
        self.link = self._new_link()

    def _new_link(self) -> PodLink:
        return PodLink(self.sid, self.scratch / "link", self.log, self.place.agent_user)

    async def _reach_keeper(self, cluster: Cluster, name: str) -> None:
        """The forward to the pod's keeper started, and the link opened over it."""
        self.forward = Forward(self.scratch / "link", lambda: cluster.exec(name, manifest.bridge_command()),
                               self.log)
        await self.forward.start()
        try:
            await self.link.open({}, start=False)
        except (KeeperError, OSError, TimeoutError) as exc:
            why = self.forward.failure or str(exc)[:200]
            raise ClusterError(f"pod {name}: its keeper cannot be reached: {why}") from None

    # ---- signals, through the keeper ------------------------------------------------------
    def signal(self, sig: int, *, group: bool = True) -> None:
        if not self.link.lost and self.link.writer is not None:
            self.link.tell("signal", sid=self.sid, sig=int(sig), group=group)

    async def wait_exit(self, seconds: float) -> bool:
        """Whether the keeper said the agent exited within `seconds`."""
        with anyio.move_on_after(seconds):
            await self.link.exit_code(self.sid)
            return True
        return False

    # ---- the end -----------------------------------------------------------------------------
    async def end(self, keeper_reason: str | None) -> str | None:
        """The session is over: say whether its host was lost (why, in words; None: the agent ended as usual)
        and delete the pod, unless the API cannot be reached (the keeper in it then stops the agent after
        kubernetes.hold, and the cluster ends the pod at its deadline)."""
        if self.deleted:  # its placement failed or was called off: nothing of it is left
            return self.lost
        with anyio.move_on_after(LOOK_WAIT):  # a kubeconfig's plugin that hangs never holds the session's end
            await self._fresh_credentials()
        if keeper_reason in (HOST_LOST, TOLD_TO_STOP) and self.name is not None:
            self.lost = await self._why_lost(keeper_reason)
        await self._delete()
        return self.lost

    async def _fresh_credentials(self) -> None:
        """A client made anew from the kubeconfig for the session's last calls: a token the kubeconfig's plugin
        gave at its start (15 minutes on EKS, an hour on GKE) may have expired since. The old one is kept when a
        new one cannot be had (the calls then say why)."""
        old, place = self.cluster, self.place
        if old is None:
            return
        try:
            self.cluster = await Cluster.connect(place.kubeconfig, place.context, self.namespace)
        except ClusterError:
            return
        await old.close()

    async def _why_lost(self, keeper_reason: str) -> str:
        assert self.cluster is not None and self.name is not None
        where = f"pod {self.name}" + (f" on node {self.node}" if self.node else "")
        try:
            with anyio.fail_after(LOOK_WAIT):
                pod = await self.cluster.read_pod(self.name)
        except PodGone:
            return f"host lost: {where} was deleted"
        except (ClusterError, TimeoutError) as exc:
            self.kept = True
            return (f"host lost: the cluster cannot be reached ({str(exc)[:160]}); {where} may hold the agent for "
                    f"up to {self.place.hold:g}s more")
        if pod.metadata.deletion_timestamp is not None or keeper_reason == TOLD_TO_STOP:
            return f"host lost: {where} was deleted (not by loopwarden)"
        reason = pod.status.reason if pod.status else None
        if reason:
            return f"host lost: the cluster ended {where} ({reason})"
        return f"host lost: the link to {where} broke; the pod was deleted so that nothing runs unwatched"

    async def delete(self) -> None:
        """Its pod deleted, and with it its agent; its link, forward and API client closed."""
        self.kept = False
        await self._delete()

    async def close(self) -> None:
        """Its link, forward and API client closed, its pod left as it is (another part deletes it)."""
        self.kept = True
        await self._delete()

    async def _delete(self) -> None:
        """Everything of the pod gone, once: the link, the forward, the pod itself, the API's client."""
        if self.deleted:
            return
        self.deleted = True
        with contextlib.suppress(Exception):
            await self.link.aclose()
        if self.forward is not None:
            await self.forward.aclose()
        if self.cluster is not None:
            if self.name is not None and not self.kept:
                try:
                    with anyio.fail_after(LOOK_WAIT):
                        await self.cluster.delete_pod(self.name, grace=0)
                except (ClusterError, TimeoutError) as exc:
                    self.log(f"pod {self.name} could not be deleted: {str(exc)[:200]}")
            await self.cluster.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def describe(self) -> dict[str, Any]:
        """What `ls`, `status`, the console and the web console show of the pod."""
        return {"on": self.place.where, "context": self.cluster.context if self.cluster else self.place.context,
                "namespace": self.namespace, "pod": self.name, "node": self.node, "image": self.place.image,
                "kubeconfig": self.place.kubeconfig, "lost": self.lost}


class PodContainment(Containment):
    """A pod session's processes: in the pod, out of this machine's reach but through its keeper. Its pids are
    the pod's: nothing here is looked up, signalled or claimed by them."""

    def __init__(self, sid: str, pod: PodSession) -> None:
        super().__init__(sid, mark=f"{sid}@pod")
        self.pod = pod

    def command(self, argv: list[str]) -> list[str]:
        return argv

    def started(self, pid: int, stdout_inode: int | None = None) -> None:
        """Nothing to remember: `pid` is the pod's, so no root, claim or guardian entry is made of it."""

    async def table(self) -> ProcTable:
        return ProcTable()

    def members(self, table: ProcTable | None = None) -> set[ProcId]:
        return set()

    def observe(self, table: ProcTable) -> None:
        return None

    def abandon_start(self) -> None:
        self.pod.abandon()

    def signal_leader(self, pid: int, sig: int) -> None:
        self.pod.signal(sig)

    def signal(self, sig: int, members: set[ProcId] | None = None, fds: Any = None) -> int:
        self.pod.signal(sig)
        return 1

    async def end(self, grace: float) -> set[ProcId]:
        """SIGTERM to the agent's group in the pod, up to `grace` seconds, then SIGKILL (the pod's deletion
        follows, which ends whatever is left)."""
        if self.emptied:
            return set()
        started = time.monotonic()
        if not await self.pod.wait_exit(0):
            self.pod.signal(signal.SIGCONT)
            self.pod.signal(signal.SIGTERM)
            if not await self.pod.wait_exit(grace):
                self.pod.signal(signal.SIGKILL)
                await self.pod.wait_exit(max(1.0, grace - (time.monotonic() - started)))
        self.emptied = True
        return set()

    def kill_now(self, members: set[ProcId] | None = None, fds: Any = None) -> None:
        self.pod.signal(signal.SIGKILL)

    def release(self) -> None:
        self._released = True

