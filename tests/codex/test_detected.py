"""The real Codex CLI run as typed (`loopwarden run -- codex exec --json ...`), no --adapter: its first
stdout line chooses the watch-only codex-exec adapter (sessions/detect.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.codex.fake_responses import FakeResponses, run, say
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.timeout(120)


def test_codex_exec_json_is_watched_as_codex_exec(cx: Harness, fake_model: FakeResponses, codex_bin: str) -> None:
    work: Path = cx.work  # type: ignore[attr-defined]
    fake_model.play([run("echo healthy-12"), say("All done.")])
    out = subprocess.run([PY, "-m", "loopwarden", "run", "--", codex_bin, "exec", "--json", "--skip-git-repo-check",
                          "--dangerously-bypass-approvals-and-sandbox", "say hello"], env=cx.env, cwd=work,
                         capture_output=True, text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "adapter codex-exec: its first line is a `codex exec --json` event" in out.stdout
    assert "stdin closed: `codex exec` reads a piped stdin" in out.stdout  # else it would wait for it forever
    (snap,) = cx.request("list")
    assert (snap["adapter"], snap["agent"], snap["exit_code"]) == ("codex-exec", "codex", 0), snap
    events = cx.events(snap["id"])
    calls = [e["data"] for e in events if e["kind"] == "tool_call"]
    assert len(calls) == 1 and calls[0]["tool"] == "shell" and "echo healthy-12" in calls[0]["args"]["command"]
    assert [e["data"]["text"] for e in events if e["kind"] == "assistant_message"] == ["All done."]
    assert not [e for e in events if e["kind"] == "invalid_line"]
