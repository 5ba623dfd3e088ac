"""`loopwarden continue` with the real Claude Code CLI on the fake API: its conversation id recorded, and a
session lost in a simulated reboot continued in the same conversation (`--resume`)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from loopwarden.runtime.client import DaemonError
from loopwarden.widgets.dialogs import ConfirmWithReason
from tests.claude_code.test_launched import said, start
from tests.console.helpers import RecordingConsole, cell, key_of, until
from tests.console.test_actions import SIZE, console_actions, page_text, select
from tests.fakes.anthropic_server import FakeAnthropic, call, say
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.reboot import reboot, stored
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SLOW = {"command": "python3 -c 'import time; time.sleep(120)'", "description": "wait"}


def transcript(cc: Harness, conversation: str) -> str:
    """Claude Code's own transcript of the conversation ("" until it wrote one)."""
    return "".join(p.read_text() for p in Path(cc.env["HOME"], ".claude", "projects").rglob(f"{conversation}.jsonl"))


def script(body: dict) -> object:
    """ALPHAZULU's turn runs a slow command (the reboot comes during it); any later turn answers."""
    texts = str(body.get("messages"))
    return say("CONTINUED FINE") if "BRAVOYANKEE" in texts else call("Bash", SLOW)


def lost_in_a_reboot(cc: Harness, fake_api: FakeAnthropic) -> tuple[str, str]:
    """A Claude Code session in the middle of a slow call when every process of the profile is killed, then the
    daemon started again: its id and its conversation's."""
    fake_api.play(script, max_turns=10)
    sid = start(cc, "--max-turns", "5", "--allowedTools=Bash", "ALPHAZULU: run the slow command")
    wait_for(lambda: of_kind(cc, sid, "tool_call"), 60, "the slow call")
    conversation = cc.status(sid)["conversation"]
    assert UUID.fullmatch(conversation) and cc.status(sid)["resumable"] is True
    wait_for(lambda: "tool_use" in transcript(cc, conversation), 30, "Claude Code to write the call in its transcript")
    wait_for(lambda: stored(cc, sid).get("conversation") == conversation, 10, "the conversation id stored")
    reboot(cc)
    return sid, conversation


def test_a_lost_session_continues_in_its_conversation_with_the_note(cc: Harness, fake_api: FakeAnthropic) -> None:
    sid, conversation = lost_in_a_reboot(cc, fake_api)
    lost = cc.status(sid)
    assert (lost["state"], lost["conversation"], lost["resumable"]) == ("lost", conversation, True)
    listed = next(line for line in cc.cli("ls").stdout.splitlines() if line.startswith(sid + " "))
    assert "continuable" in listed
    assert f"conversation: {conversation}; 'loopwarden continue' continues it" in cc.cli("status", sid).stdout
    asked = len(fake_api.messages)

    done = cc.cli("continue", sid, "--note", "BRAVOYANKEE: carry on", cwd=cc.work)  # type: ignore[attr-defined]
    assert done.returncode == 0, done.stderr
    new = re.search(r"continued as (s\d+)", done.stdout).group(1)  # type: ignore[union-attr]
    assert f"in conversation {conversation}" in done.stdout
    snap = cc.wait_state(new, "exited", "terminated", timeout=90)
    assert (snap["conversation"], snap["resume"]) == (conversation, "accepted")
    later = said(fake_api, "BRAVOYANKEE")
    assert later and min(later) >= asked
    assert min(later) in said(fake_api, "ALPHAZULU")  # the earlier messages came along with the note
    assert cc.status(sid)["conversation"] == conversation  # the old row keeps it
    audit = cc.request("actions", session=sid)
    assert any(a["action"] == "continue" and a["target"] == new for a in audit)


def test_an_unknown_conversation_is_refused_in_one_line_and_the_id_is_kept(cc: Harness,
                                                                             fake_api: FakeAnthropic) -> None:
    fake_api.play([say("done")], max_turns=5)
    sid = start(cc, "--max-turns", "2", "hello")
    cc.wait_state(sid, "exited", timeout=60)
    conversation = cc.status(sid)["conversation"]
    for path in Path(cc.env["HOME"], ".claude", "projects").rglob(f"{conversation}.jsonl"):
        path.unlink()  # the agent no longer knows the conversation

    done = cc.cli("continue", sid, cwd=cc.work)  # type: ignore[attr-defined]
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()
    assert len(error) == 1 and "did not continue conversation " + conversation in error[0], done.stderr
    assert "No conversation found" in error[0]
    new = re.search(r"continued as (s\d+)", done.stdout).group(1)  # type: ignore[union-attr]
    assert cc.status(new)["conversation"] == conversation  # the failed attempt keeps the id
    assert cc.status(sid)["conversation"] == conversation


@pytest.mark.anyio
async def test_the_console_continues_a_lost_session_with_its_key(cc: Harness, fake_api: FakeAnthropic,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    sid, conversation = lost_in_a_reboot(cc, fake_api)
    for name, value in cc.env.items():  # the console's terminal: the new run takes its environment
        monkeypatch.setenv(name, value)
    app = RecordingConsole(cc.paths, autostart=False)
    async with app.run_test(size=SIZE) as pilot:
        await select(pilot, app, sid)
        await until(pilot, lambda: "continuable (c)" in cell(app, sid, "reason"), what="the row to say continuable")
        await pilot.press(key_of(app, "continue_session"))
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, ConfirmWithReason) else None,
                             what="the continue confirmation")
        assert f"in its agent's conversation {conversation}" in page_text(dialog)
        await pilot.press(*"BRAVOYANKEE", "enter")
        await until(pilot, lambda: console_actions(cc, sid), timeout=30, what="the continue")
    [row] = console_actions(cc, sid)
    assert (row["action"], row["note"]) == ("continue", "BRAVOYANKEE")
    snap = cc.wait_state(row["target"], "exited", "terminated", timeout=90)
    assert (snap["conversation"], snap["resume"]) == (conversation, "accepted")
    assert said(fake_api, "BRAVOYANKEE")


def test_two_continues_at_once_start_one_run_of_the_conversation(cc: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play([say("done"), say("again")], max_turns=5)
    sid = start(cc, "--max-turns", "2", "hello")
    cc.wait_state(sid, "exited", timeout=60)
    env = {**cc.env}

    def one() -> object:
        try:
            return cc.request("continue", session=sid, env=env)
        except DaemonError as exc:
            return str(exc)

    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: one(), range(2)))
    started = [a for a in answers if isinstance(a, dict)]
    refused = [a for a in answers if isinstance(a, str)]
    assert len(started) == 1 and len(refused) == 1, answers
    assert "is starting" in refused[0] or "runs in that conversation already" in refused[0]
    cc.wait_state(started[0]["id"], "exited", "terminated", timeout=60)
