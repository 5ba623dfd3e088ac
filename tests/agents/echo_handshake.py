"""A handshake agent for latency benchmarks: N tool_calls as fast as possible, each waiting for its verdict.

    python tests/agents/echo_handshake.py [N] [--results] [--same]

Sends hello (handshake), reads the welcome, then N tool_calls with varied
arguments (so no repetition guard fires); after each it blocks until the
verdict for that call_id arrives. With --same every call has identical
arguments (only the call_id differs), so a repetition guard does fire. With --results an allowed call is followed by
its tool_result. Ends with `done`, then prints to stderr the count and the
round-trip latencies. Exit 0; on a `stop` line exit 0 early; stdin EOF while
waiting exit 3.
"""

from __future__ import annotations

import json
import os
import sys
import time


class Lines:
    """Unbuffered line reader on fd 0."""

    def __init__(self) -> None:
        self.buf = b""

    def next(self) -> bytes | None:
        while b"\n" not in self.buf:
            chunk = os.read(0, 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def wait(lines: Lines, want: str, call_id: str | None = None) -> dict:
    while True:
        raw = lines.next()
        if raw is None:
            print(f"echo_handshake: stdin closed while waiting for {want}", file=sys.stderr)
            sys.exit(3)
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if msg.get("type") == "stop":
            print(f"echo_handshake: stopped ({msg.get('reason')})", file=sys.stderr)
            sys.exit(0)
        if msg.get("type") == want and (call_id is None or msg.get("call_id") == call_id):
            return msg


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 1000
    results = "--results" in sys.argv[1:]
    same = "--same" in sys.argv[1:]
    lines = Lines()
    emit({"type": "hello", "name": "echo-handshake", "protocol": 1, "handshake": True})
    wait(lines, "welcome")
    latencies: list[float] = []
    actions: dict[str, int] = {}
    started = time.perf_counter()
    for i in range(1, n + 1):
        call_id = f"e{i}"
        sent = time.perf_counter()
        emit({"type": "tool_call", "tool": "echo", "args": {"i": 0 if same else i}, "call_id": call_id,
              "ts": time.time()})
        verdict = wait(lines, "verdict", call_id)
        latencies.append(time.perf_counter() - sent)
        action = str(verdict.get("action"))
        actions[action] = actions.get(action, 0) + 1
        if results and action == "allow":
            emit({"type": "tool_result", "tool": "echo", "call_id": call_id, "output": f"echo {i}"})
    total = time.perf_counter() - started
    emit({"type": "done", "summary": f"{n} calls"})
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000 if latencies else 0.0

    detail = ", ".join(f"{v} {k}" for k, v in sorted(actions.items()))
    print(f"echo_handshake: {n} calls, {len(latencies)} verdicts ({detail}) in {total:.3f}s; "
          f"round trip p50 {pct(0.5):.3f}ms p99 {pct(0.99):.3f}ms max {pct(1.0):.3f}ms", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
