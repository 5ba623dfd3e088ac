"""Running `loopwarden hook claude-code` as Claude Code does: hook JSON on stdin, the answer on stdout."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from tests.support.paths import PY


@dataclass
class Answer:
    code: int
    output: dict[str, Any] | None
    stderr: str
    seconds: float


def run_hook(env: dict[str, str], data: bytes | str | dict[str, Any], timeout: float = 30) -> Answer:
    """One hook run; `data` is the event (a dict) or raw stdin."""
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    raw = raw.encode() if isinstance(raw, str) else raw
    start = time.monotonic()
    done = subprocess.run([PY, "-m", "loopwarden", "hook", "claude-code"], input=raw, env=env,
                          capture_output=True, timeout=timeout, check=False)
    out = done.stdout.decode().strip()
    return Answer(done.returncode, json.loads(out) if out else None, done.stderr.decode(), time.monotonic() - start)


def event(name: str, session: str = "c-1", cwd: str = "/tmp/project", **fields: Any) -> dict[str, Any]:
    """A hook event with the fields Claude Code 2.1.330 sends with every event."""
    return {"session_id": session, "transcript_path": f"/tmp/{session}.jsonl", "cwd": cwd,
            "permission_mode": "default", "hook_event_name": name, **fields}


def pre(command: str = "ls", call: str = "toolu_1", **kw: Any) -> dict[str, Any]:
    return event("PreToolUse", tool_name="Bash", tool_input={"command": command}, tool_use_id=call, **kw)


def post(command: str = "ls", call: str = "toolu_1", stdout: str = "a.txt", **kw: Any) -> dict[str, Any]:
    return event("PostToolUse", tool_name="Bash", tool_input={"command": command}, tool_use_id=call,
                 tool_response={"stdout": stdout, "stderr": "", "interrupted": False, "isImage": False}, **kw)


def denial(answer: Answer) -> str | None:
    """The deny reason of a PreToolUse answer, or None when it allows."""
    specific = (answer.output or {}).get("hookSpecificOutput") or {}
    return specific.get("permissionDecisionReason") if specific.get("permissionDecision") == "deny" else None


def hooked(lw: Any, claude_session: str = "c-1") -> list[dict[str, Any]]:
    """The attached sessions of one Claude session id, oldest first."""
    return [s for s in lw.request("list") if s.get("claude_session") == claude_session]
