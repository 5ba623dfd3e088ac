"""Delivering alerts: retries, receivers that fail or hang (the daemon goes on), dedup, rate limit,
`loopwarden notify test`, and URL secrets that never show."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.alerts.conftest import Start, alert_rows, alerts_health, scenario, wait_rows
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for


def test_a_failed_send_is_tried_again_with_backoff_until_it_arrives(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()], retries=2)
    webhook.fail_next(2)
    sid = scenario(lw, "gate_request")
    row = wait_rows(lw, target=f"ask {sid}:g1")[0]
    assert row["outcome"] == "sent"
    tries = webhook.messages()
    assert [r.answered for r in tries] == [500, 500, 200]
    assert tries[2].at - tries[1].at >= 1.9 and tries[1].at - tries[0].at >= 0.9  # 1 s, then 2 s
    health = alerts_health(lw)
    assert health["sent"] == 1 and health["failed"] == 0


def test_a_receiver_that_keeps_failing_is_counted_and_shown_in_status(alerted: Start, webhook: WebhookReceiver) -> None:
    webhook.mode = "fail"
    lw = alerted([webhook.url()], retries=1)
    sid = scenario(lw, "gate_request")
    row = wait_rows(lw, target=f"ask {sid}:g1")[0]
    assert row["outcome"].startswith("failed: ") and len(webhook.messages()) == 2  # the try and one retry
    health = alerts_health(lw)
    assert health["failed"] == 1 and health["sent"] == 0 and health["last_error"].startswith("#1 json://…: ")
    status = lw.cli("status")
    assert status.returncode == 0
    assert "alerts: 1 target (#1 json://…), events gate,ask,budget,stall,ended: 0 sent, 1 failed" in status.stdout
    assert "alerts: last error: #1 json://…: " in status.stdout
    assert lw.status(sid)["state"] == "gated"  # the session waits for its human, as without alerts


def test_a_hanging_receiver_holds_up_neither_the_daemon_nor_other_receivers(alerted: Start, tmp_path: Path) -> None:
    with WebhookReceiver(mode="hang") as hanging, WebhookReceiver() as good:
        lw = alerted([hanging.url("hang"), good.url("good")], retries=0, timeout="1s", dedup_window="0s")
        first = scenario(lw, "gate_request")
        good.wait_for(lambda r: f"{first}:g1" in r.message, timeout=10)
        hanging.wait_for(lambda r: f"{first}:g1" in r.message, timeout=10)  # it arrived there, and hangs
        # meanwhile sessions are judged as ever: one loops into a gate, one stalls, one crashes
        looping = scenario(lw, "loop_gate")
        lw.wait_state(looping, "gated")
        crash = lw.launch(PY, "-c", "import sys; sys.exit(4)", adapter="plain", name="crasher")
        good.wait_for(lambda r: f"({crash})" in r.title, timeout=10)
        good.wait_for(lambda r: f"{looping}:g1" in r.message, timeout=10)
        rows = wait_for(lambda: [r for r in alert_rows(lw, target=f"ask {first}:g1")
                                 if r["outcome"].startswith("failed")], what="the hanging send to fail")
        assert rows[0]["note"].startswith("#1 json://…")
        health = alerts_health(lw)
        assert health["targets"][0]["failed"] >= 1 and health["targets"][1]["sent"] == 3
        assert lw.request("ping")["live"] >= 2


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_a_trickling_receiver_costs_one_thread_and_never_holds_the_daemons_exit(alerted: Start) -> None:
    """A receiver that answers a header a byte at a time, forever, defeats every socket timeout: its send
    is abandoned, and while it lives no other send starts to it (alerts fail at once, saying why);
    the daemon judges on, the other receiver gets everything, and stop-daemon is not held by it."""
    with WebhookReceiver(mode="trickle") as slow, WebhookReceiver() as good:
        lw = alerted([slow.url("slow"), good.url("good")], retries=0, timeout="1s", dedup_window="0s")
        assert lw.daemon is not None
        pid = lw.daemon.pid

        def crash() -> str:
            return lw.launch(PY, "-c", "import sys; sys.exit(4)", adapter="plain", name="crasher")

        first = crash()
        slow.wait_for(lambda r: f"({first})" in r.title, timeout=10)  # it arrived, and trickles
        threads = _threads(pid)
        later = [crash() for _ in range(4)]
        for sid in later:
            good.wait_for(lambda r, sid=sid: f"({sid})" in r.title, timeout=10)
        failed = wait_for(lambda: (rows := [r for r in alert_rows(lw) if r["note"].startswith("#1 ")
                                            and r["outcome"].startswith("failed")]) and len(rows) == 5 and rows,
                          what="every alert to the trickling receiver to fail", timeout=30)
        outcomes = {r["target"]: r["outcome"] for r in failed}
        assert outcomes[f"ended {first}"] == "failed: no answer within 8 s"
        for sid in later:
            assert outcomes[f"ended {sid}"].startswith("failed: an earlier send has not ended for "), outcomes
        assert len(slow.messages()) == 1  # no second thread, no second connection while the first lives
        assert _threads(pid) <= threads + 1
        health = alerts_health(lw)
        assert health["targets"][0]["failed"] == 5 and health["targets"][1]["sent"] == 5
        assert health["targets"][0]["last_error"].startswith("#1 json://…: an earlier send has not ended for ")
        stopping = lw.cli("stop-daemon")
        assert stopping.returncode == 0, stopping.stderr
        wait_for(lambda: lw.daemon is not None and lw.daemon.poll() is not None, timeout=10,
                 what="the daemon to exit with a send still trickling")


ASK_TWICE = "\n".join(json.dumps(line) for line in [
    {"scenario": "ask_twice", "description": "asks the same question twice, each time before a call",
     "handshake": True, "config": []},
    {"emit": {"type": "gate_request", "reason": "May I drop the legacy_users table?"}},
    {"call": {"tool": "bash", "args": {"command": "drop it"}}, "result": {"output": "DROP TABLE", "exit_code": 0}},
    {"emit": {"type": "gate_request", "reason": "May I drop the legacy_users table?"}},
    {"call": {"tool": "bash", "args": {"command": "drop again"}}, "result": {"output": "gone", "exit_code": 0}},
    {"emit": {"type": "done", "summary": "dropped"}}]) + "\n"


def _ask_twice(lw: Harness, tmp_path: Path, webhook: WebhookReceiver) -> str:
    """A session that asks the same question again once its first gate is approved; its id."""
    path = tmp_path / "ask_twice.jsonl"
    path.write_text(ASK_TWICE)
    sid = lw.launch(PY, "-m", "loopwarden.sessions.scripted", str(path), name="asker")
    webhook.wait_for(lambda r: f"{sid}:g1" in r.message)
    lw.request("approve", gate=f"{sid}:g1")
    wait_for(lambda: lw.status(sid)["pending_gates"] == ["g2"], what="the second gate")
    return sid


def test_the_same_alert_again_within_the_window_is_deduplicated(alerted: Start, webhook: WebhookReceiver,
                                                               tmp_path: Path) -> None:
    lw = alerted([webhook.url()])
    sid = _ask_twice(lw, tmp_path, webhook)
    row = wait_rows(lw, target=f"ask {sid}:g2")[0]
    assert row["outcome"] == "deduplicated" and row["note"] == "agent asks: May I drop the legacy_users table?"
    assert len(webhook.messages()) == 1 and alerts_health(lw)["deduplicated"] == 1


def test_a_zero_window_sends_every_repeat(alerted: Start, webhook: WebhookReceiver, tmp_path: Path) -> None:
    lw = alerted([webhook.url()], dedup_window="0s")
    sid = _ask_twice(lw, tmp_path, webhook)
    webhook.wait_for(lambda r: f"{sid}:g2" in r.message)
    assert wait_rows(lw, target=f"ask {sid}:g2")[0]["outcome"] == "sent"
    assert alerts_health(lw)["deduplicated"] == 0


def test_alerts_past_the_rate_limit_are_held_back_and_counted(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url()], max_per_minute=1)
    ids = [scenario(lw, "gate_request") for _ in range(3)]
    for sid in ids:
        lw.wait_state(sid, "gated")
    rows = wait_rows(lw, 3)
    assert sorted(r["outcome"] for r in rows) == ["rate_limited", "rate_limited", "sent"]
    assert len(webhook.messages()) == 1
    health = alerts_health(lw)
    assert health["rate_limited"] == 2 and health["sent"] == 1
    assert "1 sent, 0 failed, 0 deduplicated, 2 rate-limited" in lw.cli("status").stdout


def test_notify_test_sends_through_every_url_and_says_how_each_went(alerted: Start, webhook: WebhookReceiver) -> None:
    with WebhookReceiver(mode="fail") as failing:
        lw = alerted([webhook.url("good"), failing.url("bad")], retries=0)
        proc = lw.cli("notify", "test")
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0] == "#1 json://…: sent"
        assert lines[1].startswith("#2 json://…: FAILED: ") and len(lines) == 2
        got = webhook.wait_for(lambda r: True)[0]
        assert got.title.endswith(": test alert") and "loopwarden notify test" in got.message
        outcomes = sorted(r["outcome"].split(":")[0] for r in wait_rows(lw, 2, target="test"))
        assert outcomes == ["failed", "sent"]
        assert next(r for r in lw.request("actions") if r["action"] == "notify-test")["actor"].startswith("uid ")
        failing_only = Path(lw.home / "config.toml")
        failing_only.write_text(f'[notify]\nurls = ["{failing.url("bad")}"]\nretries = 0\n')
        proc = lw.cli("notify", "test")  # the daemon reads the edited file again
        assert proc.returncode == 1 and proc.stdout.startswith("#1 json://…: FAILED")


def test_notify_test_without_urls_says_where_to_put_them(alerted: Start) -> None:
    lw = alerted([])
    proc = lw.cli("notify", "test")
    assert proc.returncode == 2
    assert "no notify.urls are set: add [notify] urls = " in proc.stderr and str(lw.home / "config.toml") in proc.stderr
    assert "Traceback" not in proc.stderr
    (lw.home / "config.toml").write_text('[notify]\nurls = ["not-a-url-but-a-secret"]\n')
    proc = lw.cli("notify", "test")
    assert proc.returncode == 2 and "entry 1 is not a URL" in proc.stderr
    assert "not-a-url-but-a-secret" not in proc.stderr and "Traceback" not in proc.stderr
    (lw.home / "config.toml").write_text('[notify]\nurls = ["nosuchservice://host-Secret-42/x"]\n')
    proc = lw.cli("notify", "test")  # a URL apprise has no service for: one line, exit 1
    assert proc.returncode == 1 and proc.stdout.startswith("#1 nosuchservice://…: FAILED: not a URL apprise can use")
    assert len(proc.stdout.splitlines()) == 1 and "host-Secret-42" not in proc.stdout + proc.stderr


def test_notify_urls_set_in_this_shell_only_are_explained(alerted: Start) -> None:
    lw = alerted([])  # the daemon started without LOOPWARDEN_NOTIFY_URLS
    proc = subprocess.run([PY, "-m", "loopwarden", "notify", "test"], capture_output=True, text=True, timeout=60,
                          env={**lw.env, "LOOPWARDEN_NOTIFY_URLS": "json://127.0.0.1:9/x"}, check=False)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "LOOPWARDEN_NOTIFY_URLS is set here, but the daemon reads its own environment" in proc.stderr
    assert "loopwarden stop-daemon" in proc.stderr and "127.0.0.1:9" not in proc.stderr


def test_a_urls_secrets_never_reach_status_logs_or_the_store(alerted: Start, webhook: WebhookReceiver) -> None:
    webhook.mode = "fail"
    secret_user, secret_password, secret_path = "alertuser", "Pa55-Secret-Word", "hook-Token-1234567"
    url = f"json://{secret_user}:{secret_password}@127.0.0.1:{webhook.port}/{secret_path}"
    lw = alerted([], env={"LOOPWARDEN_NOTIFY_URLS": url, "LOOPWARDEN_NOTIFY_RETRIES": "0"})
    sid = scenario(lw, "gate_request")
    # a `run` from a shell with the variable sends it along (config_env): the session's settings show it redacted
    other = lw.request("run", spec={"command": [PY, "-c", "pass"], "adapter": "plain",
                                    "config_env": {"LOOPWARDEN_NOTIFY_URLS": url}})["id"]
    assert lw.wait_state(other, "exited")["settings"]["notify.urls"] == "json://…"
    wait_rows(lw, target=f"ask {sid}:g1")
    assert webhook.messages()[0].path == f"/{secret_path}"  # it did go there, with its secrets
    assert lw.cli("notify", "test").returncode == 1
    seen = [lw.cli("status").stdout, lw.cli("config", "show").stdout, json.dumps(lw.request("ping")),
            json.dumps(lw.request("actions")), json.dumps(lw.status(sid)), json.dumps(lw.request("logs", session=sid))]
    lw.stop()
    seen += [p.read_bytes().decode(errors="replace") for p in Path(lw.home).rglob("*") if p.is_file()
             and p.name != "config.toml"]
    assert "2 failed" in seen[0] and "urls = [\"json://…\"]" in seen[1]
    for secret in (secret_user, secret_password, secret_path):
        assert not [text[:200] for text in seen if secret in text], secret


def test_a_bad_config_file_leaves_the_daemon_running_without_alerts_and_says_why(alerted: Start,
                                                                                tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[notify]\nurls = "ntfys://ntfy.sh/x\n')  # an unterminated string
    lw = alerted([])
    sid = scenario(lw, "gate_request")
    lw.wait_state(sid, "gated")  # judged as ever
    status = lw.cli("status")
    assert status.returncode == 0
    assert f"alerts: settings not read: config file {tmp_path / 'config.toml'}: not valid TOML" in status.stdout
    assert "settings not read" in (tmp_path / "daemon.out").read_text()


def test_a_config_file_others_can_read_is_warned_of_in_status(alerted: Start, webhook: WebhookReceiver) -> None:
    lw = alerted([webhook.url("x")])
    assert "warning" not in lw.cli("status").stdout  # the near miss: 0600
    (lw.home / "config.toml").chmod(0o644)
    assert lw.cli("notify", "test").returncode == 0  # the settings are read again
    status = lw.cli("status").stdout
    assert f"alerts: warning: {lw.home / 'config.toml'} is readable by others (mode 0644)" in status
    assert "chmod 600" in status


def test_alerts_queued_when_the_daemon_stops_are_tried_then_audited_never_lost_unsaid(alerted: Start) -> None:
    """Each send to a hanging receiver takes its 1 s timeout, so five alerts cannot all go in the 2 s the
    stopping daemon gives them: those it tried are audited as failed, the rest as not sent."""
    with WebhookReceiver(mode="hang") as hanging:
        lw = alerted([hanging.url("hang")], retries=0, timeout="1s", dedup_window="0s")
        sids = [lw.launch(PY, "-c", "import sys; sys.exit(4)", adapter="plain", name=f"crasher{i}")
                for i in range(5)]
        hanging.wait_for(lambda r: any(f"({sid})" in r.title for sid in sids), timeout=10)  # one send hangs
        for sid in sids:
            lw.wait_state(sid, "exited")
        assert lw.cli("stop-daemon").returncode == 0
        assert lw.daemon is not None
        lw.daemon.wait(15)
        lw.start()  # the audit, read back through the next daemon
        rows = alert_rows(lw)
        outcomes = {row["target"]: row["outcome"] for row in rows}
    assert set(outcomes) == {f"ended {sid}" for sid in sids}, outcomes
    assert len(rows) == len(sids), rows  # one row each: a send cut short is not audited twice
    assert any(o.startswith("failed: ") for o in outcomes.values()), outcomes
    assert any(o == "not sent: the daemon stopped first" for o in outcomes.values()), outcomes
    assert all(o.startswith(("failed: ", "not sent: ", "unknown: ")) for o in outcomes.values()), outcomes
