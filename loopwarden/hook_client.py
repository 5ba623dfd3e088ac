"""`loopwarden hook claude-code` / `hook codex`: the hook process Claude Code (every hook event) or
Codex (PreToolUse) runs.

It reads the event on stdin, asks the daemon (never starting one) and prints the answer. It fails
open: no daemon, a slow one, bad input or any error means exit 0 with nothing on stdout (allow)
and one line on stderr, so a dead supervisor never blocks the user's agent. An event too deep,
too large for a request or too large to read is never a reason to allow unjudged: its deep parts,
long strings or unread rest are replaced by markers and the rest is judged (docs/claude-code-hooks.md).
It imports only the standard library and the small paths, bounds and lines modules: it runs once
per tool call, so start-up is its cost.

Settings (environment): LOOPWARDEN_HOOK_TIMEOUT (seconds to connect and get an answer, default 1.5),
LOOPWARDEN_HOOK_HOLD (seconds a tool call may wait on a gate or a pause, default 120),
LOOPWARDEN_HOOK_IDLE (seconds after a finished turn before the session counts as ended, default 600).
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from typing import Any

from .supervisor.bounds import MAX_HOOK_INPUT_BYTES, MAX_REQUEST_BYTES, cut_deep_json, may_exceed_depth

MAX_INPUT = MAX_HOOK_INPUT_BYTES  # bytes of hook JSON read from stdin; past it only the head's fields are
MAX_REQUEST = MAX_REQUEST_BYTES  # the daemon's line limit; long strings are cut to fit
CLIP_CHARS = 64 << 10  # a tool output is stored cut to 64 KiB anyway
ITEMS_KEPT = 1000  # entries of one object or array kept when cutting to fit
SKELETON_FIELDS = 64  # top-level fields kept when nothing else fits
TIMEOUT, HOLD, IDLE = 1.5, 120.0, 600.0
_HEAD_FIELD = re.compile(rb'"(session_id|hook_event_name|tool_name|tool_use_id|cwd|transcript_path|agent_id)"'
                         rb'\s*:\s*"([^"\\]{0,1000})"')


class NoAnswer(Exception):
    """The daemon is absent, slow or refused; the hook allows."""


def setting(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


def digest(data: bytes) -> str:
    """A short digest, so two inputs cut to the same text are still told apart."""
    import hashlib  # only when cutting: the hook's start-up stays small

    return hashlib.blake2b(data, digest_size=8).hexdigest()


def clip(value: Any, limit: int = CLIP_CHARS) -> Any:
    """Long strings inside a JSON value cut to `limit` characters, long objects and arrays to ITEMS_KEPT
    entries, each with a marker (a cut string's marker carries its length and digest)."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        full = digest(value.encode("utf-8", "surrogatepass"))
        return value[:limit] + f"… [{len(value):,} characters, digest {full}]"
    if isinstance(value, dict):
        out = {k: clip(v, limit) for k, v in list(value.items())[:ITEMS_KEPT]}
        if len(value) > ITEMS_KEPT:
            out["…"] = f"[{len(value) - ITEMS_KEPT:,} more entries cut by loopwarden]"
        return out
    if isinstance(value, list):
        items = [clip(v, limit) for v in value[:ITEMS_KEPT]]
        if len(value) > ITEMS_KEPT:
            items.append(f"[{len(value) - ITEMS_KEPT:,} more items cut by loopwarden]")
        return items
    return value


def skeleton(event: dict[str, Any], size: int, full: str) -> dict[str, Any]:
    """What is left of an event that no cut made fit: its short top-level fields, every other one a marker."""
    marker = f"[cut by loopwarden: the hook event is {size:,} bytes, over the {MAX_REQUEST:,}-byte request limit; " \
             f"digest {full}]"
    out: dict[str, Any] = {}
    for key, value in list(event.items())[:SKELETON_FIELDS]:
        if isinstance(value, str):
            out[str(key)[:256]] = value[:256]
        elif value is None or isinstance(value, (bool, int, float)):
            out[str(key)[:256]] = value
        else:
            out[str(key)[:256]] = marker
    return out


def request_line(event: dict[str, Any], hold: float, idle: float, agent: str | None = None) -> bytes:
    """The `hook` request, cut to fit the daemon's line limit (never over it: a refused request allows);
    `agent` names a hooked agent other than Claude Code (the daemon's default)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("LOOPWARDEN_") and not k.startswith("LOOPWARDEN_HOOK_")}
    env.pop("LOOPWARDEN_HOME", None)
    message = {"id": 1, "op": "hook", "client": "hook", "event": event, "hold": hold, "idle": idle,
               "config_env": env}
    if agent:
        message["agent"] = agent
    data = full = _dumps(message)
    limit = CLIP_CHARS
    while len(data) > MAX_REQUEST and limit > 256:
        message["event"] = clip(event, limit)
        data = _dumps(message)
        limit //= 4
    if len(data) > MAX_REQUEST:  # a multitude of small values: only the fields that name the call remain
        message["event"] = skeleton(event, len(full), digest(full))
        data = _dumps(message)
    return data + b"\n"


def read_event(stdin: Any) -> dict[str, Any]:
    """The hook event on stdin, nested at most MAX_DEPTH deep (deeper parts are cut, as the daemon would)."""
    data = stdin.read(MAX_INPUT + 1)
    if len(data) > MAX_INPUT:
        return unread_event(data, stdin)
    if may_exceed_depth(data):
        data = cut_deep_json(data)  # Python's json gives up near 1000 levels; the daemon keeps 64
    try:
        event = json.loads(data)
    except ValueError:
        raise NoAnswer("hook input is not JSON") from None
    if not isinstance(event, dict):
        raise NoAnswer("hook input is not a JSON object")
    return event


def unread_event(head: bytes, stdin: Any) -> dict[str, Any]:
    """An event too large to read: the fields that name it, from its head, and a marker for the rest."""
    size = len(head)
    while chunk := stdin.read(1 << 20):  # drained, so Claude Code's write completes and the size is known
        size += len(chunk)
    fields: dict[str, Any] = {}
    for match in _HEAD_FIELD.finditer(head[: 1 << 16]):
        fields.setdefault(match.group(1).decode(), match.group(2).decode("utf-8", "replace"))
    if "session_id" not in fields or "hook_event_name" not in fields:
        raise NoAnswer(f"hook input over {MAX_INPUT:,} bytes names no session")
    marker = (f"[not read by loopwarden: the hook event is {size:,} bytes, over the {MAX_INPUT:,}-byte limit; "
              f"digest of its head {digest(head[: 1 << 20])}]")
    return {**fields, "tool_input": {"loopwarden": marker}, "tool_response": marker}


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


def decide(event: dict[str, Any], socket_path: str, agent: str | None = None) -> dict[str, Any] | None:
    """The daemon's answer for one event (a hook output object), holding while it says so."""
    timeout = setting("LOOPWARDEN_HOOK_TIMEOUT", TIMEOUT)
    hold = setting("LOOPWARDEN_HOOK_HOLD", HOLD)
    conn = Connection(socket_path, timeout)
    try:
        result = conn.ask(request_line(event, hold, setting("LOOPWARDEN_HOOK_IDLE", IDLE), agent), timeout)
        if isinstance(result, dict) and result.get("wait"):
            wait = float(result["wait"])
            line = _dumps({"id": 2, "op": "hook_wait", "client": "hook", "session": result.get("session"),
                           "ticket": result.get("ticket"), "hold": wait}) + b"\n"
            result = conn.ask(line, wait + timeout)
    finally:
        conn.close()
    output = result.get("output") if isinstance(result, dict) else None
    return output if isinstance(output, dict) else None


def main(stdin: Any = None, stdout: Any = None, agent: str | None = None) -> int:
    """Always 0: the answer (if any) is JSON on stdout; trouble is one line on stderr."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout
    try:
        event = read_event(stdin)
        from .paths import default_paths

        output = decide(event, str(default_paths().socket), agent)
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
