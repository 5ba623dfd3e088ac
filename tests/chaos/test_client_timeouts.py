"""A stopped daemon (SIGSTOP) costs every client one line within its bound, never a hang (issue 29, item 5).

The daemon keeps its socket open while stopped, and the kernel still accepts connections on it, so
only a bound on each reply (LOOPWARDEN_TIMEOUT, small here) and a heartbeat on subscriptions
(LOOPWARDEN_HEARTBEAT, in the daemon's environment) can tell it from a quiet one. Every test stops
a real daemon and resumes it in a `finally`; a client that hangs fails an assertion when its
subprocess deadline passes, not the suite.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import orjson
import pytest

from loopwarden.paths import HOME_ENV, default_paths
from loopwarden.runtime.client import Client, DaemonError
from tests.console.helpers import RecordingConsole, cell, status_text, until
from tests.hosts.conftest import box, remote  # noqa: F401 - a real sshd in front of a second daemon
from tests.hosts.sshd_harness import Box
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for

TIMEOUT_ENV = "LOOPWARDEN_TIMEOUT"  # spelled out (not imported) so that this file fails by assertion on a loopwarden
HEARTBEAT_ENV = "LOOPWARDEN_HEARTBEAT"  # without them, as each test must, rather than at import
TIMEOUT = 2.0  # LOOPWARDEN_TIMEOUT of the clients under test
BEAT = 0.25  # LOOPWARDEN_HEARTBEAT of the daemon: a subscription's silence bound is then max(2, 3 x 0.25) s
LIMIT = 25.0  # seconds a command may take in all: its bound, and a Python start on a loaded machine
SLEEPER = (PY, "-c", "import time; time.sleep(120)")


@pytest.fixture
def lw(tmp_path: Path) -> Iterator[Harness]:
    """The real daemon, with a quick heartbeat."""
    harness = Harness(tmp_path)
    harness.env[HEARTBEAT_ENV] = str(BEAT)
    with harness:
        yield harness


def process_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2]


@contextmanager
def stopped(lw: Harness) -> Iterator[int]:
    """The daemon stopped with SIGSTOP (its pid given), resumed with SIGCONT however the block ends."""
    assert lw.daemon is not None
    pid = lw.daemon.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: process_state(pid) == "T", what="the daemon to be stopped")
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


def client_env(lw: Harness) -> dict[str, str]:
    return {**lw.env, TIMEOUT_ENV: str(TIMEOUT)}


def cli(lw: Harness, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """`loopwarden ARGS` with the small timeout: what it did, and how long it took."""
    start = time.monotonic()
    try:
        done = subprocess.run([PY, "-m", "loopwarden", *args], env=client_env(lw), capture_output=True, text=True,
                              timeout=LIMIT, check=False)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"loopwarden {' '.join(args)} hung: still waiting on the stopped daemon after "
                             f"{LIMIT:g}s") from None
    return done, time.monotonic() - start


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("loopwarden: error:")]


class Lines:
    """What a process writes to one pipe, read by a thread as it comes."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        assert pipe is not None
        self.text = ""
        threading.Thread(target=self._read, args=(pipe,), daemon=True).start()

    def _read(self, pipe: IO[bytes]) -> None:
        for line in pipe:
            self.text += line.decode(errors="replace")


def ended_within(proc: subprocess.Popen[bytes], what: str) -> tuple[int, float]:
    """(exit code, seconds) of a process expected to give up on the stopped daemon by itself."""
    start = time.monotonic()
    try:
        code = proc.wait(LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"{what} hung: still following the stopped daemon after {LIMIT:g}s") from None
    return code, time.monotonic() - start


@pytest.mark.parametrize("args", [("ls",), ("status",), ("status", "s1"), ("gates",), ("logs", "s1"),
                                  ("pause", "s1"), ("stop-daemon", "--yes")],
                         ids=lambda a: "-".join(a))
def test_a_command_gives_up_on_a_stopped_daemon_in_one_line(lw: Harness, args: tuple[str, ...]) -> None:
    sid = lw.launch(*SLEEPER, adapter="plain")
    lw.wait_state(sid, "running")
    with stopped(lw) as pid:
        done, took = cli(lw, *args)
    assert done.returncode == 3, done.stderr
    [line] = error_lines(done.stderr)
    said = f"loopwarden: error: the daemon (pid {pid}) did not answer within 2s: it is stopped; 'kill -CONT {pid}' "
    assert line.startswith(said + "resumes it"), line
    assert took < LIMIT
    # resumed, it answers again, and an operator action it had not read was dropped, not carried out
    snap = wait_for(lambda: lw.status(sid), what="the daemon to answer again")
    assert snap["state"] == "running"
    if args[0] in ("pause", "stop-daemon"):
        assert line.endswith("; this request is dropped, not carried out, if it had not read it yet"), line
        audit = wait_for(lambda: [a for a in lw.request("actions") if "gave up waiting" in str(a["outcome"])],
                         what="the dropped request in the audit log")
        assert [a["action"] for a in audit] == [args[0]]
        assert lw.request("ping")["pid"] == pid  # stop-daemon too: still the same daemon, still running


