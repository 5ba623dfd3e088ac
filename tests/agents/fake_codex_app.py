"""A hostile stand-in for `codex app-server`: it speaks enough of the protocol to start a turn, then
writes garbage (broken JSON, invalid UTF-8, a line nested thousands deep, an over-long request, a
request with an unreadable id, requests nobody handles) between real approval requests.

Usage: fake_codex_app.py app-server [options]   (REPORT: $FAKE_CODEX_REPORT, one JSON line per answer)

It waits for an answer to every request it sent that has a usable id, writes them to the report,
ends the turn, and exits when its stdin closes.
"""

from __future__ import annotations

import json
import os
import sys

ANSWERED = {7, 8, 9, 10, 11}


def send(obj: object) -> None:
    sys.stdout.buffer.write(json.dumps(obj).encode() + b"\n")
    sys.stdout.buffer.flush()


def raw(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.buffer.flush()


def main() -> None:
    report = open(os.environ["FAKE_CODEX_REPORT"], "a", encoding="utf-8")  # noqa: SIM115
    size = int(os.environ.get("FAKE_CODEX_BIG", str(2 << 20)))
    answers: dict[int, object] = {}
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, rid = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"id": rid, "result": {"userAgent": "fake"}})
        elif method == "thread/start":
            send({"id": rid, "result": {"thread": {"id": "thr_1"}}})
        elif method == "turn/start":
            send({"id": rid, "result": {"turn": {"id": "turn_1", "status": "inProgress"}}})
            send({"method": "turn/started", "params": {"threadId": "thr_1", "turn": {"id": "turn_1"}}})
            raw(b"this is not json at all")
            raw(b'{"method":"item/started","params":' + b"[" * 5000 + b"]" * 5000 + b"}")
            raw(b'{"method":"item/commandExecution/requestApproval","id":7,"params":{"command":"trunc')
            raw(b'{"method":"item/commandExecution/requestApproval","id":8,"params":{"command":"'
                + b"a" * size + b'"}}')
            send({"method": "item/tool/call", "id": 9, "params": {}})
            send({"method": "item/commandExecution/requestApproval", "id": {"odd": 1}, "params": {}})
            raw(b"\xff\xfe\xfd not utf-8")
            raw(b"[1, 2, 3]")
            send({"id": 999, "result": {}})
            send({"id": "nobody", "error": {"message": "?"}})
            send({"method": "item/completed", "params": {"item": "not an object"}})
            send({"method": "item/commandExecution/requestApproval", "id": 10, "params": "oops"})
            send({"method": "mcpServer/elicitation/request", "id": 11, "params": {}})
        elif rid in ANSWERED and method is None:
            answers[rid] = msg
            report.write(json.dumps(msg) + "\n")
            report.flush()
            if set(answers) == ANSWERED:
                send({"method": "turn/completed",
                      "params": {"threadId": "thr_1", "turn": {"id": "turn_1", "status": "completed"}}})
    report.write(json.dumps({"eof": True}) + "\n")


if __name__ == "__main__":
    main()
