"""Agents attached by their hooks cannot capture a person, cannot loosen limits or flood the daemon with
sessions, and a stopped one is stopped (issue 29, items 2 and 3).

Real daemons; the hooks are the real `loopwarden hook` processes run through `/bin/sh -c` as the agents run
them, by stand-ins that go by the agents' program names (tests/agents/fake_claude.py, fake_codex.py), and a
real tmux where this machine has one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.chaos.test_principals import report_done
from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.paths import AGENTS, PY
from tests.support.processes import gone
from tests.support.scenarios import opened_gate
from tests.support.waiting import wait_for

HOOK = f"{PY} -m loopwarden hook claude-code"
START = {"session_id": "c-forged", "cwd": "/tmp/forged", "hook_event_name": "SessionStart", "source": "startup"}


def operator_config(lw: Harness, text: str) -> None:
    """The operator's own settings: the profile's config file, read for each new hook session."""
    lw.paths.config_file.parent.mkdir(parents=True, exist_ok=True)
    lw.paths.config_file.write_text(text)


def code_of(path: Path) -> str:
    return wait_for(lambda: path.exists() and path.read_text().strip(), what=f"{path.name}")


def forge_then_operate(lw: Harness, tmp_path: Path, terminal: list[str]) -> tuple[str, list[int]]:
    """In one terminal (a process that runs shells for a person), a forged SessionStart names the terminal
    as Claude Code (CLAUDE_PID); then the person types an operator command in a shell of the same terminal.
    The command's exit code, and the processes the forged session claimed."""
    event = json.dumps(START)
    forged, typed = tmp_path / "forged.code", tmp_path / "typed.code"
    gate_sid = lw.scenario("loop_gate")
    lw.wait_state(gate_sid, "gated")
    forger = f"echo '{event}' | CLAUDE_PID=$TERMINAL_PID {HOOK}; echo $? > {forged}"
    person = f"{PY} -m loopwarden inject {gate_sid} 'typed by a person'; echo $? > {typed}"
    env = {**lw.env, "FORGER": forger, "PERSON": person, "FORGED": str(forged)}
    proc = subprocess.Popen([*terminal], env=env)
    try:
        assert code_of(forged) == "0"
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-forged"]
        return code_of(typed), snap.get("agent_pids", [])
    finally:
        proc.wait(30)


def test_a_forged_claim_on_the_terminal_never_locks_the_operator_out(lw: Harness, tmp_path: Path) -> None:
    # a stand-in terminal: one process that runs the forger's shell, then the person's shell
    script = ("import os, subprocess, time\n"
              "env = {**os.environ, 'TERMINAL_PID': str(os.getpid())}\n"
              "subprocess.run(['bash', '-c', os.environ['FORGER']], env=env)\n"
              "subprocess.run(['bash', '-i'], input=os.environ['PERSON'] + '\\n', text=True, env=env)\n")
    assert forge_then_operate(lw, tmp_path, [PY, "-c", script]) == ("0", [])  # the terminal is no Claude Code


def test_a_forged_claim_on_a_real_tmux_server_never_locks_the_operator_out(lw: Harness, tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (Debian: tmux)")
    sock = str(tmp_path / "tmux.sock")
    script = tmp_path / "panes.sh"
    # the forger's pane and the person's pane, both under one tmux server (the forged claim names the server)
    script.write_text("set -e\n"
                      f"tmux -S {sock} new-session -d -s t -x 80 -y 20 'sleep 600'\n"
                      f"TERMINAL_PID=$(tmux -S {sock} display-message -p '#{{pid}}')\n"
                      f"tmux -S {sock} new-window -t t -e TERMINAL_PID=$TERMINAL_PID \"$FORGER; sleep 600\"\n"
                      f"while [ ! -s $FORGED ]; do sleep 0.05; done\n"
                      f"tmux -S {sock} new-window -t t \"$PERSON; sleep 600\"\n")
    try:
        assert forge_then_operate(lw, tmp_path, ["sh", str(script)]) == ("0", [])  # tmux is no Claude Code
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], check=False, capture_output=True)


def test_a_hook_may_tighten_the_operators_settings_but_never_loosen_them(lw: Harness) -> None:
    asked = {"LOOPWARDEN_LIMITS_MAX_RUNTIME": "100000h", "LOOPWARDEN_RULES_DISABLED": "repetition",
             "LOOPWARDEN_REPETITION_MAX_IDENTICAL_CALLS": "3", "LOOPWARDEN_LIMITS_MAX_TOKENS": "5000"}
    sid = lw.request("hook", event=START, config_env=asked, hold=0)["session"]
    settings = lw.status(sid)["settings"]
    assert "limits.max_runtime" not in settings and "rules.disabled" not in settings  # the operator's stand
    assert settings["repetition.max_identical_calls"] == "3" and settings["limits.max_tokens"] == "5000"
    [attach] = [a for a in lw.request("actions", session=sid) if a["action"] == "attach"]
    assert "limits.max_runtime=100000h (the operator's: 4h)" in attach["note"]
    assert "rules.disabled=repetition" in attach["note"]
    said = [e["data"]["text"] for e in lw.events(sid) if e["kind"] == "log"]
    assert any("the operator's configuration stands" in text for text in said), said
    # what the operator sets in their own file is theirs to loosen
    operator_config(lw, '[limits]\nmax_runtime = "100000h"\n')
    again = lw.request("hook", event={**START, "session_id": "c-operator"}, hold=0)["session"]
    assert lw.status(again)["settings"]["limits.max_runtime"] == "100000h"


def test_hook_sessions_are_bounded_in_total_and_per_agent_process(lw: Harness, tmp_path: Path) -> None:
    operator_config(lw, "[hooks]\nmax_sessions = 12\nmax_per_agent = 5\n")
    out = tmp_path / "forged.json"
    subprocess.run([PY, str(AGENTS / "hook_forger.py"), "40", str(out)], env=lw.env, check=True, timeout=120)
    forged = json.loads(out.read_text())
    assert (forged["made"], forged["refused"]) == (5, 35), forged  # one process whose agent cannot be told
    assert forged["first_refusal"] == (
        "refused: hooks whose agent process cannot be told has 5 live hook sessions, the most allowed "
        "(hooks.max_per_agent); they end on SessionEnd, when the agent exits, or after hooks.idle_timeout")
    # agents that can be told: each Claude Code process gets its own share, up to the total
    plans = []
    for n in range(3):
        plan = tmp_path / f"claude{n}.json"
        plan.write_text(json.dumps({"hook": HOOK, "session_id": f"c-bound-{n}", "cwd": f"/tmp/bound{n}",
                                    "commands": [f"{PY} {AGENTS / 'hook_forger.py'} 10 {tmp_path / f'tool{n}.json'}"],
                                    "release": str(tmp_path / "release")}))
        plans.append(subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(plan), str(tmp_path / f"r{n}.jsonl")],
                                      env=lw.env))
    try:
        for n in range(3):
            report_done(tmp_path / f"r{n}.jsonl", "ready")
        live = [s for s in lw.request("list") if s["adapter"] == "claude-code-hook" and s["state"] == "running"]
        assert len(live) == 12  # the total: 5 unknown, then the three Claudes' own and their tools' forgeries
        assert "hook sessions refused" in lw.cli("status").stdout
    finally:
        (tmp_path / "release").touch()
        for proc in plans:
            proc.wait(30)


def test_a_launched_agent_forging_hook_events_makes_no_sessions(lw: Harness, tmp_path: Path) -> None:
    out = tmp_path / "forged.json"
    sid = lw.run_detached(PY, str(AGENTS / "hook_forger.py"), "500", str(out), adapter="plain")
    lw.wait_state(sid, "exited")
    forged = json.loads(out.read_text())
    assert forged == {"made": 0, "refused": 0, "ignored": 500, "first_refusal": None}
    assert not [s for s in lw.request("list") if s["adapter"] == "claude-code-hook"]


def test_a_hook_session_with_no_event_ends_as_idle(lw: Harness) -> None:
    operator_config(lw, '[hooks]\nidle_timeout = "1s"\n')
    sid = lw.request("hook", event={**START, "hook_event_name": "UserPromptSubmit", "prompt": "go"}, hold=0)["session"]
    snap = lw.wait_state(sid, "exited", timeout=30)
    assert snap["ended_as"].startswith("idle: no hook event for 1"), snap
    assert f"{sid}" in lw.cli("ls").stdout and "idle" in lw.cli("ls").stdout


