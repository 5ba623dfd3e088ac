"""A pass-through between loopwarden and the real claude CLI that times each hook_callback round trip.

    TAP_REAL=/path/to/claude TAP_LOG=/tmp/rtt.json python bench/claude_code_tap.py CLAUDE_ARGS...

Lines go through unchanged in both directions. For every `hook_callback` control request the CLI
writes, the time from forwarding it to loopwarden until loopwarden's `control_response` with the same
request_id arrives is one round trip: everything the supervisor adds to a tool call (the pipe both
ways, the daemon's read, the engine's verdict, the answer's write). The milliseconds are written as
a JSON list to TAP_LOG when the CLI exits. Used by claude_code_hook_latency.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time


def main() -> int:
    child = subprocess.Popen([os.environ["TAP_REAL"], *sys.argv[1:]], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    assert child.stdin and child.stdout
    asked: dict[str, float] = {}
    rtts: list[float] = []
    out = sys.stdout.buffer

    def up() -> None:  # the CLI's stdout to loopwarden
        for line in child.stdout:  # type: ignore[union-attr]
            request_id = None
            if b'"hook_callback"' in line:
                request_id = json.loads(line).get("request_id")
            if request_id:  # stamped before the write: the answer may come back before it returns
                asked[request_id] = time.perf_counter()
            out.write(line)
            out.flush()

    def down() -> None:  # loopwarden's answers and user lines to the CLI
        for line in sys.stdin.buffer:
            if b'"control_response"' in line:
                now = time.perf_counter()
                request_id = json.loads(line)["response"].get("request_id")
                start = asked.pop(request_id, None)
                if start is not None:
                    rtts.append((now - start) * 1000)
            child.stdin.write(line)  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
        child.stdin.close()  # type: ignore[union-attr]

    threads = [threading.Thread(target=up, daemon=True), threading.Thread(target=down, daemon=True)]
    for thread in threads:
        thread.start()
    code = child.wait()
    threads[0].join(5)
    with open(os.environ["TAP_LOG"], "w") as log:
        json.dump(rtts, log)
    return code


if __name__ == "__main__":
    sys.exit(main())
