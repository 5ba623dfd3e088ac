"""The fake Responses API drives the real `codex exec --json`, offline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.codex.codex_home import codex_env
from tests.codex.fake_responses import FakeResponses, outputs, run, say, user_texts

pytestmark = pytest.mark.timeout(90)


def codex_exec(codex_bin: str, home: Path, work: Path, prompt: str) -> list[dict[str, Any]]:
    done = subprocess.run([codex_bin, "exec", "--json", "--skip-git-repo-check", prompt], cwd=work,
                          env=codex_env(home), capture_output=True, text=True, timeout=60, check=False,
                          stdin=subprocess.DEVNULL)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_codex_exec_runs_a_scripted_call_then_answers(codex_bin: str, codex_home: Path,
                                                      fake_model: FakeResponses, tmp_path: Path) -> None:
    fake_model.play([run("echo smoke-41"), say("all done")])
    records = codex_exec(codex_bin, codex_home, tmp_path, "say hi")
    kinds = [r["type"] for r in records]
    assert kinds[0] == "thread.started" and kinds[-1] == "turn.completed", records
    commands = [r["item"] for r in records if r["type"] == "item.completed"
                and r["item"]["type"] == "command_execution"]
    assert len(commands) == 1 and "smoke-41" in commands[0]["aggregated_output"]
    assert commands[0]["exit_code"] == 0
    bodies = fake_model.requests()
    assert len(bodies) == 2 and bodies[0]["stream"] is True
    assert any("say hi" in t for t in user_texts(bodies[0]))
    assert "smoke-41" in outputs(bodies[1])[0]["output"]
    assert fake_model.received("smoke-41") == [1]


def test_a_looping_model_is_bounded_and_ids_are_unique(codex_bin: str, codex_home: Path,
                                                       fake_model: FakeResponses, tmp_path: Path) -> None:
    fake_model.play(run("true"), repeat=True, max_replies=3)
    records = codex_exec(codex_bin, codex_home, tmp_path, "loop")
    commands = [r for r in records if r["type"] == "item.completed" and r["item"]["type"] == "command_execution"]
    assert len(commands) == 3
    ids = [o["call_id"] for o in outputs(fake_model.requests()[-1])]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert records[-1]["type"] == "turn.completed"


def test_http_500_fails_the_turn(codex_bin: str, codex_home: Path, fake_model: FakeResponses,
                                 tmp_path: Path) -> None:
    from tests.codex.fake_responses import http_error
    fake_model.play([http_error(500)])
    records = codex_exec(codex_bin, codex_home, tmp_path, "fail")
    assert records[-1]["type"] == "turn.failed", records
