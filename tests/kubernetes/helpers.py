"""What the cluster tests share: the cluster, an API client from a kubeconfig, and waiting on a condition the API
answers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config

from tests.support.waiting import Described, Poll


@dataclass(frozen=True)
class Cluster:
    """A running cluster, as prepare.sh leaves it."""

    root: Path
    kubeconfig: Path  # the admin's (system:masters)
    operator_kubeconfig: Path  # `loopwarden-operator`: a token, no groups, only what RBAC grants it by name
    image: str = "localhost/loopwarden-test:1"  # Debian bookworm minbase with python3; imagePullPolicy: Never
    node: str = "node1"


@asynccontextmanager
async def core_api(kubeconfig: Path) -> AsyncIterator[client.CoreV1Api]:
    """The core/v1 API as the kubeconfig's user, its connections closed on the way out."""
    api_client = await config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    async with api_client:
        yield client.CoreV1Api(api_client)


async def until_answered(check: Callable[[], Awaitable[Any]], timeout: float = 60.0,  # noqa: ASYNC109 - a poll's deadline
                         what: Described = "condition", every: float = 0.2) -> Any:
    """`until` for a condition that must itself be awaited (an API call): its value once truthy; fails with what
    was awaited after `timeout` seconds."""
    value: Any = None
    poll = Poll(lambda: value, timeout, what)
    while True:
        value = await check()
        if poll():
            return value
        await asyncio.sleep(every)


def pod_said(pod: Any) -> str:
    """What a pod's status says of where it is: its phase, its container's waiting or ended state, and any condition
    not met (a timed-out wait prints it)."""
    if pod is None or pod.status is None:
        return "no status yet"
    said = [f"phase {pod.status.phase}"]
    for status in pod.status.container_statuses or []:
        state = status.state
        if state and state.waiting:
            said.append(f"{status.name} waiting: {state.waiting.reason} {state.waiting.message or ''}".rstrip())
        elif state and state.terminated:
            said.append(f"{status.name} ended: {state.terminated.reason} {state.terminated.exit_code}")
    said += [f"{c.type} {c.status}: {c.reason} {c.message or ''}".rstrip()
             for c in pod.status.conditions or [] if c.status != "True"]
    return "; ".join(said)
