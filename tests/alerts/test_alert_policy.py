"""Alerts without a daemon: what each record becomes, the policy with an injected clock, and redaction."""

from __future__ import annotations

import pytest

from loopwarden.runtime.alerts import (DEDUP_KEPT, EVIDENCE_CHARS, EVIDENCE_LINES, RATE_WINDOW, Alert, AlertPolicy,
                                       AlertQueue, abnormal, cli_prefix, ended_alert, gate_alert, stall_alert)
from loopwarden.runtime.notifier import label, scrub
from loopwarden.supervisor.config import ConfigError, load_config, show_value

ESC = "\x1b]0;pwned\x07\x1b[31m"


def _gate(**over: object) -> dict[str, object]:
    return {"id": "g1", "rule": "loop_counter", "reason": "T-3: the same error 3 times", "opened_at": 100.0,
            "seq": 7, "evidence": {"error": "ImportError: no module named foo"}, "status": "pending", **over}


def _alert(kind: str = "gate", session: str = "s1", reason: str = "r") -> Alert:
    return Alert(kind, session, "fixer", "host", reason)


# ---- building ------------------------------------------------------------------------------------------

def test_a_gate_that_opens_is_a_gate_alert_with_the_commands_to_decide_it() -> None:
    alert = gate_alert("s3", "fixer", "box", _gate())
    assert alert is not None and alert.kind == "gate" and alert.ref == "s3:g1" and alert.ts == 100.0
    assert alert.title == "fixer (s3) on box: a gate waits for a human"
    assert "loop_counter: T-3: the same error 3 times" in alert.body
    assert "ImportError: no module named foo" in alert.evidence
    assert "decide: loopwarden approve s3:g1" in alert.body
    assert 'decide: loopwarden deny s3:g1 --note "..."' in alert.body


def test_a_decided_gate_is_no_alert() -> None:
    for status in ("approved", "denied", "expired"):
        assert gate_alert("s3", "fixer", "box", _gate(status=status)) is None


def test_a_budget_gate_is_a_budget_alert_whose_first_command_raises_that_budget() -> None:
    raises = {"session": "loopwarden set s3 limits.max_cost_usd=...", "day": "loopwarden set budgets.day_usd=...",
              "project": "loopwarden set budgets.project_usd=... (or budgets.projects=PATH=USD)"}
    for scope, command in raises.items():
        alert = gate_alert("s3", "fixer", "box", _gate(rule="budget", reason="the day budget ... is reached",
                                                           evidence={"budget": scope, "what": "cost"}))
        assert alert is not None and alert.kind == "budget" and alert.severity == "warning"
        assert alert.title == "fixer (s3) on box: a budget is reached: the session waits"
        assert alert.commands[0] == command and alert.commands[1] == "loopwarden approve s3:g1"
        assert alert.reason == "the day budget ... is reached"
    tokens = gate_alert("s3", "f", "box", _gate(rule="budget", evidence={"budget": "session", "what": "token"}))
    assert tokens is not None and tokens.commands[0] == "loopwarden set s3 limits.max_tokens=..."
    assert AlertPolicy(["gate"], 0, 0).admit(tokens, 0.0) == "filtered"  # its own kind in notify.events


def test_an_agents_own_gate_request_is_an_ask() -> None:
    alert = gate_alert("s3", "fixer", "box", _gate(rule="gate_request", reason="agent asks: drop the table?",
                                                       evidence={"request": "drop the table?"}))
    assert alert is not None and alert.kind == "ask"
    assert alert.reason == "agent asks: drop the table?" and alert.evidence == ""  # the request is the reason


def test_agent_text_in_an_alert_is_made_visible() -> None:
    alert = gate_alert("s3", f"name{ESC}", "box", _gate(rule="gate_request", reason=f"asks{ESC}\nsecond line",
                                                             evidence={"x": ESC}))
    assert alert is not None
    for text in (alert.title, alert.body):
        assert "\x1b" not in text and "\x07" not in text
    assert "\n" not in alert.reason  # one line


def test_long_reasons_and_evidence_are_clipped() -> None:
    alert = gate_alert("s3", "n" * 500, "box", _gate(reason="x" * 5000, evidence={"big": "y" * 5000}))
    assert alert is not None and len(alert.reason) <= 200 and len(alert.title) <= 250
    assert len(alert.evidence) <= EVIDENCE_CHARS + EVIDENCE_LINES


def test_a_stall_verdict_is_a_stall_alert_and_other_verdicts_are_not() -> None:
    stall = {"rule": "stall", "action": "nudge", "reason": "no activity for 31.0s", "ts": 5.0,
             "evidence": {"silent": 31.0, "last_tool": "bash"}}
    alert = stall_alert("s2", "w", "box", stall)
    assert alert is not None and alert.kind == "stall" and "no activity for 31.0s" in alert.reason
    assert "see: loopwarden logs s2" in alert.body
    assert stall_alert("s2", "w", "box", {**stall, "rule": "repetition"}) is None
    # two stalls of one session are the same alert for deduplication, whatever their seconds
    again = stall_alert("s2", "w", "box", {**stall, "reason": "no activity for 45.2s"})
    assert again is not None and again.key == alert.key


