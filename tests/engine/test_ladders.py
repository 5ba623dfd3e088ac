"""Each agent climbs its own provider's model ladder; `escalation.models` overrides every agent's,
`escalation.ladders` one agent's."""

from __future__ import annotations

import pytest

from loopwarden.sessions.acp import AcpAdapter
from loopwarden.sessions.claude_live import ClaudeCodeAdapter
from loopwarden.sessions.codex_app import CodexAppServerAdapter
from loopwarden.sessions.codex_hooks import CodexHookAdapter
from loopwarden.supervisor import prices
from loopwarden.supervisor.config import ConfigError
from loopwarden.supervisor.health import SessionHealth
from loopwarden.supervisor.ladders import for_agent
from tests.engine.helpers import config


def climbs(cfg, agent: str | None, own: tuple[str, ...] = ()) -> list[str]:
    """The reasons of the escalations one session gives on three failed iterations in a row."""
    from loopwarden.supervisor import events as ev
    health = SessionHealth(for_agent(cfg, agent, own))
    out = []
    for n in range(1, 4):
        out += [v.reason for v in health.observe(ev.Iteration(seq=n, n=n, status="fail"), float(n))]
    return out


ONE_EACH = ("escalation.failures_per_model=1", "escalation.failures_at_top=1")


def test_each_adapter_brings_its_providers_ladder_of_models_the_price_table_knows():
    gemini = AcpAdapter().ladder_of(["gemini", "--acp"], {})
    assert gemini == ("gemini", ("gemini-3.5-flash-lite", "gemini-3.8-flash", "gemini-3.1-pro-preview"))
    assert AcpAdapter().ladder_of(["claude-agent-acp"], {})[1] == ("haiku", "sonnet", "opus")
    assert CodexAppServerAdapter().ladder_of(["codex"], {}) == ("codex", ("gpt-5.4-mini", "gpt-5.4", "gpt-5.5"))
    assert CodexHookAdapter.ladder == ("gpt-5.4-mini", "gpt-5.4", "gpt-5.5")
    assert ClaudeCodeAdapter().ladder_of(["claude"], {}) == ("claude-code", ("haiku", "sonnet", "opus"))
    table = prices.table_of([])
    for model in (*gemini[1], *CodexHookAdapter.ladder):
        assert table.price(model) is not None, model


def test_gemini_escalates_flash_lite_to_flash_to_pro_then_a_human():
    reasons = climbs(config(*ONE_EACH), "gemini", AcpAdapter().ladder_of(["gemini", "--acp"], {})[1])
    assert [r.rpartition(": ")[2] for r in reasons] == [
        "gemini-3.5-flash-lite -> gemini-3.8-flash", "gemini-3.8-flash -> gemini-3.1-pro-preview",
        "gemini-3.1-pro-preview -> human"]


def test_escalation_models_overrides_every_agent_and_ladders_one_agent():
    own = ("gpt-5.4-mini", "gpt-5.4", "gpt-5.5")
    assert climbs(config(*ONE_EACH, "escalation.models=a,b"), "codex", own)[0].endswith("a -> b")
    cfg = config(*ONE_EACH, "escalation.ladders=gemini=x,y;codex=o4-mini,o3")
    assert climbs(cfg, "codex", own)[0].endswith("o4-mini -> o3")
    assert climbs(cfg, "claude-code", ("haiku", "sonnet"))[0].endswith("haiku -> sonnet")
    assert climbs(config(*ONE_EACH), "native")[0].endswith("haiku -> sonnet")  # no ladder of its own: the default
    assert config("escalation.ladders=gemini=a,b").escalation.ladders == ["gemini=a,b"]


@pytest.mark.parametrize("bad", ["gemini", "=a,b", "gemini=", "gemini= , "])
def test_a_ladder_entry_that_cannot_be_read_is_one_line(bad: str):
    with pytest.raises(ConfigError, match=r"^escalation.ladders: .* is not AGENT=MODEL,MODEL,\.\.\., e\.g\. gemini="):
        config(f"escalation.ladders={bad}")


def test_a_replay_climbs_the_recorded_agents_ladder():
    import io

    from loopwarden.replay import Replayer
    failed_turn = b'{"type":"turn.started"}\n{"type":"turn.failed","error":{"message":"stream error"}}\n'
    verdicts: list = []
    Replayer(config(*ONE_EACH), spill=False).run(io.BytesIO(failed_turn), "codex", verdicts.append)
    assert [v.reason.rpartition(": ")[2] for v in verdicts if v.action == "escalate"] == ["gpt-5.4-mini -> gpt-5.4"]
