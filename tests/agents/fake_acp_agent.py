"""A scripted, hostile stand-in for an ACP agent (Gemini CLI, OpenCode, claude-agent-acp): it speaks
`initialize`, `session/new`, `session/prompt` and asks `session/request_permission` before each call.

Usage: fake_acp_agent.py MODE   ($FAKE_ACP_MODE wins over MODE)
REPORT: $FAKE_ACP_REPORT, one JSON line per session/new, prompt, answer and cancel.

Modes:
  loop      every turn asks to run `echo looping` again and again ($FAKE_ACP_CALLS per turn, default 40);
            a rejection ends the turn; the first turn ends `refusal` when $FAKE_ACP_FAIL_FIRST is set
  once      one call `touch held-marker` (run when allowed), then end_turn
  steps     calls `echo step-N` that each take 0.3 s, without end ($FAKE_ACP_CALLS in all)
  count     calls `true N` for N = 0.. ($FAKE_ACP_CALLS), never the same, each run at once; with
            $FAKE_ACP_TIMES, the milliseconds from each request written to its answer read go there (JSON)
  sleep     one allowed call starts `sleep $FAKE_ACP_SLEEP` (default 600.25) as a child and waits for it; a test
            that looks for that process by its command line gives it a length of its own
  edit      Gemini CLI's way of editing: an `edit` call whose content is a `diff` block (path, oldText, newText)
            changes notes.txt in its directory, a second one makes new.txt (no oldText); each written when allowed
  hostile   garbage lines, a line nested thousands deep, an over-long request, unreadable ids, fs/terminal and
            unknown requests, then a real permission request; the turn ends once every answer came

The permission options put the `*_always` kinds first, so a client that picks by position is caught.
Exits when its stdin closes (or on SIGTERM).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from typing import Any

OPTIONS = [{"optionId": "always-yes", "name": "Always allow", "kind": "allow_always"},
           {"optionId": "never", "name": "Always reject", "kind": "reject_always"},
           {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
           {"optionId": "no", "name": "Reject", "kind": "reject_once"}]


class Agent:
    def __init__(self, mode: str) -> None:
        self.mode = mode
        path = os.environ.get("FAKE_ACP_REPORT")
        self.report = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115
        self.ids = 100
        self.cancelled = False
        self.turns = 0
        self.session = "sess-1"
        self.backlog: list[dict[str, Any]] = []
        self.rtts: list[float] = []

    def send(self, obj: dict[str, Any]) -> None:
        sys.stdout.buffer.write(json.dumps({"jsonrpc": "2.0", **obj}).encode() + b"\n")
        sys.stdout.buffer.flush()

    def raw(self, data: bytes) -> None:
        sys.stdout.buffer.write(data + b"\n")
        sys.stdout.buffer.flush()

    def note(self, obj: dict[str, Any]) -> None:
        if self.report:
            self.report.write(json.dumps(obj) + "\n")
            self.report.flush()

    def update(self, **update: Any) -> None:
        self.send({"method": "session/update", "params": {"sessionId": self.session, "update": update}})

    def read(self) -> dict[str, Any] | None:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        msg: dict[str, Any] = json.loads(line)
        if msg.get("method") == "session/cancel":
            self.cancelled = True
            self.note({"cancel": True})
        return msg

    def wait_answers(self, ids: set[Any]) -> dict[Any, dict[str, Any]]:
        """Read until every id in `ids` was answered (other messages kept for later); exits on EOF."""
        got: dict[Any, dict[str, Any]] = {}
        while ids - set(got):
            msg = self.read()
            if msg is None:
                sys.exit(0)
            if msg.get("method") is None and msg.get("id") in ids:
                got[msg["id"]] = msg
                self.note({"answer": msg})
            elif msg.get("method") not in (None, "session/cancel"):
                self.backlog.append(msg)
        return got

    def ask(self, call_id: str, title: str, raw_input: dict[str, Any]) -> str:
        """A tool_call update, then a permission request; the chosen option id or 'cancelled'."""
        self.update(sessionUpdate="tool_call", toolCallId=call_id, title=title, kind="execute", status="pending",
                    rawInput=raw_input)
        self.ids += 1
        rid = self.ids
        self.send({"id": rid, "method": "session/request_permission",
                   "params": {"sessionId": self.session, "options": OPTIONS,
                              "toolCall": {"toolCallId": call_id, "title": title, "kind": "execute"}}})
        asked = time.perf_counter()
        outcome = self.wait_answers({rid})[rid].get("result", {}).get("outcome", {})
        self.rtts.append((time.perf_counter() - asked) * 1000)
        return str(outcome.get("optionId") if outcome.get("outcome") == "selected" else "cancelled")

    def run_call(self, call_id: str, command: str) -> str:
        choice = self.ask(call_id, command, {"command": command})
        if choice != "yes":
            self.update(sessionUpdate="tool_call_update", toolCallId=call_id, status="failed",
                        content=[{"type": "content", "content": {"type": "text", "text": "User refused permission"}}])
            return choice
        out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=False).stdout
        self.update(sessionUpdate="tool_call_update", toolCallId=call_id, status="completed",
                    content=[{"type": "content", "content": {"type": "text", "text": out}}])
        return choice

    def edit(self, call_id: str, name: str, old: str | None, new: str) -> str:
        """An edit call carrying its diff (ACP `diff` content), asked first; the file written when allowed."""
        path = os.path.abspath(name)
        diff = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
        self.update(sessionUpdate="tool_call", toolCallId=call_id, title=f"Edit {name}", kind="edit",
                    status="pending", content=diff, locations=[{"path": path}])
        self.ids += 1
        rid = self.ids
        self.send({"id": rid, "method": "session/request_permission",
                   "params": {"sessionId": self.session, "options": OPTIONS,
                              "toolCall": {"toolCallId": call_id, "title": f"Edit {name}", "kind": "edit",
                                           "content": diff}}})
        outcome = self.wait_answers({rid})[rid].get("result", {}).get("outcome", {})
        choice = str(outcome.get("optionId") if outcome.get("outcome") == "selected" else "cancelled")
        if choice == "yes":
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
        self.update(sessionUpdate="tool_call_update", toolCallId=call_id,
                    status="completed" if choice == "yes" else "failed", content=diff)
        return choice

    def turn(self, text: str) -> str:
        self.turns += 1
        self.cancelled = False
        self.update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "Working "})
        self.update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "on it."})
        self.update(sessionUpdate="plan", entries=[{"content": "do the task", "priority": "high",
                                                     "status": "in_progress"}])
        calls = int(os.environ.get("FAKE_ACP_CALLS", "40"))
        if self.mode == "loop":
            if self.turns == 1 and os.environ.get("FAKE_ACP_FAIL_FIRST"):
                return "refusal"
            for n in range(calls):
                if self.run_call(f"t{self.turns}-c{n}", "echo looping") != "yes" or self.cancelled:
                    break
        elif self.mode == "once":
            self.run_call(f"t{self.turns}-once", "touch held-marker")
        elif self.mode == "steps":
            for n in range(calls):
                if self.run_call(f"step-{n}", f"sleep 0.3; echo step-{n}") != "yes" or self.cancelled:
                    break
        elif self.mode == "count":
            self.count(calls)
        elif self.mode == "sleep":
            self.run_call("sleeper", f"sleep {os.environ.get('FAKE_ACP_SLEEP', '600.25')}")
        elif self.mode == "edit":
            self.edit("e1", "notes.txt", "alpha\nbeta\n", "alpha\nBETA\ngamma\n")
            self.edit("e2", "new.txt", None, "fresh\n")
        elif self.mode == "hostile":
            self.hostile()
        self.update(sessionUpdate="agent_message_chunk", content={"type": "text", "text": "Done."})
        return "cancelled" if self.cancelled else "end_turn"

    def count(self, calls: int) -> None:
        for n in range(calls):
            if self.ask(f"count-{n}", f"true {n}", {"command": f"true {n}"}) != "yes" or self.cancelled:
                break
            self.update(sessionUpdate="tool_call_update", toolCallId=f"count-{n}", status="completed",
                        content=[{"type": "content", "content": {"type": "text", "text": ""}}])
        if os.environ.get("FAKE_ACP_TIMES"):
            with open(os.environ["FAKE_ACP_TIMES"], "w", encoding="utf-8") as f:
                json.dump(self.rtts, f)

    def hostile(self) -> None:
        size = int(os.environ.get("FAKE_ACP_BIG", str(2 << 20)))
        self.raw(b"this is not json at all")
        self.raw(b'{"method":"session/update","params":' + b"[" * 5000 + b"]" * 5000 + b"}")
        self.raw(b'{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"toolCall":"trunc')
        self.raw(b'{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"x":"'
                 + b"a" * size + b'"}}')
        self.send({"id": 9, "method": "fs/read_text_file", "params": {"sessionId": self.session, "path": "/etc/x"}})
        self.send({"id": 10, "method": "terminal/create", "params": {"command": "ls"}})
        self.send({"id": "eleven", "method": "vendor/unknown", "params": {}})
        self.send({"id": {"odd": 1}, "method": "session/request_permission", "params": {}})
        self.raw(b"\xff\xfe\xfd not utf-8")
        self.raw(b"[1, 2, 3]")
        self.send({"id": 999, "result": {}})
        self.send({"method": "session/update", "params": {"update": "not an object"}})
        self.send({"id": 12, "method": "session/request_permission", "params": "oops"})
        self.wait_answers({7, 8, 9, 10, "eleven", 12})
        self.run_call("real-1", "echo after-garbage")

    def main(self) -> None:
        while True:
            msg = self.backlog.pop(0) if self.backlog else self.read()
            if msg is None:
                return
            method, rid = msg.get("method"), msg.get("id")
            if method == "initialize":
                self.send({"id": rid, "result": {"protocolVersion": 1, "agentCapabilities": {},
                                                 "authMethods": []}})
            elif method == "session/new":
                self.note({"session_new": msg.get("params"), "argv": sys.argv[1:],
                           "no_relaunch": os.environ.get("GEMINI_CLI_NO_RELAUNCH")})
                self.send({"id": rid, "result": {"sessionId": self.session}})
            elif method == "session/prompt":
                text = "".join(b.get("text", "") for b in msg["params"]["prompt"])
                self.note({"prompt": text})
                reason = self.turn(text)
                self.send({"id": rid, "result": {"stopReason": reason,
                                                 "usage": {"inputTokens": 100, "outputTokens": 10}}})
            elif rid is not None and method is not None:
                self.send({"id": rid, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    try:
        Agent(os.environ.get("FAKE_ACP_MODE") or (sys.argv[1] if len(sys.argv) > 1 else "loop")).main()
    except (BrokenPipeError, KeyboardInterrupt):
        pass

