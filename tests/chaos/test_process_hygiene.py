"""Shutdown and process hygiene (issue 10, item 8): nothing a session started outlives it, its daemon or
a dead guardian; shutdown has a cap; stop-daemon waits; bad requests and paths are one line."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from loopwarden.runtime.cgroups import DISABLE_ENV, own_cgroup
from loopwarden.runtime.client import DaemonError
from loopwarden.runtime.daemon import SHUTDOWN_CAP
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.processes import gone
from tests.support.waiting import wait_for

ESCAPER = str(AGENTS / "escaper.py")
IGNORE_SIGTERM = str(AGENTS / "ignore_sigterm.py")


def cgroups_usable() -> bool:
    parent = own_cgroup()
    return parent is not None and os.access(parent / "cgroup.procs", os.W_OK)


@pytest.fixture(params=["cgroup", "tracking"])
def contained(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A daemon finding sessions' processes by cgroup, or (forced) by /proc tracking and marks."""
    if request.param == "cgroup" and not cgroups_usable():
        pytest.skip("no writable cgroup v2 here")
    harness = Harness(tmp_path)
    if request.param == "tracking":
        harness.env[DISABLE_ENV] = "off"
    if request.node.get_closest_marker("unkept"):
        harness.not_keeping()
    harness.start()
    try:
        assert harness.request("ping")["containment"] == request.param
        yield harness
    finally:
        harness.stop()


def escapees(lw: Harness, sid: str) -> dict[str, int]:
    """The pids escaper.py printed: {"setsid": PID, "double": PID}."""
    def printed() -> dict[str, int] | None:
        found = {}
        for event in lw.events(sid):
            kind, _, pid = str(event["data"].get("text", "")).partition(" ")
            if event["kind"] == "output" and kind in ("setsid", "double"):
                found[kind] = int(pid)
        return found if len(found) == 2 else None
    return wait_for(printed, what="the escaped children's pids")


def guardian_of(daemon_pid: int) -> psutil.Process | None:
    for child in psutil.Process(daemon_pid).children():
        try:
            if "loopwarden.runtime.guardian" in " ".join(child.cmdline()) and child.status() != "zombie":
                return child
        except psutil.Error:
            continue
    return None


def containers(daemon_pid: int) -> list[Path]:
    parent = own_cgroup()
    return list(parent.glob(f"loopwarden-{daemon_pid}-*")) if parent else []


# ---- 1. the shutdown cap; stop-daemon waits; a stopping daemon starts nothing ------------------------

def test_shutdown_ends_within_its_cap_and_a_run_after_stop_daemon_goes_to_a_new_daemon(lw: Harness) -> None:
    sid = lw.run_detached(PY, IGNORE_SIGTERM, sets=("limits.kill_grace=60s",))
    texts = wait_for(lambda: [e["data"]["text"] for e in lw.events(sid) if "grandchild" in e["data"].get("text", "")],
                     what="the grandchild's pid")
    grandchild, agent = int(texts[0].split()[-1]), lw.status(sid)["pid"]
    assert lw.daemon is not None
    started = time.monotonic()
    proc = lw.cli("stop-daemon", "--yes")
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert lw.daemon.poll() is not None, "stop-daemon returned before the daemon exited"
    # capped, not waiting out kill_grace=60s: the bound sits well between the two, so that a busy machine's
    # slow CLI start cannot tip it
    assert took < (SHUTDOWN_CAP + 60) / 2, f"shutdown took {took:.1f}s with kill_grace=60s"
    assert gone(agent) and gone(grandchild)
    started_run = lw.cli("run", "-d", "--adapter", "plain", "--", PY, "-c", "import time; time.sleep(30)")
    try:
        assert started_run.returncode == 0, started_run.stderr
        new = started_run.stdout.strip()
        assert lw.request("ping")["pid"] != lw.daemon.pid
        snap = lw.wait_state(new, "running")
        assert psutil.pid_exists(snap["pid"])
        old = lw.status(sid)  # from the store, as the old daemon left it
        assert (old["state"], old["termination"]) == ("terminated", "daemon_stopped")
    finally:
        assert lw.cli("stop-daemon", "--yes").returncode == 0


def test_a_stopping_daemon_refuses_run_and_adopt_in_one_line(lw: Harness) -> None:
    sid = lw.run_detached(PY, IGNORE_SIGTERM, sets=("limits.kill_grace=3s",))
    lw.wait_state(sid, "running")
    sleeper = subprocess.Popen([PY, "-c", "import time; time.sleep(30)"])
    try:
        with lw.client() as client:
            client.request("shutdown")
        for op, fields in (("run", {"spec": {"command": [PY, "-c", "pass"], "adapter": "plain"}}),
                           ("adopt", {"pid": sleeper.pid})):
            with pytest.raises(DaemonError) as refused:
                lw.request(op, **fields)
            assert "shutting down" in str(refused.value) and "\n" not in str(refused.value)
        assert lw.daemon is not None
        lw.daemon.wait(SHUTDOWN_CAP + 30)  # a deadline for the exit, with room for a busy machine
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sleeper.returncode == -signal.SIGKILL  # never adopted, so never killed by the daemon


