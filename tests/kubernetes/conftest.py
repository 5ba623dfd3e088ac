"""The cluster tests' namespaces: one of its own for each test file (the cluster itself: tests/support/cluster.py,
the `cluster` fixture every folder has)."""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubernetes.helpers import Cluster, core_api, until_answered


def namespace_name(module_name: str) -> str:
    """A DNS label of the test file's name and a random tail: two runs against one cluster never meet."""
    stem = re.sub(r"[^a-z0-9]+", "-", module_name.rsplit(".", 1)[-1].lower()).strip("-")[:40]
    return f"lw-{stem}-{secrets.token_hex(3)}"


async def create_namespace(kubeconfig: Path, name: str) -> None:
    """The namespace, once its default ServiceAccount has its token: until then the API refuses a pod that mounts
    it ("No API token found for service account default")."""
    async with core_api(kubeconfig) as core:
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

        async def token_made() -> bool:
            try:
                account = await core.read_namespaced_service_account("default", name)
            except ApiException as exc:
                if exc.status == 404:  # not made yet either
                    return False
                raise
            return bool(account.secrets)

        await until_answered(token_made, timeout=60, what=f"namespace {name}'s default ServiceAccount token")


async def delete_namespace(kubeconfig: Path, name: str) -> None:
    """Deleting the namespace deletes everything in it (the namespace controller finishes it after we return)."""
    async with core_api(kubeconfig) as core:
        await core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def namespace(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test file's own, deleted with everything in it after the file's last test."""
    name = namespace_name(request.module.__name__)
    asyncio.run(create_namespace(cluster.kubeconfig, name))
    try:
        yield name
    finally:
        asyncio.run(delete_namespace(cluster.kubeconfig, name))