def test_a_host_whose_daemon_is_stopped_is_one_line_naming_the_host(lw: Harness, box: Box) -> None:  # noqa: F811
    sid = box.remote.launch(*SLEEPER, adapter="plain")
    box.remote.wait_state(sid, "running")
    lw.env["LOOPWARDEN_SSH_COMMAND"] = box.ssh_command
    with stopped(box.remote):
        done, _ = cli(lw, "--host", box.host, "ls")
    assert done.returncode == 3, done.stderr
    assert error_lines(done.stderr) == [f"loopwarden: error: host {box.host}'s daemon did not answer within 2s: it, or "
                                        "the ssh connection to it, is stopped, stuck or overloaded (LOOPWARDEN_TIMEOUT"
                                        "=SECONDS waits longer)"]


def test_run_against_a_stopped_daemon_starts_nothing_then_or_later(lw: Harness) -> None:
    with stopped(lw) as pid:
        done, _ = cli(lw, "run", "--adapter", "plain", "--", *SLEEPER)
    assert done.returncode == 3, done.stderr
    [line] = error_lines(done.stderr)
    assert f"the daemon (pid {pid}) did not answer within 2s: it is stopped" in line
    assert line.endswith("; this request is dropped, not carried out, if it had not read it yet"), line
    wait_for(lambda: [a for a in lw.request("actions") if a["action"] == "run"], what="the dropped run audited")
    assert lw.request("list") == []  # resumed, it did not start the session the user was told had failed


def test_logs_follow_gives_up_when_the_daemon_stops_sending_even_heartbeats(lw: Harness) -> None:
    sid = lw.launch(*SLEEPER, adapter="plain", name="quiet")
    lw.wait_state(sid, "running")
    follow = subprocess.Popen([PY, "-m", "loopwarden", "logs", "-f", sid], env=client_env(lw),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = Lines(follow.stdout), Lines(follow.stderr)
    try:
        wait_for(lambda: "RUN" in out.text, what="logs -f to print the stored records")
        wait_for(lambda: lw.request("ping")["subscribers"] == 1, what="logs -f to subscribe")
        time.sleep(1.5 * TIMEOUT)  # a quiet session on a healthy daemon, past the bound: it keeps following
        assert follow.poll() is None, err.text
        with stopped(lw) as pid:
            code, took = ended_within(follow, "logs -f")
    finally:
        if follow.poll() is None:
            follow.kill()
    wait_for(lambda: "error" in err.text, what="the error line")
    assert code == 3, err.text
    [line] = error_lines(err.text)
    assert line == (f"loopwarden: error: the daemon (pid {pid}) sent nothing for 2s, not even its heartbeat: it is "
                    f"stopped; 'kill -CONT {pid}' resumes it")
    assert took < 2 * TIMEOUT + 5


def test_run_following_a_session_gives_up_when_the_daemon_stops(lw: Harness) -> None:
    run = subprocess.Popen([PY, "-m", "loopwarden", "run", "--adapter", "plain", "--", *SLEEPER], env=client_env(lw),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err, out = Lines(run.stderr), Lines(run.stdout)
    try:
        wait_for(lambda: "RUN" in out.text, what="run to print what was stored before it subscribed")
        wait_for(lambda: lw.request("ping")["subscribers"] == 1, what="run to subscribe")
        with stopped(lw) as pid:
            code, _ = ended_within(run, "run following a session")
    finally:
        if run.poll() is None:
            run.kill()
    wait_for(lambda: "error" in err.text, what="the error line")
    assert code == 3, err.text  # the daemon is there, silent: not "lost" (19), which says it died
    [line] = error_lines(err.text)
    assert line == (f"loopwarden: error: the daemon (pid {pid}) sent nothing for 2s, not even its heartbeat: it is "
                    f"stopped; 'kill -CONT {pid}' resumes it; stopped following session s1 (loopwarden logs -f s1 "
                    "follows it again)")
    assert lw.status("s1")["state"] == "running"  # resumed: the session went on, unwatched


def attempt(app: RecordingConsole) -> int:
    found = re.search(r"\(attempt (\d+)\)", status_text(app))
    return int(found.group(1)) if found else 0


def started_beside(lw: Harness) -> bool:
    """Whether a daemon was started beside the harness's own: one started by a client logs to daemon.log (where
    the keeper the harness's daemon started also writes)."""
    log = lw.paths.daemon_log
    return log.exists() and " listening on " in log.read_text()


@pytest.mark.anyio
async def test_the_console_says_a_stopped_daemon_is_not_answering_and_attaches_again_once_resumed(
        lw: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, str(TIMEOUT))
    sid = lw.launch(*SLEEPER, adapter="plain")
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths)  # autostart, as `loopwarden` itself: it must not start a second daemon
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: app.feed.connected and cell(app, sid, "state") == "running", what="the row")
        with stopped(lw) as pid:
            gone = f"daemon not answering (pid {pid} is stopped: kill -CONT {pid}) — reconnecting (attempt"
            await until(pilot, lambda: gone in status_text(app), what="the status line to say the daemon is silent")
            assert not app.feed.connected
            await until(pilot, lambda: attempt(app) >= 2, what="a reconnection attempt on a new connection, "
                                                                 "also unanswered")
            assert gone in status_text(app)
        await until(pilot, lambda: app.feed.connected and "reconnected" in status_text(app),
                    what="the console to attach again once resumed")
        assert any("reconnected to the daemon" in n for n in app.notices)
        assert cell(app, sid, "state") == "running"
    assert not started_beside(lw)
    assert lw.request("ping")["pid"] == pid