@pytest.mark.parametrize(("snap", "expected"), [
    ({"state": "terminated", "termination": "max_runtime"}, True),
    ({"state": "terminated", "termination": "repetition_loop"}, True),
    ({"state": "terminated", "termination": "crashed"}, True),
    ({"state": "lost", "termination": "lost"}, True),
    ({"state": "exited", "exit_code": 3}, True),
    ({"state": "exited", "exit_code": -9}, True),
    ({"state": "exited", "exit_code": 0}, False),
    ({"state": "terminated", "termination": "operator", "exit_code": -15}, False),
    ({"state": "terminated", "termination": "daemon_stopped"}, False),
    ({"state": "terminated", "termination": "loop_gate_denied",
      "termination_text": "session terminated: gate g1 (loop_counter) denied by uid 0 (root)"}, False),
    ({"state": "terminated", "termination": "loop_gate_denied",
      "termination_text": "session terminated: gate g1 (loop_counter) denied by policy"}, True),
    ({"state": "running"}, False),
])
def test_which_endings_are_abnormal(snap: dict[str, object], expected: bool) -> None:
    assert abnormal(snap) is expected


def test_an_abnormal_ending_names_why_and_how_to_look() -> None:
    snap = {"id": "s4", "name": "runner", "state": "terminated", "termination": "max_runtime",
            "termination_text": "session terminated: max runtime 3s reached", "ended_at": 9.0, "runtime": 3.1,
            "events": 12, "tool_calls": 4, "exit_code": -15}
    alert = ended_alert(snap, "box")
    assert alert is not None and alert.kind == "ended" and alert.ts == 9.0
    assert alert.reason == "terminated: max runtime 3s reached"
    assert 'tool_calls: 4' in alert.evidence.splitlines() and "see: loopwarden restart s4" in alert.body
    assert ended_alert({**snap, "state": "exited", "termination": None, "exit_code": 0}, "box") is None


def test_the_commands_carry_the_profile_and_the_link_its_gate() -> None:
    alert = gate_alert("s3", "n", "box", _gate(), cli=cli_prefix("/tmp/lw home"),
                       link="https://lw.example/gates/{session}:{gate}")
    assert alert is not None
    assert "decide: LOOPWARDEN_HOME='/tmp/lw home' loopwarden approve s3:g1" in alert.body
    assert alert.body.endswith("https://lw.example/gates/s3:g1")
    assert cli_prefix(None) == "loopwarden" and cli_prefix("/tmp/lw-1") == "LOOPWARDEN_HOME=/tmp/lw-1 loopwarden"


# ---- the policy ---------------------------------------------------------------------------------------

def test_events_not_chosen_are_filtered() -> None:
    policy = AlertPolicy(["gate", "ended"], 600, 10)
    assert policy.admit(_alert("stall"), 0.0) == "filtered"
    assert policy.admit(_alert("gate"), 0.0) == "send"


def test_the_same_alert_within_the_window_is_deduplicated_and_after_it_sent_again() -> None:
    policy = AlertPolicy(["gate"], 600, 0)
    assert policy.admit(_alert(reason="a"), 1000.0) == "send"
    assert policy.admit(_alert(reason="a"), 1599.0) == "deduplicated"
    assert policy.admit(_alert(reason="b"), 1599.0) == "send"  # another reason
    assert policy.admit(_alert(session="s2", reason="a"), 1599.0) == "send"  # another session
    assert policy.admit(_alert(reason="a"), 1600.0) == "send"  # the window is over (near miss: 1599)


def test_a_zero_window_sends_every_repeat() -> None:
    policy = AlertPolicy(["gate"], 0, 0)
    assert [policy.admit(_alert(), 1.0) for _ in range(3)] == ["send"] * 3


def test_dedup_memory_is_bounded() -> None:
    policy = AlertPolicy(["gate"], 600, 0)
    for n in range(DEDUP_KEPT + 50):
        policy.admit(_alert(reason=str(n)), 1.0)
    assert len(policy.seen) == DEDUP_KEPT


def test_the_rate_limit_holds_back_the_excess_and_sums_it_up_once_there_is_room() -> None:
    policy = AlertPolicy(["gate", "ask"], 0, 3)
    got = [policy.admit(_alert("gate" if n % 2 else "ask", reason=str(n)), 100.0 + n) for n in range(5)]
    assert got == ["send", "send", "send", "rate_limited", "rate_limited"]
    assert policy.summary_due() == 100.0 + RATE_WINDOW
    assert policy.summary("box", 159.9) is None  # no room yet: the first send is not a minute old
    summary = policy.summary("box", 160.0)
    assert summary is not None and summary.kind == "summary"
    assert summary.reason == "2 alerts not sent (notify.max_per_minute): 1 ask, 1 gate"
    assert policy.summary("box", 160.0) is None and policy.summary_due() is None  # told once
    assert policy.admit(_alert(reason="later"), 161.0) == "send"  # the second send is a minute old


