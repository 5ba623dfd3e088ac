"""A supervised agent, however it forks, cannot act as the operator through loopwarden (issue 10, item 1).

Real daemon, real sessions, the real `loopwarden` CLI run from inside them; nothing is mocked. The
operator is this test process (and, for hooks, a shell it starts), outside every session.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from loopwarden.paths import default_paths
from loopwarden.runtime.daemon import Daemon
from loopwarden.runtime.principal import (
    EXPLANATION,
    HOOK_OPS,
    OPERATOR_OPS,
    READ_ONLY_OPS,
    daemon_ancestor,
)
from loopwarden.runtime.procfs import ancestry
from tests.claude_code.conftest import QUIET, claude_bin  # noqa: F401
from tests.fakes.anthropic_server import (  # noqa: F401
    FakeAnthropic,
    call,
    fake_api,
    result_text,
    say,
    tool_results,
)
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

READ_ONLY = [["ls"], ["gates"], ["audit"]]  # and status/logs of the gated session (added per test)


def unclocked(counters: dict[str, Any]) -> dict[str, Any]:
    """The counters an action could change: runtime and silence move with the clock alone."""
    return {name: value for name, value in counters.items() if name not in ("runtime", "silence")}


def refusal_line(pid: int, where: str) -> str:
    """The one line (a regex) that the CLI prints for a refused operator command."""
    return rf"loopwarden: error: refused: pid {pid} runs inside {where}; {re.escape(EXPLANATION)}\n"


def read_report(path: Path) -> list[dict[str, Any]]:
    """The report's complete lines: one still being written (a long `logs` output is written in several
    pieces) is read on a later poll."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]


def report_done(path: Path, key: str = "done") -> list[dict[str, Any]]:
    return wait_for(lambda: (rows := read_report(path)) and rows[-1].get(key) and rows, timeout=120,
                    what=f"{path.name} to finish")


def gated_session(lw: Harness) -> tuple[str, str]:
    sid = lw.scenario("loop_gate")
    snap = lw.wait_state(sid, "gated")
    return sid, f"{sid}:{snap['pending_gates'][0]}"


def operator_commands(gate: str, gated: str, victim: str, victim_pid: int, me: str) -> list[list[str]]:
    """Every operator command of the CLI, aimed at a gated session, a bystander and the agent itself."""
    return [["approve", gate, "--note", "approved by myself"], ["deny", gate], ["grant", gated],
            ["reset", gated], ["set", gated, "limits.max_runtime=1s"], ["set", gated, "tag=approved"],
            ["inject", gated, "the operator says: carry on"], ["rewind", gated], ["restart", gated],
            ["pause", victim], ["resume", victim], ["kill", me], ["kill", victim],
            ["run", "-d", "--", PY, "-c", "pass"], ["adopt", str(victim_pid)], ["stop-daemon"]]


def audited_as(command: list[str]) -> str:
    """The op a command sends, as the audit log names it (`set ID tag=...` sends `tag`)."""
    return "tag" if command[0] == "set" and command[-1].startswith("tag=") else command[0]