def test_a_session_ends_when_its_agent_process_exits(lw: Harness, tmp_path: Path) -> None:
    plan, report, release = tmp_path / "plan.json", tmp_path / "report.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"hook": HOOK, "session_id": "c-dies", "cwd": "/tmp/dies", "commands": [],
                                "release": str(release)}))
    claude = subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(plan), str(report)], env=lw.env)
    report_done(report, "ready")
    [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-dies"]
    assert snap["agent_pids"] == [claude.pid]
    claude.kill()  # no SessionEnd comes from a killed agent
    claude.wait(10)
    ended = lw.wait_state(snap["id"], "exited", timeout=60)
    assert ended["ended_as"] == "its agent process exited"


def codex_run(lw: Harness, tmp_path: Path, calls: int) -> tuple[subprocess.Popen[bytes], Path]:
    plan, report = tmp_path / "codex.json", tmp_path / "codex.jsonl"
    plan.write_text(json.dumps({"hook": f"{PY} -m loopwarden hook codex", "thread": "th-goes-on",
                                "cwd": "/tmp/goes-on", "calls": calls}))
    return subprocess.Popen([PY, str(AGENTS / "fake_codex.py"), str(plan), str(report)], env=lw.env), report


def lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


def test_a_terminated_codex_that_goes_on_calling_is_stopped(lw: Harness, tmp_path: Path) -> None:
    codex, report = codex_run(lw, tmp_path, calls=400)
    try:
        code = codex.wait(120)
    finally:
        codex.kill()
    assert code == -15, code  # SIGTERM, from loopwarden
    [snap] = [s for s in lw.request("list") if s.get("codex_session") == "th-goes-on"]
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop")
    # the 9th call ended the session, and no call came after it
    assert snap["tool_calls"] == 9 and len(lines(report)) <= 9
    said = [e["data"]["text"] for e in lw.events(snap["id"]) if e["kind"] == "log"]
    assert any(re.fullmatch(rf"sent SIGTERM to the agent process {codex.pid}( and \d+ process\(es\) below it)?; "
                            r"SIGKILL follows in 5s for any still running", text) for text in said), said
    assert rules(lw.verdicts(snap["id"]))[-1] == ("terminate", "repetition")


def test_kill_stops_the_agent_of_a_hook_session_that_has_ended(lw: Harness, tmp_path: Path) -> None:
    """A Claude Code told to stop ends its turn and waits for its user; the operator can still stop it."""
    plan, report, release = tmp_path / "plan.json", tmp_path / "report.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"hook": HOOK, "session_id": "c-ended", "cwd": "/tmp/ended", "commands": [],
                                "release": str(release)}))
    claude = subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(plan), str(report)], env=lw.env)
    try:
        report_done(report, "ready")
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-ended"]
        sid = snap["id"]
        assert lw.cli("set", sid, "limits.max_runtime=1s").returncode == 0
        lw.wait_state(sid, "terminated")
        assert psutil.pid_exists(claude.pid) and not gone(claude.pid)  # it obeys a stop: not signalled
        killed = lw.cli("kill", sid)
        assert killed.returncode == 0, killed.stderr
        wait_for(lambda: claude.poll() is not None, what="the agent to be stopped")
        assert claude.returncode == -15
        [action] = [a for a in lw.request("actions", session=sid) if a["action"] == "kill"]
        assert action["outcome"] == "stopping its agent process"
        again = lw.cli("kill", sid)  # nothing left to stop: the usual one line
        assert again.returncode == 2 and "has ended" in again.stderr
    finally:
        release.touch()
        claude.kill()
        claude.wait(10)


def test_ten_thousand_forged_sessions_leave_the_daemon_small(lw: Harness, tmp_path: Path) -> None:
    """The bound is in bytes too: whatever a forger sends, the daemon holds a bounded number of sessions."""
    daemon = psutil.Process(lw.request("ping")["pid"])
    before = daemon.memory_info().rss
    out = tmp_path / "forged.json"
    subprocess.run([PY, str(AGENTS / "hook_forger.py"), "10000", str(out)], env=lw.env, check=True, timeout=600)
    forged = json.loads(out.read_text())
    assert forged["made"] == 16 and forged["refused"] == 10000 - 16, forged
    grown = daemon.memory_info().rss - before
    assert grown < 40 << 20, f"{grown / 2**20:.1f} MiB"
    assert lw.cli("ls").returncode == 0


