"""Emits N varied, valid native events as fast as possible, then `done`.

    python tests/agents/flood.py [N]

The stream is `hello` (no handshake), N events, `done`: N + 2 lines. The
events cycle through tool_call, tool_result, assistant_message, usage,
system_nudge and condensation with arguments and outputs that never repeat,
so no guard fires on the default config. stdin is never read.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    out = sys.stdout
    dumps = json.dumps
    out.write(dumps({"type": "hello", "name": "flood", "protocol": 1, "handshake": False}) + "\n")
    for i in range(n):
        ts = time.time()
        k = i % 6
        if k == 0:
            event = {"type": "tool_call", "tool": "read_file", "args": {"path": f"src/f{i}.py"}, "call_id": f"f{i}"}
        elif k == 1:
            event = {"type": "tool_result", "tool": "read_file", "call_id": f"f{i - 1}", "output": f"line {i}"}
        elif k == 2:
            event = {"type": "assistant_message", "text": f"step {i} looks fine"}
        elif k == 3:
            event = {"type": "usage", "input_tokens": 100 + i % 50, "output_tokens": 10}
        elif k == 4:
            event = {"type": "system_nudge", "text": f"reminder {i}"}
        else:
            event = {"type": "condensation", "text": f"trimmed to step {i}"}
        event["ts"] = ts
        out.write(dumps(event) + "\n")
    out.write(dumps({"type": "done", "summary": f"{n} events", "ts": time.time()}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
