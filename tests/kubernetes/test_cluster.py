"""The test cluster itself: its workload image runs what loopwarden's keeper needs, and its operator user may do
nothing RBAC has not granted it by name."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubernetes.helpers import Cluster, core_api, until_answered

pytestmark = pytest.mark.anyio

KEEPER_MODULES = "import json, selectors, ctypes, argparse; print('ok')"


def one_shot_pod(name: str, image: str, command: list[str]) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1PodSpec(restart_policy="Never", containers=[
            client.V1Container(name="main", image=image, image_pull_policy="Never", command=command)]))


async def test_a_pod_of_the_workload_image_runs_python_with_the_keepers_modules(cluster: Cluster,
                                                                                namespace: str) -> None:
    async with core_api(cluster.kubeconfig) as core:
        await core.create_namespaced_pod(namespace, one_shot_pod("python", cluster.image,
                                                                 ["python3", "-c", KEEPER_MODULES]))

        async def finished_phase() -> str | None:
            pod = await core.read_namespaced_pod("python", namespace)
            return pod.status.phase if pod.status.phase in ("Succeeded", "Failed") else None

        phase = await until_answered(finished_phase, timeout=90, what="the python pod to finish")
        log = await core.read_namespaced_pod_log("python", namespace)
        pod = await core.read_namespaced_pod("python", namespace)
    assert (phase, log) == ("Succeeded", "ok\n")
    assert pod.spec.node_name == cluster.node


async def test_the_operator_user_has_no_rights_of_its_own(cluster: Cluster, namespace: str) -> None:
    async with core_api(cluster.operator_kubeconfig) as core:
        with pytest.raises(ApiException) as refused:
            await core.list_namespaced_pod(namespace)
    assert refused.value.status == 403
    assert "loopwarden-operator" in str(refused.value.body)
