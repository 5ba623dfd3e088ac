"""The daemon's side of the guardian: start it, tell it what to protect, and replace it if it dies."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

import anyio

from .guardian_report import REPORT_ENV

GRACE = 5.0  # the guardian's SIGTERM -> SIGKILL grace after the daemon dies
RESTART_PAUSE = 1.0  # a guardian that dies within this long of its start is restarted no faster than this
POLL_SECONDS = 2.0  # only where the kernel has no pidfd (before Linux 5.3)


class GuardianLink:
    """One guardian process at a time, and everything it must know, so a new one can be told it all."""

    def __init__(self, log: Callable[[str], None], *, grace: float = GRACE) -> None:
        self.log = log
        self.grace = grace
        self.process: subprocess.Popen[bytes] | None = None
        self.protected: dict[tuple[str, str], None] = {}  # (kind, value), in the order they were told
        self.restarts = 0
        self.report: tuple[str, str] | None = None  # (data directory, daemon instance): where it reports
        self.lagging = 0  # lines a stopped guardian could not take; a new guardian is told them all
        self._started_at = 0.0
        self._closing = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> None:
        """Start a guardian and tell it everything protected so far."""
        env = None
        if self.report is not None:  # (in its environment, not its command line: `ps` shows that to everyone)
            directory, instance = self.report
            env = {**os.environ, REPORT_ENV: f"{instance}:{directory}"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "loopwarden.runtime.guardian", f"{self.grace:g}"], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True, env=env,
        )
        self._started_at = time.monotonic()
        assert self.process.stdin is not None
        fd = self.process.stdin.fileno()
        lines = b"".join(_line("+", kind, value) for kind, value in self.protected)
        try:
            while lines:  # blocking: the new guardian is reading
                lines = lines[os.write(fd, lines):]
        except OSError:
            pass  # it died already; watch() starts another
        os.set_blocking(fd, False)  # from now on a stopped guardian must never stall the daemon

    def protect(self, kind: str, value: str) -> None:
        """Tell the guardian to kill this if the daemon dies (see guardian.py for the kinds)."""
        self.protected[(kind, value)] = None
        self._write(_line("+", kind, value))

    def forget(self, kind: str, value: str) -> None:
        """It has ended: the guardian must no longer touch it."""
        if (kind, value) in self.protected:
            del self.protected[(kind, value)]
            self._write(_line("-", kind, value))

    def _write(self, line: bytes) -> None:
        if self.process is None or self.process.stdin is None or self._closing:
            return
        try:
            os.write(self.process.stdin.fileno(), line)  # one line is under PIPE_BUF: written whole or not at all
        except BlockingIOError:
            self.lagging += 1
            if self.lagging == 1:
                self.log(f"guardian {self.process.pid} is not reading; a restarted one would be told everything")
        except OSError:
            pass  # it died: watch() restarts it and replays everything

    async def watch(self) -> None:
        """Wait for the guardian to die (a pidfd: no polling), then start a new one and tell it everything."""
        while not self._closing and self.process is not None:
            process = self.process
            await _exited(process)
            if self._closing:
                return
            code = process.wait()
            self.restarts += 1
            self.log(f"guardian {process.pid} died ({_how(code)}); starting a new one "
                     f"(restart {self.restarts}), told {len(self.protected)} things to protect")
            if time.monotonic() - self._started_at < RESTART_PAUSE:
                await anyio.sleep(RESTART_PAUSE)
            while not self._closing:
                try:
                    self.start()
                    break
                except OSError as exc:  # e.g. out of file descriptors: try again, the agents need it
                    self.log(f"cannot start a guardian ({exc.strerror or exc}); retrying in {RESTART_PAUSE:g}s")
                    await anyio.sleep(RESTART_PAUSE)

    def close(self) -> None:
        """The daemon is stopping: close the pipe, so the guardian ends whatever is left and exits."""
        self._closing = True
        if self.process is not None and self.process.stdin is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass


def _line(sign: str, kind: str, value: str) -> bytes:
    return f"{sign}{kind} {value}\n".encode()


def _how(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


async def _exited(process: subprocess.Popen[bytes]) -> None:
    """Return once `process` has exited (it stays unreaped, for the caller to wait for)."""
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        while process.poll() is None:  # noqa: ASYNC110 - without a pidfd, polling is all there is
            await anyio.sleep(POLL_SECONDS)
        return
    try:
        await anyio.wait_readable(fd)
    finally:
        os.close(fd)
