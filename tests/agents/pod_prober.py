"""A native agent for a pod that tries to harm its keeper and reports, as one tool call's arguments, what it could
do: its uid, and for each attempt "refused" or "done". Standard library only.

    python3 pod_prober.py
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def attempt(action) -> str:  # type: ignore[no-untyped-def]
    try:
        action()
    except OSError:
        return "refused"
    return "done"


def connect_keeper() -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect("/run/loopwarden/keeper.sock")


def replace_python() -> None:
    with open("/usr/bin/python3.probe", "w", encoding="utf-8") as f:
        f.write("#!/bin/true\n")


def main() -> int:
    found = {
        "uid": os.getuid(),
        "signal_keeper": attempt(lambda: os.kill(1, signal.SIGCONT)),  # pid 1: the keeper
        "connect_keeper": attempt(connect_keeper),
        "open_keepers_fds": attempt(lambda: os.listdir("/proc/1/fd")),
        "write_programs": attempt(replace_python),
        "replace_keepers_socket": attempt(lambda: os.unlink("/run/loopwarden/keeper.sock")),
        "write_keepers_folder": attempt(lambda: open("/run/loopwarden/filler", "w").close()),
    }
    call = {"type": "tool_call", "tool": "probe", "args": found, "call_id": "p1"}
    sys.stdout.write('{"type":"hello","name":"pod_prober","protocol":1}\n' + json.dumps(call) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
