"""A pass-through between loopwarden and the real `codex app-server` that times each approval round trip.

    TAP_REAL=/path/to/codex TAP_LOG=/tmp/rtt.json python bench/codex_tap.py app-server ...

Lines go through unchanged in both directions. For every `item/commandExecution/requestApproval`
the app-server writes, the time from forwarding it to loopwarden until loopwarden's answer with
the same id arrives is one round trip: everything the supervisor adds to a command (the pipe both
ways, the daemon's read, the engine's verdict, the answer's write). The milliseconds are written as
a JSON list to TAP_LOG when the app-server exits. Used by codex_approval.py.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time


def lines(buffer: bytearray) -> list[bytes]:
    """The complete lines at the head of `buffer`, removed from it (each with its newline)."""
    out = []
    while (end := buffer.find(b"\n")) >= 0:
        out.append(bytes(buffer[: end + 1]))
        del buffer[: end + 1]
    return out


def main() -> int:
    """One thread and a selector: a relay in threads would add the GIL's 5 ms switch interval to the timings."""
    child = subprocess.Popen([os.environ["TAP_REAL"], *sys.argv[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin and child.stdout
    up_in, up_out = child.stdout.fileno(), sys.stdout.fileno()  # the app-server's stdout to loopwarden
    down_in, down_out = sys.stdin.fileno(), child.stdin.fileno()  # loopwarden's lines to the app-server
    asked: dict[object, float] = {}
    rtts: list[float] = []
    pending = {up_in: bytearray(), down_in: bytearray()}
    selector = selectors.DefaultSelector()
    selector.register(up_in, selectors.EVENT_READ)
    selector.register(down_in, selectors.EVENT_READ)
    while selector.get_map():
        for key, _ in selector.select():
            fd = key.fd
            data = os.read(fd, 1 << 16)
            now = time.perf_counter()
            if not data:
                selector.unregister(fd)
                if fd == down_in:
                    child.stdin.close()
                continue
            pending[fd] += data
            for line in lines(pending[fd]):
                if fd == up_in:
                    if b"/requestApproval" in line:
                        asked[json.loads(line).get("id")] = now
                    os.write(up_out, line)
                else:
                    if b'"decision"' in line:
                        start = asked.pop(json.loads(line).get("id"), None)
                        if start is not None:
                            rtts.append((now - start) * 1000)
                    os.write(down_out, line)
    code = child.wait()
    with open(os.environ["TAP_LOG"], "w") as log:
        json.dump(rtts, log)
    return code


if __name__ == "__main__":
    sys.exit(main())
