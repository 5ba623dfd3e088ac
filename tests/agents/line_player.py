"""Plays native lines from FILE, one a line, as a handshake agent: each tool_call waits for its verdict.

Usage: line_player.py FILE

Sends each line of FILE on stdout as it is (an invalid line too); after a tool_call (its `call_id` given in
FILE) it reads stdin until the verdict for that call arrives, so a call held by an open gate holds the agent.
After the last line it waits until stdin closes or a stop line arrives; exit 0.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def read_lines(buf: bytearray) -> list[dict[str, object]]:
    """The JSON lines on stdin so far (an empty list when stdin closed)."""
    while b"\n" not in buf:
        chunk = os.read(0, 65536)
        if not chunk:
            raise SystemExit(0)
        buf += chunk
    head, _, rest = bytes(buf).rpartition(b"\n")
    buf[:] = rest
    return [json.loads(x) for x in head.split(b"\n") if x.strip()]


def wait_for_verdict(call_id: str, buf: bytearray) -> None:
    while True:
        for message in read_lines(buf):
            if message.get("type") == "stop":
                raise SystemExit(0)
            if message.get("type") == "verdict" and message.get("call_id") == call_id:
                return


def main() -> int:
    buf = bytearray()
    for line in Path(sys.argv[1]).read_text(encoding="utf-8").splitlines():
        os.write(1, line.encode() + b"\n")
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "tool_call":
            wait_for_verdict(str(record["call_id"]), buf)
    while True:
        for message in read_lines(buf):
            if message.get("type") == "stop":
                return 0


if __name__ == "__main__":
    sys.exit(main())
