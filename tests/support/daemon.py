"""A real daemon per test: its own LOOPWARDEN_HOME, a real unix socket, a real SQLite file."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from loopwarden.runtime.client import Client, DaemonError
from loopwarden.runtime.keeper_wire import SOCKET_NAME
from loopwarden.runtime.principal import KEEPER_MODULE, runs_daemon
from loopwarden.paths import Paths, default_paths
from tests.support.paths import PY
from tests.support.waiting import wait_for

# What a session's status says of why it is not (yet) in the state a test awaits, printed when the wait times out.
SAID_ON_TIMEOUT = ("state", "termination", "termination_text", "exit_code", "failure", "lost", "pod")


def exited(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """`proc.wait(timeout)` woken by the exit itself (a pidfd), not by Popen's polling, which checks at most
    every 50 ms: a daemon stops in about 60 ms, and every test stops one."""
    fd = os.pidfd_open(proc.pid)
    try:
        if not select.select([fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


class Harness:
    def __init__(self, home: Path) -> None:
        self.home = home
        # the tests act as the operator: not as a Claude Code tool, even when they run under one
        self.env = {**{k: v for k, v in os.environ.items() if k != "CLAUDECODE"}, "LOOPWARDEN_HOME": str(home)}
        self.paths: Paths = default_paths(self.env)
        self.daemon: subprocess.Popen[bytes] | None = None

    def not_keeping(self) -> Harness:
        """Agents are not kept (daemon.keep_agents = false): they stop with the daemon, by its guardian. Before
        `start`."""
        self.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.paths.config_file, "a") as config:
            config.write("[daemon]\nkeep_agents = false\n")
        return self

    def __enter__(self) -> Harness:
        """The daemon started; it stops when the block ends."""
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        log = open(self.home / "daemon.out", "ab")  # noqa: SIM115
        self.daemon = subprocess.Popen([PY, "-m", "loopwarden", "serve"], env=self.env, stdout=log, stderr=log,
                                       start_new_session=True)
        wait_for(self._connectable, what="the daemon's socket")

    def _connectable(self) -> bool:
        try:
            Client.connect(self.paths, autostart=False).close()
            return True
        except Exception:  # noqa: BLE001 - whatever the reason, not connectable yet
            return False

    def client(self) -> Client:
        return Client.connect(self.paths, autostart=False, name="test")

    def request(self, op: str, **fields: Any) -> Any:
        with self.client() as c:
            return c.request(op, **fields)

    def cli(self, *args: str, timeout: float = 60, cwd: Path | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`loopwarden ARGS` as a user runs it (in `cwd`, with `env` added to the daemon's environment)."""
        return subprocess.run([PY, "-m", "loopwarden", *args], env={**self.env, **(env or {})}, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def run_detached(self, *command: str, sets: tuple[str, ...] = (), adapter: str = "native",
                     name: str | None = None, agent: str | None = None, cwd: Path | None = None,
                     env: dict[str, str] | None = None, timeout: float = 60) -> str:
        """`loopwarden run --detach` of a command (`--agent AGENT` instead of `--adapter` when given, the
        session's working directory `cwd`); the new session's id."""
        args = ["run", "--detach", *(("--agent", agent) if agent else ("--adapter", adapter))]
        for s in sets:
            args += ["--set", s]
        if name:
            args += ["--name", name]
        proc = self.cli(*args, "--", *command, timeout=timeout, cwd=cwd, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    def launch(self, *command: str, adapter: str = "native", name: str | None = None,
              sets: tuple[str, ...] = ()) -> str:
        """A session started by a `run` request on the socket, as `loopwarden run --detach` sends it, without
        the CLI process (a second or more each on a loaded machine)."""
        spec: dict[str, Any] = {"command": list(command), "adapter": adapter, "sets": list(sets),
                                "cwd": str(self.home), "env": {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}}
        if name:
            spec["name"] = name
        return str(self.request("run", spec=spec)["id"])

    def attached(self, name: str, *command: str) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
        """`loopwarden run --name NAME -- COMMAND` attached, as a user runs it, once its session runs."""
        proc = subprocess.Popen([PY, "-m", "loopwarden", "run", "--name", name, "--", *command], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        snap = wait_for(lambda: next((s for s in self.request("list") if s["name"] == name
                                      and s["state"] == "running"), None), what=f"session {name} to run")
        return proc, snap

    def scenario(self, name: str, *sets: str) -> str:
        """Run a bundled scenario with the settings its header asks for."""
        from loopwarden.sessions.scripted import load_scenario

        header = tuple(load_scenario(name).config)
        return self.run_detached(PY, "-m", "loopwarden.sessions.scripted", name, sets=header + sets, name=name)

    def status(self, sid: str) -> dict[str, Any]:
        return self.request("status", session=sid)

    def wait_state(self, sid: str, *states: str, timeout: float = 30.0) -> dict[str, Any]:
        last: dict[str, Any] = {}

        def check() -> dict[str, Any] | None:
            try:
                snap = self.status(sid)
            except DaemonError as exc:  # one about to start (a continue's audit row is stored before its launch)
                if not str(exc).startswith(f"no session {sid!r}"):
                    raise
                return None
            last.update(snap)
            return snap if snap.get("state") in states else None

        def what() -> str:
            seen = {key: last[key] for key in SAID_ON_TIMEOUT if last.get(key) not in (None, "", [], {})}
            return f"session {sid} to be {' or '.join(states)} (last seen: {json.dumps(seen, default=str)[:600]})"
        return wait_for(check, timeout, what)

    def verdicts(self, sid: str) -> list[dict[str, Any]]:
        return self.request("logs", session=sid)["verdicts"]

    def events(self, sid: str) -> list[dict[str, Any]]:
        return self.request("logs", session=sid)["events"]

    def stop(self) -> None:
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                exited(self.daemon, 20)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait(5)
        self._stop_keeper()

    def _stop_keeper(self) -> None:
        """The keeper, and any daemon it started after the test ended the harness's own: stopped too, with the
        agents they hold. The keepers first (so that none starts a daemon again), then this home's daemons (one may
        have started a keeper of its own meanwhile), then any keeper left."""
        if not (self.paths.runtime / SOCKET_NAME).exists():
            return
        if self.paths.socket.exists():  # a daemon the keeper started: stopped as an operator stops it
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.cli("stop-daemon", "--yes", timeout=30)
        _stop(self._keepers())
        _stop(self._daemons())
        _stop(self._keepers())

    def _keepers(self) -> list[psutil.Process]:
        runtime = str(self.paths.runtime)
        return [p for p in psutil.process_iter(["cmdline"])
                if KEEPER_MODULE in (p.info["cmdline"] or []) and runtime in p.info["cmdline"]]

    def _daemons(self) -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            line = proc.info["cmdline"] or []
            if runs_daemon(line) and KEEPER_MODULE not in line:
                with contextlib.suppress(psutil.Error):
                    if proc.environ().get("LOOPWARDEN_HOME") == str(self.home):
                        found.append(proc)
        return found


def _stop(procs: list[psutil.Process]) -> None:
    """SIGTERM, then SIGKILL for those still there 15 s later."""
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=15)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()


@pytest.fixture
def lw(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A started daemon of its own for one test (LOOPWARDEN_HOME in its tmp_path), stopped after it; its agents
    are not kept for a test marked `unkept`."""
    harness = Harness(tmp_path)
    if request.node.get_closest_marker("unkept"):
        harness.not_keeping()
    with harness:
        yield harness
