"""A handshake agent whose tool_result line is longer than the line limit, then waits for its answer.

    python tests/agents/oversized_result.py [BYTES]

Prints the answer it got as an assistant_message, then `done`. Exits 3 if stdin closes first.
"""

from __future__ import annotations

import json
import sys


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(3)
    return json.loads(line)


def main() -> int:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_500_000
    out({"type": "hello", "handshake": True, "name": "oversized-result"})
    answer()  # welcome
    out({"type": "tool_call", "tool": "read_logs", "args": {"service": "auth"}, "call_id": "c1"})
    answer()  # verdict
    out({"type": "tool_result", "tool": "read_logs", "call_id": "c1", "output": "x" * size})
    reply = answer()
    out({"type": "assistant_message", "text": f"got {reply.get('type')} for {reply.get('call_id')}: "
                                               f"{str(reply.get('message'))[:60]}"})
    out({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