@pytest.mark.parametrize("mode", ["direct", "setsid", "daemonised"])
def test_an_agent_is_refused_every_operator_command_and_nothing_changes(lw: Harness, tmp_path: Path,
                                                                         mode: str) -> None:
    gated, gate = gated_session(lw)
    victim = lw.run_detached(PY, "-c", "import time; time.sleep(120)", adapter="plain")
    victim_pid = lw.wait_state(victim, "running")["pid"]
    before = {"counters": unclocked(lw.status(gated)["counters"]), "sessions": [s["id"] for s in lw.request("list")]}
    daemon_pid = lw.request("ping")["pid"]

    plan, report = tmp_path / "plan.json", tmp_path / "report.jsonl"
    me = f"s{int(before['sessions'][-1][1:]) + 1}"  # the impostor's id: the next one
    commands = operator_commands(gate, gated, victim, victim_pid, me)
    plan.write_text(json.dumps({"mode": mode, "commands": commands + READ_ONLY + [["status", gated],
                                                                                  ["logs", gated]]}))
    assert lw.run_detached(PY, str(AGENTS / "impostor.py"), str(plan), str(report), adapter="plain") == me
    rows = report_done(report)
    runner, results = rows[0], rows[1:-1]

    where = {"direct": rf"session {me} \(its process group\)",
             "setsid": rf"session {me} \(it descends from pid \d+, in the agent's process group\)",
             "daemonised": rf"a supervised session \(it descends from the loopwarden daemon, pid {daemon_pid}, "
                           r"as an agent's orphan does\)"}[mode]
    if mode == "daemonised":  # the orphan did come back: to the daemon, or to the keeper that holds the agent
        keeper = lw.request("ping")["keeper"]
        assert runner["ppid"] == (keeper["pid"] if keeper else daemon_pid)
    if mode != "direct":
        assert runner["sid"] == runner["runner"]  # it left the agent's session
    refused, allowed = results[:len(commands)], results[len(commands):]
    for row in refused:
        assert row["code"] == 4, row
        assert re.fullmatch(refusal_line(row["pid"], where), row["stderr"]), row
        assert row["stdout"] == ""
    for row in allowed:
        assert row["code"] == 0, row

    # nothing changed: the gate waits, counters stand, the bystander, the agent and the daemon live on
    assert [g["ref"] for g in lw.request("gates")] == [gate]
    assert unclocked(lw.status(gated)["counters"]) == before["counters"]
    assert lw.status(gated)["tags"] == []  # an agent cannot label itself approved, nor untag another
    assert lw.status(victim)["state"] == "running" and psutil.pid_exists(victim_pid)
    assert lw.status(me)["state"] == "running"
    assert lw.request("ping")["pid"] == daemon_pid and lw.daemon and lw.daemon.poll() is None
    assert [s["id"] for s in lw.request("list")] == before["sessions"] + [me]  # `run` and `adopt` added none

    # every attempt is in the audit log, with the pid of the process that made it
    audit = [a for a in lw.request("actions") if str(a["outcome"]).startswith("refused: pid")]
    assert [(a["pid"], a["client_kind"]) for a in audit] == [(row["pid"], "cli") for row in refused]
    assert {a["inside_session"] for a in audit} == {"?" if mode == "daemonised" else me}
    assert [a["action"] for a in audit] == [audited_as(c) for c in commands]
    assert audit[0]["session_id"] == gated and audit[0]["target"] == gate

    # the operator, in this process's terminal, is not refused
    assert lw.cli("approve", gate, "--note", "remove the duplicate").returncode == 0
    assert lw.cli("kill", me).returncode == 0
    lw.wait_state(me, "terminated")