@pytest.mark.anyio
async def test_a_console_opened_on_a_stopped_daemon_waits_for_it_without_starting_another(
        lw: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, str(TIMEOUT))
    sid = lw.launch(*SLEEPER, adapter="plain")
    lw.wait_state(sid, "running")
    app = RecordingConsole(lw.paths)
    with stopped(lw) as pid:
        async with app.run_test(size=(160, 40)) as pilot:
            said = f"daemon not answering (pid {pid} is stopped: kill -CONT {pid}) — retrying (attempt"
            await until(pilot, lambda: said in status_text(app), what="the status line to say why")
            os.kill(pid, signal.SIGCONT)
            await until(pilot, lambda: cell(app, sid, "state") == "running", what="the session once resumed")
    assert not started_beside(lw)


def test_a_quiet_subscription_gets_heartbeats_and_the_client_hands_none_on(lw: Harness) -> None:
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(lw.paths.socket))
    raw.settimeout(10)
    raw.sendall(b'{"id":1,"op":"subscribe","events":true}\n')
    reader = raw.makefile("rb")
    first = orjson.loads(reader.readline())
    assert first["result"].get("heartbeat") == BEAT
    start = time.monotonic()
    beats = [orjson.loads(reader.readline()) for _ in range(4)]  # nothing else happens: only heartbeats come
    assert beats == [{"kind": "heartbeat"}] * 4
    assert time.monotonic() - start < 4 * 2 * BEAT + 2  # each within two periods (one timer for all)
    raw.close()

    with Client.connect(lw.paths, autostart=False, name="test") as client:
        _, updates = client.subscribe(events=True)
        lw.launch(*SLEEPER, adapter="plain")
        kinds = [next(updates)["kind"] for _ in range(3)]
    assert "heartbeat" not in kinds and "session" in kinds


def test_a_socket_that_accepts_nothing_is_said_so_and_no_daemon_is_started(tmp_path: Path) -> None:
    """A listener whose backlog is full (a daemon stopped long enough): connecting times out; an operator
    action, which starts a daemon when none runs, starts none here."""
    env = {**os.environ, HOME_ENV: str(tmp_path), TIMEOUT_ENV: "1"}
    paths = default_paths(env)
    paths.socket.parent.mkdir(parents=True, mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(paths.socket))
    listener.listen(0)
    paths.lock.write_text(str(os.getpid()))
    held = []
    try:
        while True:  # fill the backlog: then a connect waits until it times out
            extra = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            extra.setblocking(False)
            held.append(extra)
            extra.connect(str(paths.socket))
    except BlockingIOError:
        pass
    try:
        for args in (("ls",), ("pause", "s1")):
            done = subprocess.run([PY, "-m", "loopwarden", *args], env=env, capture_output=True, text=True,
                                  timeout=LIMIT, check=False)
            assert done.returncode == 3, done.stderr
            [line] = error_lines(done.stderr)
            assert line.startswith(f"loopwarden: error: the daemon (pid {os.getpid()}) did not accept a connection "
                                   "within 1s: it may be stuck or overloaded"), line
        assert not paths.daemon_log.exists()  # nothing started
    finally:
        for extra in held:
            extra.close()
        listener.close()


def test_each_op_waits_its_own_bound() -> None:
    from loopwarden.runtime.client import DaemonTimeout, reply_bound, reply_timeout

    assert reply_timeout({}) == 30.0
    assert reply_timeout({TIMEOUT_ENV: "2.5"}) == 2.5 and reply_timeout({TIMEOUT_ENV: "45s"}) == 45.0
    for bad in ("0", "-1", "soon", "nan", "inf"):
        with pytest.raises(DaemonError, match="is not a number of seconds") as caught:
            reply_timeout({TIMEOUT_ENV: bad})
        assert caught.value.kind == "request"
    assert reply_bound("list", {}, 30.0) == 30.0
    assert reply_bound("hook_wait", {"hold": 600}, 30.0) == 630.0  # a gate holds the hook's answer on purpose
    assert reply_bound("prune", {}, 30.0) == 150.0
    assert not issubclass(DaemonTimeout, OSError)  # `run` reads OSError as a dead daemon ("lost")


def test_a_bad_timeout_setting_is_one_line_and_exit_2(lw: Harness) -> None:
    done = subprocess.run([PY, "-m", "loopwarden", "ls"], env={**lw.env, TIMEOUT_ENV: "soon"}, capture_output=True,
                          text=True, timeout=LIMIT, check=False)
    assert done.returncode == 2
    assert error_lines(done.stderr) == ["loopwarden: error: LOOPWARDEN_TIMEOUT='soon' is not a number of seconds "
                                        "above 0 (e.g. 30)"]
