"""In a session's pod: one connection to the pod's keeper carried over this process's stdin and stdout.

The daemon reaches a pod only through the Kubernetes API: each connection it makes to a pod's keeper is a
command run in the pod (`exec`) whose stdin and stdout this process splices to the keeper's unix socket, until
either side closes. Standard library only: it runs from the keeper's zip (pods/keeper_zip.py), in any image with
a Python 3.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys
import time

CHUNK = 64 << 10
KEEPER_WAIT = 60.0  # seconds the first connection waits for a keeper that is still starting (a new pod's)


def splice(sock: socket.socket, stdin: int, stdout: int) -> None:
    """Bytes both ways until stdin ends or the keeper closes; stdin's end is passed on as a half-close, so what
    the keeper still sends arrives."""
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ, "in")
    selector.register(sock, selectors.EVENT_READ, "sock")
    while True:
        for key, _ in selector.select():
            if key.data == "in":
                data = os.read(stdin, CHUNK)
                if not data:
                    selector.unregister(stdin)
                    sock.shutdown(socket.SHUT_WR)
                    continue
                sock.sendall(data)
            else:
                data = sock.recv(CHUNK)
                if not data:
                    return
                _write_all(stdout, data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def connect(path: str, wait: float = KEEPER_WAIT) -> socket.socket:
    """A connection to the keeper, waiting up to `wait` seconds for its socket to appear and listen."""
    deadline = time.monotonic() + wait
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        except OSError:
            sock.close()
            raise


def main(argv: list[str]) -> int:
    """`bridge SOCKET [--wait SECONDS]`: exit 0 when either side ended, 2 when the keeper cannot be reached within
    the wait (said on stderr, one line)."""
    wait = KEEPER_WAIT
    if len(argv) == 3 and argv[1] == "--wait":
        wait, argv = float(argv[2]), argv[:1]
    if len(argv) != 1:
        print("usage: bridge KEEPER_SOCKET [--wait SECONDS]", file=sys.stderr)
        return 2
    try:
        sock = connect(argv[0], wait)
    except OSError as exc:
        print(f"the keeper at {argv[0]} cannot be reached: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        splice(sock, sys.stdin.fileno(), sys.stdout.fileno())
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        sock.close()
    return 0
