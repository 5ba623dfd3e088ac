"""A handshake agent that loops, each call costing money: the runaway a budget stops.

    python tests/agents/spender.py OUT COST [--calls N] [--pace SECONDS] [--model MODEL]

Sends hello (handshake), then, for i = 1, 2, ... N (default: no end): a tool_call `work {"i": i}` (different
arguments each time, so no repetition rule sees a loop), waits for its verdict and appends "i action" to OUT;
an allowed call gets its tool_result, then a `usage` line costing COST dollars (with --model: naming MODEL and no
dollars, for loopwarden to price from its table). --pace sleeps between calls.
Exits 0 after N calls (`done`) or on a `stop` line; 3 when stdin closes while it waits.
"""

from __future__ import annotations

import json
import os
import sys
import time


def emit(obj: dict) -> None:
    os.write(1, (json.dumps(obj, separators=(",", ":")) + "\n").encode())


def main() -> int:
    out, cost = sys.argv[1], float(sys.argv[2])
    calls = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 0
    pace = float(sys.argv[sys.argv.index("--pace") + 1]) if "--pace" in sys.argv else 0.0
    model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else None
    priced = {"model": model} if model else {"cost_usd": cost}
    stdin = os.fdopen(0, "rb", buffering=0)
    buffer = b""

    def wait(kind: str, call_id: str | None = None) -> dict:
        nonlocal buffer
        while True:
            while b"\n" not in buffer:
                chunk = stdin.read(65536)
                if not chunk:
                    sys.exit(3)
                buffer += chunk
            raw, buffer = buffer.split(b"\n", 1)
            msg = json.loads(raw)
            if msg.get("type") == "stop":
                sys.exit(0)
            if msg.get("type") == kind and (call_id is None or msg.get("call_id") == call_id):
                return msg

    emit({"type": "hello", "name": "spender", "protocol": 1, "handshake": True})
    wait("welcome")
    i = 0
    with open(out, "a", buffering=1) as log:
        while not calls or i < calls:
            i += 1
            call_id = f"c{i}"
            emit({"type": "tool_call", "tool": "work", "args": {"i": i}, "call_id": call_id})
            verdict = wait("verdict", call_id)
            log.write(f"{i} {verdict.get('action')}\n")
            if verdict.get("action") == "allow":
                emit({"type": "tool_result", "tool": "work", "call_id": call_id, "output": f"step {i} done"})
                emit({"type": "usage", "input_tokens": 1000, "output_tokens": 100, **priced})
            if pace:
                time.sleep(pace)
    emit({"type": "done", "summary": f"{calls} calls"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
