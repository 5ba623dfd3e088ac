"""The real Codex CLI (`codex exec`) set up by `loopwarden hook install --agent codex`, on the fake Responses API."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.codex.codex_home import codex_env, write_codex_home
from tests.codex.fake_responses import FakeResponses, outputs, run
from tests.support.daemon import Harness
from tests.support.events import rules

from .helpers import lw_hook

pytestmark = pytest.mark.timeout(120)
BLOCKED = "Command blocked by PreToolUse hook: "


def installed_home(tmp_path: Path, fake: FakeResponses) -> Path:
    home = write_codex_home(tmp_path / "codex-home", fake.url)
    done = lw_hook(home, tmp_path, "install", "--agent", "codex")
    assert done.returncode == 0, done.stderr
    return home


def codex_exec(codex_bin: str, home: Path, work: Path, loopwarden_home: Path,
               completes: bool = True) -> tuple[list[dict[str, Any]], int]:
    """`codex exec --json`'s records and exit code; `completes`: its turn is expected to end as usual."""
    done = subprocess.run([codex_bin, "exec", "--json", "--skip-git-repo-check", "list the files"], cwd=work,
                          env=codex_env(home, LOOPWARDEN_HOME=str(loopwarden_home)), capture_output=True, text=True,
                          timeout=90, check=False, stdin=subprocess.DEVNULL)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert records, (done.stdout, done.stderr)
    if completes:
        assert records[-1]["type"] == "turn.completed", (done.stdout, done.stderr)
    return records, done.returncode


def commands_run(records: list[dict[str, Any]]) -> int:
    return sum(1 for r in records if r["type"] == "item.completed" and r["item"]["type"] == "command_execution")


def test_a_repeated_call_is_denied_by_loopwarden_and_a_terminated_codex_is_stopped(
        lw: Harness, codex_bin: str, fake_model: FakeResponses, tmp_path: Path) -> None:
    home = installed_home(tmp_path, fake_model)
    work = tmp_path / "project"
    work.mkdir()
    fake_model.play(run("ls"), repeat=True, max_replies=400)  # the same call, again and again, for as long as asked
    records, code = codex_exec(codex_bin, home, work, lw.home, completes=False)

    assert commands_run(records) == 5  # 5 ran; Codex never started the denied ones
    assert code in (-signal.SIGTERM, -signal.SIGKILL), code  # stopped by loopwarden, not by running out of replies
    seen = [o["output"] for o in outputs(fake_model.requests()[-1])]
    denied = [text for text in seen if text.startswith(BLOCKED)]
    assert denied[0].startswith(BLOCKED + "Tool call blocked: tool 'Bash' called 6 times consecutively")
    # the 9th call ended the session and Codex was stopped: no more than one more call reached the model
    assert 8 <= len(seen) <= 10 and len(fake_model.requests()) <= 11
    thread = records[0]["thread_id"]
    [snap] = [s for s in lw.request("list") if s.get("codex_session") == thread]
    assert snap["adapter"] == "codex-hook" and snap["name"] == "codex:project" and snap["cwd"] == str(work)
    assert (snap["state"], snap["termination"]) == ("terminated", "repetition_loop")
    assert rules(lw.verdicts(snap["id"])) == [("nudge", "repetition")] + [("block", "repetition")] * 3 + [
        ("terminate", "repetition")]
    said = [e["data"]["text"] for e in lw.events(snap["id"]) if e["kind"] == "log"]
    assert any(re.fullmatch(r"sent SIGTERM to the agent process \d+( and \d+ process\(es\) below it)?; SIGKILL "
                            r"follows in 5s for any still running", text) for text in said), said


def test_with_no_daemon_the_installed_hook_lets_codex_work(codex_bin: str, fake_model: FakeResponses,
                                                          tmp_path: Path) -> None:
    home = installed_home(tmp_path, fake_model)
    fake_model.play(run("echo free"), repeat=True, max_replies=7)
    records, _ = codex_exec(codex_bin, home, tmp_path, tmp_path / "no-daemon-here")
    assert commands_run(records) == 7
    assert not any(o["output"].startswith(BLOCKED) for o in outputs(fake_model.requests()[-1]))
