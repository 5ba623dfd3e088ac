"""A native-protocol agent that edits files in its working directory, step by step as its arguments say.

    python tests/agents/editor.py STEP...

Each STEP, in order, reported as a tool_call and its tool_result:
  write:PATH:TEXT     PATH holds TEXT (created, parents too, or replaced)
  append:PATH:TEXT    TEXT added at PATH's end
  delete:PATH         PATH removed
  move:OLD:NEW        OLD renamed NEW
  lines:PATH:N        PATH holds N numbered lines ("line 1" ...)
  commit:MESSAGE      `git add -A` and `git commit` in its directory, as the agent's own commit
  wait                says so (an assistant_message "waiting"), then waits for the operator's inject
                      (`loopwarden inject`): a test reads the diff while it waits
Then `done`, exit 0. stdin EOF or a stop line while waiting: exit 3. PATH may hold any character but NUL and ':'.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def emit(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def wait_for_operator() -> None:
    """Until the operator's inject arrives on stdin (a nudge of a rule is not it)."""
    while line := sys.stdin.buffer.readline():
        message = json.loads(line)
        if message.get("type") == "stop":
            break
        if message.get("type") == "inject" and message.get("kind") == "operator":
            return
    sys.exit(3)


def step(word: str) -> str:
    """One step carried out; what it did, for the tool_result."""
    verb, _, rest = word.partition(":")
    if verb == "write":
        path, _, text = rest.partition(":")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    elif verb == "append":
        path, _, text = rest.partition(":")
        with open(path, "a") as f:
            f.write(text)
    elif verb == "delete":
        os.remove(rest)
    elif verb == "lines":
        path, _, count = rest.partition(":")
        Path(path).write_text("".join(f"line {i}\n" for i in range(1, int(count) + 1)))
    elif verb == "move":
        old, _, new = rest.partition(":")
        os.rename(old, new)
    elif verb == "commit":
        git = ["git", "-c", "user.name=agent", "-c", "user.email=agent@example.invalid"]
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", rest], check=True)
    else:
        raise SystemExit(f"unknown step {word!r}")
    return f"{verb} done"


def main() -> int:
    emit({"type": "hello", "name": "editor", "protocol": 1})
    for i, word in enumerate(sys.argv[1:]):
        if word == "wait":
            emit({"type": "assistant_message", "text": "waiting"})
            wait_for_operator()
            continue
        call = f"c{i}"
        emit({"type": "tool_call", "tool": "edit", "args": {"step": word}, "call_id": call})
        emit({"type": "tool_result", "tool": "edit", "call_id": call, "output": step(word)})
    emit({"type": "done", "summary": "edited"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