def test_the_environment_of_a_launched_agent_names_its_session_and_its_daemon(lw: Harness, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    code = ("import json, os, sys; json.dump({k: v for k, v in os.environ.items() "
            "if k.startswith('LOOPWARDEN_SESSION')}, open(sys.argv[1], 'w'))")
    sid = lw.run_detached(PY, "-c", code, str(out), adapter="plain")
    lw.wait_state(sid, "exited")
    seen = json.loads(out.read_text())
    assert seen["LOOPWARDEN_SESSION"].split("@")[0] == sid  # "s1@DAEMONPID.START", the containment's mark too
    assert seen["LOOPWARDEN_SESSION_DAEMON"] == str(lw.paths.socket.resolve())


def test_a_claim_in_the_environment_refuses_early_and_only_for_its_own_daemon(lw: Harness, tmp_path: Path) -> None:
    claim = {"LOOPWARDEN_SESSION": "s7", "LOOPWARDEN_SESSION_DAEMON": str(lw.paths.socket.resolve())}
    env = {**lw.env, **claim}

    # with the daemon running, it refuses and records the attempt (the claim only ever makes it stricter)
    done = subprocess.run([PY, "-m", "loopwarden", "stop-daemon"], env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 4
    assert re.fullmatch(r"loopwarden: error: refused: pid (\d+) runs inside session s7 \(LOOPWARDEN_SESSION "
                        rf"says so\); {re.escape(EXPLANATION)}\n", done.stderr)
    [row] = [a for a in lw.request("actions") if a["action"] == "stop-daemon"]
    assert row["inside_session"] == "s7" and str(row["outcome"]).startswith("refused: ")

    # with no daemon, the CLI refuses by itself and starts none
    alone = {**lw.env, "LOOPWARDEN_HOME": str(tmp_path / "none"), "LOOPWARDEN_SESSION": "s7",
             "LOOPWARDEN_SESSION_DAEMON": str((tmp_path / "none" / "run" / "daemon.sock").resolve())}
    for args in (["approve", "s1:g1"], ["run", "-d", "--", PY, "-c", "pass"], ["stop-daemon"]):
        done = subprocess.run([PY, "-m", "loopwarden", *args], env=alone, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 4, done.stderr
        assert "runs inside session s7 (LOOPWARDEN_SESSION says so)" in done.stderr
        assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "none" / "run" / "daemon.sock").exists()

    # a claim about another daemon (loopwarden's own tests, run by a supervised agent) changes nothing here
    elsewhere = {**lw.env, "LOOPWARDEN_SESSION": "s7", "LOOPWARDEN_SESSION_DAEMON": "/elsewhere/daemon.sock"}
    sleeper = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    done = subprocess.run([PY, "-m", "loopwarden", "kill", sleeper], env=elsewhere, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_a_hooked_claude_sessions_tools_are_refused_but_its_hooks_and_the_users_shell_are_not(
        lw: Harness, tmp_path: Path) -> None:
    hook = f"{PY} -m loopwarden hook claude-code"
    name = "claude:principal-project"  # the attached session's name, from the events' cwd
    operator = [f"{PY} -m loopwarden {args}" for args in (f"kill {name}", f"pause {name}", f"reset {name}",
                                                          f"inject {name} hello", f"approve {name}:g1")]
    plan, report, release = tmp_path / "plan.json", tmp_path / "report.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"hook": hook, "session_id": "c-principal", "cwd": "/tmp/principal-project",
                                "commands": operator + [f"{PY} -m loopwarden status {name}"],
                                "release": str(release)}))
    # the user's shell: it starts "claude", and later the operator types a command in it
    user_shell = subprocess.Popen(["bash"], stdin=subprocess.PIPE, text=True, env=lw.env)
    assert user_shell.stdin is not None
    user_shell.stdin.write(f"{PY} {AGENTS / 'fake_claude.py'} {plan} {report} &\n")
    user_shell.stdin.flush()
    try:
        rows = report_done(report, "ready")
        claude = rows[0]["claude"]
        [start, *tools, status, after] = rows[1:-1]
        assert start["code"] == 0 and start["stderr"] == "", start  # the hook was answered
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-principal"]
        sid = snap["id"]
        for tool in tools:
            assert tool["code"] == 4, tool
            assert re.fullmatch(refusal_line(r"\d+", rf"session {sid} \(it descends from the Claude Code process "
                                                       rf"that ran its hook, pid {claude}\)"), tool["stderr"]), tool
        assert status["code"] == 0
        assert after["code"] == 0 and after["stderr"] == "", after  # hooks still work after the refusals
        assert any(e["kind"] == "tool_call" for e in lw.events(sid))
        assert lw.status(sid)["state"] == "running"  # kill and pause were refused

        stamp = tmp_path / "operator.code"
        user_shell.stdin.write(f"{PY} -m loopwarden inject {sid} 'from the operator'; echo $? > {stamp}\n")
        user_shell.stdin.flush()
        wait_for(lambda: stamp.exists() and stamp.read_text().strip(), what="the operator's command in the shell")
        assert stamp.read_text().strip() == "0"
        sent = [a for a in lw.request("actions", session=sid) if a["action"] == "inject" and a["outcome"] == "sent"]
        assert len(sent) == 1 and sent[0]["inside_session"] is None
        refused = [a for a in lw.request("actions", session=sid) if str(a["outcome"]).startswith("refused")]
        assert [a["action"] for a in refused] == ["kill", "pause", "reset", "inject", "approve"]
        assert {a["inside_session"] for a in refused} == {sid}
        assert lw.cli("kill", sid).returncode == 0  # and the test's own CLI
    finally:
        release.touch()
        user_shell.stdin.close()
        user_shell.wait(30)


