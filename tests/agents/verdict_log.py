"""A deterministic handshake agent that writes down every verdict it gets, for comparing runs.

    python tests/agents/verdict_log.py N OUT [--pace SECONDS]

Sends hello (handshake), then N tool_calls whose arguments repeat in runs (call i has {"n": i // 8}), so
repetition nudges and blocks come at the same calls in every run; after each it waits for that call's verdict
and appends "i action rule" to OUT. --pace sleeps between calls (a slow agent). Exit 0 after `done`; exit 0 on
a `stop` line; exit 3 when stdin closes while it waits.
"""

from __future__ import annotations

import json
import os
import sys
import time


def emit(obj: dict) -> None:
    os.write(1, (json.dumps(obj, separators=(",", ":")) + "\n").encode())


def main() -> int:
    count, out = int(sys.argv[1]), sys.argv[2]
    pace = float(sys.argv[sys.argv.index("--pace") + 1]) if "--pace" in sys.argv else 0.0
    stdin = os.fdopen(0, "rb", buffering=0)
    buffer = b""

    def line() -> dict | None:
        nonlocal buffer
        while b"\n" not in buffer:
            chunk = stdin.read(65536)
            if not chunk:
                return None
            buffer += chunk
        raw, buffer = buffer.split(b"\n", 1)
        try:
            msg = json.loads(raw)
        except ValueError:
            return {}
        return msg if isinstance(msg, dict) else {}

    def wait(kind: str, call_id: str | None = None) -> dict:
        while True:
            msg = line()
            if msg is None:
                sys.exit(3)
            if msg.get("type") == "stop":
                sys.exit(0)
            if msg.get("type") == kind and (call_id is None or msg.get("call_id") == call_id):
                return msg

    emit({"type": "hello", "name": "verdict-log", "protocol": 1, "handshake": True})
    wait("welcome")
    with open(out, "a", buffering=1) as log:
        for i in range(count):
            call_id = f"c{i}"
            emit({"type": "tool_call", "tool": "probe", "args": {"n": i // 8}, "call_id": call_id})
            verdict = wait("verdict", call_id)
            log.write(f"{i} {verdict.get('action')} {verdict.get('rule') or '-'}\n")
            if pace:
                time.sleep(pace)
    emit({"type": "done", "summary": f"{count} calls"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
