"""The one-turn lag after a cancel: the acp adapter's own state machine driving the real claude-agent-acp
(no daemon: the test is the session runtime, passing lines both ways, and the one who cancels)."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
import pytest

from loopwarden.sessions.acp import CLOSE, AcpAdapter
from loopwarden.supervisor import events as ev
from tests.claude_code.conftest import QUIET
from tests.fakes.anthropic_server import FakeAnthropic, Turn, call, say, user_texts
from tests.support.paths import PY
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)
SLOW = f"{PY} -c 'import time; time.sleep(60.75)'"


class Wire:
    """The adapter process and an AcpAdapter speaking to it; every line written is kept."""

    def __init__(self, binary: str, env: dict[str, str], work: Path, prompt: str) -> None:
        self.adapter = AcpAdapter()
        argv = self.adapter.command([binary, "--", prompt])
        self.adapter.cwd = str(work)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=work, start_new_session=True)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.sent: list[dict[str, Any]] = []
        self.events: list[ev.Event] = []
        self.seq = 0
        assert self.proc.stdout is not None
        out = self.proc.stdout
        threading.Thread(target=lambda: [self.lines.put(x) for x in out], daemon=True).start()
        self.write(self.adapter.start_lines())

    def write(self, data: list[bytes | None]) -> None:
        assert self.proc.stdin is not None
        for chunk in data:
            if chunk == CLOSE:
                self.proc.stdin.close()
            elif chunk:
                self.sent += [orjson.loads(x) for x in chunk.splitlines()]
                self.proc.stdin.write(chunk)
                self.proc.stdin.flush()

    def pump(self, until: Any, timeout: float = 30.0, before_replies: Any = None) -> None:
        """Pass lines until `until(new events)` holds: calls allowed, the adapter's replies written."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                raw = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seq += 1
            new = self.adapter.parse_stdout(raw.rstrip(b"\n"), self.seq)
            self.events += new
            self.write([self.adapter.verdict_line(e, None) for e in new if isinstance(e, ev.ToolCall)])
            if before_replies:
                before_replies(new)
            self.write(list(self.adapter.replies(False)))
            if until(new):
                return
        raise AssertionError("timed out pumping the ACP stream")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def test_after_a_cancel_the_session_is_closed_and_resumed_and_the_answer_is_in_step(
        fake_api: FakeAnthropic, claude_acp: str, tmp_path: Path) -> None:
    def script(body: dict[str, Any]) -> Turn:
        said = [t for t in user_texts(body) if "SECOND-3" in t or "first" in t]
        if said and "SECOND-3" in said[-1]:
            return say("ANSWER-SECOND")
        return call("Bash", {"command": SLOW, "description": "wait"})

    fake_api.play(script, max_turns=10)
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "IS_SANDBOX"}, **fake_api.env(), **QUIET,
           "HOME": str(home)}
    wire = Wire(claude_acp, env, work, "first: wait")
    try:
        wire.pump(lambda new: any(isinstance(e, ev.ToolCall) for e in new))
        wait_for(lambda: _running(SLOW), 30, "the slow command")
        session = wire.adapter.session_id
        wire.write([orjson.dumps({"jsonrpc": "2.0", "method": "session/cancel",
                                  "params": {"sessionId": session}}) + b"\n"])

        def operator_speaks(new: list[ev.Event]) -> None:  # text arrives as the cancelled turn ends
            if any(isinstance(e, ev.Iteration) and e.error == "stopReason cancelled" for e in new):
                wire.write([wire.adapter.inject_line("SECOND-3 say something", "operator", "operator")])

        wire.pump(lambda new: any(isinstance(e, ev.Iteration) and e.status == "pass" for e in new),
                  before_replies=operator_speaks)
        # the prompt after the cancel got its own answer, in step (one turn late it would be empty)
        answers = [e.text for e in wire.events if isinstance(e, ev.AssistantMessage)]
        assert answers == ["ANSWER-SECOND"], answers
        methods = [m["method"] for m in wire.sent if "method" in m]
        assert methods == ["initialize", "session/new", "session/prompt", "session/cancel", "session/close",
                           "session/resume", "session/prompt", "session/close"], methods
        resume = next(m for m in wire.sent if m.get("method") == "session/resume")
        assert resume["params"]["sessionId"] == session, "not the same session"
        assert resume["params"]["_meta"]["claudeCode"]["options"]["settings"] == {"permissions": {"ask": ["Bash"]}}
        assert "first: wait" in user_texts(fake_api.messages[-1]), "the resumed session lost its history"
        # the turn over, loopwarden closed the session, then stdin: the adapter exits by itself
        wire.pump(lambda new: wire.adapter.closed, timeout=15)
        assert wire.proc.wait(15) == 0
    finally:
        wire.stop()


def _running(command: str) -> bool:
    marker = command.split("'")[1]
    return any(marker in " ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"]))
