"""A real OpenSSH server on loopback standing in for another machine, with its own loopwarden profile.

The server has its own host key and one authorized key, both made here in a temporary directory, and
sets LOOPWARDEN_HOME for every session it serves, so `loopwarden` there reaches a second daemon (the
"remote" one). The client side is an ssh config file with the alias `box`, handed to loopwarden through
LOOPWARDEN_SSH_COMMAND, as a user would point GIT_SSH_COMMAND at one.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.daemon import Harness

SSHD = "/usr/sbin/sshd"
PRIVSEP = Path("/run/sshd")  # Debian's sshd refuses to start without it (the service unit makes it)
HOST = "box"
DEAD = "deadbox"  # an alias whose port nothing listens on


@dataclass
class Box:
    """The running server: its alias, the ssh command that reaches it, the remote daemon's harness."""

    host: str
    ssh_command: str
    remote: Harness
    config: Path
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _needs() -> None:
    """Skip, naming what is missing, where this machine cannot run the server."""
    for program in (SSHD, shutil.which("ssh") or "ssh", shutil.which("ssh-keygen") or "ssh-keygen"):
        if not Path(program).is_file():
            pytest.skip(f"{program} is not installed (Debian: openssh-server and openssh-client)")
    if not PRIVSEP.is_dir():
        try:
            PRIVSEP.mkdir(mode=0o755)
        except OSError as exc:
            pytest.skip(f"sshd needs its privilege separation directory {PRIVSEP}, which cannot be made: {exc}")


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def start_box(base: Path, remote: Harness) -> Iterator[Box]:
    """Start sshd for `remote`'s profile; yields the Box, stops sshd (and what it runs) afterwards."""
    _needs()
    keys = base / "keys"
    keys.mkdir()
    _keygen(keys / "host")
    _keygen(keys / "client")
    shutil.copy(keys / "client.pub", keys / "authorized")
    port = _free_port()
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"  # this venv's loopwarden first
    server = base / "sshd_config"
    server.write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {keys / 'host'}
AuthorizedKeysFile {keys / 'authorized'}
StrictModes no
UsePAM no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PidFile none
AllowStreamLocalForwarding yes
SetEnv LOOPWARDEN_HOME={remote.home} PATH={path}
""")
    client = base / "ssh_config"
    common = (f"  User {user}\n  IdentityFile {keys / 'client'}\n  IdentitiesOnly yes\n"
              f"  UserKnownHostsFile {base / 'known_hosts'}\n  StrictHostKeyChecking accept-new\n"
              "  ConnectTimeout 10\n")
    client.write_text(f"Host {HOST}\n  HostName 127.0.0.1\n  Port {port}\n{common}"
                      f"Host {DEAD}\n  HostName 127.0.0.1\n  Port {_free_port()}\n{common}")
    log = base / "sshd.log"
    with open(log, "ab") as out:
        sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", str(server)], stdout=out, stderr=out,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not _listening(port):
            if sshd.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"{SSHD} did not start: {log.read_text()[-300:]}")
            time.sleep(0.05)
        yield Box(HOST, f"ssh -F {client}", remote, client, log)
    finally:
        try:
            os.killpg(sshd.pid, 15)  # its own session: the server and the sessions it forked
        except ProcessLookupError:
            pass
        try:
            sshd.wait(10)
        except subprocess.TimeoutExpired:
            sshd.kill()
            sshd.wait(5)
