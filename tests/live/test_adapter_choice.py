"""`loopwarden run` without --adapter: the adapter is chosen from what the agent does (sessions/detect.py).

Real daemons, real agent processes (tests/agents/); every wait polls a condition with a deadline.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Harness
from tests.support.events import of_kind, rules
from tests.support.paths import AGENTS, DATA, PY
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)

CLAUDE_STREAM = DATA / "claude_turns_array__claude-code-action__sample-turns.json"
CODEX_EXEC = DATA / "codex_exec_json__openai-codex-docs__exec-md-sample.jsonl"
HELLO = json.dumps({"type": "hello", "name": "late", "protocol": 1})
CALL = json.dumps({"type": "tool_call", "tool": "read_file", "args": {"path": "a.py"}, "call_id": "c1"})


def run_attached(h: Harness, *words: str, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`loopwarden run [OPTIONS] -- COMMAND` as a user types it, to its end."""
    return subprocess.run([PY, "-m", "loopwarden", "run", *words], env={**h.env, **(env or {})}, cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def only(h: Harness) -> dict[str, Any]:
    (snap,) = h.request("list")
    return snap  # type: ignore[no-any-return]


def choice_lines(h: Harness, sid: str) -> list[str]:
    return [str(d["text"]) for d in of_kind(h, sid, "log") if str(d.get("text")).startswith("adapter ")]


def test_an_ordinary_command_runs_plain_its_lines_shown_live_and_stored(lw: Harness) -> None:
    code = "print('line one'); print('line two'); print('tricky \\x1b[2J end'); print('line four')"
    out = run_attached(lw, "--", PY, "-c", code)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    shown = out.stdout
    assert "adapter plain: its first line is not JSON" in shown
    assert "│ line one" in shown and "│ line two" in shown and "│ line four" in shown
    assert "│ tricky \\x1b[2J end" in shown and "\x1b[2J" not in shown  # made visible, never obeyed
    snap = only(lw)
    assert (snap["adapter"], snap["state"], snap["exit_code"]) == ("plain", "exited", 0), snap
    assert snap["termination"] is None and lw.verdicts(snap["id"]) == []
    stored = [d["text"] for d in of_kind(lw, snap["id"], "output")]
    assert stored == ["line one", "line two", "tricky \x1b[2J end", "line four"]
    logs = lw.cli("logs", snap["id"])
    assert logs.returncode == 0 and "│ line one" in logs.stdout and "│ line four" in logs.stdout
    assert "adapter plain" in logs.stdout


def test_a_structured_log_whose_words_are_loopwarden_event_types_is_plain_not_ended(lw: Harness) -> None:
    code = ("import json; print(json.dumps({'type': 'error', 'message': 'config missing'})); "
            "print('using defaults'); print(json.dumps({'type': 'done'})); print('bye')")
    out = run_attached(lw, "--", PY, "-c", code)
    assert out.returncode == 0, out.stderr
    snap = only(lw)
    assert (snap["adapter"], snap["state"], snap["termination"]) == ("plain", "exited", None), snap
    assert "but not a loopwarden hello" in " ".join(choice_lines(lw, snap["id"]))
    assert [d["text"] for d in of_kind(lw, snap["id"], "output")][1::2] == ["using defaults", "bye"]


def test_the_limits_plain_output_allows_still_apply_to_a_chosen_plain_session(lw: Harness) -> None:
    code = "import time; print('working', flush=True); time.sleep(60)"
    out = run_attached(lw, "--set", "limits.max_runtime=2s", "--", PY, "-c", code)
    assert out.returncode == 10, out.stderr  # max_runtime
    snap = only(lw)
    assert (snap["adapter"], snap["termination"]) == ("plain", "max_runtime"), snap
    assert [d["text"] for d in of_kind(lw, snap["id"], "output")] == ["working"]


def test_the_same_command_with_adapter_native_is_still_strict(lw: Harness) -> None:
    out = run_attached(lw, "--adapter", "native", "--", PY, "-c", "print(1); print(2); print(3)")
    assert out.returncode == 12, out.stderr
    snap = only(lw)
    assert (snap["adapter"], snap["termination"]) == ("native", "validation_failure"), snap
    assert choice_lines(lw, snap["id"]) == []  # named by the user: nothing was chosen


def test_a_native_agent_is_chosen_by_its_hello_and_its_verdicts_still_work(lw: Harness) -> None:
    out = run_attached(lw, "--name", "rep", "--", PY, "-m", "loopwarden.sessions.scripted", "repetition")
    assert out.returncode == 11, out.stderr  # repetition_loop
    snap = only(lw)
    assert (snap["adapter"], snap["handshake"], snap["termination"]) == ("native", True, "repetition_loop")
    assert rules(lw.verdicts(snap["id"]))[-1] == ("terminate", "repetition")
    assert ("block", "repetition") in rules(lw.verdicts(snap["id"]))
    assert choice_lines(lw, snap["id"]) == ["adapter native: its first line is a loopwarden hello (docs/protocol.md)"]
    assert "adapter native: its first line is a loopwarden hello" in out.stdout
    assert snap["adapter_reason"].startswith("its first line is a loopwarden hello")


@pytest.mark.parametrize(("stream", "adapter", "agent", "calls"), [
    (CLAUDE_STREAM, "claude-stream", "claude-code", 3),
    (CODEX_EXEC, "codex-exec", "codex", 1),
])
def test_an_agent_printing_its_own_json_stream_is_watched_with_its_parser(
        lw: Harness, stream: Path, adapter: str, agent: str, calls: int) -> None:
    out = run_attached(lw, "--", PY, str(AGENTS / "stream_file.py"), str(stream))
    assert out.returncode == 0, out.stderr
    snap = only(lw)
    assert (snap["adapter"], snap["agent"], snap["state"]) == (adapter, agent, "exited"), snap
    assert len(of_kind(lw, snap["id"], "tool_call")) == calls
    assert of_kind(lw, snap["id"], "output") == [] and of_kind(lw, snap["id"], "invalid_line") == []
    assert f"adapter {adapter}: its first line is" in out.stdout


def _wrapper(folder: Path, name: str, script: str) -> Path:
    """An executable called NAME that runs a fake agent: the command line names the real agent."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nexec {PY} {AGENTS / script} \"$@\"\n")
    path.chmod(0o755)
    return path


def test_codex_app_server_is_chosen_by_its_command_line(lw: Harness, tmp_path: Path) -> None:
    codex = _wrapper(tmp_path, "codex", "fake_codex_app.py")
    report = tmp_path / "answers.jsonl"
    out = run_attached(lw, "--set", "limits.max_line_bytes=1048576", "--set", "validation.max_consecutive=50",
                       "--", str(codex), "app-server", "do something", env={"FAKE_CODEX_REPORT": str(report)})
    assert out.returncode == 0, out.stderr
    snap = only(lw)
    assert (snap["adapter"], snap["agent"]) == ("codex", "codex"), snap
    assert snap["command"][:2] == [str(codex), "app-server"]
    assert json.loads(report.read_text().splitlines()[-1]) == {"eof": True}  # driven to its end by the adapter
    assert "adapter codex: the command is `codex app-server`" in out.stdout


def test_an_acp_agent_is_chosen_by_its_command_line(lw: Harness, tmp_path: Path) -> None:
    opencode = _wrapper(tmp_path, "opencode", "fake_acp_agent.py")
    report = tmp_path / "report.jsonl"
    out = run_attached(lw, "--", str(opencode), "acp", "--", "do the task",
                       env={"FAKE_ACP_MODE": "once", "FAKE_ACP_REPORT": str(report)}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    snap = only(lw)
    assert (snap["adapter"], snap["agent"], snap["state"]) == ("acp", "opencode", "exited"), snap
    prompts = [r["prompt"] for r in map(json.loads, report.read_text().splitlines()) if "prompt" in r]
    assert prompts == ["do the task"]
    assert "adapter acp: the command starts opencode, an ACP agent" in out.stdout


def test_a_request_driven_agent_without_a_prompt_is_one_line_naming_the_choice(lw: Harness, tmp_path: Path) -> None:
    opencode = _wrapper(tmp_path, "opencode", "fake_acp_agent.py")
    out = run_attached(lw, "--", str(opencode), "acp")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "adapter acp: the command starts opencode" in out.stderr and "no prompt" in out.stderr
    assert lw.request("list") == []


def test_a_silent_agent_shows_as_plain_and_is_never_killed_for_it(lw: Harness, tmp_path: Path) -> None:
    release = tmp_path / "release"
    sid = lw.run_detached(PY, str(AGENTS / "quiet_then.py"), str(release), adapter="auto")
    snap = wait_for(lambda: (s := lw.status(sid))["adapter"] == "plain" and s, what="the silent agent to show plain")
    assert snap["state"] == "running" and "nothing on stdout" in snap["adapter_reason"]
    release.touch()
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["state"], snap["exit_code"], snap["adapter"]) == ("exited", 0, "plain"), snap
    assert snap["adapter_reason"] == "it printed nothing on stdout"
    assert lw.verdicts(sid) == []


def test_a_late_first_line_still_chooses_the_adapter(lw: Harness, tmp_path: Path) -> None:
    release = tmp_path / "release"
    sid = lw.run_detached(PY, str(AGENTS / "quiet_then.py"), str(release), HELLO, CALL, adapter="auto")
    wait_for(lambda: lw.status(sid)["adapter"] == "plain", what="the silent agent to show plain")
    release.touch()
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["adapter"], snap["exit_code"]) == ("native", 0), snap
    assert [c["tool"] for c in of_kind(lw, sid, "tool_call")] == ["read_file"]
    assert of_kind(lw, sid, "output") == []
    assert [line.split(":")[0] for line in choice_lines(lw, sid)] == ["adapter plain", "adapter native"]


def test_a_first_line_over_the_chosen_adapters_limit_is_refused_as_that_adapter_would(lw: Harness) -> None:
    code = "import json; print(json.dumps({'type': 'hello', 'name': 'x' * (2 << 20)})); print('{}')"
    sid = lw.run_detached(PY, "-c", code, adapter="auto")
    snap = lw.wait_state(sid, "exited", "terminated")
    assert (snap["adapter"], snap["state"], snap["exit_code"]) == ("native", "exited", 0), snap
    reasons = [d["reason"] for d in of_kind(lw, sid, "invalid_line")]
    assert len(reasons) == 2 and reasons[0].startswith("line longer than 1,048,576 bytes"), reasons
