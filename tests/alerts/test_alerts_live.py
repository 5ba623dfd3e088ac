"""Each kind of alert from a real daemon, real agents and a JSON webhook receiver on loopback."""

from __future__ import annotations

import shlex
import signal
import socket
import sqlite3

from tests.alerts.conftest import Start, alert_rows, scenario, wait_rows
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

ESC = "\x1b]0;pwned\x07\x1b[2J"


def _decide_line(message: str, verb: str) -> list[str]:
    """The command an alert gives for `verb`, as arguments after `loopwarden`."""
    line = next(line for line in message.splitlines() if line.startswith("decide: ") and f" {verb} " in line)
    words = shlex.split(line.removeprefix("decide: "))
    return words[words.index("loopwarden") + 1:]


def test_a_gate_is_alerted_with_the_exact_command_that_decides_it(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()])
    sid = scenario(lw, "loop_gate")
    ref = f"{sid}:g1"
    got = webhook.wait_for(lambda r: ref in r.message)[0]
    assert got.title == f"loop_gate ({sid}) on {socket.gethostname()}: a gate waits for a human"
    assert got.body["type"] == "warning"
    assert "loop_counter" in got.message.splitlines()[0]
    args = _decide_line(got.message, "approve")
    assert args == ["approve", ref]
    proc = lw.cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert lw.wait_state(sid, "exited")["exit_code"] == 0
    row = wait_rows(lw, target=f"gate {ref}")[0]
    assert row["outcome"] == "sent" and row["session_id"] == sid and row["client"] == "daemon"
    assert row["note"].startswith("#1 json://…: loop_counter")
    assert not webhook.messages()[1:]  # the approval and the clean exit are no alerts


def test_an_agent_asking_a_human_is_an_ask_alert(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()])
    sid = scenario(lw, "gate_request")
    got = webhook.wait_for(lambda r: f"{sid}:g1" in r.message)[0]
    assert "an agent asks a human" in got.title
    assert got.message.startswith("agent asks: About to drop the legacy_users table in the staging database")
    assert _decide_line(got.message, "deny") == ["deny", f"{sid}:g1", "--note", "..."]
    assert wait_rows(lw, target=f"ask {sid}:g1")[0]["outcome"] == "sent"


def test_agent_text_reaches_the_webhook_only_made_visible(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()])
    sid = lw.launch(PY, str(AGENTS / "hostile_text.py"), ESC, name="hostile")
    got = webhook.wait_for(lambda r: f"{sid}:g1" in r.message)[0]
    for text in (got.title, got.message):
        assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b" in got.message or "\\e" in got.message or "␛" in got.message or "^[" in got.message


def test_a_stall_is_alerted_and_a_clean_exit_is_not(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()])
    sid = scenario(lw, "stall")
    got = webhook.wait_for(lambda r: "a session is stalled" in r.title)[0]
    assert f"({sid})" in got.title and got.message.startswith("stalled: no activity for ")
    assert f"see: LOOPWARDEN_HOME={lw.home} loopwarden logs {sid}" in got.message
    assert lw.wait_state(sid, "exited")["exit_code"] == 0
    crash = lw.launch(PY, "-c", "import sys; sys.exit(3)", adapter="plain", name="crasher")
    webhook.wait_for(lambda r: f"({crash})" in r.title)  # alerts go out in order: the stall's ending had its turn
    assert [r for r in webhook.messages() if f"({sid})" in r.title] == [got]
    assert wait_rows(lw, target=f"stall {sid}")[0]["outcome"] == "sent"


