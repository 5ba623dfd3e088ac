"""A native agent's usage lines through a real daemon: priced by the model they name, its own cost_usd winning,
an unknown model's cost shown as unknown; `ls` and `status` show it."""

from __future__ import annotations

import json

import pytest

from loopwarden.supervisor.prices import SHIPPED_TABLE
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.paths import PY

pytestmark = pytest.mark.timeout(60)


def agent(*lines: dict[str, object]) -> tuple[str, ...]:
    """A native agent that prints `lines` and exits."""
    text = "\n".join(json.dumps(line) for line in lines)
    return PY, "-c", f"print({text!r})"


def test_native_usage_is_priced_by_its_model_and_the_agents_own_cost_wins(lw: Harness) -> None:
    sid = lw.launch(*agent(
        {"type": "usage", "input_tokens": 3_000_000, "output_tokens": 200_000, "model": "anthropic/claude-haiku-4-5",
         "cache_read_tokens": 1_000_000, "cache_write_tokens": 1_000_000},
        {"type": "usage", "input_tokens": 10, "output_tokens": 10, "model": "gpt-5", "cost_usd": 0.25},
        {"type": "done"}), name="priced")
    snap = lw.wait_state(sid, "exited", timeout=30)
    priced, own = of_kind(lw, sid, "usage")
    expected = 1 * 1.0 + 1 * 0.10 + 1 * 1.25 + 0.2 * 5
    assert priced["cost_usd"] == pytest.approx(expected) and priced["cost_source"] == "table"
    assert expected == pytest.approx(SHIPPED_TABLE.cost("claude-haiku-4-5", 3_000_000, 200_000, 1_000_000,
                                                        1_000_000))
    assert (own["cost_usd"], own["cost_source"]) == (0.25, "agent")
    assert snap["cost"]["cost_usd"] == pytest.approx(expected + 0.25) and snap["cost"]["source"] == "agent+table"
    assert snap["counters"]["cost_usd"][0] == pytest.approx(expected + 0.25)
    status = lw.cli("status", sid).stdout
    assert f"cost: ${expected + 0.25:,.2f} (agent-reported and priced from the table)" in status
    assert "claude-haiku-4-5" in status and "1,000,000 read from cache" in status


def test_an_unknown_model_counts_its_tokens_and_shows_its_cost_as_unknown(lw: Harness) -> None:
    sid = lw.launch(*agent({"type": "usage", "input_tokens": 1234, "output_tokens": 56,
                            "model": "mystery-9\u001b[2J"}, {"type": "done"}), name="unknown")
    snap = lw.wait_state(sid, "exited", timeout=30)
    (usage,) = of_kind(lw, sid, "usage")
    assert "cost_usd" not in usage and "cost_source" not in usage
    assert snap["counters"]["tokens"][0] == 1290 and snap["cost"]["unpriced"] == 1
    row = next(line for line in lw.cli("ls").stdout.splitlines() if "unknown" in line)
    assert " ? " in row and "$" not in row
    status = lw.cli("status", sid).stdout
    assert "1 usage report(s) of a model with no price" in status
    assert "mystery-9" in status and "\x1b" not in status  # the agent's model name, made harmless
    priced = lw.launch(*agent({"type": "usage", "input_tokens": 1_000_000, "output_tokens": 0, "model": "mystery-9"},
                              {"type": "done"}), name="overridden", sets=("prices.models=mystery=2,8",))
    assert lw.wait_state(priced, "exited", timeout=30)["cost"]["cost_usd"] == pytest.approx(2.0)
