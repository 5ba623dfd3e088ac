"""`loopwarden hook claude-code`: the hook process Claude Code runs for every hook event.

It reads the event on stdin, asks the daemon (never starting one) and prints the answer. It fails
open: no daemon, a slow one, bad input or any error means exit 0 with nothing on stdout (allow)
and one line on stderr, so a dead supervisor never blocks the user's agent. It imports only the
standard library and the paths module: it runs once per tool call, so start-up is its cost.

Settings (environment): LOOPWARDEN_HOOK_TIMEOUT (seconds to connect and get an answer, default 1.5),
LOOPWARDEN_HOOK_HOLD (seconds a tool call may wait on a gate or a pause, default 120),
LOOPWARDEN_HOOK_IDLE (seconds after a finished turn before the session counts as ended, default 600).
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any

MAX_INPUT = 16 << 20  # bytes of hook JSON read from stdin; more is not judged
MAX_REQUEST = 900 << 10  # the daemon takes lines up to 1 MiB; big tool outputs are cut to fit
CLIP_CHARS = 64 << 10  # a tool output is stored cut to 64 KiB anyway
TIMEOUT, HOLD, IDLE = 1.5, 120.0, 600.0


class NoAnswer(Exception):
    """The daemon is absent, slow or refused; the hook allows."""


def setting(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


def clip(value: Any, limit: int = CLIP_CHARS) -> Any:
    """Long strings inside a JSON value cut to `limit` characters (with a marker)."""
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + f"… [{len(value):,} characters]"
    if isinstance(value, dict):
        return {k: clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [clip(v, limit) for v in value[:1000]]
    return value


def request_line(event: dict[str, Any], hold: float, idle: float) -> bytes:
    """The `hook` request, cut to fit the daemon's line limit."""
    env = {k: v for k, v in os.environ.items() if k.startswith("LOOPWARDEN_") and not k.startswith("LOOPWARDEN_HOOK_")}
    env.pop("LOOPWARDEN_HOME", None)
    message = {"id": 1, "op": "hook", "client": "hook", "event": event, "hold": hold, "idle": idle,
               "config_env": env}
    data = _dumps(message)
    limit = CLIP_CHARS
    while len(data) > MAX_REQUEST and limit > 256:
        message["event"] = clip(event, limit)
        data = _dumps(message)
        limit //= 4
    return data + b"\n"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, default=str, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")


class Connection:
    """One socket to the daemon with a deadline per answer."""

    def __init__(self, path: str, timeout: float) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.buffer = b""
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(path)
        except OSError as exc:
            self.sock.close()
            raise NoAnswer(f"no daemon at {path} ({exc.strerror or exc})") from None

    def ask(self, line: bytes, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        try:
            self.sock.sendall(line)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoAnswer(f"no answer within {timeout:g}s")
                self.sock.settimeout(left)
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    raise NoAnswer("the daemon closed the connection")
                self.buffer += chunk
        except TimeoutError:
            raise NoAnswer(f"no answer within {timeout:g}s") from None
        except OSError as exc:
            raise NoAnswer(f"lost the daemon ({exc.strerror or exc})") from None
        line, self.buffer = self.buffer.split(b"\n", 1)
        reply = json.loads(line)
        if not isinstance(reply, dict) or not reply.get("ok"):
            raise NoAnswer(str(reply.get("error") if isinstance(reply, dict) else reply))
        return reply.get("result")

    def close(self) -> None:
        self.sock.close()


def decide(event: dict[str, Any], socket_path: str) -> dict[str, Any] | None:
    """The daemon's answer for one event (a Claude Code hook output object), holding while it says so."""
    timeout = setting("LOOPWARDEN_HOOK_TIMEOUT", TIMEOUT)
    hold = setting("LOOPWARDEN_HOOK_HOLD", HOLD)
    conn = Connection(socket_path, timeout)
    try:
        result = conn.ask(request_line(event, hold, setting("LOOPWARDEN_HOOK_IDLE", IDLE)), timeout)
        if isinstance(result, dict) and result.get("wait"):
            wait = float(result["wait"])
            line = _dumps({"id": 2, "op": "hook_wait", "client": "hook", "session": result.get("session"),
                           "ticket": result.get("ticket"), "hold": wait}) + b"\n"
            result = conn.ask(line, wait + timeout)
    finally:
        conn.close()
    output = result.get("output") if isinstance(result, dict) else None
    return output if isinstance(output, dict) else None


def main(stdin: Any = None, stdout: Any = None) -> int:
    """Always 0: the answer (if any) is JSON on stdout; trouble is one line on stderr."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    try:
        data = stdin.read(MAX_INPUT + 1)
        if len(data) > MAX_INPUT:
            raise NoAnswer(f"hook input over {MAX_INPUT:,} bytes, not judged")
        try:
            event = json.loads(data)
        except ValueError:
            raise NoAnswer("hook input is not JSON") from None
        if not isinstance(event, dict):
            raise NoAnswer("hook input is not a JSON object")
        from .supervisor.paths import default_paths

        output = decide(event, str(default_paths().socket))
    except NoAnswer as exc:
        sys.stderr.write(f"loopwarden hook: {exc}; allowing\n")
        return 0
    except Exception as exc:  # noqa: BLE001 - whatever went wrong, the user's agent carries on
        sys.stderr.write(f"loopwarden hook: {type(exc).__name__}: {exc}; allowing\n")
        return 0
    if output:
        stdout.write(json.dumps(output) + "\n")
        stdout.flush()
    return 0
