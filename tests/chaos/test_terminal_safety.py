"""Terminal safety (issue 10, item 2): nothing an agent writes reaches a person's terminal as a control sequence.

A hostile agent (tests/agents/hostile_text.py) puts a window title, a clipboard write, a
hyperlink, a clear-screen, bells, an 8-bit CSI, bidi overrides and a carriage return in every
text it controls. Every human output (the CLI on a real pseudo-terminal, the console's
rendered screens, daemon.log) must show them as visible escapes; `--json` keeps them exact.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import threading
import tty
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from textual._compositor import LayoutUpdate
from textual.widgets import DataTable, Log, RichLog

from loopwarden.cli.common import DaemonFail
from loopwarden.runtime.daemon import Daemon
from loopwarden.paths import default_paths
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.gates import GatesQueue
from loopwarden.widgets.proctree import ProcessTree
from loopwarden.widgets.spill_viewer import SpillViewer
from tests.claude_code_hook.helpers import event, hooked, pre, run_hook
from tests.console.helpers import RecordingConsole, cell, key_of, until
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PATH_TO_PY, PY, PY_NAME
from tests.support.waiting import wait_for

TEXT = ("\x1b]0;PWNED\x07"  # window title
        "\x1b]52;c;cm0gLXJmIH4=\x07"  # clipboard write
        "\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\"  # hyperlink
        "\x1b[2J\x07\x9b31m"  # clear the screen, a bell, an 8-bit CSI
        "\u202eRTL\u2066\rCR[/][bold]x")  # a bidi override and isolate, a carriage return, markup
SHOWN = ("\\x1b]0;PWNED\\x07" "\\x1b]52;c;cm0gLXJmIH4=\\x07" "\\x1b]8;;https://evil.example/\\x1b\\link\\x1b]8;;\\x1b\\"
         "\\x1b[2J\\x07\\x9b31m" "\\u202eRTL\\u2066\\rCR[/][bold]x")  # written out: independent of the sanitiser
UP_TO_CR = SHOWN[:SHOWN.index("\\r")]  # the engine's reasons and psutil's command lines change \r
ASKS = f"agent asks: asks{UP_TO_CR}"
NAME = "[b]\x1b]0;\x07\x9b\u202e"  # markup too (shown as written, never bold), short enough for the NAME column
NAME_SHOWN = "[b]\\x1b]0;\\x07\\x9b\\u202e"
AGENT = str(AGENTS / "hostile_text.py")


def hostile_agent(where: Path) -> list[str]:
    """The hostile agent's command, run in `where`: its script under a file named NAME there (a session's
    default name is its script's name, which an agent can choose; an operator's --name with control
    characters is refused outright), and this Python by its name (on PATH_TO_PY): the command line is shown
    cut, so it must hold TEXT early, wherever the clone and the temporary directory are."""
    link = where / NAME
    if not link.exists():
        link.symlink_to(AGENT)
    return [PY_NAME, NAME, TEXT]
CLICK_STYLE = re.compile(r"\x1b\[[0-9;]*m")  # click's own colours (TEXT carries none)
BIDI = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}


def raw_controls(shown: str) -> list[str]:
    """Every character in `shown` that a terminal would act on, apart from newlines and click's colours."""
    return [char for char in CLICK_STYLE.sub("", shown)
            if char != "\n" and (unicodedata.category(char) in ("Cc", "Cs") or char in BIDI)]


