"""A handshake agent that idles until a file appears, then prints a huge output and loops on one call.

    python tests/agents/repeat_after.py TRIGGER_FILE [OUTPUT_CHARS]

Sends hello (handshake) and waits (polling every 50 ms) until TRIGGER_FILE
exists. Then it reports one tool result of OUTPUT_CHARS characters (default
300,000, over the spill threshold) and calls the same tool with the same
arguments again and again, waiting for each verdict, until a stop line or the
end of its stdin. So a test can start it, change the world (fill a disk), and
only then make it do what the supervisor must judge.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    trigger = sys.argv[1]
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 300_000
    buf = b""

    def read_until(kind: str) -> dict | None:
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
            if msg.get("type") == kind:
                return msg

    os.write(1, b'{"type":"hello","name":"repeat_after","protocol":1,"handshake":true}\n')
    while not os.path.exists(trigger):
        time.sleep(0.05)
    os.write(1, b'{"type":"tool_call","tool":"cat","args":{"path":"big.log"},"call_id":"big"}\n')
    if read_until("verdict") is None:
        return 0
    output = json.dumps({"type": "tool_result", "tool": "cat", "call_id": "big", "output": "y" * size})
    os.write(1, output.encode() + b"\n")
    n = 0
    while True:
        n += 1
        os.write(1, f'{{"type":"tool_call","tool":"ls","args":{{"path":"."}},"call_id":"c{n}"}}\n'.encode())
        if read_until("verdict") is None:
            return 0
        os.write(1, f'{{"type":"tool_result","tool":"ls","call_id":"c{n}","output":"a b c"}}\n'.encode())


if __name__ == "__main__":
    sys.exit(main())
