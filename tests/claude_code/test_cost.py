"""The real Claude Code CLI's cost: its own total_cost_usd wins, with the model and tokens beside it."""

from __future__ import annotations

import json

import pytest

from loopwarden.sessions.claude_code import ClaudeCodeParser
from loopwarden.supervisor.cost import AGENT, PROVISIONAL, SessionCost, quota_words
from loopwarden.supervisor.events import Usage
from loopwarden.supervisor.prices import SHIPPED_TABLE
from tests.claude_code.test_launched import start
from tests.fakes.anthropic_server import FakeAnthropic, say
from tests.support.daemon import Harness
from tests.support.events import of_kind

pytestmark = pytest.mark.timeout(120)
MODEL = "claude-sonnet-4-5-20250929"


def test_claude_codes_own_cost_wins_and_is_shown_with_its_model(cc: Harness, fake_api: FakeAnthropic) -> None:
    fake_api.play([say("All done.")])
    sid = start(cc, "--model", MODEL, "--max-turns", "2", "say done")
    snap = cc.wait_state(sid, "exited", "terminated", timeout=60)
    usages = of_kind(cc, sid, "usage")
    assert usages, "Claude Code reported no usage"
    # the call's usage is priced from the table as it comes; the turn's result then bills only what that missed
    assert [u["cost_source"] for u in usages] == ["provisional", "agent"]
    assert all(u["model"] == MODEL for u in usages)
    assert usages[0]["input_tokens"] > 0 and usages[0]["output_tokens"] > 0
    tokens = [sum(u.get(k) or 0 for u in usages) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                         "cache_write_tokens")]
    # Claude Code prices Sonnet 4.5 as the table does: the session's total is its reported figure, counted once
    table = SHIPPED_TABLE.cost(MODEL, *tokens)
    cost = snap["cost"]
    assert table is not None and cost["cost_usd"] == pytest.approx(table, rel=0.01)
    assert cost["source"] == "agent+table" and cost["models"] == [MODEL]
    assert cost["cost_usd"] == pytest.approx(sum(u["cost_usd"] for u in usages), abs=1e-6)
    assert snap["counters"]["cost_usd"][0] == pytest.approx(cost["cost_usd"], abs=1e-4)
    status = cc.cli("status", sid)
    assert status.returncode == 0, status.stderr
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("cost: "))
    assert "agent-reported and priced from the table" in line and MODEL in line and f"${cost['cost_usd']:.4f}" in line
    listed = cc.cli("ls")
    assert "COST" in listed.stdout.splitlines()[0] and f"${cost['cost_usd']:.4f}" in listed.stdout


def test_the_model_comes_from_the_init_record_and_a_results_model_usage() -> None:
    parser = ClaudeCodeParser()
    parser.parse_line(json.dumps({"type": "system", "subtype": "init", "model": MODEL}).encode(), 1)
    result = {"type": "result", "subtype": "success", "total_cost_usd": 0.5,
              "usage": {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20,
                        "output_tokens": 5}}
    (usage,) = [e for e in parser.parse_line(json.dumps(result).encode(), 2) if isinstance(e, Usage)]
    assert (usage.model, usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (MODEL, 130, 100,
                                                                                                     20)
    result = {**result, "total_cost_usd": 0.75, "modelUsage": {"claude-haiku-4-5": {"inputTokens": 1}}}
    (usage,) = [e for e in parser.parse_line(json.dumps(result).encode(), 3) if isinstance(e, Usage)]
    assert (usage.model, usage.cost_usd) == ("claude-haiku-4-5", 0.25)
    assert parser.memory([])["model"] == MODEL


def test_rate_limit_events_are_kept_as_the_quota() -> None:
    parser = ClaudeCodeParser()
    event = {"type": "rate_limit_event", "rate_limit_info": {
        "status": "allowed", "resetsAt": 1_900_000_000, "rateLimitType": "five_hour", "utilization": 0.42,
        "unifiedWindows": {"five_hour": {"utilization": 0.42, "resetsAt": 1_900_000_000},
                           "seven_day": {"utilization": 0.071, "resetsAt": 1_900_500_000, "status": "allowed"}}}}
    assert parser.parse_line(json.dumps(event).encode(), 1) == []
    later = {"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "rateLimitType": "five_hour",
                                                             "utilization": 1.0, "resetsAt": 1_900_000_000}}
    parser.parse_line(json.dumps(later).encode(), 2)
    assert parser.quota is not None
    words = [quota_words(w) for w in parser.quota["windows"]]
    assert words == ["five_hour: 100% used of a 5h window, resets 2030-03-17 17:46 UTC (limit reached)",
                     "seven_day: 7.1% used of a 7d window, resets 2030-03-23 12:40 UTC"]


