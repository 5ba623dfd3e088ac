"""An ACP stream's usage read as `loopwarden replay --format acp` reads it: ACP's own `usage`, Gemini CLI's
`_meta.quota`, the model from session/new, an agent's running cost from usage_update."""

from __future__ import annotations

import json
from typing import Any

from loopwarden.sessions.acp import AcpParser
from loopwarden.supervisor.events import Usage


def usages(*records: dict[str, Any]) -> list[Usage]:
    parser = AcpParser()
    out = []
    for seq, record in enumerate(records, 1):
        out += [e for e in parser.parse_line(json.dumps(record).encode(), seq) if isinstance(e, Usage)]
    return out


NEW = {"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s", "models": {"currentModelId": "claude-sonnet-4-5",
                                                                          "availableModels": []}}}


def end(**result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn", **result}}


def cost(amount: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
        "sessionUpdate": "usage_update", "used": 1000, "size": 200000, "cost": {"amount": amount, "currency": "USD"}}}}


def test_acp_usage_counts_cache_tokens_apart_and_names_the_sessions_model() -> None:
    (usage,) = usages(NEW, end(usage={"inputTokens": 10, "outputTokens": 5, "cachedReadTokens": 100,
                                      "cachedWriteTokens": 20, "totalTokens": 135}))
    assert (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (130, 100, 20)
    assert (usage.output_tokens, usage.model, usage.cost_usd) == (5, "claude-sonnet-4-5", None)


def test_gemini_clis_quota_gives_a_usage_per_model() -> None:
    quota = {"token_count": {"input_tokens": 30, "output_tokens": 7}, "model_usage": [
        {"model": "gemini-2.5-pro", "token_count": {"input_tokens": 20, "output_tokens": 5}},
        {"model": "gemini-2.5-flash", "token_count": {"input_tokens": 10, "output_tokens": 2}}]}
    got = usages({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s", "models": {"currentModelId": "auto"}}},
                 end(_meta={"quota": quota}))
    assert [(u.model, u.input_tokens, u.output_tokens) for u in got] == [
        ("gemini-2.5-pro", 20, 5), ("gemini-2.5-flash", 10, 2)]
    (total,) = usages(end(_meta={"quota": {"token_count": {"input_tokens": 3, "output_tokens": 1}}}))
    assert (total.model, total.input_tokens) == (None, 3)  # "auto" names no model


def test_an_agents_running_cost_is_each_turns_share() -> None:
    turn = {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}
    got = usages(NEW, cost(0.10), end(usage=turn), cost(0.25), end(usage=turn))
    assert [u.cost_usd for u in got] == [0.10, 0.15]



def test_a_cost_told_with_no_usage_in_the_response_is_billed_at_the_turns_end() -> None:
    got = usages(NEW, cost(0.10), end(), cost(0.25), end(usage={"inputTokens": 1, "outputTokens": 1}))
    assert [(u.cost_usd, u.input_tokens, u.output_tokens) for u in got] == [(0.10, 0, 0), (0.15, 1, 1)]


def test_the_launchs_model_is_read_from_every_spelling_of_the_flag() -> None:
    from loopwarden.sessions.recorded import launch_model

    assert launch_model(["gemini", "--acp", "--model=gemini-2.5-pro"]) == "gemini-2.5-pro"
    assert launch_model(["gemini", "--model", "gemini-2.5-pro"]) == "gemini-2.5-pro"
    assert launch_model(["codex", "exec", "-m", "gpt-5", "--json", "task"]) == "gpt-5"
    assert launch_model(["codex", "exec", "--json", "task"]) is None
    assert launch_model(["codex", "--model=", "task"]) is None and launch_model(["x", "--model"]) is None
    from loopwarden.sessions.observed import CodexExecAdapter

    watched = CodexExecAdapter()
    watched.command(["codex", "exec", "--json", "--model=gpt-5.2", "task"])
    assert watched.parser.model == "gpt-5.2"  # type: ignore[attr-defined]
