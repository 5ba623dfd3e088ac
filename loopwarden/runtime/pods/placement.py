"""Where a session runs: here, or in a pod of its own on a Kubernetes cluster (`--on kubernetes[:CONTEXT[/NS]]`).

What is checked here is everything that can be checked before the cluster is asked: the names, the image, the
volume and the CPU, each refused in one line that says what is accepted.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Final

from ...supervisor.config import Config

LOCAL: Final = "local"
KUBERNETES: Final = "kubernetes"
# a namespace (RFC 1123 label); a context is a kubeconfig's key: anything printable but '/'
_NAMESPACE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_CONTEXT: Final = re.compile(r"^[\x21-\x2e\x30-\x7e]{1,253}$")
_CLAIM: Final = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_IMAGE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,1023}$")
_CPU: Final = re.compile(r"^([0-9]+m|[0-9]+(\.[0-9]{1,3})?)$")
_VARIABLE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class PlacementError(ValueError):
    """A placement that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Volume:
    """claim:NAME (a PersistentVolumeClaim) or host:PATH (a directory of the node)."""

    kind: str
    source: str

    @classmethod
    def parse(cls, text: str) -> Volume | None:
        if not text:
            return None
        kind, sep, source = text.partition(":")
        if sep and kind == "claim" and _CLAIM.match(source):
            return cls(kind, source)
        if sep and kind == "host" and source.startswith("/") and source.strip("/") and "\n" not in source \
                and ".." not in source.split("/"):
            return cls(kind, source)
        raise PlacementError(f"kubernetes.volume: {text[:80]!r} is not claim:NAME (a PersistentVolumeClaim of the "
                             "namespace) or host:/PATH (a directory of the node)")


@dataclass(frozen=True)
class Placement:
    """A session's pod: where (context, namespace), from what (image), working in what (volume), held how long."""

    context: str | None
    namespace: str | None
    image: str
    kubeconfig: str | None = None  # the file the run's environment named (KUBECONFIG); None: the usual places
    volume: Volume | None = None
    workdir: str = "/workspace"
    cpu: str = ""
    memory: int = 0  # bytes (limits.max_rss); 0: no limit
    host_network: bool = False
    pull_policy: str = "IfNotPresent"
    hold: float = 3600.0
    start_timeout: float = 300.0
    replaces: str | None = None  # the pod of the conversation's earlier run (continue), deleted before this one
    agent_user: int = 1000  # the agent's uid and gid in the pod (0: the keeper's)

    @property
    def where(self) -> str:
        """`kubernetes:CONTEXT/NAMESPACE` as --on takes it (what `continue` places the next run with)."""
        if self.context is None and self.namespace is None:
            return KUBERNETES
        return f"{KUBERNETES}:{self.context or ''}" + (f"/{self.namespace}" if self.namespace else "")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["volume"] = f"{self.volume.kind}:{self.volume.source}" if self.volume else ""
        return data


def parse_on(text: str) -> tuple[str | None, str | None] | None:
    """`local` -> None; `kubernetes[:CONTEXT[/NAMESPACE]]` -> (context, namespace), either None when not given."""
    if text == LOCAL:
        return None
    head, sep, rest = text.partition(":")
    if head != KUBERNETES:
        raise PlacementError(f"--on {text[:80]!r}: not a place; it accepts local or kubernetes[:CONTEXT[/NAMESPACE]] "
                             "(e.g. kubernetes, kubernetes:prod, kubernetes:prod/agents, kubernetes:/agents)")
    context, _, namespace = rest.partition("/") if sep else ("", "", "")
    if context and not _CONTEXT.match(context):
        raise PlacementError(f"--on: {context[:80]!r} is not a kubeconfig context name")
    if namespace and not _NAMESPACE.match(namespace):
        raise PlacementError(f"--on: {namespace[:80]!r} is not a namespace (lowercase letters, digits and '-', "
                             "at most 63)")
    return context or None, namespace or None


def placement(on: str | None, image: str | None, config: Config, env: dict[str, str]) -> Placement | None:
    """The run's placement (None: here) from --on and --image, else the config's kubernetes.* defaults."""
    k8s = config.kubernetes
    where = parse_on(on or k8s.place or LOCAL)
    if where is None:
        if image:
            raise PlacementError("--image places a session's pod: give --on kubernetes too (or set "
                                 "kubernetes.place)")
        return None
    chosen = image or k8s.image
    if not chosen:
        raise PlacementError("a session on kubernetes needs an image: --image IMAGE or kubernetes.image (it needs the "
                             "agent's program and a python3)")
    if not _IMAGE.match(chosen):
        raise PlacementError(f"--image: {chosen[:80]!r} is not an image reference")
    if not 0 <= k8s.agent_user < 1 << 31:
        raise PlacementError(f"kubernetes.agent_user: {k8s.agent_user} is not a uid (0 to 2147483647)")
    bad = next((name for name in k8s.pass_env if not _VARIABLE.match(name)), None)
    if bad is not None:
        raise PlacementError(f"kubernetes.pass_env: {bad[:60]!r} is not an environment variable's name")
    if k8s.cpu and not _CPU.match(k8s.cpu):
        raise PlacementError(f"kubernetes.cpu: {k8s.cpu[:40]!r} is not a CPU quantity such as 500m or 2")
    if not k8s.workdir.startswith("/") or k8s.workdir in ("/", "/run/loopwarden", "/opt/loopwarden"):
        raise PlacementError(f"kubernetes.workdir: {k8s.workdir[:80]!r} must be an absolute directory of its own")
    context, namespace = where
    return Placement(context=context, namespace=namespace, image=chosen, kubeconfig=env.get("KUBECONFIG") or None,
                     volume=Volume.parse(k8s.volume), workdir=k8s.workdir.rstrip("/"), cpu=k8s.cpu,
                     memory=config.limits.max_rss, host_network=k8s.host_network, pull_policy=k8s.pull_policy,
                     hold=k8s.hold, start_timeout=k8s.start_timeout, agent_user=k8s.agent_user)


def placed_again(pod: dict[str, Any], config: Config, env: dict[str, str]) -> Placement | None:
    """A stored pod's placement made anew (pod_session.py: describe): its place and image, and the kubeconfig it
    used, with the settings of `config`; PlacementError as `placement`."""
    kubeconfig = pod.get("kubeconfig")
    return placement(str(pod.get("on") or "kubernetes"), str(pod.get("image") or ""), config,
                     {**env, **({"KUBECONFIG": kubeconfig} if isinstance(kubeconfig, str) else {})})


def agent_env(env: dict[str, str], config: Config, workdir: str) -> dict[str, str]:
    """The environment of the agent in a pod: the variables kubernetes.pass_env names and nothing else of the run's
    (its PATH and HOME are this machine's, its other variables may be secrets the agent has no use for)."""
    passed = {k: env[k] for k in config.kubernetes.pass_env if k in env}
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": workdir,
            "LANG": "C.UTF-8", **passed}
