"""A native agent that sends tool_call lines nested N levels deep (or exactly N bytes long), then `done`.

    python tests/agents/deep_call.py [--handshake] [--go FILE] SPEC...

Each SPEC is `depth=N` (the line's own object is level 1, so `args` nests N-1 levels) or `bytes=N`
(a shallow call whose line is exactly N bytes). Calls are numbered c1, c2, ... and differ, so no
repetition guard fires. With --go, it sends a `user_message` every 50 ms until FILE exists (a
test's signal that a follower sees the stream). With --handshake, it waits for each call's verdict
and reports it as a system_nudge "cI ACTION: MESSAGE" (no guard counts those, so a row of refusals
never opens a monologue gate). Exit 0; stdin closed while waiting: 3; no go signal within 60 s: 4.
"""

from __future__ import annotations

import json
import os
import sys
import time


def emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def call_line(spec: str, n: int) -> str:
    """One tool_call line built as text, so no JSON library's nesting limit applies."""
    head = f'{{"type":"tool_call","tool":"probe","call_id":"c{n}","args":'
    kind, value = spec.split("=", 1)
    size = int(value)
    if kind == "depth":
        wrappers = size - 2  # the line and the innermost object are the other two levels
        return head + '{"a":' * wrappers + f'{{"n":{n}}}' + "}" * wrappers + "}"
    pad = size - len(head) - len('{"pad":""}}')
    return head + '{"pad":"' + "x" * pad + '"}}'


def verdict(call_id: str) -> dict:
    """The next verdict line for `call_id` on stdin (other lines, such as injections, are skipped)."""
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(3)
        msg = json.loads(line)
        if msg.get("type") == "verdict" and msg.get("call_id") == call_id:
            return msg


def main() -> int:
    args = sys.argv[1:]
    handshake = "--handshake" in args
    go = args[args.index("--go") + 1] if "--go" in args else None
    specs = [a for a in args if "=" in a and not a.startswith("--")]
    emit(json.dumps({"type": "hello", "name": "deep-call", "handshake": handshake}))
    if handshake:
        sys.stdin.readline()  # welcome
    deadline = time.monotonic() + 60
    while go and not os.path.exists(go):
        if time.monotonic() > deadline:
            return 4
        emit(json.dumps({"type": "user_message", "text": "waiting for go"}))
        time.sleep(0.05)
    for n, spec in enumerate(specs, 1):
        emit(call_line(spec, n))
        if handshake:
            got = verdict(f"c{n}")
            emit(json.dumps({"type": "system_nudge",
                             "text": f"c{n} {got.get('action')}: {str(got.get('message'))[:200]}"}))
    emit(json.dumps({"type": "done", "summary": f"{len(specs)} calls"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
