"""Runtime and stall (seeds 000, 003), with an injected clock (an hour takes milliseconds).

Stall: after stall_timeout (30 s) without activity, one nudge with seed 000's diagnostic
message: "Your previous attempt stalled after 31204ms. Last tool: web_fetch -> error: 503.
Try a different approach or decompose the problem into smaller steps."
Max runtime: terminate(max_runtime) at the limit (default 4 h).
"""

from __future__ import annotations


from tests.engine.helpers import (
    Action, Session, Termination, call, config, fail, gate_request, ok, summary, system_nudge,
)

NO_STALL = config("limits.stall_timeout=0")


def started_with_web_fetch(cfg=None):
    s = Session(cfg)
    s.at(0.0, call("web_fetch", {"url": "https://api.example.test/data"}))
    s.at(0.0, fail("web_fetch", "503\nService Unavailable"))
    return s


def test_stall_nudge_carries_elapsed_ms_last_tool_and_outcome():
    s = started_with_web_fetch()
    verdicts = s.tick(31.204)
    assert summary(verdicts) == [("nudge", "stall", 0)]
    text = verdicts[0].message
    assert "stalled after 31204ms" in text
    assert "Last tool: web_fetch → error: 503" in text
    assert "Try a different approach or decompose the problem into smaller steps." in text


def test_stall_fires_at_the_timeout_not_before():
    s = started_with_web_fetch()
    assert s.tick(29.999) == []
    assert summary(s.tick(30.0)) == [("nudge", "stall", 0)]


def test_activity_postpones_the_stall():
    s = started_with_web_fetch()
    s.at(20.0, call("web_fetch", {"url": "https://api.example.test/other"}))
    s.at(25.0, ok("web_fetch", "200 OK"))
    assert s.tick(54.0) == []
    verdicts = s.tick(55.5)
    assert summary(verdicts) == [("nudge", "stall", 0)]
    assert "stalled after 30500ms" in verdicts[0].message
    assert "Last tool: web_fetch → ok: 200 OK" in verdicts[0].message


def test_stall_timeout_is_configurable_and_zero_is_off():
    s = started_with_web_fetch(config("limits.stall_timeout=5m"))
    assert s.tick(299.0) == []
    assert [v.rule for v in s.tick(300.0)] == ["stall"]
    s = started_with_web_fetch(NO_STALL)
    assert s.tick(3000.0) == []


def test_max_runtime_terminates_at_one_hour_limit():
    s = started_with_web_fetch(config("limits.max_runtime=1h", "limits.stall_timeout=0"))
    assert s.tick(3599.999) == []
    verdicts = s.tick(3600.0)
    assert summary(verdicts) == [("terminate", "runtime", 0)]
    assert verdicts[0].termination == Termination.MAX_RUNTIME
    assert "max runtime" in verdicts[0].message
    assert s.health.termination_reason == Termination.MAX_RUNTIME
    assert s.tick(3700.0) == []                       # terminated: nothing more
    assert s.at(3701.0, gate_request("anyone?")) == []


def test_max_runtime_is_checked_when_an_event_arrives_late():
    s = started_with_web_fetch(config("limits.max_runtime=1h", "limits.stall_timeout=0"))
    verdicts = s.at(3600.5, gate_request("may I continue?"))
    assert [(v.action, v.termination, v.seq) for v in verdicts] == [(Action.TERMINATE, Termination.MAX_RUNTIME, 3)]


def test_default_max_runtime_is_four_hours():
    s = started_with_web_fetch(NO_STALL)
    assert s.tick(4 * 3600 - 0.001) == []
    assert [v.termination for v in s.tick(4 * 3600.0)] == [Termination.MAX_RUNTIME]


def test_a_system_nudge_does_not_postpone_the_stall():
    s = started_with_web_fetch()
    s.at(20.0, system_nudge("Reminder: keep going."))
    assert [v.rule for v in s.tick(30.0)] == ["stall"]


def test_max_runtime_is_hard_even_while_a_gate_waits_for_a_human():
    s = started_with_web_fetch(config("limits.max_runtime=1h", "limits.stall_timeout=0"))
    assert [v.action for v in s.at(10.0, gate_request("may I drop the table?"))] == [Action.GATE]
    assert s.tick(3599.0) == []
    assert [v.termination for v in s.tick(3600.0)] == [Termination.MAX_RUNTIME]


def test_the_clock_counters_read_as_of_now_when_asked_and_never_go_back():
    s = started_with_web_fetch()
    s.at(10.0, ok("web_fetch", "200 OK"))

    def clock_counters(now=None):
        return {c.name: c.value for c in s.health.counters(now) if c.name in ("runtime", "silence")}

    assert clock_counters() == {"runtime": 10.0, "silence": 0.0}  # as of the last event
    assert clock_counters(25.0) == {"runtime": 25.0, "silence": 15.0}  # a quiet session, asked at 25 s
    assert clock_counters(5.0) == {"runtime": 10.0, "silence": 0.0}  # an earlier clock changes nothing
    assert s.tick(25.0) == []  # asking judged nothing: the stall is still the tick's to give
