"""A CLI that misbehaves on the wire (garbage lines, unknown requests, a huge hook) under a real daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.timeout(60)

SCRIPT = r'''
import json, sys
log = open(__file__ + ".stdin", "w")
def out(obj):
    sys.stdout.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
    sys.stdout.flush()
def hook(rid, call_id, tool_input):
    return {"type": "control_request", "request_id": rid, "request": {"subtype": "hook_callback",
            "callback_id": "x", "input": {"hook_event_name": "PreToolUse", "tool_name": "Bash",
            "tool_input": tool_input, "tool_use_id": call_id}}}
def text(t):
    return {"type": "assistant", "message": {"id": t, "content": [{"type": "text", "text": t}]}}
log.write(sys.stdin.readline())  # initialize
prompt = json.loads(sys.stdin.readline())
out({**prompt, "isReplay": True})  # as claude does with --replay-user-messages
out("not json at all")
out({"type": "mystery", "subtype": "new"})
out(text("still thinking"))
out([1, 2])
out({"type": "control_request", "request_id": "odd-1", "request": {"subtype": "mcp_message"}})
out(hook("big-1", "toolu_big", {"command": "x" * 200000}))
out(text("carrying on"))
out(hook("ok-1", "toolu_ok", {"command": "ls"}))
for _ in range(3):
    log.write(sys.stdin.readline())
    log.flush()
out({"type": "result", "subtype": "success", "usage": {"input_tokens": 1, "output_tokens": 1}})
log.write(sys.stdin.read())  # until loopwarden closes stdin after the turn
'''


def test_garbage_and_huge_requests_are_answered_and_never_hurt_the_daemon(lw: Harness, tmp_path: Path) -> None:
    fake = tmp_path / "claude"
    fake.write_text(f"#!{sys.executable}\n{SCRIPT}")
    fake.chmod(0o755)
    lw.env["LOOPWARDEN_CLAUDE"] = str(fake)
    done = subprocess.run([PY, "-m", "loopwarden", "run", "-d", "--adapter", "claude-code",
                           "--set", "limits.max_line_bytes=64KiB", "--", "go"],
                          env=lw.env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    sid = done.stdout.strip()
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["state"], snap["exit_code"]) == ("exited", 0), snap
    sent = [json.loads(line) for line in (tmp_path / "claude.stdin").read_text().splitlines()]
    answers = {m["response"]["request_id"]: m["response"] for m in sent if m["type"] == "control_response"}
    assert answers["odd-1"]["subtype"] == "error"
    assert answers["big-1"]["response"]["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert answers["ok-1"]["response"] == {}
    kinds = [e["kind"] for e in lw.events(sid)]
    assert kinds.count("invalid_line") == 3 and kinds.count("tool_call") == 1
    assert lw.request("ping")["sessions"] >= 1  # the daemon is fine


@pytest.mark.parametrize(("args", "env", "code", "says"), [
    (["--max-turns", "3"], {"LOOPWARDEN_CLAUDE": "/bin/true"}, 2, "no prompt for Claude Code"),
    (["--allowedTools", "Bash", "Read"], {"LOOPWARDEN_CLAUDE": "/bin/true"}, 2, "no prompt for Claude Code"),
    (["fix it"], {"LOOPWARDEN_CLAUDE": "/nonexistent/claude"}, 127, "cannot start '/nonexistent/claude'"),
])
def test_a_bad_command_line_is_a_one_line_error(tmp_path: Path, args: list[str], env: dict[str, str], code: int,
                                                says: str) -> None:
    done = subprocess.run([PY, "-m", "loopwarden", "run", "--adapter", "claude-code", "--", *args],
                          env={**os.environ, "LOOPWARDEN_HOME": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == code
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr
