"""A minimal ACP client for smoke tests of the real Gemini CLI, without loopwarden in between.

It speaks JSON-RPC over the agent's stdio, answers each permission request by option kind
(`allow_once` or `reject_once`) and records every message. Every wait is bounded.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


class AcpClient:
    """One `gemini --acp` process and the messages it sent."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, stderr: Path) -> None:
        self._err = stderr.open("wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=env, cwd=cwd, start_new_session=True)
        self.messages: list[dict[str, Any]] = []
        self.permissions: list[dict[str, Any]] = []  # the params of each session/request_permission
        self.answer_kind = "allow_once"
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue()
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._queue.put(json.loads(line))
            except ValueError:
                continue

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        """Send a request and wait for its response, answering permission requests meanwhile."""
        self._ids += 1
        wanted = self._ids
        self.send({"jsonrpc": "2.0", "id": wanted, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no answer to {method} within {timeout}s")
            try:
                msg = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            self.messages.append(msg)
            if msg.get("method") == "session/request_permission":
                self.permissions.append(msg["params"])
                option = next(o for o in msg["params"]["options"] if o["kind"] == self.answer_kind)
                self.send({"jsonrpc": "2.0", "id": msg["id"],
                           "result": {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}})
            elif "method" not in msg and msg.get("id") == wanted:
                if "error" in msg:
                    raise AssertionError(f"{method} failed: {msg['error']}")
                return dict(msg["result"])

    def start_session(self, cwd: Path) -> str:
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {},
                                 "clientInfo": {"name": "loopwarden-tests", "version": "0"}})
        return str(self.call("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"])

    def prompt(self, session: str, text: str) -> dict[str, Any]:
        return self.call("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]})

    def updates(self, kind: str) -> list[dict[str, Any]]:
        return [m["params"]["update"] for m in self.messages
                if m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == kind]

    def close(self, timeout: float = 15) -> int:
        """Close stdin (Gemini then ends by itself) and wait; kill the group if it does not."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)
        finally:
            self._err.close()