def codex_event(thread: str, name: str = "PreToolUse", **fields: Any) -> dict[str, Any]:
    return {"session_id": thread, "turn_id": "turn-1", "cwd": f"/tmp/{thread}", "hook_event_name": name,
            "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "call_1", **fields}


def start_agent(lw: Harness, tmp_path: Path, name: str, events: list[dict[str, Any]], tool: str | None = None,
                release: bool = False, hook_env: dict[str, str] | None = None
                ) -> tuple[subprocess.Popen[bytes], Path, Path]:
    """tests/agents/hook_agent.py as `claude` or `codex`, once its hooks were answered and its tool started:
    (its process, its report file, its release file)."""
    agent = "codex" if name == "codex" else "claude-code"
    plan, ready, out, go = (tmp_path / f"{name}.{part}" for part in ("plan", "ready", "out", "release"))
    plan.write_text(json.dumps({"name": name, "hook": f"{PY} -m loopwarden hook {agent}", "events": events,
                                "hook_env": hook_env or {}, "tool": tool, "ready": str(ready),
                                "release": str(go) if release else None, "out": str(out)}))
    proc = subprocess.Popen([PY, str(AGENTS / "hook_agent.py"), str(plan)], env=lw.env)
    wait_for(lambda: ready.exists() or proc.poll() is not None, what=f"{name} to be answered")
    return proc, out, go


def test_a_forged_session_end_leaves_the_agent_and_its_tools_claimed(lw: Harness, tmp_path: Path) -> None:
    """A tool of an attached Claude Code ends its own session with a forged SessionEnd, then acts."""
    gate = opened_gate(lw)
    end = json.dumps({"session_id": "c-victim", "cwd": "/tmp/victim", "hook_event_name": "SessionEnd",
                      "reason": "other"})
    attack = f"echo '{end}' | {HOOK}; {PY} -m loopwarden approve {gate}"
    plan, report, release = tmp_path / "plan.json", tmp_path / "report.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"hook": HOOK, "session_id": "c-victim", "cwd": "/tmp/victim", "commands": [attack],
                                "release": str(release)}))
    claude = subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(plan), str(report)], env=lw.env)
    try:
        [tool] = [row for row in report_done(report, "ready") if row.get("tool")]
        assert tool["code"] == 4 and "runs inside session" in tool["stderr"], tool
        assert lw.status(gate.split(":")[0])["pending_gates"]
    finally:
        release.touch()
        claude.wait(30)


def test_a_tool_outlasting_its_sessions_idle_end_is_still_inside(lw: Harness, tmp_path: Path) -> None:
    gate, go, code = opened_gate(lw), tmp_path / "go", tmp_path / "tool.code"
    tool = f"while [ ! -e {go} ]; do sleep 0.05; done; {PY} -m loopwarden approve {gate}; echo $? > {code}"
    # Codex has no Stop: its idle clock runs from each call, and a long tool outlasts it (600 s by default)
    codex, _, _ = start_agent(lw, tmp_path, "codex", [codex_event("th-long")], tool=tool,
                              hook_env={"LOOPWARDEN_HOOK_IDLE": "0.2"})
    try:
        [snap] = [s for s in lw.request("list") if s.get("codex_session") == "th-long"]
        lw.wait_state(snap["id"], "exited")
        go.touch()  # the session has ended; its Codex still runs, and so does the tool it started
        assert code_of(code) == "4"
        assert lw.status(gate.split(":")[0])["pending_gates"]
    finally:
        go.touch()
        codex.wait(30)


def test_processes_named_like_the_agent_cannot_push_the_agent_out(lw: Harness, tmp_path: Path) -> None:
    gate = opened_gate(lw)
    forger = tmp_path / "claude.py"  # its script's name makes it look like Claude Code
    forger.write_text("import json, subprocess, sys\n"
                      "event = {'session_id': 'c-pushed', 'cwd': '/tmp/pushed', 'hook_event_name': 'Notification'}\n"
                      "subprocess.run(['/bin/sh', '-c', sys.argv[1]], input=json.dumps(event), text=True)\n")
    forge = "; ".join(f"{PY} {forger} '{HOOK}'" for _ in range(6))
    attack = f"{forge}; env -u CLAUDECODE {PY} -m loopwarden approve {gate}"
    plan, report, release = tmp_path / "plan.json", tmp_path / "report.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"hook": HOOK, "session_id": "c-pushed", "cwd": "/tmp/pushed", "commands": [attack],
                                "release": str(release)}))
    claude = subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(plan), str(report)], env=lw.env)
    try:
        [tool] = [row for row in report_done(report, "ready") if row.get("tool")]
        assert tool["code"] == 4, tool
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-pushed"]
        assert snap["agent_pids"] == [claude.pid]  # the renamed processes below it are no agents of their own
    finally:
        release.touch()
        claude.wait(30)


