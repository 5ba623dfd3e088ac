"""The control socket: private, checks the peer's uid, survives garbage."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.daemon import Harness


def _raw(lw: Harness) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(lw.paths.socket))
    return s


def _reply(s: socket.socket) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return json.loads(data.splitlines()[0]) if data else {}


def test_socket_and_directories_are_private(lw: Harness) -> None:
    sock = lw.paths.socket
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(lw.paths.runtime).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(lw.paths.database).st_mode) == 0o600


@pytest.fixture
def open_lw() -> Iterator[Harness]:
    """A daemon whose home is reachable by other users (pytest's tmp dirs are 0700)."""
    home = Path(tempfile.mkdtemp(prefix="lw-", dir="/tmp"))
    os.chmod(home, 0o711)
    try:
        with Harness(home) as harness:
            yield harness
    finally:
        shutil.rmtree(home, ignore_errors=True)


SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3"


@pytest.mark.skipif(os.getuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
                    reason="needs root, and a python3 another uid may run, to connect as another uid")
def test_another_uid_is_refused_even_when_the_file_modes_would_let_it_in(open_lw: Harness) -> None:
    lw = open_lw
    sock = lw.paths.socket
    for parent in (sock.parent, lw.home):
        os.chmod(parent, 0o711)
    os.chmod(sock, 0o777)
    script = ("import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.settimeout(10)\n"
              "s.connect(sys.argv[1])\n"
              "try:\n    s.sendall(b'{\"op\":\"list\"}\\n')\n"
              "except BrokenPipeError:\n    pass  # the daemon may already have refused and hung up\n"
              "sys.stdout.buffer.write(s.makefile('rb').readline())")
    child = subprocess.run([SYSTEM_PYTHON, "-c", script, str(sock)], user=65534, group=65534,
                           capture_output=True, timeout=30, check=False)
    assert child.stdout.startswith(b"{"), (child.stdout, child.stderr)
    reply = json.loads(child.stdout)
    assert reply["ok"] is False
    assert reply["error"].startswith("refused: uid 65534 is not the owner of this daemon")
    assert lw.request("ping")["pid"] == lw.daemon.pid  # type: ignore[union-attr]


def test_garbage_oversized_and_half_closed_requests_do_not_crash_the_daemon(lw: Harness) -> None:
    cases = [b"\xff\xfe\x00garbage\n", b"not json\n", b"[1,2,3]\n", b'{"op": 5}\n', b'{"op":"nosuch"}\n',
             b'{"op":"status"}\n', b'{"op":"run","spec":{"command":[]}}\n',
             b'{"op":"run","spec":{"command":["x"],"adapter":"evil"}}\n',
             b'{"op":"approve","gate":"s1:g1"}\n', b'{"op":"adopt","pid":-1}\n']
    for payload in cases:
        with _raw(lw) as s:
            s.sendall(payload)
            reply = _reply(s)
            assert reply["ok"] is False and reply["error"], payload
    with _raw(lw) as s:
        try:
            for _ in range(32):
                s.sendall(b"x" * (64 << 10))  # 2 MiB without a newline; the daemon hangs up after 1 MiB
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = _reply(s)
        assert reply["ok"] is False and "longer than" in reply["error"]
    with _raw(lw) as s:
        s.sendall(b'{"op":"li')
        s.shutdown(socket.SHUT_WR)  # half-closed mid-request
        assert s.recv(100) == b""
    with _raw(lw) as s:
        s.close()  # connect and vanish
    assert lw.request("ping")["sessions"] == 0


def test_the_daemon_collects_cycles_less_often_and_never_scans_what_it_started_with(lw: Harness) -> None:
    from loopwarden.runtime.daemon import GC_YOUNG

    collector = lw.request("ping")["gc"]
    assert collector["young"] == GC_YOUNG > 700  # Python's default
    assert collector["frozen"] > 10_000  # the modules and classes loaded before serving


def test_a_slow_subscriber_never_blocks_a_session(lw: Harness) -> None:
    stalled = _raw(lw)
    stalled.sendall(b'{"op":"subscribe","events":true}\n')  # and never read again
    sid = lw.run_detached("python3", "-c", "import sys\nfor i in range(200000): print(i)", adapter="plain")
    snap = lw.wait_state(sid, "exited", timeout=60)
    assert snap["exit_code"] == 0
    assert snap["events"] == 200000
    stalled.close()
