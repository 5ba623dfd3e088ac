"""A stand-in for Claude Code attached by hooks: it runs `loopwarden hook claude-code` as Claude does
(`/bin/sh -c COMMAND` in a new session, the event on stdin), and runs its "Bash tool" commands the
same way, so they descend from this process. Like Claude Code it goes by the name `claude`. Each result
is reported as one JSON line.

Usage: fake_claude.py PLAN.json REPORT.jsonl

PLAN: {"hook": COMMAND, "session_id": str, "cwd": str, "commands": [COMMAND, ...], "release": PATH}
Steps: a SessionStart hook; each command as a tool; a PreToolUse hook (hooks still answer); then
{"ready": true}, and it waits until the file RELEASE exists (the operator acts meanwhile) and exits.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time


def shell(command: str, stdin: str = "") -> dict[str, object]:
    """Run COMMAND as Claude Code runs hooks and Bash tools: /bin/sh -c, in a session of its own."""
    proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    stdout, stderr = proc.communicate(stdin, timeout=60)
    return {"command": command, "pid": proc.pid, "code": proc.returncode, "stdout": stdout, "stderr": stderr}


def named_claude() -> None:
    """Go by the name `claude`, as Claude Code does (`process.title`), so hooks may bind to this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(15, b"claude", 0, 0, 0)  # PR_SET_NAME: the command name in /proc/PID/stat


def main() -> None:
    named_claude()
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    base = {"session_id": plan["session_id"], "transcript_path": "/tmp/fake.jsonl", "cwd": plan["cwd"],
            "permission_mode": "default"}
    with open(sys.argv[2], "a", encoding="utf-8") as out:
        def report(record: dict[str, object]) -> None:
            out.write(json.dumps(record) + "\n")
            out.flush()

        report({"claude": os.getpid()})
        start = {**base, "hook_event_name": "SessionStart", "source": "startup"}
        report({"hook": "SessionStart", **shell(plan["hook"], json.dumps(start))})
        for command in plan["commands"]:
            report({"tool": True, **shell(command)})
        call = {**base, "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "ls"},
                "tool_use_id": "toolu_after"}
        report({"hook": "PreToolUse", **shell(plan["hook"], json.dumps(call))})
        report({"ready": True})
    deadline = time.monotonic() + 120
    while not os.path.exists(plan["release"]) and time.monotonic() < deadline:
        time.sleep(0.02)


if __name__ == "__main__":
    main()