def _assistant(msg_id: str, usage: dict[str, int], block: dict[str, object]) -> bytes:
    return json.dumps({"type": "assistant", "message": {"id": msg_id, "model": MODEL, "content": [block],
                                                        "usage": usage}}).encode()


def test_each_message_is_billed_once_as_it_comes_and_the_turn_settles_the_rest() -> None:
    """Every record of one API message repeats its usage: billed once, provisionally; the result's total_cost_usd
    then bills only what the calls were not, so the session's total is the agent's figure."""
    parser, session = ClaudeCodeParser(), SessionCost(SHIPPED_TABLE)
    use = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 0,
           "cache_creation_input_tokens": 0}
    lines = [_assistant("m1", use, {"type": "text", "text": "looking"}),
             _assistant("m1", use, {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}),
             _assistant("m2", use, {"type": "tool_use", "id": "t2", "name": "Bash", "input": {}})]
    events = [e for n, line in enumerate(lines, 1) for e in parser.parse_line(line, n) if isinstance(e, Usage)]
    for event in events:
        session.take(event)
    assert [e.cost_source for e in events] == [PROVISIONAL, PROVISIONAL]
    billed = SHIPPED_TABLE.cost(MODEL, 1000, 100, 0, 0)
    assert billed is not None and session.cost_usd == pytest.approx(2 * billed)
    reported = 2 * billed + 0.01  # the agent knows better (a third call the stream did not show, say)
    result = {"type": "result", "subtype": "success", "total_cost_usd": reported,
              "usage": {"input_tokens": 3000, "output_tokens": 300}}
    (turn,) = [e for e in parser.parse_line(json.dumps(result).encode(), 4) if isinstance(e, Usage)]
    session.take(turn)
    assert (turn.cost_source, turn.input_tokens, turn.output_tokens) == (AGENT, 1000, 100)
    assert turn.cost_usd == pytest.approx(0.01) and session.cost_usd == pytest.approx(reported)
    assert (session.input_tokens, session.output_tokens) == (3000, 300)
    # a turn the table overpriced bills nothing more, and never takes back
    line = _assistant("m3", use, {"type": "text", "text": "again"})
    for later in parser.parse_line(line, 5):
        if isinstance(later, Usage):
            session.take(later)
    result = {**result, "total_cost_usd": reported + billed / 2}
    (turn,) = [e for e in parser.parse_line(json.dumps(result).encode(), 6) if isinstance(e, Usage)]
    session.take(turn)
    assert turn.cost_usd == 0 and session.cost_usd == pytest.approx(reported + billed)


def test_a_continued_run_counts_only_its_own_cost(cc: Harness, fake_api: FakeAnthropic) -> None:
    """A resumed Claude Code's total_cost_usd includes the earlier runs' (checked on 2.x): the continued session
    counts from there, so the earlier run is not billed twice."""
    fake_api.play([say("one"), say("two")])
    sid = start(cc, "--model", MODEL, "say one")
    first = cc.wait_state(sid, "exited", "terminated", timeout=60)["cost"]["cost_usd"]
    proc = cc.cli("continue", sid, "--fresh-counters")
    assert proc.returncode == 0, proc.stderr
    new = next(w for w in proc.stdout.split() if w.startswith("s") and w[1:].isdigit() and w != sid)
    snap = cc.wait_state(new, "exited", "terminated", timeout=60)
    usages = of_kind(cc, new, "usage")
    tokens = [sum(u.get(k) or 0 for u in usages) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                             "cache_write_tokens")]
    own = SHIPPED_TABLE.cost(MODEL, *tokens)
    assert own is not None and snap["cost"]["cost_usd"] == pytest.approx(own, rel=0.01)
    assert snap["cost"]["cost_usd"] < 1.5 * first  # not the two runs' together
