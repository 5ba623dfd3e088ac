"""A handshake agent that records every verdict it receives, for crash tests.

    python tests/agents/verdict_recorder.py RECORD_FILE [N]

Sends hello (handshake), then tool_calls with arguments that never repeat,
each waiting for its verdict; after each verdict it appends the call's `seq`
(the line number the supervisor gave it) to RECORD_FILE and flushes it, so the
file lists exactly the calls whose verdict reached the agent. N calls (default:
until stdin closes or a stop line arrives).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    record = open(sys.argv[1], "a", buffering=1)  # noqa: SIM115 - kept open for the whole run
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    buf = b""
    os.write(1, b'{"type":"hello","name":"recorder","protocol":1,"handshake":true}\n')
    i = 0
    while not n or i < n:
        i += 1
        os.write(1, f'{{"type":"tool_call","tool":"read","args":{{"path":"f{i}"}},"call_id":"c{i}"}}\n'.encode())
        while True:
            while b"\n" not in buf:
                chunk = os.read(0, 65536)
                if not chunk:
                    return 0
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("type") == "stop":
                return 0
            if msg.get("type") == "verdict" and msg.get("call_id") == f"c{i}":
                record.write(f"{msg['seq']}\n")
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
