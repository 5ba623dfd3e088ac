"""`loopwarden takeover` with the real Claude Code: the supervised run stopped, the operator's turn typed in
the real `claude --resume` interactive program (in tmux, on the fake API), then the session continued under
supervision with the operator's turn in its history. Both handovers audited."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude_code.test_continue import SLOW, transcript
from tests.claude_code.test_launched import said, start
from tests.fakes.anthropic_server import FakeAnthropic, call, say
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.paths import PY
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def script(body: dict) -> object:
    """The first turn runs a slow command (the takeover stops it); the operator's and the later turns answer."""
    texts = str(body.get("messages"))
    if "Continue the task" in texts:
        return say("SUPERVISED AGAIN")
    if "CHARLIEXRAY" in texts:
        return say("OPERATOR ANSWERED")
    return call("Bash", SLOW)


class Tmux:
    """A tmux server of the test's own, one window running a command in a real terminal."""

    def __init__(self, folder: Path) -> None:
        self.socket = str(folder / "tmux.sock")

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, check=False,
                              timeout=20).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "op")

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", "op", "-l", text)
        self.run("send-keys", "-t", "op", "Enter")

    def kill(self) -> None:
        self.run("kill-server")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    server = Tmux(tmp_path)
    yield server
    server.kill()


def test_takeover_in_the_real_claude_program_then_continue(cc: Harness, fake_api: FakeAnthropic, tmux: Tmux,
                                                           tmp_path: Path) -> None:
    fake_api.play(script, max_turns=20)
    sid = start(cc, "--max-turns", "5", "--allowedTools=Bash", "ALPHAZULU: run the slow command")
    wait_for(lambda: of_kind(cc, sid, "tool_call"), 60, "the slow call")
    conversation = cc.status(sid)["conversation"]
    wait_for(lambda: "tool_use" in transcript(cc, conversation), 30, "Claude Code to write its transcript")

    operator_terminal(cc, tmux, tmp_path, "takeover", sid)

    wait_for(lambda: cc.status(sid)["state"] == "terminated", 60, "the supervised run stopped")
    assert cc.status(sid)["termination"] == "operator"
    wait_for(lambda: "ALPHAZULU" in tmux.screen(), 60, "claude's program to show the conversation")
    tmux.type("CHARLIEXRAY from the operator")
    wait_for(lambda: "OPERATOR ANSWERED" in tmux.screen(), 60, "the operator's answer on the screen")
    tmux.type("/exit")
    wait_for(lambda: "under loopwarden's supervision?" in tmux.screen(), 60, "the offer to continue")
    tmux.type("y")

    new = wait_for(lambda: next((a["target"] for a in cc.request("actions", session=sid)
                                 if a["action"] == "continue"), None), 60, "the continue")
    snap = cc.wait_state(new, "exited", "terminated", timeout=90)
    assert (snap["conversation"], snap["resume"]) == (conversation, "accepted")
    back = said(fake_api, "Continue the task")
    assert back and back[0] in said(fake_api, "CHARLIEXRAY") and back[0] in said(fake_api, "ALPHAZULU")
    assert not [e for e in cc.events(sid) + cc.events(new) if "CHARLIEXRAY" in str(e["data"])]  # not judged
    actions = [a["action"] for a in cc.request("actions", session=sid)]
    assert actions.index("takeover") < actions.index("handback") < actions.index("continue")


def operator_terminal(cc: Harness, tmux: Tmux, tmp_path: Path, *words: str) -> None:
    """`loopwarden WORDS` in a real terminal (tmux), in the session's folder, with the test's environment."""
    env = {k: v for k, v in cc.env.items() if k != "IS_SANDBOX"}  # as root, IS_SANDBOX changes what claude runs
    env["TERM"] = "xterm-256color"
    launcher = tmp_path / "operator.sh"
    launcher.write_text("cd " + shlex.quote(str(cc.work)) + "\nexec env -i "  # type: ignore[attr-defined]
                        + " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
                        + f" {shlex.quote(PY)} -m loopwarden {' '.join(map(shlex.quote, words))}; sleep 60\n")
    tmux.run("new-session", "-d", "-s", "op", "-x", "160", "-y", "48", f"sh {shlex.quote(str(launcher))}")


def test_the_console_takes_a_session_over_with_its_key_then_continues_it(cc: Harness, fake_api: FakeAnthropic,
                                                                        tmux: Tmux, tmp_path: Path) -> None:
    fake_api.play(script, max_turns=20)
    sid = start(cc, "--max-turns", "5", "--allowedTools=Bash", "ALPHAZULU: run the slow command")
    wait_for(lambda: of_kind(cc, sid, "tool_call"), 60, "the slow call")
    conversation = cc.status(sid)["conversation"]
    wait_for(lambda: "tool_use" in transcript(cc, conversation), 30, "Claude Code to write its transcript")
    operator_terminal(cc, tmux, tmp_path, "console")
    wait_for(lambda: sid in tmux.screen() and "running" in tmux.screen(), 60, "the console's row")
    tmux.run("send-keys", "-t", "op", "T")
    wait_for(lambda: "Take session" in tmux.screen(), 30, "the takeover question")
    tmux.run("send-keys", "-t", "op", "y")
    wait_for(lambda: "ALPHAZULU" in tmux.screen() and cc.status(sid)["state"] == "terminated", 60,
             "claude's program on the conversation")
    tmux.type("CHARLIEXRAY from the operator")
    wait_for(lambda: "OPERATOR ANSWERED" in tmux.screen(), 60, "the operator's answer on the screen")
    tmux.type("/exit")
    wait_for(lambda: "under loopwarden's supervision?" in tmux.screen(), 60, "the console back, offering to continue")
    tmux.run("send-keys", "-t", "op", "y")
    new = wait_for(lambda: next((a["target"] for a in cc.request("actions", session=sid)
                                 if a["action"] == "continue"), None), 60, "the continue")
    snap = cc.wait_state(new, "exited", "terminated", timeout=90)
    assert (snap["conversation"], snap["resume"]) == (conversation, "accepted")
    assert said(fake_api, "Continue the task")[0] in said(fake_api, "CHARLIEXRAY")
    rows = [a for a in cc.request("actions", session=sid) if a["action"] in ("takeover", "handback", "continue")]
    assert [a["action"] for a in rows] == ["takeover", "handback", "continue"]
    assert all(a["client"].startswith("console pid ") for a in rows)
