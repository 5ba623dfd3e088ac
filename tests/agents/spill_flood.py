"""A handshake agent whose every tool output is spilled, waiting for each answer, recording what it got.

    python tests/agents/spill_flood.py COUNT SIZE[,SIZE...] RECORD_FILE

Sends hello (handshake), then COUNT tool_call/tool_result pairs; output i is SIZES[i % len(SIZES)] ASCII
characters, all different. It waits for the verdict on each call and for the spill line on each result, and
appends that spill line (JSON) to RECORD_FILE. Then `done`, exit 0; exit 3 if stdin closes first (an answer
never came).
"""

from __future__ import annotations

import json
import os
import sys


class Input:
    def __init__(self) -> None:
        self.buf = b""

    def line(self) -> dict:
        while b"\n" not in self.buf:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                sys.exit(3)
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        return json.loads(raw)

    def answer(self, kind: str) -> dict:
        while True:  # injected nudges may come between
            msg = self.line()
            if msg.get("type") == kind:
                return msg


def out(obj: dict) -> None:
    data = (json.dumps(obj) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def main() -> int:
    count, sizes, record_path = int(sys.argv[1]), [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
    inp = Input()
    out({"type": "hello", "name": "spill_flood", "protocol": 1, "handshake": True})
    inp.answer("welcome")
    with open(record_path, "a", buffering=1) as record:
        for i in range(count):
            out({"type": "tool_call", "tool": "cat", "args": {"path": f"f{i}"}, "call_id": f"c{i}"})
            inp.answer("verdict")
            size = sizes[i % len(sizes)]
            head = f"output {i} "
            out({"type": "tool_result", "tool": "cat", "call_id": f"c{i}", "output": head + "x" * (size - len(head))})
            record.write(json.dumps(inp.answer("spill")) + "\n")
    out({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
