"""Defects a review reproduced against a real daemon; each test failed before its fix."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import psutil

from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.processes import gone
from tests.support.waiting import wait_for


def test_a_subscriber_hanging_up_mid_flood_does_not_take_the_daemon_down(lw: Harness) -> None:
    sid = lw.run_detached("sh", "-c", "while :; do echo line; done", adapter="plain")
    lw.wait_state(sid, "running")
    attached = subprocess.Popen([PY, "-m", "loopwarden", "logs", "-f", sid], env=lw.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)  # let the follower receive some of the flood; the assertions below are on state
    attached.send_signal(signal.SIGINT)
    attached.wait(10)
    assert lw.request("ping")["pid"] == lw.daemon.pid  # type: ignore[union-attr]
    assert lw.status(sid)["state"] == "running"
    lw.request("kill", session=sid)
    lw.wait_state(sid, "terminated")


def test_following_an_unknown_session_is_an_error_reply_not_a_dead_daemon(lw: Harness) -> None:
    proc = lw.cli("logs", "-f", "no-such-session")
    assert proc.returncode == 2 and "no session 'no-such-session'" in proc.stderr
    assert lw.request("ping")["sessions"] == 0


def test_a_type_that_is_not_a_string_is_a_validation_failure_live_and_offline(lw: Harness) -> None:
    script = ("import sys,time\nprint('{\"type\":{}}', flush=True)\nprint('{\"type\":[1]}', flush=True)\n"
              "time.sleep(60)")
    sid = lw.run_detached(PY, "-c", script, sets=("limits.max_runtime=2s",))
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "max_runtime" and snap["validation_failures"] == 2
    wait_for(lambda: gone(snap["pid"]), what="the agent to be gone")
    replay = subprocess.run([PY, "-m", "loopwarden", "replay", "-"], input=b'{"type":{}}\n', env=lw.env,
                            capture_output=True, timeout=30, check=False)
    assert replay.returncode == 0 and b"Traceback" not in replay.stderr


def test_stderr_output_counts_against_the_budget_and_is_enforced(lw: Harness) -> None:
    sid = lw.run_detached("sh", "-c", "while :; do echo noise >&2; sleep 0.01; done", adapter="plain",
                          sets=("limits.max_output_bytes=1000",))
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "budget"
    wait_for(lambda: gone(snap["pid"]), what="the agent to be gone")


def test_an_expired_gate_releases_the_held_verdict(lw: Harness) -> None:
    sid = lw.scenario("gate_request", "gates.timeout=1s", "gates.on_timeout=approve")
    snap = lw.wait_state(sid, "exited", timeout=30)
    assert snap["exit_code"] == 0
    gates = [g for g in lw.request("logs", session=sid)["verdicts"] if g["action"] == "gate"]
    assert gates
    assert lw.request("gates") == []


def test_a_kill_while_starting_is_not_lost(lw: Harness) -> None:
    with lw.client() as a:
        started = a.request("run", spec={"command": [PY, "-c", "import time; time.sleep(60)"],
                                         "adapter": "plain", "env": dict(os.environ)})
        a.request("kill", session=started["id"])
    snap = lw.wait_state(started["id"], "terminated", timeout=20)
    assert snap["termination"] == "operator"


def test_a_later_kill_does_not_overwrite_the_termination_reason(lw: Harness) -> None:
    from tests.support.paths import AGENTS

    sid = lw.run_detached(PY, str(AGENTS / "ignore_sigterm.py"), sets=("limits.max_runtime=1s",
                                                                        "limits.kill_grace=2s"))
    wait_for(lambda: lw.status(sid)["state"] == "stopping", what="the runtime stop")
    lw.cli("kill", sid)
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "max_runtime"
    assert [v["termination"] for v in lw.verdicts(sid) if v["action"] == "terminate"] == ["max_runtime"]


def test_agents_get_the_clients_environment_not_the_daemons(lw: Harness) -> None:
    leaky = subprocess.run([PY, "-m", "loopwarden", "ls"], env={**lw.env, "DEPLOY_TOKEN": "s3cr3t"},
                           capture_output=True, timeout=30, check=False)
    assert leaky.returncode == 0
    env = {k: v for k, v in lw.env.items() if k != "DEPLOY_TOKEN"}
    proc = subprocess.run([PY, "-m", "loopwarden", "run", "--adapter", "plain", "--", "sh", "-c",
                           'echo "token=[$DEPLOY_TOKEN]"'], env=env, capture_output=True, text=True,
                          timeout=30, check=False)
    assert "token=[]" in proc.stdout


def test_an_agent_leaving_a_chatty_background_child_still_finishes(lw: Harness) -> None:
    sid = lw.run_detached("sh", "-c", "(while :; do echo bg; sleep .2; done) & sleep 0.5; exit 0",
                          adapter="plain")
    snap = lw.wait_state(sid, "exited", timeout=20)
    assert snap["exit_code"] == 0


def test_many_quick_agents_keep_their_exit_codes_while_the_reaper_works(lw: Harness) -> None:
    stopper = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(stopper, "running")
    lw.request("kill", session=stopper)  # the reaper runs while the others start and exit
    # `run` requests on the socket, not 25 CLI processes: the quick agents start and exit together while it works
    sids = [lw.launch("sh", "-c", "exit 3", adapter="plain") for _ in range(25)]
    codes = [lw.wait_state(sid, "exited")["exit_code"] for sid in sids]
    assert codes == [3] * 25


def test_idle_connections_beyond_the_fd_limit_do_not_kill_the_daemon(lw: Harness) -> None:
    soft, _ = 256, None
    assert lw.daemon is not None
    psutil.Process(lw.daemon.pid).rlimit(psutil.RLIMIT_NOFILE, (soft, soft))
    socks = []
    try:
        for _ in range(400):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(str(lw.paths.socket))
            except OSError:
                s.close()
                break
            socks.append(s)
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: _pings(lw), timeout=15, what="the daemon to answer again")
    assert lw.daemon.poll() is None


def _pings(lw: Harness) -> bool:
    try:
        return bool(lw.request("ping"))
    except Exception:  # noqa: BLE001
        return False


def test_a_handshake_agent_with_a_result_over_the_line_limit_gets_an_answer(lw: Harness) -> None:
    from tests.support.paths import AGENTS

    sid = lw.run_detached(PY, str(AGENTS / "oversized_result.py"), "1500000", str(lw.paths.database))
    snap = lw.wait_state(sid, "exited", timeout=30)
    assert snap["exit_code"] == 0 and snap["validation_failures"] == 1
    texts = [e["data"].get("text", "") for e in lw.events(sid) if e["kind"] == "assistant_message"]
    assert texts and texts[0].startswith("got spill for c1: Tool response too large (1,500,0")
    assert texts[0].endswith("(invalid lines stored: 1)")  # the answer waited for its event (write ahead)
