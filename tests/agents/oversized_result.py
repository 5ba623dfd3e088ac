"""A handshake agent whose tool_result line is longer than the line limit, then waits for its answer.

    python tests/agents/oversized_result.py [BYTES] [DATABASE]

Prints the answer it got as an assistant_message, then `done`. Exits 3 if stdin closes first. With
DATABASE (the daemon's SQLite file), the message also says how many invalid_line events were stored when
the answer came: write ahead means the line's event is durable before the agent hears of it.
"""

from __future__ import annotations

import json
import sqlite3
import sys


def out(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def answer() -> dict:
    line = sys.stdin.readline()
    if not line:
        sys.exit(3)
    return json.loads(line)


def invalid_lines(database: str) -> int:
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM events WHERE kind = 'invalid_line'").fetchone()[0])


def main() -> int:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_500_000
    out({"type": "hello", "handshake": True, "name": "oversized-result"})
    answer()  # welcome
    out({"type": "tool_call", "tool": "read_logs", "args": {"service": "auth"}, "call_id": "c1"})
    answer()  # verdict
    out({"type": "tool_result", "tool": "read_logs", "call_id": "c1", "output": "x" * size})
    reply = answer()
    stored = f" (invalid lines stored: {invalid_lines(sys.argv[2])})" if len(sys.argv) > 2 else ""
    out({"type": "assistant_message", "text": f"got {reply.get('type')} for {reply.get('call_id')}: "
                                               f"{str(reply.get('message'))[:60]}{stored}"})
    out({"type": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
