"""A Kubernetes API as loopwarden uses it (kubernetes_asyncio, on the daemon's event loop): the keeper's
ConfigMap, a session's pod created, waited for, read and deleted, and commands run in it over a websocket.

Credentials are the kubeconfig's (or, inside a cluster, the daemon's ServiceAccount), exactly as kubectl uses
them: loopwarden adds none, opens no port, and never writes the kubeconfig. Every failure is a ClusterError whose
message is one line naming what was asked, with the API's own reason.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Final, cast

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import kube_config
from kubernetes_asyncio.config.incluster_config import SERVICE_TOKEN_FILENAME, load_incluster_config
from kubernetes_asyncio.stream import WsApiClient

from ...supervisor.visible import visible

IN_CLUSTER_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
IN_CLUSTER: Final = "in-cluster"  # the context a daemon inside the cluster names (its ServiceAccount's)
# every API call the daemon makes, as RBAC names it (all in the sessions' namespace; no list, no watch):
# deploy/kubernetes/rbac.yaml grants exactly these. An exec over a websocket is a GET, which the API authorises as
# `get` on pods/exec; clusters from 1.30 (AuthorizePodWebsocketUpgradeCreatePermission) ask for `create` as well.
API_VERBS: Final = {
    "configmaps": ("get", "create"),  # the keeper's ConfigMap, read and made once (ensure_config_map)
    "pods": ("create", "get", "delete"),  # a session's pod (create_pod, read_pod and wait_running, delete_pod)
    "pods/exec": ("create", "get"),  # each connection to the pod's keeper (exec)
}
POLL: Final = 0.25  # seconds between looks at a pod that is starting
# the link's lease: each connection to a pod's keeper is pinged this often, and closed when no answer comes within
# half of it (a laptop asleep, a network gone quiet): its session is then a host lost, never an end
LEASE: Final = 10.0
# why a pod will not run, as its container's waiting reason says (the rest are waited out)
STUCK: Final = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
                          "CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


class ClusterError(OSError):
    """The cluster cannot do what was asked; one line."""


class PodGone(ClusterError):
    """The pod is not there (deleted, or never made)."""


def _said(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        reason = exc.reason or ""
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            reason = json.loads(exc.body or b"").get("message") or reason
        return visible(f"{exc.status} {reason}")[:300]
    return visible(str(exc) or type(exc).__name__)[:300]


class Cluster:
    """One context of one kubeconfig (or the cluster the daemon runs in), and its namespace."""

    def __init__(self, api: client.ApiClient, ws: WsApiClient, namespace: str, context: str) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.ws = client.CoreV1Api(ws)
        self._ws_client = ws
        self.namespace = namespace
        self.context = context

    @classmethod
    async def connect(cls, kubeconfig: str | None, context: str | None, namespace: str | None) -> Cluster:
        """The API of `context` in `kubeconfig` (None: $KUBECONFIG's first file, else ~/.kube/config; inside a pod
        with neither, the pod's ServiceAccount)."""
        configuration = client.Configuration()
        path, in_cluster = _where(kubeconfig, context)
        try:
            if in_cluster:
                load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
                context, own = IN_CLUSTER, _read(IN_CLUSTER_NAMESPACE)
            else:
                loader = kube_config._get_kube_config_loader_for_yaml_file(
                    path, active_context=context, persist_config=False, temp_file_path=str(_inline_files()))
                await loader.load_and_set(configuration)
                current = loader.current_context or {}
                context = str(current.get("name") or context or "")
                own = (current.get("context") or {}).get("namespace")
            api = client.ApiClient(configuration)  # reads the certificates
            ws = WsApiClient(configuration, heartbeat=LEASE)
        except Exception as exc:  # noqa: BLE001 - the YAML's, the loader's and ssl's errors: all one line
            where = f"context {context!r} of {path}" if context else path
            raise ClusterError(f"kubernetes: cannot use {where}: {visible(str(exc))[:200]}") from None
        return cls(api, ws, namespace or own or "default", context)

    async def close(self) -> None:
        for one in (self.api, self._ws_client):
            with contextlib.suppress(Exception):
                await one.close()

    # ---- the keeper's ConfigMap -----------------------------------------------------------
    async def ensure_config_map(self, body: dict[str, Any]) -> None:
        """Create it unless it is there (one per loopwarden version; never changed once made)."""
        with _reached():
            try:
                await self.core.read_namespaced_config_map(body["metadata"]["name"], self.namespace)
                return
            except ApiException as exc:
                if exc.status != 404:
                    raise ClusterError(f"kubernetes: cannot read the keeper's ConfigMap in {self.namespace}: "
                                       f"{_said(exc)}") from None
            try:
                await self.core.create_namespaced_config_map(self.namespace, cast(Any, body))  # the API's JSON as is
            except ApiException as exc:
                if exc.status != 409:  # made meanwhile by another daemon
                    raise ClusterError(f"kubernetes: cannot create the keeper's ConfigMap in {self.namespace}: "
                                       f"{_said(exc)}") from None

    # ---- pods -------------------------------------------------------------------------------
    async def create_pod(self, body: dict[str, Any]) -> None:
        with _reached():
            try:
                await self.core.create_namespaced_pod(self.namespace, cast(Any, body))
            except ApiException as exc:
                raise ClusterError(f"kubernetes: cannot create pod {body['metadata']['name']} in {self.namespace}: "
                                   f"{_said(exc)}") from None

    async def read_pod(self, name: str) -> Any:
        """The pod as the API has it; PodGone when it is not there, ClusterError when the API cannot say."""
        with _reached():
            try:
                return await self.core.read_namespaced_pod(name, self.namespace)
            except ApiException as exc:
                if exc.status == 404:
                    raise PodGone(f"pod {name} is gone from {self.namespace}") from None
                raise ClusterError(f"kubernetes: cannot read pod {name}: {_said(exc)}") from None

    async def wait_running(self, name: str, within: float) -> str:
        """Wait until the pod's container runs; its node's name. ClusterError (one line) when it cannot run."""
        deadline = time.monotonic() + within
        while True:
            pod = await self.read_pod(name)
            phase = pod.status.phase if pod.status else None
            statuses = (pod.status.container_statuses or []) if pod.status else []
            if phase == "Running" and statuses and statuses[0].state and statuses[0].state.running:
                return str(pod.spec.node_name or "")
            why = _stuck(pod)
            if why or phase in ("Succeeded", "Failed"):
                raise ClusterError(f"pod {name} did not start: {why or phase}")
            if time.monotonic() > deadline:
                raise ClusterError(f"pod {name} did not start within {within:g}s: "
                                   f"{_pending(pod) or phase or 'no status yet'}")
            await asyncio.sleep(POLL)

    async def delete_pod(self, name: str, grace: int = 0) -> None:
        """Delete it (gone already is fine)."""
        with _reached():
            try:
                await self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=grace)
            except ApiException as exc:
                if exc.status != 404:
                    raise ClusterError(f"kubernetes: cannot delete pod {name}: {_said(exc)}") from None

    def exec(self, name: str, command: list[str]) -> Any:
        """A websocket to `command` run in the pod's container, stdin, stdout and stderr as channels 0, 1 and 2 (an
        async context manager)."""
        return self.ws.connect_get_namespaced_pod_exec(
            name, self.namespace, command=cast(Any, command), stdin=True, stdout=True, stderr=True, tty=False,
            _preload_content=False)


