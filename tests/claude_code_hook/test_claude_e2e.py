"""The real Claude Code CLI with `loopwarden hook install --project` settings, on the fake Messages API."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.fakes.anthropic_server import (
    FakeAnthropic,
    assistant_turns,
    call,
    result_text,
    say,
    tool_results,
    user_texts,
)
from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.paths import PY

from .conftest import QUIET
from .helpers import hooked

PROMPT = "List the files in this directory."


def claude_project(lw: Harness, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A project with the hooks installed, and the environment Claude Code runs in (a temporary HOME)."""
    home, project = tmp_path / "claude-home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    done = subprocess.run([PY, "-m", "loopwarden", "hook", "install", "--project"], cwd=project,
                          env={**lw.env, "HOME": str(home)}, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LOOPWARDEN_HOME": str(lw.home), **QUIET}
    return project, env


def run_claude(claude_bin: str, project: Path, env: dict[str, str], fake: FakeAnthropic) -> dict[str, Any]:
    done = subprocess.run([claude_bin, "-p", PROMPT, "--max-turns", "15", "--allowedTools", "Bash",
                           "--output-format", "json"], cwd=project, env={**env, **fake.env()},
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def test_a_repeated_call_is_denied_and_the_loop_ended_through_the_hooks(
        lw: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> None:
    project, env = claude_project(lw, tmp_path)
    fake_api.play(lambda body: call("Bash", {"command": "ls"}), max_turns=15)  # the same call, forever
    result = run_claude(claude_bin, project, env, fake_api)

    requests = fake_api.messages
    assert len(requests) == 9  # 5 allowed, 3 denied, the 9th call ended the run (not the turn limit)
    denied = [r for r in tool_results(requests[-1]) if r.get("is_error")]
    assert len(denied) == 3
    assert "Tool call blocked: tool 'Bash' called 6 times consecutively" in result_text(denied[0])
    assert result["session_id"]
    [snap] = hooked(lw, result["session_id"])
    assert snap["adapter"] == "claude-code-hook" and snap["name"] == "claude:project" and snap["cwd"] == str(project)
    assert (snap["state"], snap["termination"], snap["tool_calls"]) == ("terminated", "repetition_loop", 9)
    assert rules(lw.verdicts(snap["id"])) == [("nudge", "repetition")] + [("block", "repetition")] * 3 + [
        ("terminate", "repetition")]


def test_operator_text_reaches_the_model_through_the_stop_hook(
        lw: Harness, fake_api: FakeAnthropic, claude_bin: str, tmp_path: Path) -> None:
    project, env = claude_project(lw, tmp_path)

    def model(body: dict[str, Any]) -> Any:
        if assistant_turns(body) == 0:  # the prompt's hook has attached the session by now
            [snap] = [s for s in lw.request("list") if s["adapter"] == "claude-code-hook"]
            lw.request("inject", session=snap["id"], text="Say the magic word before you stop.")
            return say("Here are the files.")
        return say("Magic word.")

    fake_api.play(model, max_turns=6)
    result = run_claude(claude_bin, project, env, fake_api)
    assert fake_api.errors == []
    assert len(fake_api.messages) == 2 and result["result"] == "Magic word."
    assert any("Say the magic word before you stop." in text for text in user_texts(fake_api.messages[1]))
    [snap] = hooked(lw, result["session_id"])
    kinds = [e["kind"] for e in lw.events(snap["id"])]
    assert kinds == ["user_message", "assistant_message", "assistant_message"]
