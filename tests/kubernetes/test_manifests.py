"""What loopwarden puts on a cluster, read without one: deploy/kubernetes's manifests (the Role grants exactly the
API calls the daemon makes, the Deployment runs the daemon as its ServiceAccount), a session's pod and the keeper's
ConfigMap (runtime/pods/manifest.py), and --on's refusals (runtime/pods/placement.py). The Role is then tried on the
real cluster, as a ServiceAccount bound to it and to one verb fewer."""

from __future__ import annotations

import ast
import asyncio
import base64
import contextlib
import secrets
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.config import kube_config

from loopwarden.cli import COMMANDS
from loopwarden.runtime.pods import manifest
from loopwarden.runtime.pods.cluster import API_VERBS
from loopwarden.runtime.pods.placement import Placement, PlacementError, Volume, parse_on, placement
from loopwarden.supervisor.config import load_config
from tests.kubernetes.helpers import Cluster
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, ROOT
from tests.support.waiting import wait_for

DEPLOY = ROOT / "deploy" / "kubernetes"


def documents(name: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all((DEPLOY / name).read_text(encoding="utf-8")) if doc]


def one(name: str, kind: str) -> dict[str, Any]:
    found = [doc for doc in documents(name) if doc["kind"] == kind]
    assert len(found) == 1, f"{name} has {len(found)} {kind}s"
    return found[0]


