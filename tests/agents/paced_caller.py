"""A handshake agent that makes one identical tool call each time a test asks for it.

    python tests/agents/paced_caller.py DIR

Sends hello (handshake), then for n = 1, 2, ...: waits (polling every 20 ms)
until DIR/go{n} exists, calls `ls .` (the same arguments every time), waits for
the verdict and writes its action to DIR/verdict{n}; an allowed call gets its
tool_result (the same output every time). Ends on a stop line or the end of its
stdin. So a test decides when each repeat happens, and can change the session's
limits in between.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    folder = Path(sys.argv[1])

    def verdict() -> dict | None:
        for line in sys.stdin:  # a line at a time, as the daemon sends them
            msg = json.loads(line)
            if msg.get("type") == "stop":
                return None
            if msg.get("type") == "verdict":
                return msg
        return None

    os.write(1, b'{"type":"hello","name":"paced_caller","protocol":1,"handshake":true}\n')
    n = 0
    while True:
        n += 1
        while not (folder / f"go{n}").exists():
            time.sleep(0.02)
        os.write(1, f'{{"type":"tool_call","tool":"ls","args":{{"path":"."}},"call_id":"c{n}"}}\n'.encode())
        answer = verdict()
        if answer is None:
            return 0
        (folder / f"verdict{n}.tmp").write_text(str(answer.get("action")))
        (folder / f"verdict{n}.tmp").rename(folder / f"verdict{n}")
        if answer.get("action") == "allow":
            os.write(1, f'{{"type":"tool_result","tool":"ls","call_id":"c{n}","output":"a b c"}}\n'.encode())


if __name__ == "__main__":
    sys.exit(main())
