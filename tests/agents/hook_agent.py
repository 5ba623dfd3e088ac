"""A stand-in for an agent the user started (Claude Code or Codex) that reports to loopwarden by its hooks.

    hook_agent.py PLAN.json

PLAN: {"name": "claude" | "codex", "hook": COMMAND, "events": [EVENT, ...], "hook_env": {VAR: VALUE},
       "tool": COMMAND or null, "ready": PATH, "release": PATH or null, "out": PATH}

It goes by the agent's program name, runs the hook for each event as the agents do (`/bin/sh -c COMMAND`,
the event on stdin, HOOK_ENV added), then starts its "tool" (`/bin/sh -c`, in a session of its own, as
Claude Code runs a Bash tool), writes READY, and waits: for the file RELEASE when given, else for the tool.
Its report (the hooks' answers, the tool's exit code) goes to OUT as one JSON object.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    ctypes.CDLL(None).prctl(15, plan["name"].encode(), 0, 0, 0)  # PR_SET_NAME, as `process.title` does
    env = {**os.environ, **plan.get("hook_env", {})}
    report: dict[str, Any] = {"pid": os.getpid(), "answers": []}
    for event in plan["events"]:
        done = subprocess.run(["/bin/sh", "-c", plan["hook"]], input=json.dumps(event), capture_output=True,
                              text=True, env=env, timeout=60, check=False)
        report["answers"].append(json.loads(done.stdout) if done.stdout.strip() else None)
    tool = subprocess.Popen(["/bin/sh", "-c", plan["tool"]], start_new_session=True) if plan.get("tool") else None
    Path(plan["ready"]).write_text(json.dumps(report))
    if plan.get("release"):
        deadline = time.monotonic() + 120
        while not os.path.exists(plan["release"]) and time.monotonic() < deadline:
            time.sleep(0.02)
    if tool is not None:
        report["tool"] = tool.wait()
    Path(plan["out"]).write_text(json.dumps(report))


if __name__ == "__main__":
    main()
