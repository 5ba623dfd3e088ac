"""A session's settings stored as values and read back (`stored_settings`, `from_stored`): the same config,
alert URLs (secrets) left out."""

from __future__ import annotations

import orjson
import pytest

from loopwarden.supervisor.config import ConfigError, from_stored, load_config, stored_settings


def test_the_settings_that_differ_from_the_preset_come_back_the_same_through_json() -> None:
    config = load_config(preset="aggressive", env={}, sets=[
        "limits.max_runtime=5m", "rules.disabled=alternation",
        "tools.limits=WebFetch:repetition.max_identical_calls=10", "notify.urls=json://host:1/secret-token"])
    values = stored_settings(config)
    assert values == {"limits.max_runtime": 300.0, "rules.disabled": ["alternation"],
                      "tools.limits": ["WebFetch:repetition.max_identical_calls=10"]}
    again = from_stored("aggressive", orjson.loads(orjson.dumps(values)))
    assert again.limits == config.limits and again.rules == config.rules and again.tools == config.tools
    assert again.attempts == config.attempts and again.preset == "aggressive"
    assert again.notify.urls == [] and "secret-token" not in orjson.dumps(values).decode()


def test_unreadable_stored_settings_are_one_line_errors() -> None:
    with pytest.raises(ConfigError, match="preset 'nope' is unknown"):
        from_stored("nope", {})
    with pytest.raises(ConfigError, match=r"unknown key 'limits\.nope'") as info:
        from_stored(None, {"limits.nope": 1})
    assert "\n" not in str(info.value)