# ---- 2. a dead guardian is noticed, replaced and told everything -------------------------------------

@pytest.mark.unkept
def test_a_killed_guardian_is_replaced_and_the_agents_still_die_with_the_daemon(contained: Harness) -> None:
    lw = contained
    assert lw.daemon is not None
    sid = lw.run_detached(PY, ESCAPER, adapter="plain", sets=("limits.kill_grace=0.3s",))
    escaped = escapees(lw, sid)
    agent = lw.status(sid)["pid"]
    first = wait_for(lambda: guardian_of(lw.daemon.pid), what="the guardian")
    first.kill()
    second = wait_for(lambda: (g := guardian_of(lw.daemon.pid)) is not None and g.pid != first.pid and g,
                      timeout=10, what="a new guardian")
    assert lw.request("ping")["guardian"] == {"pid": second.pid, "restarts": 1}
    assert f"guardian {first.pid} died (killed by signal 9)" in (lw.home / "daemon.out").read_text()
    daemon = psutil.Process(lw.daemon.pid)
    cpu = sum(daemon.cpu_times()[:2])
    time.sleep(2.0)  # idle: watching the guardian must cost nothing (a pidfd, no polling)
    assert sum(daemon.cpu_times()[:2]) - cpu < 0.2
    os.kill(lw.daemon.pid, signal.SIGKILL)
    lw.daemon.wait(10)
    wait_for(lambda: gone(agent) and all(gone(pid) for pid in escaped.values()), timeout=15,
             what="the agent and its escaped children to die with the daemon")


# ---- 3. setsid and double-forked children end with their session, on both paths ----------------------

@pytest.mark.parametrize("ending", ["kill", "exit", pytest.param("daemon_sigkill", marks=pytest.mark.unkept)])
def test_setsid_and_double_forked_children_end_with_their_session(contained: Harness, ending: str) -> None:
    lw = contained
    assert lw.daemon is not None
    daemon_pid = lw.daemon.pid
    args = (ESCAPER, "--exit") if ending == "exit" else (ESCAPER,)
    sid = lw.run_detached(PY, *args, adapter="plain", sets=("limits.kill_grace=0.3s",))
    escaped = escapees(lw, sid)
    assert all(not gone(pid) for pid in escaped.values()) or ending == "exit"
    if ending == "kill":
        lw.request("kill", session=sid)
        lw.wait_state(sid, "terminated", timeout=10)
    elif ending == "exit":
        assert lw.wait_state(sid, "exited", timeout=10)["exit_code"] == 0
    else:
        os.kill(daemon_pid, signal.SIGKILL)
        lw.daemon.wait(10)
    timeout = 12 if ending == "daemon_sigkill" else 5  # the guardian's grace is 5 s
    wait_for(lambda: all(gone(pid) for pid in escaped.values()), timeout=timeout,
             what=f"the setsid and double-forked children to be gone after {ending}")
    if ending != "daemon_sigkill" and lw.request("ping")["containment"] == "cgroup":
        [container] = containers(daemon_pid)
        wait_for(lambda: not (container / sid).exists(), timeout=5, what="the session's cgroup to be removed")
    if ending == "daemon_sigkill":
        wait_for(lambda: not containers(daemon_pid), timeout=10, what="the guardian to remove the cgroups")


# ---- 4. per-session spill settings ---------------------------------------------------------------------

@pytest.mark.parametrize("restart", [False, True])
def test_a_sessions_own_spill_dir_and_retention_are_honoured(lw: Harness, tmp_path: Path, restart: bool) -> None:
    custom = tmp_path / "my-spills"
    custom.mkdir(mode=0o700)
    stranger = custom / "s99-0000001-read.txt"  # a file of a session nobody remembers: the daemon's 24 h apply
    stranger.write_text("x")
    os.utime(stranger, (time.time() - 60, time.time() - 60))
    sid = lw.scenario("huge_output", f"spill.dir={custom}", "spill.retention=5s")
    lw.wait_state(sid, "exited")
    [spill] = [v for v in lw.verdicts(sid) if v["action"] == "spill"]
    path = Path(spill["evidence"]["path"])
    assert path.parent == custom
    if restart:  # a new daemon knows the session's spill settings from the store
        assert lw.cli("stop-daemon").returncode == 0
        assert path.exists()
        lw.start()
    wait_for(lambda: not path.exists(), timeout=15, what="the spill file to go after its session's 5 s")
    assert stranger.exists()


# ---- 5. the socket is never in a shared place --------------------------------------------------------

