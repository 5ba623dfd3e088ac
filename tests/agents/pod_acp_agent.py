"""An ACP agent whose conversations live in files under $HOME (a pod's volume), so a conversation outlives the pod
it started in: `session/load` on a new pod reads it back. Standard library only (a pod's image has no loopwarden).

    python3 pod_acp_agent.py

It answers `initialize` (loadSession), `session/new` (a new conversation file), `session/load` (its earlier prompts
replayed as user messages, then the answer) and `session/prompt`: each prompt is appended to the file, then it runs
`echo step-N` calls (each asked with `session/request_permission`, 0.2 s apart) until its stdin closes.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from typing import Any

OPTIONS = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
           {"optionId": "no", "name": "Reject", "kind": "reject_once"}]
STORE = os.path.join(os.environ.get("HOME", "."), ".pod-acp")


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **obj}) + "\n")
    sys.stdout.flush()


def read() -> dict[str, Any]:
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    return dict(json.loads(line))


def conversation(sid: str) -> str:
    return os.path.join(STORE, f"{sid}.json")


def update(sid: str, **fields: Any) -> None:
    send({"method": "session/update", "params": {"sessionId": sid, "update": fields}})


def remember(sid: str, text: str) -> list[str]:
    with open(conversation(sid), encoding="utf-8") as f:
        prompts = list(json.load(f)["prompts"])
    prompts.append(text)
    with open(conversation(sid) + ".new", "w", encoding="utf-8") as f:
        json.dump({"prompts": prompts}, f)
    os.replace(conversation(sid) + ".new", conversation(sid))
    return prompts


def work(sid: str) -> None:
    """Calls, each asked first, until stdin closes."""
    n, rid = 0, 1000
    while True:
        n += 1
        rid += 1
        call = f"call-{n}"
        update(sid, sessionUpdate="tool_call", toolCallId=call, title=f"echo step-{n}", kind="execute",
               status="pending", rawInput={"command": f"echo step-{n}"})
        send({"id": rid, "method": "session/request_permission",
              "params": {"sessionId": sid, "options": OPTIONS,
                         "toolCall": {"toolCallId": call, "title": f"echo step-{n}", "kind": "execute"}}})
        while (msg := read()).get("id") != rid or "method" in msg:
            pass
        update(sid, sessionUpdate="tool_call_update", toolCallId=call, status="completed",
               content=[{"type": "content", "content": {"type": "text", "text": f"step-{n}"}}])
        time.sleep(0.2)


def main() -> int:
    os.makedirs(STORE, exist_ok=True)
    while True:
        msg = read()
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send({"id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}})
        elif method == "session/new":
            sid = f"pod-{secrets.token_hex(4)}"
            with open(conversation(sid), "w", encoding="utf-8") as f:
                json.dump({"prompts": []}, f)
            send({"id": rid, "result": {"sessionId": sid}})
        elif method == "session/load":
            sid = str(params.get("sessionId"))
            if not os.path.exists(conversation(sid)):
                send({"id": rid, "error": {"code": -32002, "message": f"no conversation {sid}"}})
                continue
            with open(conversation(sid), encoding="utf-8") as f:
                for text in json.load(f)["prompts"]:
                    update(sid, sessionUpdate="user_message_chunk", content={"type": "text", "text": text})
            send({"id": rid, "result": {}})
        elif method == "session/prompt":
            sid = str(params.get("sessionId"))
            text = "".join(p.get("text", "") for p in params.get("prompt") or [] if isinstance(p, dict))
            remember(sid, text)
            work(sid)
        elif rid is not None:
            send({"id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    sys.exit(main())
