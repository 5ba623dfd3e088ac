"""`loopwarden hook claude-code` against a real daemon, fed hook JSON on stdin as Claude Code does."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
from pathlib import Path

from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.paths import PY
from tests.support.waiting import wait_for

from .helpers import denial, event, hooked, post, pre, run_hook


def test_repeated_call_is_denied_with_the_engines_reason_then_the_session_is_stopped(lw: Harness) -> None:
    assert run_hook(lw.env, event("UserPromptSubmit", prompt="list the files")).output is None
    answers = []
    for n in range(1, 10):
        answer = run_hook(lw.env, pre(call=f"t{n}"))
        assert answer.code == 0
        answers.append(answer)
        if denial(answer) is None:
            nudge = run_hook(lw.env, post(call=f"t{n}"))
            if n == 2:  # the repetition nudge rides on the tool result as context for the model
                assert "called 2 consecutive times" in nudge.output["hookSpecificOutput"]["additionalContext"]
    assert [denial(a) is not None for a in answers] == [False] * 5 + [True] * 4
    assert "Tool call blocked: tool 'Bash' called 6 times" in denial(answers[5])
    assert answers[8].output["continue"] is False  # the 9th repeat ends the run
    assert "repetition loop" in answers[8].output["stopReason"]

    [snap] = hooked(lw)
    assert snap["adapter"] == "claude-code-hook" and snap["name"] == "claude:project"
    assert snap["state"] == "terminated" and snap["termination"] == "repetition_loop"
    sid = snap["id"]
    assert rules(lw.verdicts(sid)) == [("nudge", "repetition")] + [("block", "repetition")] * 3 + [
        ("terminate", "repetition")]
    kinds = [e["kind"] for e in lw.events(sid)]
    assert kinds[:3] == ["user_message", "tool_call", "tool_result"] and kinds.count("tool_call") == 9
    [attach] = [a for a in lw.request("actions", session=sid) if a["action"] == "attach"]
    assert attach["client"].startswith("hook pid ") and attach["target"] == "c-1"
    # a terminated session answers every event with a stop, until a human types a new prompt
    assert run_hook(lw.env, post(call="t9")).output["continue"] is False
    assert run_hook(lw.env, event("UserPromptSubmit", prompt="try something else")).output is None
    assert [s["state"] for s in hooked(lw)] == ["terminated", "running"]


def test_injected_text_blocks_the_stop_so_the_model_continues_with_it(lw: Harness) -> None:
    run_hook(lw.env, event("SessionStart", source="startup"))
    [snap] = hooked(lw)
    assert lw.cli("inject", snap["id"], "also update the changelog").returncode == 0
    stop = run_hook(lw.env, event("Stop", stop_hook_active=False, last_assistant_message="done"))
    assert stop.output["decision"] == "block"
    assert stop.output["reason"].endswith("also update the changelog")
    again = run_hook(lw.env, event("Stop", stop_hook_active=True, last_assistant_message="updated"))
    assert again.output is None  # delivered once: no endless Stop loop
    lw.cli("inject", snap["id"], "run the tests too")  # before a tool call: context on its PreToolUse
    assert "run the tests too" in run_hook(lw.env, pre()).output["hookSpecificOutput"]["additionalContext"]


def test_no_daemon_allows_at_once_and_a_silent_daemon_within_the_timeout(tmp_path: Path) -> None:
    env = {**os.environ, "LOOPWARDEN_HOME": str(tmp_path / "nobody-home")}
    answer = run_hook(env, pre())
    assert (answer.code, answer.output) == (0, None)
    assert "no daemon" in answer.stderr and answer.stderr.count("\n") == 1
    assert not (tmp_path / "nobody-home").exists()  # starts no daemon

    home = tmp_path / "silent"  # a socket that accepts and never answers
    run = home / "run"
    run.mkdir(parents=True, mode=0o700)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(run / "daemon.sock"))
    server.listen(4)
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    try:
        answer = run_hook({**os.environ, "LOOPWARDEN_HOME": str(home), "LOOPWARDEN_HOOK_TIMEOUT": "0.5"}, pre())
    finally:
        server.close()
        for conn in accepted:
            conn.close()
    assert (answer.code, answer.output) == (0, None)
    assert "no answer within 0.5s" in answer.stderr
    assert answer.seconds < 30  # the socket never answers: only the 0.5 s timeout can have ended the wait


def test_garbage_on_stdin_allows(lw: Harness) -> None:
    for data in (b"{not json", b"[1, 2]", b"", "\udcff".encode("utf-8", "surrogatepass")):
        answer = run_hook(lw.env, data)
        assert (answer.code, answer.output) == (0, None)
        assert answer.stderr.startswith("loopwarden hook: ") and answer.stderr.endswith("; allowing\n")
    answer = run_hook(lw.env, {"hook_event_name": "PreToolUse"})  # no session_id: the daemon refuses
    assert (answer.code, answer.output) == (0, None) and "session_id" in answer.stderr
    assert hooked(lw) == []


def test_a_huge_tool_output_is_cut_to_fit_and_still_judged(lw: Harness) -> None:
    run_hook(lw.env, pre())
    assert run_hook(lw.env, post(stdout="x" * (3 << 20))).code == 0
    [snap] = hooked(lw)
    [result] = [e for e in lw.events(snap["id"]) if e["kind"] == "tool_result"]
    assert 60_000 < len(result["data"]["output"]) < 70_000


def test_a_gate_holds_the_tool_call_until_a_human_decides(lw: Harness) -> None:
    for n in range(6):  # 2 x repetition.max_monologue assistant messages with no tool call open a gate
        run_hook(lw.env, event("Stop", stop_hook_active=False, last_assistant_message=f"thinking {n}"))
    [snap] = hooked(lw)
    assert snap["state"] == "gated" and snap["pending_gates"] == ["g1"]
    held: list = []
    thread = threading.Thread(target=lambda: held.append(run_hook(lw.env, pre())))
    thread.start()
    wait_for(lambda: any(e["kind"] == "tool_call" for e in lw.events(snap["id"])), what="the held call")
    assert thread.is_alive()  # held, not answered
    assert lw.cli("approve", f"{snap['id']}:g1", "--note", "use the cached build").returncode == 0
    thread.join(30)
    [answer] = held
    assert denial(answer) is None
    assert "use the cached build" in answer.output["hookSpecificOutput"]["additionalContext"]
    assert lw.status(snap["id"])["state"] == "running"


def test_an_undecided_gate_answers_by_its_timeout_policy_after_the_hold(lw: Harness) -> None:
    for n in range(6):
        run_hook(lw.env, event("Stop", stop_hook_active=False, last_assistant_message=f"thinking {n}"))
    answer = run_hook({**lw.env, "LOOPWARDEN_HOOK_HOLD": "0.3"}, pre())
    assert "Waiting for a human decision on g1" in denial(answer)
    [snap] = hooked(lw)
    assert snap["state"] == "gated"  # the gate stays for the human
    approving = {**lw.env, "LOOPWARDEN_HOOK_HOLD": "0.3", "LOOPWARDEN_GATES_ON_TIMEOUT": "approve"}
    run_hook(approving, event("Stop", session="c-2", stop_hook_active=False, last_assistant_message="x"))
    [asked] = hooked(lw, "c-2")  # a hook may not loosen the operator's settings: its gates still deny
    assert "gates.on_timeout" not in asked["settings"]
    lw.paths.config_file.write_text('[gates]\non_timeout = "approve"\n')  # the operator's own choice
    for n in range(6):  # another Claude session, whose gates approve when nobody decides
        run_hook(approving, event("Stop", session="c-3", stop_hook_active=False, last_assistant_message=f"{n}"))
    assert hooked(lw, "c-3")[0]["state"] == "gated"
    assert run_hook(approving, pre(session="c-3")).output is None


def test_pause_holds_answers_and_kill_stops_the_next_one(lw: Harness) -> None:
    run_hook(lw.env, event("UserPromptSubmit", prompt="go"))
    [snap] = hooked(lw)
    sid = snap["id"]
    assert lw.cli("pause", sid).returncode == 0
    assert lw.status(sid)["state"] == "paused"
    held: list = []
    thread = threading.Thread(target=lambda: held.append(run_hook(lw.env, pre())))
    thread.start()
    wait_for(lambda: any(e["kind"] == "tool_call" for e in lw.events(sid)), what="the held call")
    assert thread.is_alive()
    lw.cli("resume", sid)
    thread.join(30)
    assert held[0].output is None
    lw.cli("pause", sid)
    for hold in ("0.3", "0"):  # held until the hold passes; no hold at all: answered at once
        timed_out = run_hook({**lw.env, "LOOPWARDEN_HOOK_HOLD": hold}, pre(call=f"t2-{hold}"))
        assert "Paused by the operator" in denial(timed_out)
    assert lw.cli("kill", sid).returncode == 0
    assert lw.status(sid)["state"] == "terminated"
    stopped = run_hook(lw.env, pre(call="t3"))
    assert stopped.output["continue"] is False and "terminated by an operator" in denial(stopped)


def test_the_session_ends_on_session_end_or_after_an_idle_finished_turn(lw: Harness) -> None:
    run_hook(lw.env, event("UserPromptSubmit", prompt="hi"))
    run_hook(lw.env, event("SessionEnd", reason="prompt_input_exit"))
    [snap] = hooked(lw)
    assert (snap["state"], snap["exit_code"]) == ("exited", 0)
    idle = {**lw.env, "LOOPWARDEN_HOOK_IDLE": "0.5"}
    run_hook(idle, event("UserPromptSubmit", prompt="hi again"))  # a new session for the same Claude session
    run_hook(idle, event("Stop", stop_hook_active=False))
    second = hooked(lw)[1]["id"]
    lw.wait_state(second, "exited", timeout=10)


def test_max_runtime_holds_from_the_first_hook_event(lw: Harness) -> None:
    env = {**lw.env, "LOOPWARDEN_LIMITS_MAX_RUNTIME": "0.5s"}
    run_hook(env, event("UserPromptSubmit", prompt="go"))
    [snap] = hooked(lw)
    snap = lw.wait_state(snap["id"], "terminated", timeout=10)
    assert snap["termination"] == "max_runtime"
    assert run_hook(env, pre()).output["continue"] is False


def test_the_hook_process_loads_no_heavy_modules(tmp_path: Path) -> None:
    code = ("import sys\nsys.argv = ['loopwarden', 'hook', 'claude-code']\nfrom loopwarden import entry\n"
            "try:\n    entry.run()\nexcept SystemExit:\n    pass\n"
            "heavy = ('click', 'textual', 'anyio', 'sqlite_utils', 'psutil', 'orjson', 'anthropic')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n")
    done = subprocess.run([PY, "-c", code], input=json.dumps(pre()).encode(), capture_output=True, timeout=60,
                          env={**os.environ, "LOOPWARDEN_HOME": str(tmp_path)}, check=False)
    assert done.stdout.decode().strip() == "[]", done.stderr
