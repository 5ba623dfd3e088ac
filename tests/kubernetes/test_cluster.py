"""The test cluster itself: its workload image runs what loopwarden's keeper needs, and its operator user may do
nothing RBAC has not granted it by name."""

from __future__ import annotations

import json

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.kubernetes.helpers import Cluster, core_api, pod_said, until_answered

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

        seen: list[client.V1Pod] = []

        async def finished_phase() -> str | None:
            seen[:] = [pod := await core.read_namespaced_pod("python", namespace)]
            return pod.status.phase if pod.status.phase in ("Succeeded", "Failed") else None

        phase = await until_answered(finished_phase, timeout=90,
                                     what=lambda: f"the python pod to finish ({pod_said(seen[0] if seen else None)})")
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


async def test_the_kubelet_keeps_the_images_it_cannot_pull_and_evicts_no_pod(cluster: Cluster) -> None:
    """The workload image was loaded, not pulled: once deleted, every later pod waits on ErrImageNeverPull. The
    kubelet reads this machine's disk as 85% used with tens of GB free (used = size - available), so its image
    collection must be off, and so must its evictions: the disk and memory are the test run's."""
    async with core_api(cluster.kubeconfig) as core:
        answer = await core.connect_get_node_proxy_with_path(cluster.node, "configz", _preload_content=False)
        kubelet = json.loads(await answer.read())["kubeletconfig"]
    assert kubelet["imageGCHighThresholdPercent"] == 100
    assert set(kubelet["evictionHard"].values()) == {"0%"}  # "0%" is no threshold
