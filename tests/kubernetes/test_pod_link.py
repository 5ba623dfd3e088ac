"""A session's pod before and around the cluster, no cluster needed: what a failed placement leaves (nothing), a
kubeconfig whose certificates are inline serving every session of a daemon, and a pod's keeper (the agent's
neighbour) unable to grow what the daemon remembers."""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from loopwarden.runtime.pods.cluster import ClusterError
from loopwarden.runtime.pods.placement import Placement
from loopwarden.runtime.pods.pod_session import PodLink, PodSession

pytestmark = pytest.mark.anyio

NOWHERE = "https://127.0.0.1:1"  # nothing listens: every call is refused at once


@pytest.fixture
def inline_kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig as kind or a managed cluster writes it: the CA certificate inline, base64."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test's CA certificate)")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=lw-test", "-days", "1",
                    "-keyout", str(tmp_path / "ca.key"), "-out", str(tmp_path / "ca.crt")],
                   check=True, capture_output=True)
    ca = base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode("ascii")
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "k", "cluster": {"server": NOWHERE, "certificate-authority-data": ca}}],
              "users": [{"name": "u", "user": {"token": "t"}}],
              "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u", "namespace": "ns"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


async def _placed(kubeconfig: Path, sid: str) -> tuple[str, PodSession]:
    pod = PodSession(sid, Placement(context=None, namespace=None, image="i:1", kubeconfig=str(kubeconfig)),
                     lambda _line: None)
    with pytest.raises(ClusterError) as failed:
        await pod.place_pod(None)
    return str(failed.value), pod


async def test_every_session_uses_a_kubeconfig_with_inline_certificates(inline_kubeconfig: Path) -> None:
    first, pod = await _placed(inline_kubeconfig, "s1")
    await pod.end(None)  # the first session is over: what it made goes with it
    second, _ = await _placed(inline_kubeconfig, "s2")
    assert "cannot be reached" in first, first
    assert "cannot be reached" in second, second


async def test_a_placement_that_fails_before_its_pod_leaves_nothing(inline_kubeconfig: Path, tmp_path: Path) -> None:
    said, pod = await _placed(inline_kubeconfig, "s1")
    assert "cannot be reached" in said
    assert not pod.scratch.exists()


async def test_a_kubeconfig_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("clusters: [\n")
    said, pod = await _placed(broken, "s1")
    assert said.startswith("kubernetes: cannot use") and "\n" not in said, said
    assert not pod.scratch.exists()


async def test_a_pods_keeper_is_heard_only_about_its_own_session(tmp_path: Path) -> None:
    async def keeper(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()  # control
        hello = yaml.safe_load(await reader.readline())
        writer.write(b'{"id": %d, "pid": 1, "generation": 1, "sessions": []}\n' % hello["id"])
        writer.write(b"".join(b'{"op": "exited", "sid": "x%d", "code": 0}\n' % i for i in range(2000)))
        writer.write(b'{"op": "exited", "sid": "s1", "code": 3}\n')
        await writer.drain()
        await reader.read()

    server = await asyncio.start_unix_server(keeper, str(tmp_path / "keeper.sock"))
    link = PodLink("s1", tmp_path, lambda _line: None)
    try:
        await link.open({}, start=False)
        assert await asyncio.wait_for(link.exit_code("s1"), 10) == (3, None)
        assert set(link._exits) == {"s1"}
    finally:
        await link.aclose()
        server.close()