class Terminal:
    """A command whose stdout and stderr are a pseudo-terminal, as in the operator's shell (click keeps colours)."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> None:
        master, slave = pty.openpty()
        tty.setraw(slave)  # no newline translation: every \r read back was written by the command
        self.proc = subprocess.Popen(args, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
        os.close(slave)
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, args=(master,), daemon=True)
        self.reader.start()

    def _read(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 65536):
                self.chunks.append(chunk)
        except OSError:  # EIO: the command closed the terminal
            pass
        finally:
            os.close(fd)

    def output(self, timeout: float = 60) -> str:
        """Everything the command wrote, once it has exited (strict UTF-8: a lone surrogate would have failed)."""
        self.proc.wait(timeout)
        self.reader.join(timeout)
        return b"".join(self.chunks).decode()


def shell(lw: Harness, *args: str) -> str:
    return Terminal([PY, "-m", "loopwarden", *args], lw.env).output()


# ---- the CLI -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """What each command printed about one hostile session: an attached run, and the listings around it."""
    lw = Harness(tmp_path_factory.mktemp("lw"))
    lw.start()
    try:
        run = Terminal([PY, "-m", "loopwarden", "run", "--", *hostile_agent(lw.home)], {**lw.env, **PATH_TO_PY},
                       cwd=lw.home)
        snap = wait_for(lambda: next((s for s in lw.request("list") if s["state"] == "gated"), None),
                        what="the hostile session's gate")
        sid = snap["id"]
        out: dict[str, Any] = {"sid": sid, "gates": shell(lw, "gates"), "ls": shell(lw, "ls"),
                               "status": shell(lw, "status", sid)}
        lw.request("approve", gate=f"{sid}:{snap['pending_gates'][0]}", note="go on")
        out["run"] = run.output()
        out["run exit"] = run.proc.returncode
        out["logs"] = shell(lw, "logs", sid)
        out["audit"] = shell(lw, "audit")
        out["logs --json"] = lw.cli("logs", "--json", sid).stdout
        yield out
    finally:
        lw.stop()


@pytest.mark.parametrize(("command", "expected"), [
    ("run", [f"tool{SHOWN[:40]}", f"out{SHOWN}"[:120], f"said{SHOWN}", f"failed{SHOWN}", f"stderr{SHOWN}",
             ASKS, NAME_SHOWN]),
    ("logs", [f"tool{SHOWN[:40]}", f"out{SHOWN}"[:120], f"said{SHOWN}", f"failed{SHOWN}", f"stderr{SHOWN}",
              ASKS]),
    ("gates", [NAME_SHOWN, ASKS]),
    ("ls", [NAME_SHOWN[:18]]),
    ("status", [NAME_SHOWN, SHOWN]),  # the name, and the command line that carries TEXT
    ("audit", [SHOWN]),  # the run action's target is the command line
])
def test_every_command_shows_agent_text_as_visible_escapes(printed: dict[str, Any], command: str,
                                                           expected: list[str]) -> None:
    shown = printed[command]
    assert not raw_controls(shown), f"`{command}` sent {raw_controls(shown)!r} to the terminal:\n{shown!r}"
    for fragment in expected:
        assert fragment in shown, f"`{command}` does not show {fragment!r}:\n{shown}"


def test_the_attached_run_ends_with_the_agents_exit_code(printed: dict[str, Any]) -> None:
    assert printed["run exit"] == 0, printed["run"]
    assert f"said{SHOWN}" in printed["run"]


def test_json_logs_keep_the_exact_text_the_human_logs_escape(printed: dict[str, Any]) -> None:
    records = [orjson.loads(line) for line in printed["logs --json"].splitlines()]
    data = [r["data"] for r in records]
    [call] = [d for d in data if d.get("type") == "tool_call" and d["tool"] != "after_gate"]
    assert (call["tool"], call["args"]) == (f"tool{TEXT}", {"cmd": f"arg{TEXT}"})
    exact = {f"out{TEXT}\nsecond line", f"said{TEXT}", f"failed{TEXT}", f"stderr{TEXT}", f"asks{TEXT}"}
    found = {d.get("output") or d.get("text") or d.get("message") or d.get("reason") for d in data}
    assert exact <= found
    assert f"said{TEXT}" not in printed["logs"] and f"said{SHOWN}" in printed["logs"]


def test_a_hook_session_from_a_hostile_directory_shows_a_safe_name(lw: Harness) -> None:
    directory, claude_id = "d\x1b]0;PWNED\x07\x1b[2J\x9b\u202e", "c\x1b]0;X\x07"
    cwd = f"/tmp/{directory}"
    assert run_hook(lw.env, event("SessionStart", session=claude_id, cwd=cwd, source="startup")).code == 0
    command = "ls \x9b31m\u202eRTL \x1b]0;PWNED\x07"
    assert run_hook(lw.env, pre(command=command, session=claude_id, cwd=cwd)).code == 0
    [snap] = hooked(lw, claude_id)
    assert snap["name"] == f"claude:{directory}"  # exact in the daemon, escaped when shown
    wait_for(lambda: any(e["kind"] == "tool_call" for e in lw.events(snap["id"])), what="the hooked tool call")
    shown = {"ls": shell(lw, "ls"), "status": shell(lw, "status", snap["id"]), "logs": shell(lw, "logs", snap["id"]),
             "audit": shell(lw, "audit")}
    for which, text in shown.items():
        assert not raw_controls(text), f"`{which}` sent {raw_controls(text)!r}:\n{text!r}"
    assert "claude:d\\x1b]0;PWN" in shown["ls"]  # the NAME column's 18 characters
    assert "claude:d\\x1b]0;PWNED\\x07\\x1b[2J\\x9b\\u202e" in shown["status"]
    assert "ls \\x9b31m\\u202eRTL \\u001b]0;PWNED\\u0007" in shown["logs"]  # the arguments are JSON: \u001b
    assert "c\\x1b]0;X\\x07" in shown["audit"]  # the attach action's target is the Claude session id


def test_errors_relayed_from_the_daemon_are_shown_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    DaemonFail(f"gate s1:g1 was already approved by {TEXT}").show()
    assert capsys.readouterr().err == f"loopwarden: error: gate s1:g1 was already approved by {SHOWN}\n"


def test_daemon_log_lines_are_one_line_with_visible_escapes(tmp_path: Path,
                                                            capfd: pytest.CaptureFixture[str]) -> None:
    daemon = Daemon(default_paths({"LOOPWARDEN_HOME": str(tmp_path)}))
    daemon.log(f"error in status: no session {TEXT}\nforged line")
    line = capfd.readouterr().err
    assert line.endswith(f"error in status: no session {SHOWN}\\nforged line\n")
    assert line.count("\n") == 1 and not raw_controls(line)


# ---- the console ---------------------------------------------------------------------------------

def screen_text(app: RecordingConsole) -> str:
    """The text of every cell of the screen as the terminal would get it (the compositor's segments)."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    assert isinstance(update, LayoutUpdate)  # what a full render is
    return "\n".join("".join(seg.text for strip in line for seg in strip if not seg.control) for line in update.strips)


def assert_safe(app: RecordingConsole, where: str, *fragments: str) -> None:
    text = screen_text(app)
    assert not raw_controls(text), f"the {where} drew {raw_controls(text)!r}:\n{text}"
    for fragment in fragments:
        assert fragment in text, f"the {where} does not show {fragment!r}:\n{text}"


@pytest.mark.anyio
async def test_console_screens_show_agent_text_as_visible_escapes(lw: Harness) -> None:
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await until(pilot, lambda: app.feed.ready, what="the console's feed")
        sid = await anyio.to_thread.run_sync(lambda: lw.run_detached(  # the gate opens under the console's eyes
            *hostile_agent(lw.home), sets=("spill.threshold_chars=10",), cwd=lw.home, env=PATH_TO_PY))
        await until(pilot, lambda: cell(app, sid, "gates") == "1", what="the gate in the table")
        await until(pilot, lambda: "opened" in screen_text(app), what="the gate's toast")
        assert_safe(app, "sessions table and toast", NAME_SHOWN, f"asks{SHOWN}"[:40])

        await pilot.press(key_of(app, "kill"))  # the kill confirmation quotes the name
        await until(pilot, lambda: len(app.screen_stack) == 2, what="the confirmation")
        assert_safe(app, "kill confirmation", f"({NAME_SHOWN})?")
        await pilot.press("escape")

        await pilot.press("ctrl+p", *"open s")  # the command palette offers the session by name
        await until(pilot, lambda: f"Open {sid} {NAME_SHOWN}" in screen_text(app), what="the palette's entry")
        assert_safe(app, "command palette")
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1, what="the palette to close")

        await pilot.press("enter")
        detail = await until(pilot, lambda: isinstance(app.screen, SessionDetail) and app.screen, what="the detail")
        stream = detail.query_one("#stream", RichLog)
        await until(pilot, lambda: any("said" in strip.text for strip in stream.lines), what="the stream")
        await pilot.press("l")  # the agent's stderr, hidden by default
        await until(pilot, lambda: any("stderr" in strip.text for strip in stream.lines), what="the stderr lines")
        tree = detail.query_one(ProcessTree)
        await until(pilot, lambda: tree.root.children, what="the process tree")
        await pilot.pause()
        assert_safe(app, "detail screen", *(text[:60] for text in (f"hello hostile {SHOWN}", f"tool{SHOWN}",
                    f"said{SHOWN}", f"failed{SHOWN}", f"stderr{SHOWN}", ASKS)), NAME_SHOWN)
        labels = [node.label.plain for node in tree.root.children]
        assert any(UP_TO_CR in label for label in labels), labels  # the agent's command line carries TEXT

        await pilot.press("o")
        viewer = await until(pilot, lambda: isinstance(app.screen, SpillViewer) and app.screen.loaded and app.screen,
                             what="the spill viewer")
        assert viewer.query_one(Log).lines[:2] == [f"out{SHOWN}", "second line"]
        await pilot.pause()
        assert_safe(app, "spill viewer", f"out{SHOWN}"[:60])
        await pilot.press("escape", "escape")

        await until(pilot, lambda: len(app.screen_stack) == 1, what="the sessions screen")
        await pilot.press("g")
        queue = await until(pilot, lambda: isinstance(app.screen, GatesQueue) and app.screen, what="the queue")
        await until(pilot, lambda: queue.query_one("#gates", DataTable).row_count == 1, what="the gate's row")
        await pilot.pause()
        assert_safe(app, "gates queue", NAME_SHOWN, ASKS[:60], f"request: asks{SHOWN}")
        await pilot.press("d", "enter")  # deny, with no reason typed: the agent is stopped
        await until(pilot, lambda: cell(app, sid, "state") == "terminated", what="the denied session to end")
