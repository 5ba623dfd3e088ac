"""Running `loopwarden hook codex` and `hook install --agent codex` as Codex and a user would."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.claude_code_hook.helpers import Answer
from tests.support.paths import PY


def run_hook(env: dict[str, str], data: bytes | str | dict[str, Any], timeout: float = 30) -> Answer:
    """One run of the Codex hook command; `data` is the event (a dict) or raw stdin."""
    raw = json.dumps(data).encode() if isinstance(data, dict) else data
    raw = raw.encode() if isinstance(raw, str) else raw
    start = time.monotonic()
    done = subprocess.run([PY, "-m", "loopwarden", "hook", "codex"], input=raw, env=env, capture_output=True,
                          timeout=timeout, check=False)
    out = done.stdout.decode().strip()
    return Answer(done.returncode, json.loads(out) if out else None, done.stderr.decode(), time.monotonic() - start)


def pre(command: str = "ls", call: str = "call_1", thread: str = "th-1", turn: str = "turn-1",
        cwd: str = "/tmp/project") -> dict[str, Any]:
    """A PreToolUse event with the fields Codex CLI 0.163.0 sends."""
    return {"session_id": thread, "turn_id": turn, "transcript_path": f"/tmp/{thread}.jsonl", "cwd": cwd,
            "hook_event_name": "PreToolUse", "model": "gpt-5.5", "permission_mode": "bypassPermissions",
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": call}


def lw_hook(codex_home: Path | None, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`loopwarden hook ARGS` with CODEX_HOME (None: unset) and HOME."""
    env = {k: v for k, v in os.environ.items() if k != "CODEX_HOME"}
    env["HOME"] = str(home)
    if codex_home is not None:
        env["CODEX_HOME"] = str(codex_home)
    return subprocess.run([PY, "-m", "loopwarden", "hook", *args], cwd=home, env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def hooks_list(codex_bin: str, codex_home: Path, cwd: Path, timeout: float = 30) -> list[dict[str, Any]]:
    """The hooks `codex app-server` reports (`hooks/list`), with their keys and trust status."""
    proc = subprocess.Popen([codex_bin, "app-server"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env={"PATH": os.environ.get("PATH", ""), "HOME": str(codex_home),
                                 "CODEX_HOME": str(codex_home)})
    assert proc.stdin and proc.stdout
    try:
        for message in ({"id": 0, "method": "initialize", "params": {
                            "clientInfo": {"name": "loopwarden-test", "title": "t", "version": "1"},
                            "capabilities": {"experimentalApi": True}}},
                        {"method": "initialized"}, {"id": 1, "method": "hooks/list", "params": {}}):
            proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()  # app-server answers every request; EOF ends the loop too
            if not line:
                break
            reply = json.loads(line)
            if reply.get("id") == 1:
                return [h for entry in reply["result"]["data"] for h in entry["hooks"]]
        raise AssertionError("no hooks/list answer from codex app-server")
    finally:
        proc.kill()
        proc.wait(10)
