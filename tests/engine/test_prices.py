"""The price table (supervisor/prices.py), its config override, and usage priced by the engine before the guards."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.supervisor.config import ConfigError, change, load_config, show_value
from loopwarden.supervisor.cost import show_cost, show_source
from loopwarden.supervisor.events import Usage
from loopwarden.supervisor.health import SessionHealth
from loopwarden.supervisor.prices import SHIPPED_TABLE, Price, PriceError, PriceTable, parse_entry, table_of
from loopwarden.supervisor.protocol import parse_line


@pytest.mark.parametrize(("model", "expected"), [
    ("claude-sonnet-4-5-20250929", (3, 15, 0.30, 3.75)),
    ("anthropic/claude-sonnet-4-5", (3, 15, 0.30, 3.75)),
    ("us.anthropic.claude-opus-4-5-20251101-v1:0", (5, 25, 0.50, 6.25)),
    ("claude-opus-4-5@20251101", (5, 25, 0.50, 6.25)),
    ("claude-opus-4-1-20250805", (15, 75, 1.50, 18.75)),
    ("claude-opus-4-20250514", (15, 75, 1.50, 18.75)),
    ("CLAUDE-HAIKU-4-5", (1, 5, 0.10, 1.25)),
    ("claude-3-5-haiku-20241022", (0.80, 4, 0.08, 1.00)),
    ("gpt-5", (1.25, 10, 0.125, 1.25)),
    ("gpt-5-2025-08-07", (1.25, 10, 0.125, 1.25)),
    ("gpt-5-mini-2025-08-07", (0.25, 2, 0.025, 0.25)),
    ("gpt-5-nano", (0.05, 0.40, 0.005, 0.05)),
    ("gpt-5-codex", (1.25, 10, 0.125, 1.25)),
    ("openai/gpt-5.1-codex-mini", (0.25, 2, 0.025, 0.25)),
    ("gpt-4.1-mini-2025-04-14", (0.40, 1.60, 0.10, 0.40)),
    ("o4-mini", (1.10, 4.40, 0.275, 1.10)),
    ("codex-mini-latest", (1.50, 6, 0.375, 1.50)),
    ("models/gemini-2.5-pro", (1.25, 10, 0.125, 1.25)),
    ("gemini-2.5-flash", (0.30, 2.50, 0.03, 0.30)),
    ("gemini-2.5-flash-lite", (0.10, 0.40, 0.01, 0.10)),
    ("gemini-3-pro-preview", (2, 12, 0.20, 2)),
    # the models the agents' CLIs default to now
    ("claude-opus-5-5", (4, 20, 0.20, 5)),
    ("claude-sonnet-5-5", (2, 10, 0.10, 2.50)),
    ("claude-haiku-5-5", (0.10, 0.50, 0.01, 0.125)),
    ("gpt-5.5", (5, 30, 0.50, 5)),
    ("gpt-5.5-2026-04-23", (5, 30, 0.50, 5)),
    ("models/gemini-3.8-flash", (0.75, 3.75, 0.075, 0.75)),
    ("claude-fable-5-1", (10, 50, 0.25, 12.50)),
    ("claude-sonnet-4-6", (3, 15, 0.30, 3.75)),
    ("gpt-5.4-mini", (0.75, 4.50, 0.075, 0.75)),
    ("gemini-3.5-flash-lite", (0.30, 2.50, 0.03, 0.30)),
])
def test_a_model_is_priced_by_its_longest_entry(model: str, expected: tuple[float, ...]) -> None:
    assert SHIPPED_TABLE.price(model) == Price(*expected)


@pytest.mark.parametrize(("model", "row"), [
    # a newer model never takes an older neighbour's price, an older one never a newer's
    ("claude-opus-5-5", "claude-opus-5-5"), ("claude-opus-5", "claude-opus-5"),
    ("claude-opus-5-20260724", "claude-opus-5"), ("anthropic.claude-opus-5-5-v1:0", "claude-opus-5-5"),
    ("claude-opus-5-5[1m]", "claude-opus-5-5"), ("claude-sonnet-5-5@20260928", "claude-sonnet-5-5"),
    ("claude-sonnet-5", "claude-sonnet-5"), ("claude-fable-5-1", "claude-fable-5-1"),
    ("claude-fable-5", "claude-fable-5"),
    ("gpt-5.5", "gpt-5.5"), ("gpt-5", "gpt-5"), ("gpt-5.5-pro", "gpt-5.5-pro"), ("gpt-5.4-nano", "gpt-5.4-nano"),
    ("gemini-3.8-flash", "gemini-3.8-flash"), ("gemini-3.5-flash-lite", "gemini-3.5-flash-lite"),
    ("gemini-3.5-flash", "gemini-3.5-flash"), ("gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite"),
])
def test_neighbouring_models_keep_their_own_rows(model: str, row: str) -> None:
    assert SHIPPED_TABLE.price(model) == SHIPPED_TABLE.rows[row]


@pytest.mark.parametrize("model", [
    "gpt-5.6", "gpt-50", "claude-opus-4-9", "claude-haiku-5-6", "llama-3", "", None,
    # a newer minor version, or a sibling the table does not list, is unknown rather than priced as its neighbour
    "claude-opus-5-6", "claude-sonnet-5-7", "claude-fable-5-2", "claude-mythos-5-2", "gemini-3.8-flash-lite",
    "gpt-5.5-mini", "gpt-5.4-pro", "o3-pro", "gemini-3.8-pro"])
def test_a_model_the_table_does_not_know_has_no_price(model: str | None) -> None:
    """A prefix matches whole dash-separated parts only (gpt-5 never prices gpt-5.6), and not a newer minor version
    (claude-opus-5 never prices claude-opus-5-6) nor a sibling (gemini-3.8-flash never prices gemini-3.8-flash-lite)."""
    assert SHIPPED_TABLE.price(model) is None
    assert SHIPPED_TABLE.cost(model, 1000, 1000) is None


def test_a_price_with_a_long_prompt_band_is_its_base_band() -> None:
    """Haiku 5.5 costs 5x past a 100k-token prompt, GPT-5.5 more past 272k: the table has the lower band."""
    assert SHIPPED_TABLE.cost("claude-haiku-5-5", 1_000_000, 0) == pytest.approx(0.10)
    assert SHIPPED_TABLE.cost("gpt-5.5", 1_000_000, 0) == pytest.approx(5)


def test_cost_counts_cached_input_at_its_own_prices() -> None:
    # 1M input of which 500k read from the cache and 100k written to it, 100k out, on Claude Sonnet 4.5
    cost = SHIPPED_TABLE.cost("claude-sonnet-4-5", 1_000_000, 100_000, cache_read=500_000, cache_write=100_000)
    assert cost == pytest.approx(0.4 * 3 + 0.5 * 0.30 + 0.1 * 3.75 + 0.1 * 15)


def test_an_entry_adds_or_replaces_a_row() -> None:
    table = table_of(["gpt-5=2,20", "my-model=1,2,0.5,3"])
    assert table.price("gpt-5-2025-08-07") == Price(2, 20, 2, 2)  # cache prices default to the input price
    assert table.cost("My-Model-v2", 1_000_000, 1_000_000, cache_read=1_000_000) == pytest.approx(0.5 + 2)
    assert table.price("gpt-5-mini") == SHIPPED_TABLE.price("gpt-5-mini")  # the rest of the table stays
    assert table_of([]) is SHIPPED_TABLE


@pytest.mark.parametrize("entry", ["gpt-5", "gpt-5=1", "=1,2", "gpt-5=a,b", "gpt-5=1,2,3,4,5", "gpt-5=-1,2",
                                   "gpt-5=inf,2"])
def test_a_bad_entry_says_what_is_expected(entry: str) -> None:
    with pytest.raises(PriceError) as caught:
        parse_entry(entry)
    said = str(caught.value)
    assert "\n" not in said and repr(entry) in said and ("MODEL=IN,OUT" in said or "number" in said)


def test_the_config_takes_prices_from_toml_environment_and_set(tmp_path: Path) -> None:
    file = tmp_path / "config.toml"
    file.write_text('[prices]\nmodels = ["gpt-5=2,20,0.2"]\n')
    assert load_config(env={}, file=file).prices.models == ["gpt-5=2,20,0.2"]
    config = load_config(env={"LOOPWARDEN_PRICES_MODELS": "a-model = 1, 2; b-model=3,4"})
    assert config.prices.models == ["a-model=1,2", "b-model=3,4"]
    assert show_value("prices.models", config.prices.models) == "a-model=1,2;b-model=3,4"
    config = load_config(env={}, sets=["prices.models=gpt-5=9,9"])
    assert config.prices.models == ["gpt-5=9,9"]
    with pytest.raises(ConfigError, match=r"^prices\.models: 'gpt-5=x,1': the prices must be numbers"):
        load_config(env={}, sets=["prices.models=gpt-5=x,1"])


def test_the_engine_prices_a_usage_before_the_budget_counts_it() -> None:
    health = SessionHealth(load_config(env={}, sets=["limits.max_cost_usd=100"]))
    usage = Usage(input_tokens=2_000_000, output_tokens=100_000, model="gpt-5", cache_read_tokens=1_000_000)
    health.observe(usage, 1.0)
    expected = (1_000_000 * 1.25 + 1_000_000 * 0.125 + 100_000 * 10) / 1e6
    assert usage.cost_usd == pytest.approx(expected) and usage.cost_source == "table"
    assert usage.to_dict()["cost_source"] == "table"  # the stored event carries the dollars and their source
    counters = {c.name: c.value for c in health.counters(2.0)}
    assert counters["cost_usd"] == pytest.approx(expected, abs=1e-4)
    view = health.cost.view()
    assert view is not None and view["source"] == "table" and view["models"] == ["gpt-5"]
    assert show_cost(view) == f"${expected:,.2f}"


def test_the_agents_own_cost_wins() -> None:
    health = SessionHealth(load_config(env={}))
    usage = Usage(input_tokens=1_000_000, output_tokens=0, model="gpt-5", cost_usd=0.5)
    health.observe(usage, 1.0)
    assert usage.cost_usd == 0.5 and usage.cost_source == "agent"
    view = health.cost.view()
    assert view is not None and show_cost(view) == "$0.5000" and show_source(view) == "agent-reported"


def test_an_unknown_model_counts_its_tokens_and_its_cost_is_unknown() -> None:
    health = SessionHealth(load_config(env={}))
    usage = Usage(input_tokens=1000, output_tokens=10, model="mystery-1")
    health.observe(usage, 1.0)
    assert usage.cost_usd is None and usage.cost_source is None
    counters = {c.name: c.value for c in health.counters(2.0)}
    assert counters["tokens"] == 1010 and counters["cost_usd"] == 0
    view = health.cost.view()
    assert show_cost(view) == "?" and "no price" in show_source(view or {})
    health.observe(Usage(input_tokens=1_000_000, output_tokens=0, model="gpt-5"), 3.0)
    assert show_cost(health.cost.view()) == "$1.25+?"


def test_a_running_sessions_prices_change_with_set() -> None:
    config = load_config(env={})
    health = SessionHealth(config)
    health.reconfigure(change(config, {"prices.models": "mystery=2,4"}))
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, model="mystery-1")
    health.observe(usage, 1.0)
    assert usage.cost_usd == pytest.approx(6.0)


def test_a_stored_usage_keeps_the_price_it_was_given() -> None:
    """A session rebuilt from the store after the table changed counts what was stored, not a new price."""
    health = SessionHealth(load_config(env={}, sets=["prices.models=gpt-5=100,100"]))
    stored = Usage(input_tokens=1_000_000, output_tokens=0, model="gpt-5", cost_usd=1.25, cost_source="table")
    health.observe(stored, 1.0)
    assert stored.cost_usd == 1.25 and stored.cost_source == "table"


def test_a_native_usage_line_names_its_model_and_cache_counts() -> None:
    event = parse_line(b'{"type":"usage","input_tokens":10,"output_tokens":2,"model":"gpt-5",'
                       b'"cache_read_tokens":4,"cache_write_tokens":1}')
    assert isinstance(event, Usage)
    assert (event.model, event.cache_read_tokens, event.cache_write_tokens) == ("gpt-5", 4, 1)
    old = parse_line(b'{"type":"usage","input_tokens":10,"output_tokens":2}')  # an old stream still parses
    assert isinstance(old, Usage) and old.model is None
    bad = parse_line(b'{"type":"usage","input_tokens":10,"output_tokens":2,"cache_read_tokens":"many"}')
    assert bad.kind == "invalid_line" and "cache_read_tokens" in bad.reason  # type: ignore[attr-defined]


def test_a_price_table_remembers_few_lookups() -> None:
    table = PriceTable()
    for n in range(1000):
        table.price(f"unknown-{n}")
    assert len(table._known) <= 256