def context_named(context: Any) -> str | None:
    """The context a stored pod names, to connect with again (None: the ServiceAccount's, or none named)."""
    return context if isinstance(context, str) and context != IN_CLUSTER else None


@contextlib.contextmanager
def _reached() -> Iterator[None]:
    """The API's transport failing (refused, reset, timed out) as one ClusterError line; the API's own answers are
    said by each call."""
    try:
        yield
    except ClusterError:
        raise
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise ClusterError(f"kubernetes: the API cannot be reached: {_said(exc)}") from None


@cache
def _inline_files() -> Path:
    """A private folder, for the daemon's life, for the certificates kubeconfigs hold inline: the client keeps
    the files it writes, by their content, for the whole process (a later session reuses them), so they must
    outlive the session that made them."""
    folder = Path(tempfile.mkdtemp(prefix="lw-kube-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _stuck(pod: Any) -> str | None:
    for status in (pod.status.container_statuses or []) if pod.status else []:
        waiting = status.state.waiting if status.state else None
        if waiting is not None and waiting.reason in STUCK:
            return visible(f"{waiting.reason}: {waiting.message or ''}".rstrip(": "))[:300]
        done = status.state.terminated if status.state else None
        if done is not None:
            return visible(f"its container ended ({done.reason or 'exit'} {done.exit_code}): "
                           f"{done.message or ''}".rstrip(": "))[:300]
    return None


def _pending(pod: Any) -> str:
    """Why a pod waits, as its conditions say (Unschedulable: 0/1 nodes are available...)."""
    for condition in (pod.status.conditions or []) if pod.status else []:
        if condition.status != "True" and (condition.reason or condition.message):
            return visible(f"{condition.reason or ''} {condition.message or ''}".strip())[:300]
    return ""


def _where(kubeconfig: str | None, context: str | None) -> tuple[str, bool]:
    """The kubeconfig file to read ($KUBECONFIG's first, else ~/.kube/config), and whether to use the pod's
    ServiceAccount instead (no such file, no context asked for, and a token mounted: the daemon runs in a pod)."""
    path = kubeconfig or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or None
    path = os.path.expanduser(path or kube_config.KUBE_CONFIG_DEFAULT_LOCATION)
    return path, not os.path.exists(path) and context is None and os.path.exists(SERVICE_TOKEN_FILENAME)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