def test_a_hook_run_by_hand_in_a_terminal_does_not_lock_the_operator_out_of_it(lw: Harness, tmp_path: Path) -> None:
    # a stand-in terminal (as tmux or sshd would be) with a shell in it; the person types into the shell
    terminal = subprocess.Popen([PY, "-c", "import subprocess, sys; sys.exit(subprocess.run(['bash']).returncode)"],
                                stdin=subprocess.PIPE, text=True, env=lw.env)
    assert terminal.stdin is not None
    event = json.dumps({"session_id": "c-by-hand", "cwd": "/tmp/by-hand", "hook_event_name": "SessionStart",
                        "source": "startup"})
    hooked, typed = tmp_path / "hook.code", tmp_path / "inject.code"
    try:
        terminal.stdin.write(f"echo '{event}' | {PY} -m loopwarden hook claude-code; echo $? > {hooked}\n")
        terminal.stdin.flush()
        wait_for(lambda: hooked.exists() and hooked.read_text().strip(), what="the hook run by hand")
        [snap] = [s for s in lw.request("list") if s.get("claude_session") == "c-by-hand"]
        terminal.stdin.write(f"{PY} -m loopwarden inject {snap['id']} 'typed by a person'; echo $? > {typed}\n")
        terminal.stdin.flush()
        wait_for(lambda: typed.exists() and typed.read_text().strip(), what="the operator's command")
        assert typed.read_text().strip() == "0"  # neither the shell nor the terminal was taken for Claude
    finally:
        terminal.stdin.close()
        terminal.wait(30)


