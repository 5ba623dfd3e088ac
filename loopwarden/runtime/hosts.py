"""Daemons on other machines, reached through the user's own `ssh`: nothing new listens on the network.

A host is an ssh destination (`box`, `user@box`, an alias of ~/.ssh/config). Its daemon's unix socket is
forwarded to a private local socket (`ssh -N -L LOCAL:REMOTE`), so every client of the local daemon
(the CLI, the console, its detail view) talks to a remote one unchanged, one SSH connection carrying
them all. The remote socket's path is asked of the remote loopwarden first (`loopwarden where`), so
its own LOOPWARDEN_HOME or XDG_RUNTIME_DIR decide it. No remote daemon is ever started from here.
"""

from __future__ import annotations

import ctypes
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Collection
from pathlib import Path

import orjson
import platformdirs

from ..paths import APP, HOME_ENV, Paths, SocketPathTooLong, default_paths
from ..supervisor.visible import visible

LOCAL = "local"  # this machine's daemon, as the console and the CLI name it
SSH_ENV = "LOOPWARDEN_SSH_COMMAND"  # the ssh to run, with options (`ssh -F cfg`), like GIT_SSH_COMMAND
HOSTS_ENV = "LOOPWARDEN_HOSTS_FILE"
LOCATE_TIMEOUT = 20.0  # seconds for `ssh HOST loopwarden where` (a first connection, a slow login)
OPEN_TIMEOUT = 20.0  # seconds for the forwarded socket to appear
SOCKET_LIMIT = 100  # as paths.py: sun_path is 108 bytes on Linux
SAID_LIMIT = 200  # characters of ssh's (the remote side's) words that reach a terminal
# an ssh destination, optionally user@; never an option (`-oProxyCommand=...`) on either side of the @, never a
# reference separator, no `%` (ssh expands %-tokens in some places)
_NAME = re.compile(r"^(?!-)[A-Za-z0-9_.+-]+(@(?!-)[A-Za-z0-9_.+-]+)?$")
# names that references already use: this machine, a session (s3), a gate (g1); a host so named would take
# them over (`loopwarden approve s3:g1` going to a host `s3`, a hosts-file `local` replacing this machine)
_RESERVED = re.compile(r"^(local|[sg][0-9]+)$", re.IGNORECASE)


class HostError(OSError):
    """A host cannot be used or reached; the message is one line and names the host."""


def check_name(name: str) -> str:
    """`name` if it can be a host (an ssh destination without a port or a colon), else HostError."""
    if not _NAME.match(name or ""):
        raise HostError(f"not a host name: {visible(name[:80])!r} (an ssh destination such as box, user@box or "
                        "an alias of ~/.ssh/config; no spaces, colons, '%' or leading '-')")
    if _RESERVED.match(name):
        raise HostError(f"not a host name: {name!r} names this machine, a session or a gate in references; "
                        "use another alias of ~/.ssh/config")
    return name


def hosts_file(env: dict[str, str] | None = None) -> Path:
    """The hosts file: $LOOPWARDEN_HOSTS_FILE, else `hosts` in LOOPWARDEN_HOME or the user's config directory."""
    env = dict(os.environ) if env is None else env
    if env.get(HOSTS_ENV):
        return Path(env[HOSTS_ENV]).expanduser()
    if env.get(HOME_ENV):
        return Path(env[HOME_ENV]).expanduser() / "hosts"
    return Path(platformdirs.user_config_dir(APP)) / "hosts"


def listed_hosts(path: Path | None = None) -> list[str]:
    """The hosts of the hosts file, one a line (`#` starts a comment); none when it does not exist."""
    path = hosts_file() if path is None else path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise HostError(f"cannot read the hosts file {path}: {getattr(exc, 'strerror', None) or exc}") from None
    names: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        try:
            check_name(name)
        except HostError as exc:
            raise HostError(f"{path}, line {number}: {exc}") from None
        if name not in names:
            names.append(name)
    return names


def split_ref(ref: str, hosts: Collection[str]) -> tuple[str, str]:
    """`box:s3:g1` -> ("box", "s3:g1") when box is one of `hosts`; else (LOCAL, ref)."""
    head, sep, rest = ref.partition(":")
    if sep and rest and head in hosts:
        return head, rest
    return LOCAL, ref


def ssh_command() -> list[str]:
    """The ssh program and its options: $LOOPWARDEN_SSH_COMMAND, else `ssh`."""
    words = shlex.split(os.environ.get(SSH_ENV) or "ssh")
    return words or ["ssh"]