def test_abnormal_endings_are_alerted_and_the_operators_own_are_not(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()])
    killed = lw.launch(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="killed")
    clean = lw.launch(PY, "-c", "print('ok')", adapter="plain", name="clean")
    lw.wait_state(killed, "running")
    lw.request("kill", session=killed)
    lw.wait_state(killed, "terminated")
    lw.wait_state(clean, "exited")
    crash = lw.launch(PY, "-c", "import sys; sys.exit(3)", adapter="plain", name="crasher")
    timed = scenario(lw, "max_runtime")
    crashed = webhook.wait_for(lambda r: f"({crash})" in r.title)[0]
    assert "a session ended abnormally" in crashed.title and crashed.message.startswith("exited 3")
    assert crashed.body["type"] == "failure"
    ran_out = webhook.wait_for(lambda r: f"({timed})" in r.title, timeout=30)[0]
    assert ran_out.message.startswith("terminated: ") and "max" in ran_out.message.splitlines()[0].lower()
    assert f"see: LOOPWARDEN_HOME={lw.home} loopwarden restart {timed}" in ran_out.message
    titles = [r.title for r in webhook.messages()]
    assert not [t for t in titles if f"({killed})" in t or f"({clean})" in t], titles
    assert not alert_rows(lw, session_id=killed) and not alert_rows(lw, session_id=clean)
    assert wait_rows(lw, target=f"ended {crash}")[0]["outcome"] == "sent"


def test_sessions_lost_with_their_daemon_are_alerted_by_the_next_one(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()], keeping=False)  # the guardian's path: a kept agent would outlive its daemon
    sid = lw.launch(PY, "-c", "import time; time.sleep(60)", adapter="plain", name="orphan")
    lw.wait_state(sid, "running")

    def stored_running() -> bool:  # what the next daemon will find: the session stored as running
        with sqlite3.connect(lw.paths.database) as db:
            return db.execute("SELECT state FROM sessions WHERE id = ?", (sid,)).fetchone() == ("running",)

    wait_for(stored_running, what="the session stored as running")
    assert lw.daemon is not None
    lw.daemon.send_signal(signal.SIGKILL)
    lw.daemon.wait(10)
    lw.start()
    got = webhook.wait_for(lambda r: f"({sid})" in r.title)[0]
    assert "a session ended abnormally" in got.title and got.message.startswith("lost")
    assert wait_rows(lw, target=f"ended {sid}")[0]["outcome"] == "sent"


def test_events_not_chosen_are_not_alerted(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()], events=["ended"])
    asking = scenario(lw, "gate_request")
    lw.wait_state(asking, "gated")
    crash = lw.launch(PY, "-c", "import sys; sys.exit(5)", adapter="plain", name="crasher")
    webhook.wait_for(lambda r: f"({crash})" in r.title)
    assert [r.title for r in webhook.messages()] == [webhook.messages()[0].title]  # the crash only, no ask
    assert not alert_rows(lw, session_id=asking)
    health = wait_for(lambda: (lw.request("ping").get("alerts") or {}).get("filtered") and lw.request("ping")["alerts"])
    assert health["filtered"] == 1 and health["events"] == ["ended"]


MARKUP = '<a href="https://evil.example/x">click</a> **now** [here](https://evil.example/y)'


def test_agent_markup_reaches_html_and_markdown_services_escaped(alerted: Start, webhook: WebhookReceiver) -> None:
    """An agent's link would be live in Telegram (HTML) or ntfy (Markdown) if apprise were handed it as
    markup: ntfy itself on loopback (markdown) and a JSON hook asking for HTML get it escaped, inert."""
    port = webhook.port
    lw = alerted([f"ntfy://127.0.0.1:{port}/topic?format=markdown", f"json://127.0.0.1:{port}/html?format=html"])
    sid = lw.launch(PY, str(AGENTS / "hostile_text.py"), MARKUP, name="marker")
    ntfy = webhook.wait_for(lambda r: r.path == "/" and f"{sid}:g1" in r.message)[0]
    html = webhook.wait_for(lambda r: r.path == "/html" and f"{sid}:g1" in r.message)[0]
    assert ntfy.body["topic"] == "topic"
    assert '<a href\\="https://evil\\.example/x"\\>' in ntfy.message and "\\*\\*now\\*\\*" in ntfy.message
    assert "[here](" not in ntfy.message and "**now**" not in ntfy.message
    assert "&lt;a&nbsp;href=&quot;https://evil.example/x&quot;&gt;" in html.message
    assert "<a " not in html.message
