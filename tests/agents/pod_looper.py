"""A native agent for a pod: it says hello (handshake), then calls `ls .` again and again, waiting for each
verdict, until a stop line or the end of its stdin. Standard library only (the pod's image has no loopwarden).

    python3 pod_looper.py [--changing] [MARK]

--changing: each call's output differs (`a b c N`), as polling does, so the repetition rules see progress and only
repetition.progress_gate_after stops it (with a gate). MARK, a word of its command line, lets a test find its
process on the node.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    changing = "--changing" in sys.argv[1:]
    buf = b""

    def verdict() -> dict | None:
        nonlocal buf
        while True:
            while b"\n" not in buf:
                chunk = os.read(0, 65536)
                if not chunk:
                    return None
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("type") == "stop":
                return None
            if msg.get("type") == "verdict":
                return msg

    os.write(1, b'{"type":"hello","name":"pod_looper","protocol":1,"handshake":true}\n')
    n = 0
    while True:
        n += 1
        os.write(1, f'{{"type":"tool_call","tool":"ls","args":{{"path":"."}},"call_id":"c{n}"}}\n'.encode())
        if verdict() is None:
            return 0
        if changing:
            time.sleep(0.05)  # a poller's pace: many sessions of it stay light
        output = f"a b c {n}" if changing else "a b c"
        os.write(1, f'{{"type":"tool_result","tool":"ls","call_id":"c{n}","output":"{output}"}}\n'.encode())


if __name__ == "__main__":
    sys.exit(main())
