"""Sessions on Kubernetes: what placing a session in a pod costs, against a bare pod and a local session.

    .venv/bin/python bench/pod_sessions.py [--only start,latency,cpu,takeup] [--repeats 5] [-n 2000]
        [--events 100000]
        [--image local/py3:1] [--pull-policy Never] [--namespace NS]

Needs a cluster: $KUBECONFIG names it (its current context); without one, or with an API that does not answer,
the script prints one SKIP line and exits 0. It works in a namespace of its own (`lw-bench-XXXXXX`, created here
and deleted at the end; --namespace uses an existing one instead). The agents run from a host directory mounted
as the pod's volume (kubernetes.volume=host:DIR), so the node must be this machine (a one-node dev cluster) and
the image needs only python3. Each session has a throw-away daemon of its own (`loopwarden serve` in a temporary
LOOPWARDEN_HOME); every part compares places in the same run, interleaved, and prints medians over the repeats.

(start) Time to the first judged event. From the start of `loopwarden run -d --on kubernetes:/NS --image IMAGE
    -- python3 pod_looper.py` (the CLI as a user runs it) to the session's first tool call, stored once judged:
    when the bench, polling the daemon's `logs` every 20 ms, first sees it, and the time the daemon stored with
    it; also from the daemon's receipt of the run (the CLI's own start left out), and that time in steps.
    Against a bare pod of the same image running the same command, created here with kubernetes_asyncio: from
    the create call to the pod's first log line (polled every 20 ms; and the container runtime's time of that
    line). The two alternate, each waiting for the other's pod to be gone.
(latency) Verdict latency through the link. tests/agents/echo_handshake.py N --results (distinct arguments, so
    no rule fires; each call waits for its verdict, and the agent times it) run locally (the daemon reading its
    pipes), locally held by the keeper (a pod's path without the API between) and in a pod; p50/p99 as the
    agent reports them, and the pod's ratios.
(cpu) Daemon CPU per event. tests/agents/flood.py N (events as fast as it writes them, no handshake) in the
    same three places: the daemon's CPU time (user + system, every thread) from the moment a tenth of the events
    are counted to the moment nine tenths are (polled every 0.1 s), over the events stored meanwhile; so the
    pod's placement and deletion are left out and the steady cost of its link is in. The same figure for the
    (latency) sessions is printed beside them: there every event waits for a round trip, so it holds the
    daemon's cost per second of a session as well as per event.

(takeup) restart-daemon under a polling session (pod_looper.py --changing: each call waits for its verdict, and
    no rule stops it): the longest wait between two of its calls judged and stored across the restart (the old
    daemon's last to the next daemon's first: how long the agent waits unwatched), for a session in a pod (its
    keeper reached again through the API) and one held by the local keeper; interleaved.

Prints PASS/FAIL only for what the issue states (every session judged, nothing left behind); the ratios are
figures. Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, cast

sys.path.insert(0, str(Path(__file__).resolve().parent))
from live_common import AGENTS, FINAL, PY, BenchDaemon, leftovers, verdict_line, wait_for
from live_latency import parse_report

T = TypeVar("T")
AGENT_FILES = ("pod_looper.py", "echo_handshake.py", "flood.py")
POLL = 0.02  # seconds between looks, the same for both sides of (start)
STALL = 30.0  # seconds a session's count may stay still before the bench gives up on it
WINDOW_POLL = 0.1  # seconds between looks while the daemon's CPU is counted (each look costs it a request)
API_WAIT = 5.0  # seconds the API is given to answer before the bench skips



class Kube:
    """The bench's own calls to the cluster (kubernetes_asyncio on a private event loop): its namespace and the
    bare pods of (start)."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes_asyncio import client
        from kubernetes_asyncio.config import kube_config

        self.client = client
        self.loop = asyncio.new_event_loop()
        self.made_namespace: str | None = None

        async def connect() -> Any:  # (its HTTP session is made on the loop that will use it)
            configuration = client.Configuration()
            await kube_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration,
                                               persist_config=False)
            return client.ApiClient(configuration)

        try:
            self.api = self.call(connect())
        except BaseException:
            self.loop.close()
            raise
        self.core = client.CoreV1Api(self.api)

    def call(self, coro: Awaitable[T], timeout: float = 60.0) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def reachable(self) -> str | None:
        """None when the API answers; otherwise why not, in one line."""
        try:
            version = self.call(self.client.VersionApi(self.api).get_code(), API_WAIT)
        except Exception as exc:  # noqa: BLE001 - any failure means: no cluster to measure on
            return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        self.version = str(version.git_version)
        return None

    def make_namespace(self) -> str:
        name = f"lw-bench-{secrets.token_hex(3)}"
        self.call(self.core.create_namespace(cast(Any, {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": name}})))
        self.made_namespace = name
        return name

    def pods(self, namespace: str) -> list[str]:
        listed = self.call(self.core.list_namespaced_pod(namespace))
        return [p.metadata.name for p in listed.items]

    def delete_pod(self, name: str, namespace: str) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            self.call(self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def gone(self, name: str, namespace: str) -> bool:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            self.call(self.core.read_namespaced_pod(name, namespace))
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        return False

    def first_log_line(self, name: str, namespace: str) -> str | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            text = self.call(self.core.read_namespaced_pod_log(name, namespace, timestamps=True, limit_bytes=4096))
        except ApiException as exc:
            if exc.status in (400, 404):  # the container is not running yet
                return None
            raise
        return text.splitlines()[0] if text else None

    def close(self) -> None:
        if self.made_namespace:
            self.call(self.core.delete_namespace(self.made_namespace))
        self.call(self.api.close())
        self.loop.close()


class Setup:
    """What every measurement shares: the cluster, the namespace, the agents' directory, the pods' settings."""

    def __init__(self, kube: Kube, kubeconfig: str, namespace: str, image: str, pull: str) -> None:
        self.kube, self.kubeconfig, self.namespace, self.image, self.pull = kube, kubeconfig, namespace, image, pull
        self.volume = Path(tempfile.mkdtemp(prefix="lw-podbench-"))
        for name in AGENT_FILES:
            shutil.copy(AGENTS / name, self.volume / name)
        self.volume.chmod(0o755)  # the agent in the pod runs as kubernetes.agent_user: it reads its program here
        self.sets = [f"kubernetes.volume=host:{self.volume}", f"kubernetes.pull_policy={pull}"]

    def pod_spec(self, command: list[str], name: str) -> dict[str, Any]:
        """A session's run request placed in a pod of the bench's namespace (the `run` op, as the CLI sends it)."""
        return {"name": name, "command": command, "adapter": "native", "cwd": str(self.volume),
                "env": {**os.environ, "KUBECONFIG": self.kubeconfig}, "sets": list(self.sets),
                "on": f"kubernetes:/{self.namespace}", "image": self.image}

    def bare_pod(self, name: str, command: list[str]) -> dict[str, Any]:
        """The same image and command as a session's agent, and nothing of loopwarden's."""
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": self.namespace},
                "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                         "enableServiceLinks": False,
                         "containers": [{"name": "agent", "image": self.image, "imagePullPolicy": self.pull,
                                         "command": command, "workingDir": "/workspace",
                                         "volumeMounts": [{"name": "work", "mountPath": "/workspace"}]}],
                         "volumes": [{"name": "work", "hostPath": {"path": str(self.volume),
                                                                   "type": "DirectoryOrCreate"}}]}}

    def close(self) -> None:
        shutil.rmtree(self.volume, ignore_errors=True)


def log_time(line: str) -> float:
    """The container runtime's time of a log line (`2026-12-07T05:00:00.123456789Z text`), as a Unix time."""
    stamp = line.split(" ", 1)[0].rstrip("Z")
    whole, _, frac = stamp.partition(".")
    return datetime.fromisoformat(whole + "+00:00").timestamp() + float(f"0.{frac or '0'}")


def ended(d: BenchDaemon, sid: str) -> dict[str, Any] | None:
    """The session's snapshot once it has ended (`status`, not BenchDaemon.status: a pod session's pid is the
    pod's, no process of this machine to look after)."""
    snap: dict[str, Any] = d.request("status", session=sid)
    return snap if snap.get("state") in FINAL else None


# ---- (start) ---------------------------------------------------------------------------------------------------
def start_session(d: BenchDaemon, s: Setup) -> dict[str, float]:
    """`loopwarden run -d --on kubernetes` to the session's first tool call judged and stored (an allowed call
    has no verdict row: its event is stored once judged)."""
    cmd = [PY, "-m", "loopwarden", "run", "-d", "--adapter", "native", "--on", f"kubernetes:/{s.namespace}",
           "--image", s.image, *(a for x in s.sets for a in ("--set", x)), "--", "python3", "pod_looper.py"]
    env = {**d.env, "KUBECONFIG": s.kubeconfig}
    t0 = time.time()
    done = subprocess.run(cmd, env=env, cwd=s.volume, capture_output=True, text=True, timeout=120, check=False)
    returned = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"loopwarden run failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    sid = done.stdout.strip().splitlines()[-1]

    def first_call() -> dict[str, Any] | None:
        events = d.request("logs", session=sid, limit=4)["events"]
        return next((e for e in events if e.get("kind") == "tool_call"), None)

    call = wait_for(first_call, 60, "the pod session's first tool call", POLL)
    seen = time.time()
    snap = d.request("status", session=sid)  # (not d.status: its pid is the pod's, no process to look after here)
    hello = d.request("logs", session=sid, limit=1)["events"][0]
    pod = snap.get("pod") or {}
    d.request("kill", session=sid, note="benchmark: measured")
    wait_for(lambda: ended(d, sid), 60, "the session's end", 0.1)
    wait_for(lambda: s.kube.gone(str(pod.get("pod")), s.namespace), 60, "the session's pod to be gone", 0.2)
    return {"seen": seen - t0, "stamped": float(call["ts"]) - t0, "cli": returned - t0,
            "daemon": float(call["ts"]) - snap["created_at"],
            "asked": snap["created_at"] - t0, "placed": snap["started_at"] - snap["created_at"],
            "hello": float(hello["ts"]) - snap["started_at"], "call": float(call["ts"]) - float(hello["ts"])}


def start_bare(s: Setup, i: int) -> dict[str, float]:
    """A bare pod's create call to its first log line."""
    name = f"bare-{i}-{secrets.token_hex(2)}"
    body = s.bare_pod(name, ["python3", "pod_looper.py"])
    t0 = time.time()
    s.kube.call(s.kube.core.create_namespaced_pod(s.namespace, cast(Any, body)))  # the API's JSON as is
    try:
        line = wait_for(lambda: s.kube.first_log_line(name, s.namespace), 60, "the bare pod's first line", POLL)
        seen = time.time()
    finally:
        s.kube.delete_pod(name, s.namespace)
    wait_for(lambda: s.kube.gone(name, s.namespace), 60, "the bare pod to be gone", 0.2)
    return {"seen": seen - t0, "stamped": log_time(line) - t0}


def part_start(d: BenchDaemon, s: Setup, repeats: int) -> None:
    print(f"\n(start) `run --on kubernetes` to the first judged event, against a bare pod's first log line; "
          f"{repeats} repeats")
    sessions, bares = [], []
    for i in range(repeats):
        sessions.append(start_session(d, s))
        bares.append(start_bare(s, i))
        print(f"  {i + 1}: session {sessions[-1]['seen']:.3f} s (stamped {sessions[-1]['stamped']:.3f}, "
              f"the CLI back after {sessions[-1]['cli']:.3f}); bare pod {bares[-1]['seen']:.3f} s (line stamped "
              f"{bares[-1]['stamped']:.3f}); load {os.getloadavg()[0]:.1f}")
    for key, base, what in (("seen", "seen", "seen by polling"), ("stamped", "stamped", "by their own times"),
                            ("daemon", "stamped", "from the daemon's receipt of the run (no CLI start)")):
        a, b = statistics.median(x[key] for x in sessions), statistics.median(x[base] for x in bares)
        print(f"  median, {what}: session {a:.3f} s, bare pod {b:.3f} s: ratio {a / b:.2f} (+{a - b:.3f} s)")
    steps = {k: statistics.median(x[k] for x in sessions) for k in ("asked", "placed", "hello", "call")}
    print(f"  the session's median steps: the CLI to the daemon {steps['asked']:.3f} s; the pod made, running and "
          f"its keeper reached, the agent spawned {steps['placed']:.3f} s; to its first line (its streams "
          f"attached) {steps['hello']:.3f} s; to its first call {steps['call']:.3f} s")


# ---- (latency) and (cpu) ----------------------------------------------------------------------------------------
def cpu_seconds(d: BenchDaemon) -> float:
    assert d.ps is not None
    times = d.ps.cpu_times()
    return float(times.user + times.system)


PLACES = ("local", "local kept", "pod")


def measured_session(d: BenchDaemon, spec: dict[str, Any], key: str, total: int) -> dict[str, Any]:
    """Run one session; the daemon's CPU per event between a tenth and nine tenths of its `total` `key` (tool_calls
    or events, as `status` counts them): its steady state, neither the pod's placement nor its deletion."""
    sid = d.request("run", spec=spec)["id"]
    moved = [-1, time.monotonic()]  # the count last seen, and when it changed

    def past(mark: int) -> tuple[dict[str, Any], float] | None:
        snap = d.request("status", session=sid)
        count, now = int(snap.get(key) or 0), time.monotonic()
        if count >= mark:
            return snap, now
        if snap.get("state") in FINAL:
            raise RuntimeError(f"session {sid} ({spec['name']}) ended after {count} {key}: "
                               f"{snap.get('state')} {snap.get('exit_code')} {snap.get('termination_text') or ''}; "
                               f"the daemon's log: {d.log_tail(5)}")
        if count != moved[0]:
            moved[:] = [count, now]
        elif now - moved[1] > STALL:
            raise RuntimeError(f"session {sid} ({spec['name']}) stalled: {count} {key} for {STALL:g} s "
                               f"({snap.get('events')} events stored)")
        return None

    first, t0 = wait_for(lambda: past(total // 10), 120, f"a tenth of the {key}", 0.01)
    cpu0 = cpu_seconds(d)
    last, t1 = wait_for(lambda: past(total * 9 // 10), 600, f"nine tenths of the {key}", WINDOW_POLL)
    cpu1 = cpu_seconds(d)
    snap = wait_for(lambda: ended(d, sid), 120, "the session's end", 0.1)
    events = int(last["events"]) - int(first["events"])
    return {"sid": sid, "snap": snap, "rate": events / (t1 - t0),
            "us_per_event": (cpu1 - cpu0) / events * 1e6 if events else float("nan")}


def each_place(s: Setup, agent: list[str], keep: bool, left: list[str],
               measure: Callable[[BenchDaemon, dict[str, Any]], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`measure` of the agent (a file of the volume, and its arguments) run locally (the daemon reading its pipes),
    locally held by the keeper (the path a pod's keeper takes, without the API between), and in a pod; each by a
    daemon of its own. Processes left behind are added to `left`."""
    out = {}
    for place in PLACES:
        if place == "pod":
            spec = s.pod_spec(["python3", *agent], Path(agent[0]).stem)
        else:
            spec = {"name": Path(agent[0]).stem, "command": [PY, str(s.volume / agent[0]), *agent[1:]],
                    "adapter": "native"}
        d = BenchDaemon("podbench", keep=keep, kept=place == "local kept")
        try:  # (not `with`: a daemon too slow to start on a busy machine is stopped too)
            d.start()
            out[place] = measure(d, spec)
        finally:
            d.close()
        left += leftovers(d)
    return out


def medians(runs: dict[str, list[dict[str, Any]]], fields: tuple[str, ...]) -> dict[str, dict[str, float]]:
    return {k: {f: statistics.median(r[f] for r in v) for f in fields} for k, v in runs.items()}


def part_latency(s: Setup, repeats: int, calls: int, keep: bool, left: list[str]) -> bool:
    """echo_handshake in each place, interleaved; True when every session ran to its end, every call allowed."""
    print(f"\n(latency) echo_handshake.py {calls} calls, distinct arguments, each waiting for its verdict; "
          f"{repeats} repeats")

    def measure(d: BenchDaemon, spec: dict[str, Any]) -> dict[str, Any]:
        run = measured_session(d, spec, "tool_calls", calls)
        text = "\n".join(str((e.get("data") or {}).get("text")) for e in d.logs(run["sid"]) if e.get("kind") == "log")
        return {**run, **parse_report(text)}

    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in PLACES}
    for i in range(repeats):
        for k, r in each_place(s, ["echo_handshake.py", str(calls), "--results"], keep, left, measure).items():
            runs[k].append(r)
        print(f"  {i + 1}: " + "; ".join(f"{k} p50 {v[-1]['p50']:.3f} p99 {v[-1]['p99']:.3f} ms"
                                         for k, v in runs.items()) + f"; load {os.getloadavg()[0]:.1f}")
    med = medians(runs, ("p50", "p99", "us_per_event"))
    for k, m in med.items():
        print(f"  median {k:<11} p50 {m['p50']:7.3f} ms  p99 {m['p99']:7.3f} ms  (daemon {m['us_per_event']:.0f} us "
              f"per event of this session)")
    for base in ("local", "local kept"):
        pod, b = med["pod"], med[base]
        print(f"  pod / {base}: p50 {pod['p50'] / b['p50']:.1f}x, p99 {pod['p99'] / b['p99']:.1f}x")
    return all(r["snap"].get("state") == "exited" and r["snap"].get("exit_code") == 0
               and r["actions"] == {"allow": calls} for v in runs.values() for r in v)


def part_cpu(s: Setup, repeats: int, events: int, keep: bool, left: list[str]) -> bool:
    """flood.py in each place, interleaved; True when every session stored every line."""
    print(f"\n(cpu) flood.py {events:,} events as fast as it can write them; {repeats} repeats")

    def measure(d: BenchDaemon, spec: dict[str, Any]) -> dict[str, Any]:
        return measured_session(d, spec, "events", events)

    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in PLACES}
    for i in range(repeats):
        for k, r in each_place(s, ["flood.py", str(events)], keep, left, measure).items():
            runs[k].append(r)
        print(f"  {i + 1}: " + "; ".join(f"{k} {v[-1]['us_per_event']:.1f} us/event, {v[-1]['rate']:,.0f} events/s"
                                         for k, v in runs.items()) + f"; load {os.getloadavg()[0]:.1f}")
    med = medians(runs, ("us_per_event", "rate"))
    for k, m in med.items():
        print(f"  median {k:<11} daemon {m['us_per_event']:6.1f} us/event, {m['rate']:,.0f} events/s stored")
    for base in ("local", "local kept"):
        pod, b = med["pod"], med[base]
        print(f"  pod / {base}: daemon CPU per event {pod['us_per_event'] / b['us_per_event']:.2f}x, "
              f"events/s {pod['rate'] / b['rate']:.2f}x")
    return all(r["snap"].get("state") == "exited" and r["snap"].get("exit_code") == 0
               and int(r["snap"].get("events") or 0) == events + 2 for v in runs.values() for r in v)


# ---- (takeup) -----------------------------------------------------------------------------------------------------
POLLING = ["repetition.progress_nudge_after=0", "repetition.progress_gate_after=0"]  # no rule stops the poller


def restarted(d: BenchDaemon, spec: dict[str, Any]) -> dict[str, Any]:
    """restart-daemon under a polling session (each call waits for its verdict): the longest wait between two of
    its calls judged and stored across the restart (the old daemon's last to the next one's first), and the
    CLI's own return, from its start."""
    sid = d.request("run", spec=spec)["id"]
    wait_for(lambda: int(d.request("status", session=sid).get("tool_calls") or 0) >= 5, 120, "five calls", 0.05)
    t0 = time.time()
    done = subprocess.run([PY, "-m", "loopwarden", "restart-daemon", "--yes"], env=d.env, capture_output=True,
                          text=True, timeout=300, check=False)
    returned = time.time()
    if done.returncode != 0:
        raise RuntimeError(f"restart-daemon failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    d.close_client()

    def calls_after(since: float) -> list[float]:
        """The stored times of its calls from `since` on (every page)."""
        times, cursor = [], {}
        while True:
            page = d.request("logs", session=sid, since=since, tables=["events"], limit=1000, **cursor)
            times += [float(e["ts"]) for e in page["events"] if e.get("kind") == "tool_call"]
            if not page.get("more"):
                return times
            cursor = page["next"]

    def judged_on() -> list[float] | None:
        try:
            times = calls_after(t0 - 1.0)
        except Exception:  # noqa: BLE001 - the next daemon not answering yet, or not knowing the session yet
            return None
        return times if sum(t > returned for t in times) >= 5 else None

    times = wait_for(judged_on, 120, "five calls judged by the next daemon", 0.1)
    gap = max(b - a for a, b in itertools.pairwise(times))
    snap = d.request("status", session=sid)
    stopped = subprocess.run([PY, "-m", "loopwarden", "stop-daemon", "--yes"], env=d.env, capture_output=True,
                             text=True, timeout=120, check=False)
    if stopped.returncode != 0:
        raise RuntimeError(f"stop-daemon failed: {stopped.stderr.strip()[-300:]}")
    return {"gap": gap, "cli": returned - t0, "state": snap.get("state"), "pod": snap.get("pod")}


def part_takeup(s: Setup, repeats: int, keep: bool, left: list[str]) -> bool:
    """restart-daemon in a pod and locally kept, interleaved; True when each was taken up, the pod's in its pod."""
    print(f"\n(takeup) restart-daemon under a polling session: the longest wait between two calls judged; "
          f"{repeats} repeats")
    places = ("local kept", "pod")
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in places}
    for i in range(repeats):
        for place in places:
            if place == "pod":
                spec = {**s.pod_spec(["python3", "pod_looper.py", "--changing"], "poller"),
                        "sets": [*s.sets, *POLLING]}
            else:
                spec = {"name": "poller", "command": [PY, str(s.volume / "pod_looper.py"), "--changing"],
                        "adapter": "native", "sets": POLLING}
            d = BenchDaemon("podbench-takeup", keep=keep, kept=place == "local kept")
            try:
                d.start()
                runs[place].append(restarted(d, spec))
            finally:
                d.close()
            left += leftovers(d)
        print(f"  {i + 1}: " + "; ".join(f"{k}: no call judged for {v[-1]['gap']:.3f} s (restart-daemon back after "
                                         f"{v[-1]['cli']:.3f})" for k, v in runs.items())
              + f"; load {os.getloadavg()[0]:.1f}")
    med = {k: statistics.median(r["gap"] for r in v) for k, v in runs.items()}
    print(f"  median wait between two calls judged across the restart: pod {med['pod']:.3f} s, local kept "
          f"{med['local kept']:.3f} s: ratio {med['pod'] / med['local kept']:.2f} "
          f"(+{med['pod'] - med['local kept']:.3f} s)")
    return all(r["state"] == "running" for v in runs.values() for r in v) \
        and all(isinstance(r["pod"], dict) and r["pod"].get("node") for r in runs["pod"])


# ---- main ---------------------------------------------------------------------------------------------------------
def cluster_or_skip() -> tuple[Kube, str] | None:
    kubeconfig = (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0]
    if not kubeconfig:
        print("SKIP: KUBECONFIG is not set: no cluster to measure on")
        return None
    try:
        kube = Kube(kubeconfig)
    except Exception as exc:  # noqa: BLE001 - an unreadable kubeconfig is no cluster either
        print(f"SKIP: the kubeconfig {kubeconfig} cannot be used: {str(exc).splitlines()[0][:160]}")
        return None
    why = kube.reachable()
    if why:
        print(f"SKIP: the cluster of {kubeconfig} does not answer: {why}")
        kube.close()
        return None
    return kube, kubeconfig


def run_parts(s: Setup, parts: set[str], args: argparse.Namespace) -> list[str]:
    """The parts asked for; what they left behind (processes, pods)."""
    left: list[str] = []
    if "start" in parts:
        d = BenchDaemon("podbench-start", keep=args.keep)
        try:
            d.start()
            part_start(d, s, args.repeats)
        finally:
            d.close()
        left += leftovers(d)
    if "latency" in parts:
        ok = part_latency(s, args.repeats, args.n, args.keep, left)
        print(verdict_line(ok, f"every session ran its {args.n} calls to the end, each call allowed (exit 0)"))
    if "cpu" in parts:
        ok = part_cpu(s, args.repeats, args.events, args.keep, left)
        print(verdict_line(ok, f"every session stored its {args.events + 2:,} lines (exit 0)"))
    if "takeup" in parts:
        ok = part_takeup(s, args.repeats, args.keep, left)
        print(verdict_line(ok, "every session was taken up by the next daemon, running (the pod's in its pod)"))
    return left + [f"pod {p}" for p in s.kube.pods(s.namespace)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="start,latency,cpu,takeup", help="parts to run (default: all four)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats of each part (medians; default 5)")
    ap.add_argument("-n", type=int, default=2000, help="tool calls of each (latency) session (default 2000)")
    # (flood.py writes about 96 bytes an event: 100,000 are past the 8 MiB a pod's keeper holds until it is told
    # what is stored)
    ap.add_argument("--events", type=int, default=100_000, help="events of each (cpu) session (default 100000)")
    ap.add_argument("--image", default="local/py3:1", help="an image with python3 on the cluster's node")
    ap.add_argument("--pull-policy", default="Never", help="its imagePullPolicy (default Never: a local image)")
    ap.add_argument("--namespace", help="an existing namespace to use (default: one of its own, deleted after)")
    ap.add_argument("--keep", action="store_true", help="keep the daemons' temporary LOOPWARDEN_HOMEs")
    args = ap.parse_args()
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    known = {"start", "latency", "cpu", "takeup"}
    if not parts <= known:
        ap.error(f"--only: unknown part(s) {', '.join(sorted(parts - known))}")
    found = cluster_or_skip()
    if found is None:
        return 0
    kube, kubeconfig = found
    try:
        namespace = args.namespace or kube.make_namespace()
        s = Setup(kube, kubeconfig, namespace, args.image, args.pull_policy)
        print(f"pod sessions: cluster {kube.version}, namespace {namespace}, image {args.image}; "
              f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores")
        try:
            left = run_parts(s, parts, args)
        finally:
            s.close()
        print(verdict_line(not left, "nothing left behind" + (f": {', '.join(left)}" if left else "")))
    finally:
        kube.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
