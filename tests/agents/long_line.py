"""A handshake agent that writes one line far longer than the keeper keeps, between two calls.

    python tests/agents/long_line.py BYTES KIND [MIB_PER_SECOND]

hello (handshake), then tool_call c0 (waits for its verdict), then one line of about BYTES: KIND "output" is c0's
tool_result (its output is streamed to a spill file), KIND "message" an assistant_message past the line limit;
written 1 MiB at a time, at most MIB_PER_SECOND (0 or absent: as fast as the pipe takes it). Then tool_call c1
(waits for its verdict), `done`, exit 0; exit 3 if stdin closes before a verdict.
"""

from __future__ import annotations

import json
import os
import sys
import time

MIB = 1 << 20


def out(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def send(obj: dict) -> None:
    out((json.dumps(obj) + "\n").encode())


def wait_for(kind: str, buf: list[bytes]) -> None:
    while True:
        while b"\n" not in buf[0]:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                sys.exit(3)
            buf[0] += chunk
        line, buf[0] = buf[0].split(b"\n", 1)
        if json.loads(line).get("type") == kind:
            return


def main() -> int:
    size, kind = int(sys.argv[1]), sys.argv[2]
    pace = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    buf = [b""]
    send({"type": "hello", "name": "long_line", "protocol": 1, "handshake": True})
    wait_for("welcome", buf)
    send({"type": "tool_call", "tool": "cat", "args": {"path": "big"}, "call_id": "c0"})
    wait_for("verdict", buf)
    if kind == "output":
        head = b'{"type": "tool_result", "tool": "cat", "call_id": "c0", "output": "'
    else:
        head = b'{"type": "assistant_message", "text": "'
    out(head)
    written = 0
    while written < size:
        chunk = min(MIB, size - written)
        out(b"y" * chunk)
        written += chunk
        if pace:
            time.sleep(1 / pace)
    out(b'"}\n')
    send({"type": "tool_call", "tool": "cat", "args": {"path": "after"}, "call_id": "c1"})
    wait_for("verdict", buf)
    send({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