def test_a_socket_path_too_long_is_refused_in_one_line_by_every_command(tmp_path: Path) -> None:
    home = tmp_path / ("deep-" * 20)
    env = {**os.environ, "LOOPWARDEN_HOME": str(home)}
    for args in (["serve"], ["ls"], ["run", "-d", "--", "true"], ["status"], ["stop-daemon"], ["console"]):
        proc = subprocess.run([PY, "-m", "loopwarden", *args], env=env, capture_output=True, text=True,
                              timeout=20, check=False)
        assert proc.returncode in (1, 3), (args, proc.returncode, proc.stderr)
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert "set a shorter LOOPWARDEN_HOME" in proc.stderr, (args, proc.stderr)
    runtime = (home / "run").resolve()
    shared = Path("/tmp") / f"loopwarden-{os.getuid()}-{hashlib.sha256(os.fsencode(runtime)).hexdigest()[:12]}"
    assert not shared.exists()


# ---- 6. bad request fields ---------------------------------------------------------------------------

RUN = {"command": [PY, "-c", "pass"], "adapter": "plain"}
BAD_RUNS = [
    ({"spec": "x"}, "spec"),
    ({"spec": {**RUN, "command": "ls"}}, "command"),
    ({"spec": {**RUN, "command": [1]}}, "command"),
    ({"spec": {**RUN, "command": ["a\0b"]}}, "NUL"),
    ({"spec": {**RUN, "cwd": 5}}, "cwd"),
    ({"spec": {**RUN, "cwd": "relative/dir"}}, "absolute"),
    ({"spec": {**RUN, "cwd": "/nonexistent-dir"}}, "not a directory"),
    ({"spec": {**RUN, "env": ["A=1"]}}, "env"),
    ({"spec": {**RUN, "env": {"A": 1}}}, "env"),
    ({"spec": {**RUN, "env": {"A=B": "1"}}}, "variable name"),
    ({"spec": {**RUN, "name": 5}}, "name"),
    ({"spec": {**RUN, "name": "two\nlines"}}, "printable"),
    ({"spec": {**RUN, "adapter": 5}}, "adapter"),
    ({"spec": {**RUN, "adapter": "nope"}}, "unknown adapter"),
    ({"spec": {**RUN, "sets": "limits.max_runtime=1s"}}, "sets"),
    ({"spec": {**RUN, "sets": [5]}}, "sets"),
    ({"spec": {**RUN, "preset": 5}}, "preset"),
    ({"spec": {**RUN, "preset": "nope"}}, "preset"),
    ({"spec": {**RUN, "task": {"id": 1}}}, "task"),
    ({"spec": {**RUN, "config_file": 5}}, "config_file"),
    ({"spec": {**RUN, "config_file": "relative.toml"}}, "absolute"),
    ({"spec": {**RUN, "config_env": {"LOOPWARDEN_X": 1}}}, "config_env"),
]
BAD_ADOPTS = [({"pid": "12"}, "process id"), ({"pid": -1}, "process id"), ({"pid": True}, "process id"),
              ({"pid": 2 ** 40}, "process id"), ({"pid": 1, "name": 5}, "name"), ({"pid": 1, "sets": "x"}, "sets"),
              ({"pid": 1, "preset": 5}, "preset")]


def test_bad_run_and_adopt_fields_are_refused_in_one_line(lw: Harness) -> None:
    for op, cases in (("run", BAD_RUNS), ("adopt", BAD_ADOPTS)):
        for fields, word in cases:
            with pytest.raises(DaemonError) as refused:
                lw.request(op, **fields)
            message = str(refused.value)
            assert word in message and "\n" not in message and "internal error" not in message, (fields, message)
    assert lw.request("list") == []  # nothing was half-started


# ---- 7. exit codes -----------------------------------------------------------------------------------

@pytest.mark.unkept
def test_an_attached_run_exits_19_when_its_daemon_dies_and_the_other_codes_hold(lw: Harness) -> None:
    killed, snap = lw.attached("killed", PY, "-c", "import time; time.sleep(60)")
    lw.request("kill", session=snap["id"])
    assert killed.wait(15) == 17  # operator
    doomed, snap = lw.attached("doomed", PY, "-c", "import time; time.sleep(60)")
    assert lw.daemon is not None
    os.kill(lw.daemon.pid, signal.SIGKILL)
    lw.daemon.wait(10)
    _, err = doomed.communicate(timeout=20)
    assert doomed.returncode == 19, err
    assert err.decode().splitlines()[-1].startswith(f"loopwarden: session {snap['id']} lost: ")
    assert b"Traceback" not in err
    wait_for(lambda: gone(snap["pid"]), timeout=15, what="the agent to die with its daemon")
    lw.start()
    assert lw.cli("run", "--adapter", "nope", "--", "true").returncode == 2  # usage
    assert lw.cli("status", "no-such-session").returncode == 2  # the daemon's refusal: a wrong request
    assert lw.cli("run", "--", "/nonexistent/agent").returncode == 127  # cannot start
