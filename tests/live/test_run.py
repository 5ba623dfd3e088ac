"""Sessions as real processes: limits enforced live, exit codes, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import psutil
import pytest

from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.paths import AGENTS, PY
from tests.support.processes import gone
from tests.support.waiting import wait_for


def test_max_runtime_ends_a_sleeping_command_with_a_clear_reason_and_exit_code(lw: Harness) -> None:
    proc = lw.cli("run", "--set", "limits.max_runtime=2s", "--", PY, "-c", "import time; time.sleep(60)")
    assert proc.returncode == 10, proc.stderr
    assert "terminated(max_runtime)" in proc.stderr
    assert "max runtime exceeded (2s)" in proc.stderr
    [snap] = lw.request("list")
    assert snap["state"] == "terminated" and snap["termination"] == "max_runtime"


def test_an_agent_that_ignores_sigterm_and_forks_a_grandchild_leaves_nothing_behind(lw: Harness) -> None:
    sid = lw.run_detached(PY, str(AGENTS / "ignore_sigterm.py"),
                          sets=("limits.max_runtime=2s", "limits.kill_grace=0.2s"))
    texts = wait_for(lambda: [e["data"].get("text", "") for e in lw.events(sid)
                              if e["kind"] == "assistant_message" and "grandchild" in e["data"].get("text", "")],
                     what="the grandchild's pid")
    grandchild = int(texts[0].split()[-1])
    agent = lw.status(sid)["pid"]
    assert psutil.pid_exists(grandchild)
    snap = lw.wait_state(sid, "terminated")
    assert snap["termination"] == "max_runtime"
    wait_for(lambda: gone(grandchild) and gone(agent), timeout=10, what="the agent and its grandchild to be gone")


def test_the_exit_code_of_an_agent_that_finishes_is_its_own(lw: Harness) -> None:
    proc = lw.cli("run", "--adapter", "plain", "--", PY, "-c", "print('hi'); raise SystemExit(4)")
    assert proc.returncode == 4, proc.stderr
    assert "hi" in proc.stdout


def test_plain_adapter_stores_output_and_enforces_the_output_budget(lw: Harness) -> None:
    sid = lw.run_detached(PY, str(AGENTS / "plain_chatter.py"), "1000", "--interval", "0.01", adapter="plain",
                          sets=("limits.max_output_bytes=2KiB",))
    snap = lw.wait_state(sid, "terminated", "exited")
    assert snap["termination"] == "budget", snap
    events = lw.events(sid)
    assert {e["data"]["stream"] for e in events if e["kind"] == "output"} >= {"stdout", "stderr"}


def test_a_killed_client_leaves_the_session_running(lw: Harness) -> None:
    attached, snap = lw.attached("longrun", PY, "-c", "import time; time.sleep(60)")
    attached.send_signal(signal.SIGKILL)
    attached.wait(10)
    time.sleep(0.5)  # give a (wrong) daemon the chance to react to the hang-up; the assertion is on state
    assert lw.status(snap["id"])["state"] == "running"
    assert psutil.pid_exists(snap["pid"])
    lw.request("kill", session=snap["id"])
    lw.wait_state(snap["id"], "terminated")


def test_ctrl_c_detaches_without_stopping_the_session(lw: Harness) -> None:
    attached, snap = lw.attached("ctrlc", PY, "-c", "import time; time.sleep(60)")
    attached.send_signal(signal.SIGINT)
    _, err = attached.communicate(timeout=10)
    assert attached.returncode == 0
    assert b"detached" in err
    assert lw.status(snap["id"])["state"] == "running"


def test_pause_and_resume_stop_and_continue_the_process_group(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    pid = lw.wait_state(sid, "running")["pid"]
    assert lw.cli("pause", sid).returncode == 0
    wait_for(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, what="SIGSTOP")
    assert lw.status(sid)["state"] == "paused"
    assert lw.cli("resume", sid).returncode == 0
    wait_for(lambda: psutil.Process(pid).status() != psutil.STATUS_STOPPED, what="SIGCONT")
    lw.cli("kill", sid)
    lw.wait_state(sid, "terminated")


def test_adopt_watches_a_foreign_process_and_enforces_its_runtime(lw: Harness) -> None:
    victim = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"])
    try:
        proc = lw.cli("adopt", str(victim.pid), "--set", "limits.max_runtime=5s", "--set", "limits.kill_grace=0.2s")
        assert proc.returncode == 0, proc.stderr
        sid = proc.stdout.strip()
        for args, refused in ((("reset", sid), "has no loop counters to reset"),
                              (("inject", sid, "hi"), "(adopted) cannot receive text")):
            out = lw.cli(*args)  # asked of what it can do, not of its kind; nothing is audited as done
            assert out.returncode == 2 and refused in out.stderr, out.stderr
        snap = lw.wait_state(sid, "terminated")
        assert snap["termination"] == "max_runtime"
        assert snap["agent"] == "process" and snap["capabilities"] == []
        assert victim.wait(10) == -signal.SIGTERM
    finally:
        if victim.poll() is None:
            victim.kill()


def test_one_line_errors_for_unknown_sessions_and_missing_commands(lw: Harness) -> None:
    for args, expected in ((("status", "nosuch"), "no session 'nosuch'"),
                           (("approve", "s9:g1"), "no session 's9'"),
                           (("adopt", "1"), "refusing to adopt pid 1"),
                           (("adopt", str(os.getpid())), "it is the daemon, the calling shell or one of their parents"),
                           (("adopt", "999999999"), "no process 999999999")):
        proc = lw.cli(*args)
        assert proc.returncode == 2 and proc.stderr.startswith("loopwarden: error: ") and expected in proc.stderr
        assert proc.stderr.count("\n") == 1
    for command, expected in ((["/nonexistent/agent"], "cannot start '/nonexistent/agent': no such file"),
                              (["nosuchcmd-xyz"], "cannot start 'nosuchcmd-xyz': command not found"),
                              (["--sett", "x"], "cannot start '--sett': command not found "
                                                "(an option for loopwarden? put it before --)")):
        proc = lw.cli("run", "--", *command)
        assert proc.returncode == 127 and proc.stderr == f"loopwarden: error: {expected}\n"
    with lw.client() as client:  # other clients get the same refusal from the daemon
        try:
            client.request("run", spec={"command": ["nosuchcmd-xyz"]})
        except Exception as exc:  # noqa: BLE001
            assert "command not found" in str(exc)
        else:
            raise AssertionError("the daemon accepted a command that does not exist")
    assert lw.request("list") == []  # no session was created, no id used up


@pytest.mark.unkept
def test_the_daemon_dying_takes_its_agents_with_it_and_a_restart_marks_them_lost(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "import time; time.sleep(120)", adapter="plain")
    pid = lw.wait_state(sid, "running")["pid"]
    time.sleep(0.3)  # let the batch with the running state reach the store
    assert lw.daemon is not None
    os.kill(lw.daemon.pid, signal.SIGKILL)
    lw.daemon.wait(10)
    wait_for(lambda: gone(pid), timeout=15, what="the agent to die with its daemon")
    lw.start()
    snap = lw.status(sid)
    assert snap["state"] == "lost" and snap["termination"] == "lost"
    assert rules([]) == []


def test_session_ids_are_never_reused_across_daemon_restarts(lw: Harness) -> None:
    first = lw.run_detached("true", adapter="plain")
    lw.wait_state(first, "exited")
    assert lw.cli("stop-daemon").returncode == 0
    assert lw.daemon is not None
    lw.daemon.wait(20)
    lw.start()
    second = lw.run_detached("true", adapter="plain")
    assert second != first
    assert [s["id"] for s in lw.request("list")] == [first, second]


def test_stop_daemon_asks_first_and_ends_sessions_as_daemon_stopped_not_lost_nor_killed(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="sleeper")
    lw.wait_state(sid, "running")
    asked = lw.cli("stop-daemon")  # no terminal to ask on: refused, and nothing stops
    assert asked.returncode == 2
    assert asked.stderr == (f"loopwarden: error: 1 live session would stop with the daemon: {sid} (sleeper); "
                            "run 'loopwarden stop-daemon --yes' to stop them\n")
    assert lw.status(sid)["state"] == "running"
    proc = lw.cli("stop-daemon", "-y")
    assert proc.returncode == 0 and proc.stdout == "daemon stopped; 1 live session stopped with it\n"
    assert lw.daemon is not None
    lw.daemon.wait(20)
    again = lw.cli("stop-daemon")
    assert again.returncode == 0 and again.stdout == "no daemon is running\n"
    lw.start()
    snap = lw.status(sid)
    assert snap["state"] == "terminated" and snap["termination"] == "daemon_stopped"
    assert snap["termination_text"].startswith("session terminated: the daemon stopped")
    assert [v["rule"] for v in lw.verdicts(sid)] == ["daemon"]  # not "operator"


def test_a_bad_loopwarden_home_is_one_line(lw: Harness, tmp_path) -> None:  # type: ignore[no-untyped-def]
    afile = tmp_path / "afile"
    afile.write_text("x")
    proc = subprocess.run([PY, "-m", "loopwarden", "run", "-d", "--", "true"],  # a command that starts a daemon
                          env={**lw.env, "LOOPWARDEN_HOME": str(afile)}, capture_output=True, text=True, timeout=30,
                          check=False)
    assert proc.returncode == 3
    assert proc.stderr.startswith(f"loopwarden: error: cannot use LOOPWARDEN_HOME={afile}")
    assert proc.stderr.count("\n") == 1


def test_logs_show_the_newest_records_with_operator_actions_and_audit_lists_them(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "import time\nfor i in range(50): print(i, flush=True)\ntime.sleep(60)",
                          adapter="plain")
    wait_for(lambda: len(lw.events(sid)) >= 50, what="50 output lines")
    assert lw.cli("pause", sid, "--note", "coffee").returncode == 0
    logs = lw.cli("logs", "--limit", "5", sid).stdout
    assert "│ 49" in logs and "│ 0\n" not in logs
    assert "PAUSE by uid" in logs and "coffee" in logs
    audit = lw.cli("audit", sid).stdout
    assert " run " in audit and " pause " in audit and "why: coffee" in audit
    lw.cli("kill", sid)


def _stop_daemon_answering(lw: Harness, answer: bytes) -> tuple[str, int, bytes]:
    """`stop-daemon` on a terminal with one live session, answered `answer`: (session, exit code, what it showed)."""
    sid = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="sleeper")
    lw.wait_state(sid, "running")
    leader, follower = os.openpty()
    proc = subprocess.Popen([PY, "-m", "loopwarden", "stop-daemon"], env=lw.env, stdin=follower, stdout=follower,
                            stderr=follower, close_fds=True)
    os.close(follower)
    os.set_blocking(leader, False)
    shown = bytearray()

    def read() -> bytes:
        try:
            shown.extend(os.read(leader, 4096))
        except (BlockingIOError, OSError):  # OSError: the terminal closed with the process
            pass
        return bytes(shown)

    wait_for(lambda: b"[y/N]" in read(), what="the question")
    os.write(leader, answer)  # the answer a person types
    code = proc.wait(30)
    read()
    os.close(leader)
    assert f"Stop the daemon and 1 live session with it: {sid} (sleeper)? [y/N]".encode() in shown
    return sid, code, bytes(shown)


def test_stop_daemon_on_a_terminal_asks_and_a_no_keeps_everything_running(lw: Harness) -> None:
    sid, code, _ = _stop_daemon_answering(lw, b"n\n")
    assert code == 130
    assert lw.status(sid)["state"] == "running" and lw.daemon is not None and lw.daemon.poll() is None


def test_stop_daemon_on_a_terminal_answered_yes_stops_the_daemon_and_its_sessions(lw: Harness) -> None:
    _, code, shown = _stop_daemon_answering(lw, b"y\n")
    assert code == 0, shown.decode(errors="replace")
    assert b"daemon stopped; 1 live session stopped with it" in shown
    assert lw.daemon is not None and lw.daemon.wait(30) == 0
