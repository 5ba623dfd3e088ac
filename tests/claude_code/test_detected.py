"""The real Claude Code CLI run as typed (`loopwarden run -- claude -p --output-format stream-json ...`),
no --adapter: its first stdout line chooses the watch-only claude-stream adapter (sessions/detect.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import FakeAnthropic, call, say
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.timeout(120)


def test_claude_printing_stream_json_is_watched_as_claude_stream(cc: Harness, fake_api: FakeAnthropic,
                                                                  claude_bin: str) -> None:
    work: Path = cc.work  # type: ignore[attr-defined]
    (work / "notes.txt").write_text("alpha\nbeta\n")
    fake_api.play([call("Read", {"file_path": str(work / "notes.txt")}, text="Reading the notes."),
                   say("The notes say alpha, beta.")])
    out = subprocess.run([PY, "-m", "loopwarden", "run", "--", claude_bin, "-p", "--output-format", "stream-json",
                          "--verbose", "--max-turns", "3", "summarise notes.txt"], env=cc.env, cwd=work,
                         capture_output=True, text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stderr
    assert "adapter claude-stream: its first line is Claude Code stream-json" in out.stdout
    assert "stdin closed: `claude -p` waits for a piped stdin" in out.stdout
    assert "no stdin data received" not in out.stdout  # it did not wait for the pipe
    (snap,) = cc.request("list")
    assert (snap["adapter"], snap["agent"], snap["exit_code"]) == ("claude-stream", "claude-code", 0), snap
    events = cc.events(snap["id"])
    calls = [e["data"] for e in events if e["kind"] == "tool_call"]
    assert [(c["tool"], c["args"]["file_path"]) for c in calls] == [("Read", str(work / "notes.txt"))]
    assert [e["data"]["text"] for e in events if e["kind"] == "assistant_message"] == [
        "Reading the notes.", "The notes say alpha, beta."]
    assert not [e for e in events if e["kind"] == "invalid_line"]
