"""`loopwarden web` run for a test's daemon (tests/live's harness), on a free port, and its console processes."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import psutil
from loopwarden.web.token import token_path
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.processes import gone
from tests.support.waiting import wait_for


class WebServer:
    """`loopwarden web --port 0 ARGS` for a harness's profile: its address (with the token) and its output."""

    def __init__(self, lw: Harness, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([PY, "-m", "loopwarden", "web", "--port", "0", *args],
                                     env={**lw.env, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.stderr: list[str] = []
        self.stdout: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                         for stream, lines in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr))]
        for reader in self._readers:
            reader.start()
        deadline = time.monotonic() + 60
        while not self.stdout:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"loopwarden web did not start: {''.join(self.stderr)}")
            time.sleep(0.05)
        printed = self.stdout[0].strip()  # http://127.0.0.1:PORT/?token=... when the token is new
        self.printed_token = "?token=" in printed
        self.base = printed.split("?token=")[0]
        self.token = token_path(lw.paths).read_text().strip()
        self.url = f"{self.base}?token={self.token}"

    @staticmethod
    def _read(stream: object, lines: list[str]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            lines.append(line)

    def consoles(self) -> list[psutil.Process]:
        """The console processes it runs now (its children)."""
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> int:
        """Ctrl-C, as a person stops it; its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(20)
        finally:
            for reader in self._readers:
                reader.join(5)

    def kill(self) -> None:
        left = self.consoles()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for child in left:
            try:
                child.kill()
            except psutil.Error:
                pass


def wait_for_children(server: WebServer, count: int, timeout: float = 30.0) -> list[psutil.Process]:
    """The server's console processes, once there are `count` of them."""
    found: list[psutil.Process] = []

    def counted() -> bool:
        found[:] = [c for c in server.consoles() if not gone(c.pid)]
        return len(found) == count  # none at all, too, when that is the count

    wait_for(counted, timeout, lambda: f"{count} console processes, found {len(found)}", every=0.05)
    return found