def test_stopping_the_daemon_never_signals_the_users_agent(lw: Harness, tmp_path: Path) -> None:
    codex, _, release = start_agent(lw, tmp_path, "codex", [codex_event("th-user")], release=True)
    try:
        [snap] = [s for s in lw.request("list") if s.get("codex_session") == "th-user"]
        assert snap["agent_pids"] == [codex.pid]
        assert lw.cli("stop-daemon", "--yes").returncode == 0
        assert codex.poll() is None  # the daemon has exited: nothing of it is left to signal the agent later
    finally:
        release.touch()
        assert codex.wait(30) == 0


def test_the_tools_of_a_stopped_agent_are_stopped_with_it(lw: Harness, tmp_path: Path) -> None:
    gate = opened_gate(lw)
    mark = tmp_path / "tool.started"
    tool = (f"touch {mark}; {PY} -c 'import time; time.sleep(60)'; "
            f"env -u LOOPWARDEN_SESSION {PY} -m loopwarden approve {gate}")
    codex, out, _ = start_agent(lw, tmp_path, "codex", [codex_event("th-tree")], tool=tool)
    wait_for(mark.exists, what="the tool to start")
    [snap] = [s for s in lw.request("list") if s.get("codex_session") == "th-tree"]
    killed = lw.cli("kill", snap["id"])
    assert killed.returncode == 0, killed.stderr
    assert codex.wait(30) == -15
    said = wait_for(lambda: [e["data"]["text"] for e in lw.events(snap["id"]) if e["kind"] == "log"
                             and "has exited" in e["data"]["text"]], what="the stop to finish")
    assert said == [f"the agent process {codex.pid} has exited with everything below it"]
    assert lw.status(gate.split(":")[0])["pending_gates"]  # the tool was stopped before it could approve
    assert not out.exists() or json.loads(out.read_text()).get("tool") != 0


def test_a_gated_hook_session_is_not_ended_by_silence(lw: Harness) -> None:
    operator_config(lw, '[hooks]\nidle_timeout = "1s"\n')
    event = {**START, "session_id": "c-gated"}
    for n in range(6):  # a monologue: the sixth message opens a gate
        lw.request("hook", event={**event, "hook_event_name": "Stop", "stop_hook_active": False,
                                  "last_assistant_message": f"thinking {n}"}, hold=0)
    [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-gated"]
    assert snap["state"] == "gated"
    ungated = lw.request("hook", event={**START, "session_id": "c-quiet"}, hold=0)["session"]
    lw.wait_state(ungated, "exited", timeout=30)  # a quiet session beside it ends as idle meanwhile
    assert lw.status(snap["id"])["state"] == "gated"  # a gate waits for a person, however long


def test_a_terminated_claude_that_calls_a_tool_anyway_is_stopped(lw: Harness, tmp_path: Path) -> None:
    claude, _, release = start_agent(lw, tmp_path, "claude", [{**START, "session_id": "c-defiant"}], release=True)
    try:
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-defiant"]
        assert lw.cli("set", snap["id"], "limits.max_runtime=1s").returncode == 0
        ended = lw.wait_state(snap["id"], "terminated")
        call = {**START, "session_id": "c-defiant", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": {"command": "ls"}, "tool_use_id": "t1"}
        # a call in flight with the one that was told to stop (parallel calls) is not defiance
        assert claude.poll() is None
        # one made after the stop's grace is: the agent is stopped (its own hook, as Claude Code runs it)
        wait_for(lambda: time.time() - ended["ended_at"] >= 3.1, what="the stop's grace to pass")
        hooked = subprocess.run(["/bin/sh", "-c", HOOK], input=json.dumps(call), text=True, env=lw.env,
                                capture_output=True, timeout=60, check=False)
        assert '"continue": false' in hooked.stdout
        assert claude.wait(30) == -15
    finally:
        release.touch()
        claude.kill()
        claude.wait(10)
