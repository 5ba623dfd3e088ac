"""An agent supervised here cannot decide a gate on another host: the host's daemon sees only sshd, so this
machine's daemon judges the CLI's process first (its sessions' claims, descent, a session's mark up its
ancestry), and with no daemon here, the CLI itself (a daemon of any profile among its ancestors)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from loopwarden.runtime.procfs import read_stat
from tests.hosts.sshd_harness import Box
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

APPROVER = str(AGENTS / "host_approver.py")


def remote_gate(box: Box) -> str:
    sid = box.remote.scenario("gate_request")
    box.remote.wait_state(sid, "gated")
    return f"{sid}:{box.remote.status(sid)['pending_gates'][0]}"


def marked_approve(lw: Harness, box: Box, ref: str, mark: str) -> subprocess.CompletedProcess[str]:
    """`--host approve` with the mark cleared, run by a shell that carries `mark` (outside the daemon's tree)."""
    env = {**lw.env, "LOOPWARDEN_SESSION": mark}
    script = f'env -u LOOPWARDEN_SESSION {PY} -m loopwarden --host {box.host} approve {ref}; exit $?'
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)


def test_an_agent_that_clears_its_mark_cannot_approve_a_remote_gate(lw: Harness, box: Box, tmp_path: Path) -> None:
    ref = remote_gate(box)
    lw.env["LOOPWARDEN_SSH_COMMAND"] = box.ssh_command
    out = tmp_path / "agent.txt"
    # the agent clears its mark before it starts too: no process up its chain carries it, descent tells
    agent = lw.run_detached("env", "-u", "LOOPWARDEN_SESSION", PY, APPROVER, box.host, ref, str(out),
                            adapter="plain")
    lw.wait_state(agent, "exited")
    code, said = out.read_text().split("\n", 1)
    assert code != "0", said
    assert "refused: pid" in said and f"runs inside session {agent}" in said and "approved" not in said, said
    assert box.remote.status(ref.split(":")[0])["pending_gates"], "the remote gate was decided"
    # outside the daemon's tree, with the mark cleared only in the last step: the ancestor's mark refuses it
    daemon = lw.request("ping")["pid"]
    stat = read_stat(daemon)
    assert stat is not None
    refused = marked_approve(lw, box, ref, f"{agent}@{daemon}.{stat.start}")
    assert refused.returncode != 0 and "LOOPWARDEN_SESSION in its ancestor pid" in refused.stderr, refused.stderr
    assert box.remote.status(ref.split(":")[0])["pending_gates"]
    # near miss: a stale mark (its daemon no longer runs) is no session; the operator's approval goes through
    approved = marked_approve(lw, box, ref, f"{agent}@{daemon}.{stat.start + 1}")
    assert approved.returncode == 0 and approved.stdout.strip() == f"{ref} approved", approved.stderr
    wait_for(lambda: not box.remote.status(ref.split(":")[0])["pending_gates"], what="the gate decided")


def test_a_console_run_by_an_agent_cannot_approve_a_remote_gate(lw: Harness, box: Box, tmp_path: Path) -> None:
    ref = remote_gate(box)
    lw.env["LOOPWARDEN_SSH_COMMAND"] = box.ssh_command
    out = tmp_path / "console.txt"
    agent = lw.run_detached("env", "-u", "LOOPWARDEN_SESSION", PY, APPROVER, box.host, ref, str(out), "console",
                            adapter="plain")
    lw.wait_state(agent, "exited")
    code, said = out.read_text().split("\n", 1)
    assert code == "1" and f"runs inside session {agent}" in said, said
    assert box.remote.status(ref.split(":")[0])["pending_gates"], "the remote gate was decided"


def test_an_agent_that_points_loopwarden_home_elsewhere_is_still_refused(lw: Harness, box: Box,
                                                                          tmp_path: Path) -> None:
    ref = remote_gate(box)
    lw.env["LOOPWARDEN_SSH_COMMAND"] = box.ssh_command
    out = tmp_path / "agent.txt"
    elsewhere = tempfile.mkdtemp(prefix="lw-elsewhere-")  # no daemon there: descent is judged by the ancestry
    try:
        agent = lw.run_detached("env", "-u", "LOOPWARDEN_SESSION", f"LOOPWARDEN_HOME={elsewhere}", PY, APPROVER,
                                box.host, ref, str(out), adapter="plain")
        lw.wait_state(agent, "exited")
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
    code, said = out.read_text().split("\n", 1)
    assert code != "0" and "refused" in said and "descends from the loopwarden daemon" in said, said
    assert box.remote.status(ref.split(":")[0])["pending_gates"], "the remote gate was decided"
