"""The forward to a pod's keeper carries the daemon's own connections only: another process of the same user (an
agent of a local session) is refused before any command is run in the pod with the operator's credentials."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from loopwarden.runtime.pods.forward import Forward

pytestmark = pytest.mark.anyio


class Refused(OSError):
    """What the test's exec says: no pod behind it."""


async def test_another_process_is_refused_and_the_daemons_own_connection_is_carried(tmp_path: Path) -> None:
    execs: list[str] = []

    async def open_exec() -> None:
        execs.append("exec")
        raise Refused("no pod here")

    forward = Forward(tmp_path / "link", open_exec, lambda _line: None)
    await forward.start()
    try:
        assert forward.path.stat().st_mode & 0o777 == 0o600 and forward.directory.stat().st_mode & 0o777 == 0o700
        other = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
            "try:\n"
            "    s.sendall(b'{}\\n'); print('read', repr(s.recv(10)))\n"
            "except OSError as exc:\n"
            "    print('closed', type(exc).__name__)\n"), str(forward.path)], capture_output=True, text=True,
                                      timeout=30)
        assert other.stdout.strip() in ("read b''", "closed ConnectionResetError", "closed BrokenPipeError"), other
        assert execs == []  # closed at once: nothing was run in the pod
        reader, writer = await asyncio.open_unix_connection(str(forward.path))
        assert await asyncio.wait_for(reader.read(), 30) == b""  # carried: the exec was tried (and failed)
        writer.close()
        assert execs == ["exec"] and forward.failure == "no pod here"
    finally:
        await forward.aclose()
    assert not forward.path.exists()