def test_no_limit_means_no_rate_limiting() -> None:
    policy = AlertPolicy(["gate"], 0, 0)
    assert all(policy.admit(_alert(reason=str(n)), 1.0) == "send" for n in range(1000))


def test_the_queue_is_bounded_by_count_and_bytes() -> None:
    queue = AlertQueue(most=3, most_bytes=10_000)
    assert all(queue.push(_alert(reason=str(n))) for n in range(3))
    assert not queue.push(_alert())
    queue.pop()
    assert queue.push(_alert())
    small = AlertQueue(most=100, most_bytes=300)
    assert small.push(_alert(reason="x" * 100)) and not small.push(_alert(reason="x" * 200))
    assert small.bytes == _alert(reason="x" * 100).size


# ---- secrets ------------------------------------------------------------------------------------------

SECRET_URLS = ["tgram://123456789:AAH-bot-TOKEN/98765", "json://user:pa55word@hooks.example:8080/path-secret?key=k3y"]


def test_urls_are_shown_by_number_and_scheme_only() -> None:
    assert label(1, SECRET_URLS[0]) == "#1 tgram://…"
    assert label(2, "not a url") == "#2 (not a URL)"
    assert show_value("notify.urls", SECRET_URLS) == "tgram://…,json://…"


def test_errors_are_scrubbed_of_every_part_of_the_urls() -> None:
    error = ("Failed to send to https://api.telegram.org/bot123456789:AAH-bot-TOKEN/sendMessage chat 98765; "
             "auth user:pa55word at hooks.example:8080 path-secret key k3y")
    clean = scrub(error, SECRET_URLS)
    for secret in ("123456789:AAH-bot-TOKEN", "pa55word", "hooks.example", "path-secret", "k3y", "98765"):
        assert secret not in clean
    assert clean.startswith("Failed to send to https://…")


def test_notify_settings_parse_and_a_bad_url_is_named_by_its_number_only() -> None:
    config = load_config(env={"LOOPWARDEN_NOTIFY_URLS": "ntfys://ntfy.sh/t1, json://h:1/p",
                              "LOOPWARDEN_NOTIFY_EVENTS": "gate,ended", "LOOPWARDEN_NOTIFY_MAX_PER_MINUTE": "2"})
    assert config.notify.urls == ["ntfys://ntfy.sh/t1", "json://h:1/p"]
    assert config.notify.events == ["gate", "ended"] and config.notify.max_per_minute == 2
    with pytest.raises(ConfigError) as bad:
        load_config(env={"LOOPWARDEN_NOTIFY_URLS": "ntfys://ntfy.sh/t1,my-secret-token"})
    assert "entry 2 is not a URL" in str(bad.value) and "my-secret-token" not in str(bad.value)
    with pytest.raises(ConfigError, match="unknown event 'stalled'"):
        load_config(env={"LOOPWARDEN_NOTIFY_EVENTS": "gate,stalled"})
    assert load_config(env={}).notify.urls == [] and load_config(env={}).notify.events == ["gate", "ask", "budget",
                                                                                           "stall", "ended"]


def test_a_loop_gate_s_failures_read_as_numbered_facts_with_clock_times() -> None:
    failures = [{"seq": 5, "ts": 1795504039.93, "message": "IntegrityError: duplicate key", "agent": None},
                {"seq": 9, "ts": 1795504051.2, "message": "IntegrityError: duplicate key", "agent": None}]
    alert = gate_alert("s3", "migrate", "box", _gate(evidence={"task": "T-3", "failures": failures}))
    assert alert is not None
    lines = alert.evidence.splitlines()
    assert lines[:2] == ["task: T-3", "failures:"]
    assert lines[2].startswith("   1. seq=5, ts=") and "message=IntegrityError: duplicate key" in lines[2]
    assert "agent" not in alert.evidence and "1795504039" not in alert.evidence  # no nulls, no raw epoch
    assert "\nevidence:\n  task: T-3\n  failures:\n     1. seq=5" in alert.body


def test_scrubbing_a_url_keeps_the_bracket_that_closes_the_sentence() -> None:
    text = scrub("not a URL apprise can use (Unparseable URL jsn://tok3n@127.0.0.1:9/x)", [])
    assert text == "not a URL apprise can use (Unparseable URL jsn://…)"
    assert scrub("sending to 'json://user:pw@h/p' failed", []) == "sending to 'json://…' failed"