def _ssh_error(host: str, stderr: str, code: int | None) -> HostError:
    """ssh's own last words (the one that says why), else its exit code, as one line naming the host."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip() and not line.startswith("Warning:")]
    why = visible(lines[-1][:SAID_LIMIT]) if lines else f"ssh exited with {code}"  # the remote side may say it
    return HostError(f"host {host}: {why}")


class Tunnel:
    """One host's forwarded daemon socket: `paths.socket` is a local socket reaching the remote daemon.

    `ensure()` (re)starts the ssh process when it is not running; it is safe from several threads.
    """

    def __init__(self, host: str, *, base: Path | None = None) -> None:
        self.host = check_name(host)
        self._base = base
        self._dir: Path | None = None
        self.remote_socket: str | None = None
        self.daemon_running: bool | None = None  # what `where` said when the socket was last located
        self.process: subprocess.Popen[bytes] | None = None
        self._said: deque[str] = deque(maxlen=8)
        self.opened_at: float | None = None  # monotonic seconds the last forward took to come up
        self._lock = threading.Lock()  # held only to swap `process`, never across a wait
        self._starting = threading.Lock()  # ensure() callers take turns; close() never takes it
        self._locating: subprocess.Popen[bytes] | None = None
        self._closed = False

    @property
    def paths(self) -> Paths:
        """A profile whose socket is the forwarded one (a client must not start a daemon through it)."""
        run = self._private() / "h"
        return Paths(run, run, run)

    def _private(self) -> Path:
        """A short 0700 directory of ours (mkdtemp), so the socket path fits a unix socket's limit."""
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="lw-", dir=self._base))
            (self._dir / "h").mkdir(mode=0o700)
            socket = self._dir / "h" / "daemon.sock"
            if len(os.fsencode(socket)) > SOCKET_LIMIT:
                self.close()
                raise SocketPathTooLong(f"the forwarded socket {socket} is longer than a unix socket allows; "
                                        "set a shorter TMPDIR")
        return self._dir

    def locate(self) -> str:
        """The remote daemon's socket path, asked of `loopwarden where` on the host over ssh."""
        command = [*ssh_command(), "-o", "BatchMode=yes", "-T", self.host, "loopwarden", "where", "--json"]
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise HostError(f"host {self.host}: {command[0]} is not installed (it carries the connection)") from None
        self._locating = process  # close() kills it: quitting never waits for a host that hangs
        try:
            if self._closed:
                process.kill()
            stdout, raw_stderr = process.communicate(timeout=LOCATE_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise HostError(f"host {self.host}: no answer over ssh within {LOCATE_TIMEOUT:g}s") from None
        finally:
            self._locating = None
        if self._closed:
            raise HostError(f"host {self.host}: closed")
        stderr = raw_stderr.decode(errors="replace")
        if process.returncode == 127 or "loopwarden: command not found" in stderr or (
                process.returncode != 0 and "No such command 'where'" in stderr):
            raise HostError(f"host {self.host}: loopwarden (with `where`) is not on the PATH of a non-interactive "
                            "ssh session there")
        if process.returncode != 0:
            raise _ssh_error(self.host, stderr, process.returncode)
        try:
            answer = orjson.loads(stdout.strip().splitlines()[-1])
            socket = str(answer["socket"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise HostError(f"host {self.host}: `loopwarden where` answered something else: "
                            f"{visible(stdout[:80].decode(errors='replace'))!r}") from None
        self.remote_socket = _remote_socket(self.host, socket)
        self.daemon_running = bool(answer.get("daemon"))
        return socket

    def ensure(self) -> Paths:
        """Start (or restart) the forward if it is not up; the forwarded profile, or HostError in one line.

        Callers take turns (`_starting`); close() takes no lock, so it never waits for a host that hangs."""
        with self._starting:
            if self._closed:
                raise HostError(f"host {self.host}: closed")
            paths = self.paths
            if self.process is not None and self.process.poll() is None and paths.socket.exists():
                return paths
            self._stop()
            started = time.monotonic()
            remote = self.locate()
            local = paths.socket
            # ControlPath=none: a connection of its own, not a multiplexing master's, so the forward lives and
            # ends with this process; ServerAlive*: a host that vanished is noticed within ~15 s, then restarted
            command = [*ssh_command(), "-N", "-T", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
                       "-o", "StreamLocalBindUnlink=yes", "-o", "ControlPath=none", "-o", "ServerAliveInterval=5",
                       "-o", "ServerAliveCountMax=3", "-L", f"{local}:{remote}", self.host]
            with self._lock:
                if self._closed:
                    raise HostError(f"host {self.host}: closed")
                # our process group: ^C ends it too; the wrapper ends ssh and removes our directory when this
                # process dies, however it dies (PR_SET_PDEATHSIG)
                process = self.process = subprocess.Popen(
                    ["sh", "-c", _FORWARD, "loopwarden-forward", str(self._private()), str(os.getpid()), *command],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    preexec_fn=_die_with_parent())  # only prctl runs between fork and exec
            said = self._said = deque(maxlen=8)  # ssh's last lines, read all along so its pipe never fills
            reader = threading.Thread(target=_keep_lines, args=(process, said), daemon=True,
                                      name=f"loopwarden-ssh-{self.host}")
            reader.start()
            deadline = time.monotonic() + OPEN_TIMEOUT
            while not local.exists():
                code = process.poll()
                if self._closed:
                    raise HostError(f"host {self.host}: closed")
                if code is not None:
                    reader.join(2)
                    raise _ssh_error(self.host, "\n".join(said), code)
                if time.monotonic() > deadline:
                    self._stop()
                    raise HostError(f"host {self.host}: the forward did not come up within {OPEN_TIMEOUT:g}s")
                time.sleep(0.02)
            self.opened_at = time.monotonic() - started
            return paths

    @property
    def up(self) -> bool:
        process = self.process
        return process is not None and process.poll() is None

    def _stop(self) -> None:
        with self._lock:
            process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGUSR1)  # the wrapper ends ssh and keeps our directory for the next
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    def close(self) -> None:
        """End the ssh process and remove the private directory with its socket; never waits for ensure()."""
        self._closed = True
        locating = self._locating
        if locating is not None and locating.poll() is None:
            locating.kill()
        self._stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


# Runs ssh ("$@") for a Tunnel: USR1 (Tunnel._stop) ends it; TERM, HUP or INT (the CLI or console died:
# PR_SET_PDEATHSIG; ^C) end it and remove the private directory ($1) with its socket. $2 is the pid that
# started it: another parent means that one died before PR_SET_PDEATHSIG was set.
_FORWARD = """dir=$1; parent=$2; shift 2; child=; drop=
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null' USR1
trap 'drop=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null' TERM HUP INT
[ "$PPID" = "$parent" ] || drop=1
"$@" & child=$!
[ -z "$drop" ] || kill -TERM "$child" 2>/dev/null
code=0
while :; do wait "$child"; code=$?; kill -0 "$child" 2>/dev/null || break; done
[ -z "$drop" ] || rm -rf -- "$dir"
exit "$code"
"""
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn that has the child sent SIGTERM when the thread that started it ends (Linux), else None.

    Everything it needs is looked up here, before the fork: the child only calls prctl."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    term = int(signal.SIGTERM)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, term, 0, 0, 0)

    return preexec


def _remote_socket(host: str, socket: str) -> str:
    """`where`'s socket, if it can be the remote end of `-L` (absolute, no ':' that would split it, short)."""
    if not socket.startswith("/") or ":" in socket or len(os.fsencode(socket)) > SOCKET_LIMIT \
            or not socket.isprintable():
        raise HostError(f"host {host}: `loopwarden where` named a socket that cannot be forwarded: "
                        f"{visible(socket[:80])!r}")
    return socket


def where(env: dict[str, str] | None = None) -> dict[str, object]:
    """This profile's daemon socket and whether a daemon answers on it; starts nothing (`loopwarden where`)."""
    from importlib.metadata import PackageNotFoundError, version

    path = default_paths(env).socket  # SocketPathTooLong: the caller says it in one line
    try:
        release = version(APP)
    except PackageNotFoundError:
        release = "?"
    return {"socket": str(path), "daemon": _answers(str(path)), "version": release}


def where_main(as_json: bool) -> int:
    """`loopwarden where [--json]` without the command line's machinery: ssh runs it before each forward."""
    try:
        answer = where()
    except OSError as exc:
        print(f"loopwarden: error: {exc}", file=sys.stderr)
        return 3
    if as_json:
        print(orjson.dumps(answer).decode())
    else:
        print(f"{answer['socket']} ({'a daemon answers' if answer['daemon'] else 'no daemon is running'})")
    return 0


def _answers(path: str) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(path)
        return True
    except OSError:
        return False
    finally:
        sock.close()


def _keep_lines(process: subprocess.Popen[bytes], said: deque[str]) -> None:
    """Read ssh's stderr to its end, keeping the last lines (why it stopped, when it does)."""
    assert process.stderr is not None
    for raw in process.stderr:
        said.append(raw.decode(errors="replace").rstrip()[:300])
    process.stderr.close()


def unreachable_daemon(host: str, tunnel: Tunnel) -> str:
    """Why a forwarded connection was closed at once: the remote daemon is not running."""
    where = f" (socket {tunnel.remote_socket})" if tunnel.remote_socket else ""
    return f"host {host}: no daemon is running there{where}; start one there with 'loopwarden serve'"
