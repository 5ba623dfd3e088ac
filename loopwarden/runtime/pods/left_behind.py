"""The pods an earlier daemon left that the next daemon cannot take up (take_up.py says when): their sessions are
marked lost, and their pods deleted, so that no agent works on in one that nobody watches; `continue` takes each
conversation up in a new pod, from its volume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from ..store import Store, StoreError
from .cluster import Cluster, ClusterError, context_named



def pod_of(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pod a stored session ran in (its snapshot's `pod`), if it ran in one that was made."""
    snapshot = (row or {}).get("snapshot")
    pod = snapshot.get("pod") if isinstance(snapshot, dict) else None
    return pod if isinstance(pod, dict) and isinstance(pod.get("pod"), str) else None


async def delete_left_pods(store: Store | None, sids: list[str], log: Callable[[str], None]) -> None:
    """Delete the pod of each of `sids` (sessions just marked lost) that ran in one; each failure one log line."""
    for sid in sids if store is not None else []:
        assert store is not None
        try:
            pod = pod_of(await anyio.to_thread.run_sync(store.session, sid))
        except StoreError:
            return
        if pod is not None:
            await _delete(sid, pod, log)


async def _delete(sid: str, pod: dict[str, Any], log: Callable[[str], None]) -> None:
    try:
        with anyio.fail_after(30):  # a kubeconfig's plugin that hangs
            cluster = await Cluster.connect(pod.get("kubeconfig"), context_named(pod.get("context")),
                                            pod.get("namespace"))
    except (ClusterError, TimeoutError) as exc:
        log(f"session {sid}: its pod {pod['pod']} is left (an earlier daemon's): {exc}")
        return
    try:
        with anyio.fail_after(30):
            await cluster.delete_pod(str(pod["pod"]), grace=0)
        log(f"session {sid}: deleted pod {pod['pod']}, which an earlier daemon left running")
    except (ClusterError, TimeoutError) as exc:
        log(f"session {sid}: its pod {pod['pod']} is left (an earlier daemon's): {str(exc)[:200]}")
    finally:
        await cluster.close()