def granted(role: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """The Role's rules as API_VERBS writes them: resource -> verbs."""
    verbs: dict[str, tuple[str, ...]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""], rule  # the core group only
        assert not rule.get("resourceNames"), rule
        for resource in rule["resources"]:
            verbs[resource] = (*verbs.get(resource, ()), *rule["verbs"])
    return verbs


# ---- deploy/kubernetes ---------------------------------------------------------------------------------------

def test_the_role_grants_exactly_the_verbs_the_daemon_uses() -> None:
    role = one("rbac.yaml", "Role")
    assert role["metadata"]["name"] == "loopwarden-sessions"
    assert {r: sorted(v) for r, v in granted(role).items()} == {r: sorted(v) for r, v in API_VERBS.items()}
    assert "*" not in str(role["rules"])


def test_the_binding_gives_the_role_to_the_service_account() -> None:
    account = one("rbac.yaml", "ServiceAccount")
    binding = one("rbac.yaml", "RoleBinding")
    namespace = account["metadata"]["namespace"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "loopwarden-sessions"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": namespace}]
    namespaced = [doc for doc in documents("rbac.yaml") if doc["kind"] != "Namespace"]
    assert {doc["metadata"].get("namespace") for doc in namespaced} == {namespace}
    assert "--user" in (DEPLOY / "rbac.yaml").read_text()  # how an operator's own user is bound, for the laptop


def test_the_deployment_runs_one_daemon_as_the_service_account() -> None:
    deployment = one("daemon.yaml", "Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    assert pod["serviceAccountName"] == one("rbac.yaml", "ServiceAccount")["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is True
    (container,) = pod["containers"]
    assert container["command"][0] == "loopwarden" and container["command"][1:] == ["serve"]
    assert "serve" in COMMANDS  # a command the CLI has: the daemon in the foreground
    env = {e["name"]: e["value"] for e in container["env"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["home"] == env["LOOPWARDEN_HOME"]
    (home,) = pod["volumes"]
    claim = one("daemon.yaml", "PersistentVolumeClaim")
    assert home["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert load_config(env=env).kubernetes.place == "kubernetes"  # its variables are settings loopwarden knows


def test_the_agent_image_example_has_a_python3() -> None:
    text = (DEPLOY / "Dockerfile.agent").read_text()
    assert text.startswith("# AN EXAMPLE") and " python3 " in text


# ---- a session's pod -------------------------------------------------------------------------------------------

def place(**fields: Any) -> Placement:
    return Placement(context=None, namespace="agents", image="local/py3:1", **fields)


def container_of(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod["spec"]["containers"]
    return container


def test_the_limits_become_the_pods_resources_and_deadline() -> None:
    pod = manifest.pod("lw-s3-abc123", "agents", "S3", "d1", place(memory=512 << 20, cpu="500m"), deadline=3660.2)
    resources = container_of(pod)["resources"]
    assert resources["limits"] == {"memory": str(512 << 20), "cpu": "500m"} == resources["requests"]
    assert pod["spec"]["activeDeadlineSeconds"] == 3661
    unlimited = manifest.pod("lw-s3-abc123", "agents", "s3", "d1", place(), deadline=None)
    assert container_of(unlimited)["resources"] == {} and "activeDeadlineSeconds" not in unlimited["spec"]


def test_the_pod_can_act_on_nothing() -> None:
    pod = manifest.pod("lw-s3-abc123", "agents", "s3", "d1", place(), deadline=None)
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False and spec["enableServiceLinks"] is False
    assert spec["restartPolicy"] == "Never" and spec["hostNetwork"] is False
    # the keeper may only switch users and signal its agent, started as kubernetes.agent_user with no capability
    added = ["SETUID", "SETGID", "KILL"]
    assert container_of(pod)["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False,
                                                    "capabilities": {"drop": ["ALL"], "add": added}, "runAsUser": 0}
    assert spec["securityContext"] == {"fsGroup": 1000}  # a claim's files the agent's group's
    assert not container_of(pod).get("env")  # the agent's environment goes to the keeper, never into the spec
    same = manifest.pod("lw-s3-abc123", "agents", "s3", "d1", place(agent_user=0), deadline=None)
    assert container_of(same)["securityContext"]["capabilities"] == {"drop": ["ALL"]} and "securityContext" not in \
        same["spec"]


def test_the_pods_labels_name_loopwarden_its_session_and_daemon() -> None:
    pod = manifest.pod("lw-s3-abc123", "agents", "S3", "d1", place(), deadline=None)
    assert pod["metadata"] == {"name": "lw-s3-abc123", "namespace": "agents", "labels": {
        "app.kubernetes.io/managed-by": "loopwarden", "loopwarden.dev/session": "s3", "loopwarden.dev/daemon": "d1"}}


@pytest.mark.parametrize(("volume", "work"), [
    (None, {"emptyDir": {}}),
    (Volume("claim", "agents-work"), {"persistentVolumeClaim": {"claimName": "agents-work"}}),
    (Volume("host", "/srv/agents"), {"hostPath": {"path": "/srv/agents", "type": "DirectoryOrCreate"}}),
], ids=["empty", "claim", "host"])
def test_the_work_volume_is_mounted_as_the_agents_directory(volume: Volume | None, work: dict[str, Any]) -> None:
    pod = manifest.pod("lw-s3-abc123", "agents", "s3", "d1", place(volume=volume, workdir="/w"), deadline=None)
    volumes = {v.pop("name"): v for v in pod["spec"]["volumes"]}
    assert volumes["work"] == work
    assert volumes["keeper"] == {"configMap": {"name": manifest.keeper_map_name(), "defaultMode": 0o444}}
    assert volumes["runtime"]["emptyDir"]["medium"] == "Memory"
    container = container_of(pod)
    assert {"name": "work", "mountPath": "/w"} in container["volumeMounts"] and container["workingDir"] == "/w"
    assert {"name": "keeper", "mountPath": manifest.KEEPER_DIR, "readOnly": True} in container["volumeMounts"]


# ---- the keeper's ConfigMap ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keeper_pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ConfigMap's zip, as the pod sees it."""
    config_map = manifest.keeper_map("agents")
    assert config_map["metadata"]["name"] == manifest.keeper_map_name()
    path = tmp_path_factory.mktemp("keeper") / "keeper.pyz"
    path.write_bytes(base64.b64decode(config_map["binaryData"]["keeper.pyz"]))
    return path


def isolated(pyz: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python3 -I -S keeper.pyz ARGS`: no site-packages, no user's paths: the standard library alone."""
    return subprocess.run([sys.executable, "-I", "-S", str(pyz), *args], capture_output=True, text=True,
                          timeout=30, check=False)


def test_the_keeper_zip_runs_with_the_standard_library_only(keeper_pyz: Path) -> None:
    shown = isolated(keeper_pyz, "--help")
    assert shown.returncode == 0 and "--daemon-wait" in shown.stdout and "--first-wait" in shown.stdout, shown
    bridge = isolated(keeper_pyz, "bridge", str(keeper_pyz / "no.sock"))  # a path it cannot wait for: not a folder
    assert bridge.returncode == 2 and bridge.stderr.count("\n") == 1 and "cannot be reached" in bridge.stderr


def test_every_import_in_the_keeper_zip_is_in_it_or_the_standard_library(keeper_pyz: Path) -> None:
    """Imports inside functions too, which --help does not run."""
    with zipfile.ZipFile(keeper_pyz) as archive:
        sources = {name: archive.read(name).decode() for name in archive.namelist() if name.endswith(".py")}
    inside = {name.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for name in sources}
    missing = []
    for name, source in sources.items():
        package = name.rsplit("/", 1)[0].replace("/", ".")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package if node.level == 1 else package.rsplit(".", node.level - 1)[0]
                targets = [f"{base}.{node.module}" if node.module else f"{base}.{a.name}" for a in node.names]
                missing += [f"{name}: {t}" for t in targets if t not in inside]
            elif isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                missing += [f"{name}: {m}" for m in modules
                            if m not in inside and m.split(".")[0] not in sys.stdlib_module_names]
    assert not missing, missing


def test_the_keeper_command_runs_the_zip_from_the_config_map() -> None:
    command = manifest.keeper_command(place(hold=90.5))
    assert command[:3] == ["python3", f"{manifest.KEEPER_DIR}/keeper.pyz", manifest.RUNTIME_DIR]
    assert command[command.index("--daemon-wait") + 1] == "91"
    assert manifest.bridge_command() == ["python3", f"{manifest.KEEPER_DIR}/keeper.pyz", "bridge",
                                         manifest.KEEPER_SOCKET]


# ---- --on and the kubernetes.* settings ---------------------------------------------------------------------

@pytest.mark.parametrize(("on", "where"), [
    ("local", None), ("kubernetes", (None, None)), ("kubernetes:prod", ("prod", None)),
    ("kubernetes:prod/agents", ("prod", "agents")), ("kubernetes:/agents", (None, "agents")),
    ("kubernetes:kind-kind", ("kind-kind", None)),
    ("kubernetes:arn:aws:eks:eu-west-1:1:cluster@x", ("arn:aws:eks:eu-west-1:1:cluster@x", None)),
])
def test_on_accepts_local_and_kubernetes_contexts_and_namespaces(on: str, where: tuple[str | None, ...] | None) -> None:
    assert parse_on(on) == where


@pytest.mark.parametrize(("on", "said"), [
    ("k8s", "not a place; it accepts local or kubernetes[:CONTEXT[/NAMESPACE]]"),
    ("Kubernetes", "not a place"),
    ("", "not a place"),
    ("kubernetes:prod/Agents", "is not a namespace"),
    ("kubernetes:/a_b", "is not a namespace"),
    ("kubernetes:/" + "a" * 64, "is not a namespace"),
    ("kubernetes:my context", "is not a kubeconfig context name"),
    ("kubernetes:x\ny/agents", "is not a kubeconfig context name"),
])
def test_on_refuses_anything_else_in_one_line(on: str, said: str) -> None:
    with pytest.raises(PlacementError) as refused:
        parse_on(on)
    assert said in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith("--on")


@pytest.mark.parametrize(("on", "image", "sets", "said"), [
    ("kubernetes", None, [], "needs an image: --image IMAGE or kubernetes.image"),
    (None, "local/py3:1", [], "--image places a session's pod: give --on kubernetes too"),
    ("kubernetes", "bad image\nname", [], "--image: "),
    ("kubernetes", "local/py3:1", ["kubernetes.cpu=lots"], "kubernetes.cpu: 'lots' is not a CPU quantity"),
    ("kubernetes", "local/py3:1", ["kubernetes.workdir=/"], "must be an absolute directory of its own"),
    ("kubernetes", "local/py3:1", ["kubernetes.workdir=work"], "must be an absolute directory of its own"),
    ("kubernetes", "local/py3:1", ["kubernetes.volume=pvc:x"], "is not claim:NAME"),
    ("kubernetes", "local/py3:1", ["kubernetes.volume=host:relative"], "is not claim:NAME"),
    ("kubernetes", "local/py3:1", ["kubernetes.volume=host:/a/../etc"], "is not claim:NAME"),
    ("kubernetes", "local/py3:1", ["kubernetes.volume=host:/"], "is not claim:NAME"),  # the node's whole root
    ("kubernetes", "local/py3:1", ["kubernetes.pass_env=A,B="], "kubernetes.pass_env: 'B=' is not an environment"),
])
def test_placement_refuses_what_cannot_run_in_one_line(on: str | None, image: str | None, sets: list[str],
                                                       said: str) -> None:
    with pytest.raises(PlacementError) as refused:
        placement(on, image, load_config(env={}, sets=sets), {})
    assert said in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_placement_takes_the_settings_and_the_runs_kubeconfig() -> None:
    config = load_config(env={}, sets=["kubernetes.place=kubernetes:/agents", "kubernetes.image=local/py3:1",
                                       "kubernetes.volume=claim:agents-work", "limits.max_rss=1G",
                                       "kubernetes.cpu=2", "kubernetes.workdir=/w/"])
    chosen = placement(None, None, config, {"KUBECONFIG": "/k/config"})
    assert chosen is not None and chosen.where == "kubernetes:/agents"
    assert (chosen.image, chosen.volume, chosen.memory, chosen.cpu, chosen.workdir, chosen.kubeconfig) == \
        ("local/py3:1", Volume("claim", "agents-work"), 1 << 30, "2", "/w", "/k/config")
    assert placement("local", None, config, {}) is None  # --on local wins over the setting


# ---- the Role on a real cluster ------------------------------------------------------------------------------

@pytest.fixture
def admin(cluster: Cluster) -> Path:
    """The cluster's admin kubeconfig (the `cluster` fixture skips in one line where there is none)."""
    return cluster.kubeconfig


@pytest.fixture
def image(cluster: Cluster) -> str:
    return cluster.image


@contextlib.asynccontextmanager
async def api_of(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    configuration = client.Configuration()
    await kube_config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration,
                                       persist_config=False)
    async with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
def namespace(admin: Path) -> Iterator[str]:
    """A namespace of the test's own, deleted with all it holds at the end."""
    name = f"lw-rbac-{secrets.token_hex(3)}"

    async def create() -> None:
        async with api_of(admin) as api:
            await client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})

    async def delete() -> None:
        async with api_of(admin) as api:
            await client.CoreV1Api(api).delete_namespace(name)

    asyncio.run(create())
    try:
        yield name
    finally:
        asyncio.run(delete())


def in_namespace(doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    doc = {**doc, "metadata": {**doc["metadata"], "namespace": namespace}}
    if "subjects" in doc:
        doc["subjects"] = [{**s, "namespace": namespace} for s in doc["subjects"]]
    return doc


def without(role: dict[str, Any], resource: str, verb: str) -> dict[str, Any]:
    rules = [{**r, "verbs": [v for v in r["verbs"] if not (resource in r["resources"] and v == verb)]}
             for r in role["rules"]]
    return {**role, "rules": [r for r in rules if r["verbs"]]}


def bind_service_account(admin: Path, namespace: str, role: dict[str, Any], kubeconfig: Path) -> None:
    """rbac.yaml's ServiceAccount, `role` and the binding made in `namespace` as the admin; `kubeconfig` written
    (0600) to use the cluster as that ServiceAccount."""
    kubeconfig.touch(mode=0o600)
    kubeconfig.write_text(yaml.safe_dump(asyncio.run(service_account_config(admin, namespace, role))))


async def service_account_config(admin: Path, namespace: str, role: dict[str, Any]) -> dict[str, Any]:
    """A kubeconfig of the ServiceAccount, with the token Secret the cluster makes for it (1.20)."""
    account, binding = one("rbac.yaml", "ServiceAccount"), one("rbac.yaml", "RoleBinding")
    async with api_of(admin) as api:
        core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
        await core.create_namespaced_service_account(namespace, in_namespace(account, namespace))
        await rbac.create_namespaced_role(namespace, in_namespace(role, namespace))
        await rbac.create_namespaced_role_binding(namespace, in_namespace(binding, namespace))

        async def token_secret() -> Any:
            found = await core.read_namespaced_service_account(account["metadata"]["name"], namespace)
            return found.secrets and found.secrets[0].name

        secret_name = await until_async(token_secret, 60, "the ServiceAccount's token Secret")
        secret = await core.read_namespaced_secret(secret_name, namespace)
        server = api.configuration.host
    cluster = {"server": server, "certificate-authority-data": secret.data["ca.crt"]}
    return {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "test", "cluster": cluster}],
            "users": [{"name": "sa", "user": {"token": base64.b64decode(secret.data["token"]).decode()}}],
            "contexts": [{"name": "sa", "context": {"cluster": "test", "user": "sa", "namespace": namespace}}]}


async def until_async(condition: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not (value := await condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.2)
    return value


def run_pod_looper(lw: Harness, kubeconfig: Path, volume: Path, image: str) -> subprocess.CompletedProcess[str]:
    """The design's native agent in a pod, as the ServiceAccount, working in a host directory."""
    volume.mkdir()
    shutil.copy(AGENTS / "pod_looper.py", volume)
    return lw.cli("run", "--on", "kubernetes", "--image", image, "--set", f"kubernetes.volume=host:{volume}",
                  "--set", "kubernetes.pull_policy=Never", "--set", "kubernetes.start_timeout=2m", "--",
                  "python3", "pod_looper.py", env={"KUBECONFIG": str(kubeconfig)}, timeout=180)


async def pods_in(admin: Path, namespace: str) -> list[str]:
    async with api_of(admin) as api:
        return [pod.metadata.name for pod in (await client.CoreV1Api(api).list_namespaced_pod(namespace)).items]


@pytest.mark.timeout(300)
def test_the_role_is_enough_for_a_session_on_the_cluster(admin: Path, image: str, namespace: str, lw: Harness,
                                                        tmp_path: Path) -> None:
    kubeconfig = tmp_path / "sa.kubeconfig"
    bind_service_account(admin, namespace, one("rbac.yaml", "Role"), kubeconfig)
    ran = run_pod_looper(lw, kubeconfig, tmp_path / "work", image)
    assert ran.returncode == 11, ran.stdout + ran.stderr  # terminated by a rule: its calls judged through the link
    assert "terminated(repetition_loop)" in ran.stderr, ran.stderr
    (session,) = lw.request("list")
    assert session["pod"]["namespace"] == namespace and session["pod"]["node"], session["pod"]
    assert not session["pod"].get("lost"), session["pod"]
    wait_for(lambda: not asyncio.run(pods_in(admin, namespace)), 60, "the session's pod deleted")


@pytest.mark.timeout(300)
def test_a_role_without_pods_exec_fails_the_run_in_one_line(admin: Path, image: str, namespace: str, lw: Harness,
                                                             tmp_path: Path) -> None:
    """The pod is made, but no connection to its keeper can be: the session never starts, and its pod goes."""
    kubeconfig = tmp_path / "sa.kubeconfig"
    role = without(without(one("rbac.yaml", "Role"), "pods/exec", "get"), "pods/exec", "create")
    bind_service_account(admin, namespace, role, kubeconfig)
    ran = run_pod_looper(lw, kubeconfig, tmp_path / "work", image)
    assert ran.returncode == 127, ran.stdout + ran.stderr
    said = [line for line in (ran.stdout + ran.stderr).splitlines() if "cannot start" in line]
    assert len(said) == 1 and "HTTP 403" in said[0] and "pods/exec" in said[0], ran.stdout + ran.stderr
    wait_for(lambda: not asyncio.run(pods_in(admin, namespace)), 60, "the session's pod deleted")
