"""A stand-in for a Codex CLI attached by its PreToolUse hook that does not stop when told to: it makes the
same call again and again, running `loopwarden hook codex` for each (as Codex does, `/bin/sh -c`, the event
on stdin) and reporting each answer as one JSON line, whatever the answer says. Like Codex it goes by the
name `codex`.

Usage: fake_codex.py PLAN.json REPORT.jsonl
PLAN: {"hook": COMMAND, "thread": str, "cwd": str, "calls": N}
"""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys


def main() -> None:
    ctypes.CDLL(None).prctl(15, b"codex", 0, 0, 0)  # PR_SET_NAME: the command name in /proc/PID/stat
    with open(sys.argv[1], encoding="utf-8") as f:
        plan = json.load(f)
    with open(sys.argv[2], "a", encoding="utf-8") as out:
        for n in range(1, int(plan["calls"]) + 1):
            event = {"session_id": plan["thread"], "turn_id": "turn-1", "transcript_path": None, "cwd": plan["cwd"],
                     "hook_event_name": "PreToolUse", "model": "gpt-5", "permission_mode": "default",
                     "tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": f"call_{n}"}
            done = subprocess.run(["/bin/sh", "-c", plan["hook"]], input=json.dumps(event), capture_output=True,
                                  text=True, timeout=60, check=False)
            answer = json.loads(done.stdout) if done.stdout.strip() else None
            specific = (answer or {}).get("hookSpecificOutput") or {}
            out.write(json.dumps({"call": n, "denied": specific.get("permissionDecision") == "deny",
                                  "reason": specific.get("permissionDecisionReason")}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
