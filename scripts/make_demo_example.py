"""Write loopwarden/examples/demo.jsonl: one scripted agent that loops in every way loopwarden knows."""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "loopwarden" / "examples" / "demo.jsonl"


def main() -> None:
    t = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    lines: list[str] = []

    def emit(obj: dict | str, dt: float = 1.0) -> None:
        nonlocal t
        t += dt
        if isinstance(obj, str):
            lines.append(obj)
        else:
            lines.append(json.dumps({**obj, "ts": round(t, 3)}))

    def call(tool: str, args: dict, cid: str, output: str, is_error: bool = False, **extra: object) -> None:
        emit({"type": "tool_call", "tool": tool, "args": args, "call_id": cid})
        emit({"type": "tool_result", "tool": tool, "call_id": cid, "output": output, "is_error": is_error, **extra})

    emit({"type": "hello", "name": "demo-agent", "handshake": True}, 0)
    emit({"type": "user_message", "text": "Fix the failing login test in tests/test_auth.py."})
    # 1. The same call twice, with keys reordered: a repetition nudge.
    call("read_file", {"path": "src/auth.py", "limit": 200}, "c1", "def login(user, password):\n    ...")
    call("read_file", {"limit": 200.0, "path": " src/auth.py"}, "c2", "def login(user, password):\n    ...")
    # 2. The same error from one tool with varying arguments: the 4th call is blocked.
    for i, target in enumerate(["tests/test_auth.py", "tests/test_auth.py::test_login", "-x tests", "tests -k login"]):
        err = (f"FAILED tests/test_auth.py::test_login - AssertionError: expected 200, got 500\n"
               f"1 failed in {0.41 + i / 10:.2f}s")
        if i < 3:
            call("run_tests", {"target": target}, f"t{i}", err, True, exit_code=1)
        else:
            emit({"type": "tool_call", "tool": "run_tests", "args": {"target": target}, "call_id": f"t{i}"})
    call("read_file", {"path": "src/session.py"}, "c3", "SESSION_TTL = 0  # bug?")
    # 3. Thinking aloud with no tool: a monologue nudge at the third message.
    for text in ["The TTL might be the issue.", "Or maybe the password hash.", "Let me think about the hash again."]:
        emit({"type": "assistant_message", "text": text})
    # 4. Malformed output: a broken line and a validation error, then a valid step.
    emit('{"type": "tool_call", "tool": "edit_file", "args": {"path": "src/session.py"')
    emit({"type": "validation_error", "message": "tool input is not valid JSON", "raw": "{path: src/session.py"})
    call("edit_file", {"path": "src/session.py", "old": "SESSION_TTL = 0", "new": "SESSION_TTL = 3600"}, "e1", "ok")
    # 5. Alternating between two calls that keep returning the same thing.
    for i in range(3):
        call("git_diff", {}, f"d{i}", "- SESSION_TTL = 0\n+ SESSION_TTL = 3600")
        call("git_status", {}, f"s{i}", "modified: src/session.py")
    # 6. A slow tool: 45 s of silence earns a stall nudge.
    emit({"type": "tool_call", "tool": "fetch_url", "args": {"url": "https://pypi.org/simple/bcrypt/"},
          "call_id": "f1"})
    emit({"type": "tool_result", "tool": "fetch_url", "call_id": "f1", "output": "error: 503 Service Unavailable",
          "is_error": True}, 45.0)
    # 7. A huge output: spilled to a private file, the agent gets the path and a preview.
    huge = "\n".join(f"DEBUG request {i}: GET /login -> 500 (session expired)" for i in range(5000))
    call("read_logs", {"service": "auth"}, "l1", huge)
    # 8. The same failure four times in one task: the loop counter opens a gate for a human.
    for _ in range(4):
        emit({"type": "error", "task": "T1", "message": "IntegrityError: UNIQUE constraint failed: sessions.token",
              "error_type": "runtime", "location": "src/session.py:42"})
        call("read_file", {"path": f"src/db_{_}.py"}, f"db{_}", "CREATE TABLE sessions (token TEXT UNIQUE)")
    # 9. A task blocked three times on the same blockers: unblock authority.
    for _ in range(3):
        emit({"type": "attempt", "task": "T2", "status": "blocked", "blockers": ["staging database unavailable"],
              "work": []})
    # 10. Two failed iterations: escalate from haiku to sonnet.
    emit({"type": "iteration", "n": 1, "status": "fail", "failing_tests": ["test_login"]})
    emit({"type": "iteration", "n": 2, "status": "fail", "failing_tests": ["test_login", "test_logout"]})
    emit({"type": "usage", "input_tokens": 48210, "output_tokens": 3120, "cost_usd": 0.19})
    # 11. Finally the same call over and over: blocked, then terminated (repetition_loop).
    for i in range(9):
        call("read_file", {"path": "tests/test_auth.py"}, f"r{i}", "def test_login():\n    assert login() == 200")
    emit({"type": "done", "summary": "never reached"})
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT} ({len(lines)} lines)")


if __name__ == "__main__":
    main()
