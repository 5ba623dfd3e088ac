"""The real Codex CLI (`codex exec`) set up by `loopwarden hook install --agent codex`, on the fake Responses API."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.codex.codex_home import codex_env, write_codex_home
from tests.codex.fake_responses import FakeResponses, outputs, run
from tests.live.live_harness import Harness, rules

from .helpers import lw_hook

pytestmark = pytest.mark.timeout(120)
BLOCKED = "Command blocked by PreToolUse hook: "


def installed_home(tmp_path: Path, fake: FakeResponses) -> Path:
    home = write_codex_home(tmp_path / "codex-home", fake.url)
    done = lw_hook(home, tmp_path, "install", "--agent", "codex")
    assert done.returncode == 0, done.stderr
    return home


def codex_exec(codex_bin: str, home: Path, work: Path, loopwarden_home: Path) -> list[dict[str, Any]]:
    done = subprocess.run([codex_bin, "exec", "--json", "--skip-git-repo-check", "list the files"], cwd=work,
                          env=codex_env(home, LOOPWARDEN_HOME=str(loopwarden_home)), capture_output=True, text=True,
                          timeout=90, check=False, stdin=subprocess.DEVNULL)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert records and records[-1]["type"] == "turn.completed", (done.stdout, done.stderr)
    return records


def commands_run(records: list[dict[str, Any]]) -> int:
    return sum(1 for r in records if r["type"] == "item.completed" and r["item"]["type"] == "command_execution")


def test_a_repeated_call_is_denied_by_loopwarden_and_the_reason_reaches_the_model(
        lw: Harness, codex_bin: str, fake_model: FakeResponses, tmp_path: Path) -> None:
    home = installed_home(tmp_path, fake_model)
    work = tmp_path / "project"
    work.mkdir()
    fake_model.play(run("ls"), repeat=True, max_replies=11)  # the same call, again and again
    records = codex_exec(codex_bin, home, work, lw.home)

    assert commands_run(records) == 5  # 5 ran; Codex never started the denied ones
    seen = [o["output"] for o in outputs(fake_model.requests()[-1])]
    denied = [text for text in seen if text.startswith(BLOCKED)]
    assert len(denied) == 6 and len(seen) == 11
    assert denied[0].startswith(BLOCKED + "Tool call blocked: tool 'Bash' called 6 times consecutively")
    assert "repetition loop" in denied[3]  # the 9th call ended the session; later calls are denied too
    thread = records[0]["thread_id"]
    [snap] = [s for s in lw.request("list") if s.get("codex_session") == thread]
    assert snap["adapter"] == "codex-hook" and snap["name"] == "codex:project" and snap["cwd"] == str(work)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop")
    assert rules(lw.verdicts(snap["id"])) == [("nudge", "repetition")] + [("block", "repetition")] * 3 + [
        ("terminate", "repetition")]


def test_with_no_daemon_the_installed_hook_lets_codex_work(codex_bin: str, fake_model: FakeResponses,
                                                          tmp_path: Path) -> None:
    home = installed_home(tmp_path, fake_model)
    fake_model.play(run("echo free"), repeat=True, max_replies=7)
    records = codex_exec(codex_bin, home, tmp_path, tmp_path / "no-daemon-here")
    assert commands_run(records) == 7
    assert not any(o["output"].startswith(BLOCKED) for o in outputs(fake_model.requests()[-1]))
