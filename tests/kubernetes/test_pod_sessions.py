"""Sessions placed in pods (`run --on kubernetes`) on the real cluster: judged as local ones are, gated and approved
from the console, killed and ended by max_runtime with their pods deleted, a pod deleted under a live session a
host lost that `continue` takes up on a new pod, and twenty at once on the one node."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import shutil
from pathlib import Path
from typing import Any

import psutil
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from loopwarden.widgets.dialogs import Confirm
from tests.console.helpers import RecordingConsole, until
from tests.kubernetes.api_proxy import FrozenableRelay
from tests.kubernetes.helpers import Cluster, core_api
from tests.support.daemon import Harness
from tests.support.processes import processes_with
from tests.support.waiting import wait_for

AGENTS = Path(__file__).parent.parent / "agents"
pytestmark = pytest.mark.timeout(400)  # pods made, run and deleted on a loaded machine: the waits say what failed
SIZE = (160, 40)
AGENT_USER = 1000  # kubernetes.agent_user's default


def workdir(tmp_path: Path, *agents: str) -> Path:
    """The session's volume (a directory of the node: this machine), holding the agent's program."""
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    for agent in agents:
        shutil.copy(AGENTS / agent, work / agent)
    os.chown(work, AGENT_USER, AGENT_USER)  # a host: volume is the agent's to write, not its keeper's alone
    return work


def run_in_pod(lw: Harness, cluster: Cluster, namespace: str, work: Path, *command: str, adapter: str = "native",
               sets: tuple[str, ...] = ()) -> str:
    """`loopwarden run -d` of `command` in a pod, placed by the settings kubernetes.place and .image (the config
    default --on and --image fall back to)."""
    placed = (f"kubernetes.place=kubernetes:/{namespace}", f"kubernetes.image={cluster.image}",
              f"kubernetes.volume=host:{work}", "kubernetes.pull_policy=Never")
    return lw.run_detached(*command, adapter=adapter, sets=placed + sets, env={"KUBECONFIG": str(cluster.kubeconfig)},
                           timeout=120)


POLLING_ALLOWED = ("repetition.progress_nudge_after=0", "repetition.progress_gate_after=0")  # no rule ends it


def run_poller(lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path, *args: str,
               sets: tuple[str, ...] = ()) -> str:
    """pod_looper.py polling (`--changing`) in a pod, where no rule stops it: only what the test does ends it."""
    work = workdir(tmp_path, "pod_looper.py")
    return run_in_pod(lw, cluster, namespace, work, "python3", "pod_looper.py", "--changing", *args,
                      sets=(*POLLING_ALLOWED, *sets))


def pod_of(lw: Harness, sid: str) -> dict[str, Any]:
    return wait_for(lambda: (lw.status(sid).get("pod") or {}).get("node") and lw.status(sid)["pod"],
                    timeout=120, what=f"session {sid}'s pod to run")


async def _pod_exists(cluster: Cluster, namespace: str, name: str) -> bool:
    async with core_api(cluster.kubeconfig) as core:
        try:
            await core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
    return True


def pod_exists(cluster: Cluster, namespace: str, name: str) -> bool:
    return asyncio.run(_pod_exists(cluster, namespace, name))


def delete_pod(cluster: Cluster, namespace: str, name: str) -> None:
    async def delete() -> None:
        async with core_api(cluster.kubeconfig) as core:
            await core.delete_namespaced_pod(name, namespace, grace_period_seconds=1)

    asyncio.run(delete())


def test_a_looping_agent_in_a_pod_is_nudged_blocked_and_terminated_and_its_pod_deleted(
        lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    work = workdir(tmp_path, "pod_looper.py")
    sid = run_in_pod(lw, cluster, namespace, work, "python3", "pod_looper.py")
    snap = lw.wait_state(sid, "terminated", timeout=120)
    assert snap["termination"] == "repetition_loop"
    actions = [v["action"] for v in lw.verdicts(sid)]
    assert "nudge" in actions and actions.count("block") == 3 and actions[-1] == "terminate"
    pod = snap["pod"]
    assert (pod["node"], pod["namespace"], pod["lost"]) == (cluster.node, namespace, None)
    wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60, what=f"pod {pod['pod']} deleted")


def test_the_agent_in_a_pod_runs_as_another_user_than_its_keeper_and_cannot_touch_it(
        lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    work = workdir(tmp_path, "pod_prober.py")
    sid = run_in_pod(lw, cluster, namespace, work, "python3", "pod_prober.py")
    lw.wait_state(sid, "exited", "terminated", timeout=120)
    [probe] = [e["data"] for e in lw.events(sid) if e["kind"] == "tool_call" and e["data"].get("tool") == "probe"]
    assert probe["args"] == {"uid": AGENT_USER, "signal_keeper": "refused", "connect_keeper": "refused",
                             "open_keepers_fds": "refused", "write_programs": "refused",
                             "replace_keepers_socket": "refused", "write_keepers_folder": "refused"}, probe


@pytest.mark.anyio
async def test_a_gate_opened_in_a_pod_is_approved_from_the_console(
        lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    sid = run_poller(lw, cluster, namespace, tmp_path, sets=("repetition.progress_gate_after=3",))
    snap = lw.wait_state(sid, "gated", timeout=120)
    assert snap["pod"]["node"] == cluster.node
    ref = f"{sid}:{snap['pending_gates'][0]}"
    calls = snap["tool_calls"]
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: ref in {g["ref"] for g in app.gates}, what=f"gate {ref} in the console")
        await pilot.press("g")
        await until(pilot, lambda: app.screen.id != "_default", what="the gates queue")
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, Confirm), what="the approval's confirmation")
        await pilot.press("y")
        await until(pilot, lambda: ref not in {g["ref"] for g in app.gates}, what="the gate to be decided")
    [approve] = [a for a in lw.request("actions", session=sid) if a["action"] == "approve"]
    assert approve["target"] == ref and approve["client"].startswith("console pid ")
    # the agent in the pod was let go on: it calls again, until the next gate
    wait_for(lambda: lw.status(sid)["tool_calls"] > calls, timeout=60, what="the agent to call again")
    assert lw.cli("kill", sid).returncode == 0
    lw.wait_state(sid, "terminated", timeout=60)


def test_pause_stops_the_agent_in_its_pod_and_resume_lets_it_go_on(lw: Harness, cluster: Cluster, namespace: str,
                                                                    tmp_path: Path) -> None:
    mark = f"mark-{secrets.token_hex(4)}"
    sid = run_poller(lw, cluster, namespace, tmp_path, mark)
    pod_of(lw, sid)
    wait_for(lambda: lw.status(sid)["tool_calls"] >= 3, timeout=60, what="the agent to call")
    [agent] = wait_for(lambda: processes_with(mark), timeout=30, what="the agent's process on the node")
    assert lw.cli("pause", sid).returncode == 0  # SIGSTOP, sent by the keeper in the pod to another user's process
    wait_for(lambda: agent.status() == psutil.STATUS_STOPPED, timeout=30, what="the agent stopped")
    assert lw.cli("resume", sid).returncode == 0
    wait_for(lambda: agent.status() != psutil.STATUS_STOPPED, timeout=30, what="the agent going on")
    calls = lw.status(sid)["tool_calls"]
    wait_for(lambda: lw.status(sid)["tool_calls"] > calls, timeout=60, what="the agent to call again")
    assert lw.cli("kill", sid).returncode == 0
    assert lw.wait_state(sid, "terminated", timeout=60)["termination"] == "operator"
    wait_for(lambda: not processes_with(mark), timeout=60, what="the agent to be ended by its keeper")


def test_kill_deletes_the_pod_and_its_processes(lw: Harness, cluster: Cluster, namespace: str,
                                                tmp_path: Path) -> None:
    mark = f"mark-{secrets.token_hex(4)}"
    sid = run_poller(lw, cluster, namespace, tmp_path, mark)
    pod = pod_of(lw, sid)
    wait_for(lambda: lw.status(sid)["tool_calls"] >= 3, timeout=60, what="the agent to call")
    assert processes_with(mark), "the agent runs on the node"
    kill = lw.cli("kill", sid)
    assert kill.returncode == 0, kill.stderr
    snap = lw.wait_state(sid, "terminated", timeout=60)
    assert snap["termination"] == "operator" and snap["pod"]["lost"] is None
    wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60, what=f"pod {pod['pod']} deleted")
    wait_for(lambda: not processes_with(mark), timeout=60, what="the agent's processes to end")


def test_max_runtime_ends_a_session_in_a_pod(lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    sid = run_poller(lw, cluster, namespace, tmp_path, sets=("limits.max_runtime=3s",))
    pod = pod_of(lw, sid)
    snap = lw.wait_state(sid, "terminated", timeout=120)
    assert snap["termination"] == "max_runtime"
    wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60, what=f"pod {pod['pod']} deleted")


def test_a_pod_deleted_under_a_session_is_a_host_lost_and_continue_brings_it_back_on_a_new_pod(
        lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    work = workdir(tmp_path, "pod_acp_agent.py")
    sid = run_in_pod(lw, cluster, namespace, work, "python3", "pod_acp_agent.py", "--", "write the tests",
                     adapter="acp")
    pod = pod_of(lw, sid)
    wait_for(lambda: lw.status(sid)["tool_calls"] >= 2, timeout=60, what="the agent to work")
    conversation = lw.status(sid)["conversation"]
    delete_pod(cluster, namespace, pod["pod"])
    snap = lw.wait_state(sid, "lost", timeout=60)
    assert snap["lost"]["how"] == "host" and "host lost" in snap["termination_text"]
    assert pod["pod"] in snap["termination_text"]
    listed = lw.cli("ls")
    assert "host lost" in listed.stdout, listed.stdout
    went_on = lw.cli("continue", sid, env={"KUBECONFIG": str(cluster.kubeconfig)})
    assert went_on.returncode == 0, went_on.stderr
    new = wait_for(lambda: next((s["id"] for s in lw.request("list") if s["id"] != sid
                                 and s.get("conversation") == conversation), None), what="the continued session")
    again = pod_of(lw, new)
    assert again["pod"] != pod["pod"] and again["namespace"] == namespace
    wait_for(lambda: lw.status(new)["tool_calls"] >= 1, timeout=60, what="the continued agent to work")
    # the conversation was read back from the volume by the new pod's agent: both prompts are in it
    [stored] = list((work / ".pod-acp").glob("*.json"))
    assert stored.stem == conversation and stored.read_text().count('"') >= 6
    assert "write the tests" in stored.read_text() and "Continue the task" in stored.read_text()
    assert lw.cli("kill", new).returncode == 0
    wait_for(lambda: not pod_exists(cluster, namespace, again["pod"]), timeout=60, what="the new pod deleted")


def test_twenty_sessions_at_once_on_the_one_node(lw: Harness, cluster: Cluster, namespace: str,
                                                  tmp_path: Path) -> None:
    work = workdir(tmp_path, "pod_looper.py")
    placed = (f"kubernetes.place=kubernetes:/{namespace}", f"kubernetes.image={cluster.image}",
              f"kubernetes.volume=host:{work}", "kubernetes.pull_policy=Never",
              *POLLING_ALLOWED)
    spec = {"command": ["python3", "pod_looper.py", "--changing"], "adapter": "native", "sets": list(placed),
            "env": {"KUBECONFIG": str(cluster.kubeconfig)}}
    sids = [lw.request("run", spec=spec)["id"] for _ in range(20)]
    pods = [pod_of(lw, sid) for sid in sids]
    assert {p["node"] for p in pods} == {cluster.node} and len({p["pod"] for p in pods}) == 20
    wait_for(lambda: all(lw.status(sid)["tool_calls"] >= 3 for sid in sids), timeout=120,
             what="every agent to be judged")
    for sid in sids:
        assert lw.cli("kill", sid).returncode == 0
    for sid in sids:
        lw.wait_state(sid, "terminated", timeout=120)
    wait_for(lambda: not any(pod_exists(cluster, namespace, p["pod"]) for p in pods), timeout=120,
             what="every pod deleted")


def test_an_api_gone_quiet_is_a_host_lost_by_the_lease_and_continue_replaces_the_pod_left_holding_the_agent(
        lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    relay = FrozenableRelay.of(cluster.kubeconfig)
    try:
        kubeconfig = relay.kubeconfig(cluster.kubeconfig, tmp_path / "kubeconfig")
        work = workdir(tmp_path, "pod_acp_agent.py")
        placed = (f"kubernetes.place=kubernetes:/{namespace}", f"kubernetes.image={cluster.image}",
                  f"kubernetes.volume=host:{work}", "kubernetes.pull_policy=Never")
        sid = lw.run_detached("python3", "pod_acp_agent.py", "--", "write the tests", adapter="acp", sets=placed,
                              env={"KUBECONFIG": str(kubeconfig)}, timeout=120)
        pod = pod_of(lw, sid)
        wait_for(lambda: lw.status(sid)["tool_calls"] >= 2, timeout=60, what="the agent to work")
        relay.frozen.set()  # nothing closes: only the lease can tell
        snap = lw.wait_state(sid, "lost", timeout=90)
        assert snap["lost"]["how"] == "host" and "cannot be reached" in snap["termination_text"]
        relay.frozen.clear()
        assert pod_exists(cluster, namespace, pod["pod"]), "the keeper holds the agent in its pod meanwhile"
        went_on = lw.cli("continue", sid, env={"KUBECONFIG": str(kubeconfig)})
        assert went_on.returncode == 0, went_on.stderr
        new = wait_for(lambda: next((s["id"] for s in lw.request("list") if s["id"] != sid
                                     and s.get("conversation") == snap["conversation"]), None),
                       what="the continued session")
        again = pod_of(lw, new)
        assert again["pod"] != pod["pod"]
        wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60,
                 what="the pod left holding the agent to be deleted before the conversation goes on")
        assert lw.cli("kill", new).returncode == 0
        wait_for(lambda: not pod_exists(cluster, namespace, again["pod"]), timeout=60, what="the new pod deleted")
    finally:
        relay.close()


def test_a_kill_while_the_pod_waits_for_a_node_ends_its_start_at_once(lw: Harness, cluster: Cluster, namespace: str,
                                                                       tmp_path: Path) -> None:
    work = workdir(tmp_path, "pod_looper.py")
    sid = run_in_pod(lw, cluster, namespace, work, "python3", "pod_looper.py",
                     sets=("kubernetes.cpu=64", "kubernetes.start_timeout=10m"))  # no node has 64 CPUs to give
    name = wait_for(lambda: (lw.status(sid).get("pod") or {}).get("pod"), timeout=60, what="its pod to be made")
    assert lw.status(sid)["state"] == "starting"
    assert lw.cli("kill", sid).returncode == 0
    snap = lw.wait_state(sid, "exited", "terminated", timeout=60)  # not after kubernetes.start_timeout
    assert "its start was called off" in str([e["data"] for e in lw.events(sid)])
    assert snap["pod"]["node"] is None
    wait_for(lambda: not pod_exists(cluster, namespace, name), timeout=60, what=f"pod {name} deleted")


def kill_daemon(lw: Harness) -> None:
    assert lw.daemon is not None
    os.kill(lw.daemon.pid, signal.SIGKILL)  # nothing of it gets another word in
    lw.daemon.wait(30)


def test_the_next_daemon_takes_up_a_pod_session_a_dead_one_left_as_it_was(lw: Harness, cluster: Cluster,
                                                                           namespace: str, tmp_path: Path) -> None:
    """A daemon killed -9 under a session paused in its pod: the keeper there holds the agent, and the next daemon
    reaches that keeper again through the API and takes the session up where the store ends, still paused; resumed,
    it calls on, judged; killed, its pod is deleted."""
    mark = f"mark-{secrets.token_hex(4)}"
    sid = run_poller(lw, cluster, namespace, tmp_path, mark)
    pod = pod_of(lw, sid)
    wait_for(lambda: lw.status(sid)["tool_calls"] >= 3, timeout=60, what="the agent to call")
    [agent] = wait_for(lambda: processes_with(mark), timeout=30, what="the agent's process on the node")
    assert lw.cli("pause", sid).returncode == 0
    wait_for(lambda: agent.status() == psutil.STATUS_STOPPED, timeout=30, what="the agent stopped")
    calls = lw.status(sid)["tool_calls"]
    kill_daemon(lw)
    lw.start()
    snap = lw.wait_state(sid, "paused", timeout=90)  # never lost, and paused as it was left (its keeper says so)
    assert snap["pod"]["pod"] == pod["pod"] and snap["pod"]["node"] == cluster.node, snap["pod"]
    assert snap["tool_calls"] == calls and agent.is_running() and agent.status() == psutil.STATUS_STOPPED
    assert lw.cli("resume", sid).returncode == 0
    wait_for(lambda: lw.status(sid)["tool_calls"] > calls + 2, timeout=60, what="the agent to call on, judged")
    assert lw.status(sid)["state"] == "running"
    assert lw.cli("kill", sid).returncode == 0
    assert lw.wait_state(sid, "terminated", timeout=60)["termination"] == "operator"
    wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60, what="its pod deleted")
    wait_for(lambda: not processes_with(mark), timeout=60, what="the agent ended")


def test_restart_daemon_hands_a_pod_session_to_the_next_daemon(lw: Harness, cluster: Cluster, namespace: str,
                                                                tmp_path: Path) -> None:
    """restart-daemon leaves a session in a pod to its keeper there, and the next daemon takes it up: the same pod,
    its agent calling on, judged; a kill then deletes the pod."""
    sid = run_poller(lw, cluster, namespace, tmp_path)
    pod = pod_of(lw, sid)
    wait_for(lambda: lw.status(sid)["tool_calls"] >= 3, timeout=60, what="the agent to call")
    old = lw.request("ping")["pid"]
    done = lw.cli("restart-daemon", "--yes", timeout=300)
    assert done.returncode == 0 and "1 kept sessions taken up" in done.stdout, (done.stdout, done.stderr)
    assert lw.request("ping")["pid"] != old
    snap = lw.wait_state(sid, "running", timeout=90)
    assert snap["pod"]["pod"] == pod["pod"], snap["pod"]
    calls = snap["tool_calls"]
    wait_for(lambda: lw.status(sid)["tool_calls"] > calls + 2, timeout=60, what="the agent to call on, judged")
    assert lw.cli("kill", sid).returncode == 0
    lw.wait_state(sid, "terminated", timeout=60)
    wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60, what="its pod deleted")


def test_a_pod_deleted_while_no_daemon_watched_is_lost_saying_so(lw: Harness, cluster: Cluster, namespace: str,
                                                                 tmp_path: Path) -> None:
    """A daemon killed -9 under a pod session, whose pod is then deleted: the next daemon cannot take it up, marks it
    lost saying why, and starts without waiting on it."""
    sid = run_poller(lw, cluster, namespace, tmp_path)
    pod = pod_of(lw, sid)
    wait_for(lambda: lw.status(sid)["tool_calls"] >= 2, timeout=60, what="the agent to call")  # so, it is stored
    kill_daemon(lw)
    assert pod_exists(cluster, namespace, pod["pod"]), "the keeper holds the agent in its pod meanwhile"
    delete_pod(cluster, namespace, pod["pod"])
    wait_for(lambda: not pod_exists(cluster, namespace, pod["pod"]), timeout=60, what="the pod deleted")
    lw.start()
    snap = lw.wait_state(sid, "lost", timeout=90)
    said = snap["termination_text"]
    assert pod["pod"] in said and "daemon died" in said and "could not take it up" in said \
        and "was deleted meanwhile" in said, said


def test_an_agent_in_a_pod_writes_more_than_its_keeper_holds_and_nothing_stalls(
        lw: Harness, cluster: Cluster, namespace: str, tmp_path: Path) -> None:
    work = workdir(tmp_path)
    lines = 120_000  # 12 MiB of output: past the 8 MiB a keeper holds until it is told what is stored
    (work / "writer.py").write_text("import sys\n"
                                    f"for i in range({lines}):\n"
                                    "    sys.stdout.write(f'line {i:08d} ' + 'x' * 90 + '\\n')\n")
    sid = run_in_pod(lw, cluster, namespace, work, "python3", "writer.py", adapter="plain")
    snap = lw.wait_state(sid, "exited", timeout=120)
    assert snap["exit_code"] == 0, snap
    page = lw.request("logs", session=sid, tail=True, limit=5)
    assert f"line {lines - 1:08d}" in str(page["events"]), "its last line was read and stored"
