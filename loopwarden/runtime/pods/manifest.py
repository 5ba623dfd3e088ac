"""What loopwarden creates on a cluster, as the API's JSON: a session's pod and the keeper's ConfigMap.

The pod's one container runs loopwarden's keeper (from the ConfigMap, with the image's python3), which starts
the agent when the daemon asks and holds it while the daemon cannot be reached. The session's limits become the
pod's: its memory (limits.max_rss) and CPU as resources, its max_runtime (with the kill grace and the keeper's
margin) as activeDeadlineSeconds, so the cluster ends it even when neither the daemon nor the keeper can. The
agent gets no ServiceAccount token, no privilege escalation and no capabilities: nothing in the pod can act on
the cluster, nor as the operator.
"""

from __future__ import annotations

import base64
import math
import secrets
from typing import Any, Final

from .keeper_zip import keeper_digest, keeper_zip
from .placement import Placement

KEEPER_DIR: Final = "/opt/loopwarden"  # the ConfigMap's keeper.pyz, read-only
RUNTIME_DIR: Final = "/run/loopwarden"  # the keeper's socket (the pod's own, in memory)
KEEPER_SOCKET: Final = f"{RUNTIME_DIR}/keeper.sock"
CONTAINER: Final = "agent"
MANAGED: Final = {"app.kubernetes.io/managed-by": "loopwarden"}
SESSION_LABEL: Final = "loopwarden.dev/session"
DAEMON_LABEL: Final = "loopwarden.dev/daemon"
FIRST_WAIT: Final = 600  # seconds the keeper waits for the daemon to reach it before it exits (a pod never reached)


def keeper_map_name() -> str:
    return f"loopwarden-keeper-{keeper_digest()}"


def keeper_map(namespace: str) -> dict[str, Any]:
    """The ConfigMap holding the keeper's zip: one per loopwarden version, shared by its pods."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": keeper_map_name(), "namespace": namespace, "labels": dict(MANAGED)},
            "binaryData": {"keeper.pyz": base64.b64encode(keeper_zip()).decode("ascii")}}


def pod_name(sid: str) -> str:
    """`lw-s3-k2x9f1`: the session's id, and a random tail so that two profiles' s3 never collide."""
    return f"lw-{sid.lower()}-{secrets.token_hex(3)}"


def keeper_command(place: Placement, python: str = "python3") -> list[str]:
    hold = max(1, math.ceil(place.hold))
    return [python, f"{KEEPER_DIR}/keeper.pyz", RUNTIME_DIR, "--restarts", "0", "--daemon-wait", str(hold),
            "--first-wait", str(FIRST_WAIT)]


def bridge_command(python: str = "python3") -> list[str]:
    """What the daemon runs in the pod for each connection to its keeper (runtime/keeper_bridge.py)."""
    return [python, f"{KEEPER_DIR}/keeper.pyz", "bridge", KEEPER_SOCKET]


def pod(name: str, namespace: str, sid: str, daemon: str, place: Placement, *,
        deadline: float | None) -> dict[str, Any]:
    """The session's pod. `deadline`: seconds from its start after which the cluster ends it (None: never)."""
    labels = {**MANAGED, SESSION_LABEL: sid.lower(), DAEMON_LABEL: daemon}
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 10,
        "hostNetwork": place.host_network,
        **({"securityContext": {"fsGroup": place.agent_user}} if place.agent_user else {}),
        "containers": [_container(place)],
        "volumes": _volumes(place),
    }
    if deadline:
        spec["activeDeadlineSeconds"] = max(1, math.ceil(deadline))
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}


def _container(place: Placement) -> dict[str, Any]:
    limits: dict[str, str] = {}
    if place.memory:
        limits["memory"] = str(place.memory)
    if place.cpu:
        limits["cpu"] = place.cpu
    return {
        "name": CONTAINER, "image": place.image, "imagePullPolicy": place.pull_policy,
        "command": keeper_command(place), "workingDir": place.workdir,
        "resources": {"limits": limits, "requests": dict(limits)} if limits else {},
        "securityContext": _security(place),
        "volumeMounts": [
            {"name": "keeper", "mountPath": KEEPER_DIR, "readOnly": True},
            {"name": "runtime", "mountPath": RUNTIME_DIR},
            {"name": "work", "mountPath": place.workdir},
        ],
    }


def _security(place: Placement) -> dict[str, Any]:
    """No privilege; with an agent user, the keeper is root in the container with only the rights to switch users
    and to signal another user's processes (it starts the agent as agent_user, who then holds no capability at
    all, and pauses, stops and ends it)."""
    context: dict[str, Any] = {"allowPrivilegeEscalation": False, "privileged": False,
                               "capabilities": {"drop": ["ALL"]}}
    if place.agent_user:
        context["runAsUser"] = 0
        context["capabilities"]["add"] = ["SETUID", "SETGID", "KILL"]  # KILL: its agent is another user's
    return context


def _volumes(place: Placement) -> list[dict[str, Any]]:
    work: dict[str, Any] = {"name": "work", "emptyDir": {}}
    if place.volume is not None and place.volume.kind == "claim":
        work = {"name": "work", "persistentVolumeClaim": {"claimName": place.volume.source}}
    elif place.volume is not None:
        work = {"name": "work", "hostPath": {"path": place.volume.source, "type": "DirectoryOrCreate"}}
    return [
        {"name": "keeper", "configMap": {"name": keeper_map_name(), "defaultMode": 0o444}},
        {"name": "runtime", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
        work,
    ]
