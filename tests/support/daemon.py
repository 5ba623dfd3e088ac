"""A real daemon per test: its own LOOPWARDEN_HOME, a real unix socket, a real SQLite file."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from loopwarden.runtime.client import Client
from loopwarden.paths import Paths, default_paths

AGENTS = Path(__file__).resolve().parents[1] / "agents"
PY = sys.executable


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll until `condition()` is truthy (and return it) or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)  # the condition often asks the daemon: finer polls would cost it CPU


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

    def cli(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "loopwarden", *args], env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def run_detached(self, *command: str, sets: tuple[str, ...] = (), adapter: str = "native",
                     name: str | None = None) -> str:
        args = ["run", "--detach", "--adapter", adapter]
        for s in sets:
            args += ["--set", s]
        if name:
            args += ["--name", name]
        proc = self.cli(*args, "--", *command)
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
        def check() -> dict[str, Any] | None:
            snap = self.status(sid)
            return snap if snap.get("state") in states else None
        return wait_for(check, timeout, f"session {sid} to be {' or '.join(states)}")

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


@pytest.fixture
def lw(tmp_path: Path) -> Iterator[Harness]:
    with Harness(tmp_path) as harness:
        yield harness


def rules(verdicts: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(v["action"], v["rule"]) for v in verdicts]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


__all__ = ["AGENTS", "PY", "Harness", "gone", "json", "rules", "wait_for"]
