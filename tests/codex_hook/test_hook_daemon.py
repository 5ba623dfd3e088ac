"""`loopwarden hook codex` against a real daemon (or none), fed Codex's PreToolUse JSON on stdin."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.claude_code_hook.helpers import Answer, denial
from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.waiting import wait_for

from .helpers import pre, run_hook

pytestmark = pytest.mark.timeout(90)


def attached(lw: Harness, thread: str = "th-1") -> list[dict[str, object]]:
    return [s for s in lw.request("list") if s.get("codex_session") == thread]


def test_repeats_are_denied_in_codex_shape_then_every_call_until_a_new_turn(lw: Harness) -> None:
    answers = [run_hook(lw.env, pre(call=f"call_{n}")) for n in range(1, 11)]
    assert all(a.code == 0 for a in answers)
    assert [denial(a) is not None for a in answers] == [False] * 5 + [True] * 5
    assert "Tool call blocked: tool 'Bash' called 6 times" in denial(answers[5])
    assert "repetition loop" in denial(answers[8])  # the 9th ended the session: a deny, never `continue`
    assert all("continue" not in (a.output or {}) for a in answers)
    # the engine's nudge rides on the next allowed call, as text for the model
    assert "called 2 consecutive times" in answers[2].output["hookSpecificOutput"]["additionalContext"]

    [snap] = attached(lw)
    assert snap["adapter"] == "codex-hook" and snap["name"] == "codex:project" and "claude_session" not in snap
    assert (snap["state"], snap["termination"], snap["tool_calls"]) == ("terminated", "repetition_loop", 9)
    assert rules(lw.verdicts(snap["id"])) == [("nudge", "repetition")] + [("block", "repetition")] * 3 + [
        ("terminate", "repetition")]
    ls = lw.cli("ls")
    assert ls.returncode == 0 and "codex-hook" in ls.stdout

    assert denial(run_hook(lw.env, pre(call="call_11", turn="turn-2"))) is None  # the user came back
    assert [s["state"] for s in attached(lw)] == ["terminated", "running"]
    assert run_hook(lw.env, pre(thread="th-2")).output is None and len(attached(lw, "th-2")) == 1


def test_no_daemon_allows_with_one_line(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LOOPWARDEN_HOME": str(tmp_path / "lw")}
    answer = run_hook(env, pre())
    assert (answer.code, answer.output) == (0, None)
    assert answer.stderr.startswith("loopwarden hook: no daemon at ") and answer.stderr.count("\n") == 1
    assert answer.stderr.rstrip().endswith("allowing") and answer.seconds < 10


@pytest.mark.parametrize("garbage", [b"", b"not json at all", b"[1, 2]", b"\xff\xfe{", b'{"hook_event_name": 3}'])
def test_garbage_on_stdin_allows_with_one_line_and_no_traceback(lw: Harness, garbage: bytes) -> None:
    answer = run_hook(lw.env, garbage)
    assert (answer.code, answer.output) == (0, None), answer
    assert answer.stderr.startswith("loopwarden hook: ") and answer.stderr.count("\n") == 1, answer.stderr
    assert "Traceback" not in answer.stderr and "allowing" in answer.stderr


def test_pause_holds_the_call_inject_rides_on_the_next_kill_denies_and_idle_ends(lw: Harness) -> None:
    assert run_hook(lw.env, pre(call="c1")).output is None
    [snap] = attached(lw)
    sid = snap["id"]
    assert lw.cli("pause", sid).returncode == 0
    held: list[Answer] = []
    thread = threading.Thread(target=lambda: held.append(run_hook(lw.env, pre(command="pwd", call="c2"))))
    thread.start()
    wait_for(lambda: len([e for e in lw.events(sid) if e["kind"] == "tool_call"]) == 2, what="the held call")
    assert thread.is_alive()  # held, not answered
    assert lw.cli("inject", sid, "run the tests too").returncode == 0
    assert lw.cli("resume", sid).returncode == 0
    thread.join(30)
    [answer] = held
    assert denial(answer) is None
    assert "run the tests too" in answer.output["hookSpecificOutput"]["additionalContext"]
    assert lw.cli("kill", sid).returncode == 0
    stopped = run_hook(lw.env, pre(command="whoami", call="c3"))
    assert "terminated by an operator" in denial(stopped) and "continue" not in stopped.output

    idle = {**lw.env, "LOOPWARDEN_HOOK_IDLE": "0.5"}  # no Stop hook: the idle clock runs from every call
    run_hook(idle, pre(thread="th-idle"))
    lw.wait_state(attached(lw, "th-idle")[0]["id"], "exited", timeout=10)
