"""An agent that prints one line, waits for a go file, then writes BYTES to stdout and stays, or exits.

    python tests/agents/stop_and_go.py GO_FILE write BYTES WRITTEN_FILE
    python tests/agents/stop_and_go.py GO_FILE exit

Prints `ready` and waits (polling every 10 ms, at most 10 minutes) for GO_FILE. `write`: then writes
BYTES bytes to stdout in 100-byte lines, creates WRITTEN_FILE once they are all in the pipe, and sleeps
(10 minutes at most). `exit`: exits 0. A test stops the daemon (SIGSTOP) before it creates GO_FILE, so
what the agent writes or does next is known never to have been read.
"""

from __future__ import annotations

import os
import sys
import time

LIFETIME = 600.0


def main() -> int:
    go, mode = sys.argv[1], sys.argv[2]
    os.write(1, b"ready\n")
    deadline = time.monotonic() + LIFETIME
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.01)
    if mode == "exit":
        return 0
    size, written = int(sys.argv[3]), sys.argv[4]
    line = b"x" * 99 + b"\n"
    data = (line * (size // 100 + 1))[:size]
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]
    open(written, "w").close()  # a mark: every byte is in the pipe
    time.sleep(max(0.0, deadline - time.monotonic()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
