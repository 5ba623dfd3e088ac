"""The real Claude Code CLI's cost: its own total_cost_usd wins, with the model and tokens beside it."""

from __future__ import annotations

import json

import pytest

from loopwarden.sessions.claude_code import ClaudeCodeParser
from loopwarden.supervisor.cost import quota_words
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
    usage = usages[-1]
    assert usage["model"] == MODEL and usage["cost_source"] == "agent"
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    # Claude Code prices Sonnet 4.5 as the table does: the figure it reported is the table's for its tokens
    table = SHIPPED_TABLE.cost(MODEL, usage["input_tokens"], usage["output_tokens"], usage["cache_read_tokens"],
                               usage["cache_write_tokens"])
    assert table is not None and usage["cost_usd"] == pytest.approx(table, rel=0.01)
    cost = snap["cost"]
    assert cost["source"] == "agent" and cost["models"] == [MODEL]
    assert cost["cost_usd"] == pytest.approx(sum(u["cost_usd"] for u in usages), abs=1e-6)
    assert snap["counters"]["cost_usd"][0] == pytest.approx(cost["cost_usd"], abs=1e-4)
    status = cc.cli("status", sid)
    assert status.returncode == 0, status.stderr
    line = next(ln for ln in status.stdout.splitlines() if ln.startswith("cost: "))
    assert "agent-reported" in line and MODEL in line and f"${cost['cost_usd']:.4f}" in line
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