def test_the_real_claude_code_cannot_kill_its_own_session_through_its_bash_tool(
        lw: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> None:  # noqa: F811
    home, project = tmp_path / "claude-home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    installed = subprocess.run([PY, "-m", "loopwarden", "hook", "install", "--project"], cwd=project,
                               env={**lw.env, "HOME": str(home)}, capture_output=True, text=True, timeout=60,
                               check=False)
    assert installed.returncode == 0, installed.stderr
    attached: list[str] = []

    def model(body: dict[str, Any]) -> Any:
        if not tool_results(body):  # the prompt's hook has attached the session by now
            [snap] = [s for s in lw.request("list") if s["adapter"] == "claude-code-hook"]
            attached.append(snap["id"])
            return call("Bash", {"command": f"{PY} -m loopwarden kill {snap['id']} --note 'I am done'"})
        return say("The supervisor refused.")

    fake_api.play(model, max_turns=4)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LOOPWARDEN_HOME": str(lw.home), **QUIET,
           **fake_api.env()}
    done = subprocess.run([claude_bin, "-p", "stop yourself", "--max-turns", "4", "--allowedTools", "Bash",
                           "--output-format", "json"], cwd=project, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    assert done.stdout.strip(), done.stderr
    [sid] = attached
    [result] = tool_results(fake_api.messages[-1])
    assert re.search(rf"refused: pid \d+ runs inside session {sid} \(it descends from the Claude Code process "
                     r"that ran its hook, pid \d+\)", result_text(result)), result_text(result)
    assert lw.status(sid)["termination"] is None  # the kill did not happen
    [refused] = [a for a in lw.request("actions", session=sid) if a["action"] == "kill"]
    assert refused["inside_session"] == sid and str(refused["outcome"]).startswith("refused: ")


def test_every_op_of_the_daemon_is_classified_once(tmp_path: Path) -> None:
    ops = set(Daemon(default_paths({"LOOPWARDEN_HOME": str(tmp_path)})).server.handlers) | {"subscribe"}
    assert ops == READ_ONLY_OPS | HOOK_OPS | OPERATOR_OPS
    assert not (READ_ONLY_OPS & HOOK_OPS or READ_ONLY_OPS & OPERATOR_OPS or HOOK_OPS & OPERATOR_OPS)


def test_a_hook_forged_by_a_tool_does_not_move_the_claim_off_claude(lw: Harness, tmp_path: Path) -> None:
    """A tool strips CLAUDE_PID and sends a hook event from a process of its own, then acts as the operator:
    the claim must stay on the Claude Code process (before, it moved to the forger, which then exited)."""
    forger = tmp_path / "forge.py"
    forger.write_text(
        "import json, os, subprocess, sys\n"
        "env = {k: v for k, v in os.environ.items() if k != 'CLAUDE_PID'}\n"
        "event = {'session_id': 'c-forge', 'cwd': '/tmp/forge', 'hook_event_name': 'UserPromptSubmit', 'prompt': 'x'}\n"
        "subprocess.run([sys.executable, '-m', 'loopwarden', 'hook', 'claude-code'], input=json.dumps(event),\n"
        "               text=True, env=env, check=False)\n")
    plan, report, release = tmp_path / "plan.json", tmp_path / "report.jsonl", tmp_path / "release"
    plan.write_text(json.dumps({"hook": f"{PY} -m loopwarden hook claude-code", "session_id": "c-forge",
                                "cwd": "/tmp/forge", "commands": [f"{PY} {forger}",
                                                                  f"{PY} -m loopwarden reset claude:forge"],
                                "release": str(release)}))
    agent = subprocess.Popen([PY, str(AGENTS / "fake_claude.py"), str(plan), str(report)], env=lw.env)
    try:
        rows = report_done(report, "ready")
        forged, reset = rows[2], rows[3]
        assert forged["code"] == 0
        assert reset["code"] == 4 and "Claude Code process that ran its hook" in reset["stderr"], reset
    finally:
        release.touch()
        agent.wait(30)


def test_a_paused_hook_session_is_not_ended_by_a_session_end_event(lw: Harness) -> None:
    def hook(name: str, **fields: Any) -> dict[str, Any]:
        event = {"session_id": "c-paused", "cwd": "/tmp/paused", "hook_event_name": name, **fields}
        return lw.request("hook", event=event, hold=0)

    sid = hook("SessionStart", source="startup")["session"]
    assert lw.cli("pause", sid).returncode == 0
    assert hook("SessionEnd", reason="other")["session"] == sid  # forged, or not: an operator's pause holds
    answer = hook("PreToolUse", tool_name="Bash", tool_input={"command": "ls"}, tool_use_id="t1")
    assert answer["session"] == sid and lw.status(sid)["state"] == "paused"
    assert answer["output"]["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_only_the_hook_given_a_ticket_may_take_its_answer(lw: Harness) -> None:
    def event(name: str, **fields: Any) -> dict[str, Any]:
        return {"session_id": "c-ticket", "cwd": "/tmp/ticket", "hook_event_name": name, **fields}

    sid = lw.request("hook", event=event("SessionStart", source="startup"))["session"]
    assert lw.cli("pause", sid).returncode == 0
    held = lw.request("hook", event=event("PreToolUse", tool_name="Bash", tool_input={"command": "ls"},
                                          tool_use_id="t1"), hold=60)
    assert held["ticket"]
    thief = subprocess.run([PY, "-c", (
        "import sys; from loopwarden.runtime.client import Client; from loopwarden.paths import "
        "default_paths\ntry:\n    Client.connect(default_paths(), autostart=False, name='hook').request("
        f"'hook_wait', session='{sid}', ticket={held['ticket']}, hold=1)\nexcept Exception as e:\n    print(e)")],
        env=lw.env, capture_output=True, text=True, timeout=60, check=False)
    assert "belongs to another hook process" in thief.stdout, thief


def test_a_claude_code_tool_that_left_claudes_process_tree_is_still_refused(lw: Harness) -> None:
    """A double-forked tool is re-parented to init, out of Claude's tree; CLAUDECODE=1 still gives it away."""
    lw.request("hook", event={"session_id": "c-escape", "cwd": "/tmp/escape", "hook_event_name": "SessionStart"})
    orphan = subprocess.run(["setsid", "-f", "sh", "-c", f"{PY} -m loopwarden kill claude:escape > /dev/null 2>&1; "
                             f"echo $? > {lw.home}/orphan.code"], env={**lw.env, "CLAUDECODE": "1"}, timeout=30,
                            check=False)
    assert orphan.returncode == 0
    code = wait_for(lambda: (lw.home / "orphan.code").exists() and (lw.home / "orphan.code").read_text().strip(),
                    what="the orphan's command")
    assert code == "4"  # refused
    assert lw.status("claude:escape")["state"] == "running"
    assert lw.cli("kill", "claude:escape").returncode == 0  # the operator, without CLAUDECODE, is not refused


def test_a_daemon_of_any_profile_is_found_among_an_agents_ancestors(lw: Harness) -> None:
    sid = lw.launch(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="sleeper")
    pid = wait_for(lambda: lw.status(sid).get("pid"), what="the agent's pid")
    ping = lw.request("ping")
    nearest = ping["keeper"]["pid"] if ping["keeper"] else ping["pid"]  # a kept agent's parent is its keeper
    assert daemon_ancestor(ancestry(pid)) == nearest  # found by its command line, whatever the agent's env says
    assert daemon_ancestor(ancestry(os.getpid())) is None  # the near miss: this test runs under no daemon
