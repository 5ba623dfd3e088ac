"""A native-protocol agent whose every text carries terminal escape sequences, to test that none reaches a person.

    python tests/agents/hostile_text.py TEXT

Sends hello (handshake, its name carrying TEXT), then: a tool_call whose tool name and
arguments carry TEXT, its tool_result (TEXT on the first line of the output), an
assistant_message, an error, a line on stderr, a gate_request whose reason carries TEXT,
and a second tool_call that waits for the gate to be decided. Allowed, it sends `done`
and exits 0; blocked or stopped, it exits 0 at once; stdin EOF exits 3. With a low
`spill.threshold_chars` the tool output goes to a spill file (it waits for the `spill` line).
"""

from __future__ import annotations

import json
import os
import sys


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")  # json escapes every control character inside strings
    sys.stdout.flush()


def wait_for(want: str) -> dict[str, object]:
    """The next message of type `want` on stdin; a stop line or EOF ends the agent."""
    buffered = b""
    while True:
        while b"\n" not in buffered:
            chunk = os.read(0, 65536)
            if not chunk:
                sys.exit(3)
            buffered += chunk
        line, buffered = buffered.split(b"\n", 1)
        message = json.loads(line)
        if message.get("type") == "stop":
            sys.exit(0)
        if message.get("type") == want:
            return message


def main() -> int:
    text = sys.argv[1]
    emit({"type": "hello", "name": f"hostile {text}", "protocol": 1, "handshake": True})
    threshold = wait_for("welcome").get("spill_threshold")
    emit({"type": "tool_call", "tool": f"tool{text}", "args": {"cmd": f"arg{text}"}, "call_id": "c1"})
    wait_for("verdict")
    output = f"out{text}\nsecond line"
    emit({"type": "tool_result", "tool": f"tool{text}", "call_id": "c1", "output": output})
    if isinstance(threshold, int) and len(output) > threshold:
        wait_for("spill")
    emit({"type": "assistant_message", "text": f"said{text}"})
    emit({"type": "error", "message": f"failed{text}"})
    sys.stderr.write(f"stderr{text}\n")
    sys.stderr.flush()
    emit({"type": "gate_request", "reason": f"asks{text}"})
    emit({"type": "tool_call", "tool": "after_gate", "args": {}, "call_id": "c2"})
    if wait_for("verdict").get("action") == "allow":
        emit({"type": "done", "summary": f"done{text}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
