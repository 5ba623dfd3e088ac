"""Settings a hook may make stricter, never looser (supervisor/tighten.py), key by key."""

from __future__ import annotations

from dataclasses import fields

import pytest

from loopwarden.supervisor.config import KEYS, LIVE_KEYS, SECTIONS, Config, load_config, value_of
from loopwarden.supervisor.tighten import stricter, tightened

NUMBERS = sorted(k for k in LIVE_KEYS if KEYS[k] in ("int", "float", "duration", "size"))


@pytest.mark.parametrize("key", NUMBERS)
def test_zero_switches_a_limit_off_and_is_never_taken_as_stricter(key: str) -> None:
    assert not stricter(key, value_of(Config(), key), 0)
    assert not stricter(key, value_of(Config(), key), -1)


def test_a_smaller_positive_threshold_is_stricter_and_a_larger_one_is_not() -> None:
    assert stricter("limits.max_runtime", 4 * 3600.0, 3600.0)
    assert not stricter("limits.max_runtime", 4 * 3600.0, 100000 * 3600.0)
    assert stricter("repetition.max_identical_calls", 5, 3)
    assert not stricter("repetition.max_identical_calls", 5, 6)
    assert stricter("limits.max_tokens", 0, 5000)  # against the operator's off, any limit is stricter
    assert stricter("attempts.window", 3600.0, 7200.0)  # a longer window counts more attempts
    assert not stricter("attempts.window", 3600.0, 60.0)
    assert not stricter("gates.timeout", 0.0, 60.0)  # an expiring gate may approve: no order
    assert not stricter("limits.max_line_bytes", 1 << 20, 1024)  # not a live key: shaped how it started


def test_switches_and_lists_are_stricter_in_one_direction_only() -> None:
    assert stricter("repetition.reset_on_user_message", True, False)
    assert not stricter("repetition.reset_on_user_message", False, True)
    assert stricter("rules.disabled", ["alternation", "monologue"], ["alternation"])  # a rule switched back on
    assert not stricter("rules.disabled", [], ["repetition"])
    assert stricter("tools.exempt", ["TodoWrite"], [])
    assert not stricter("tools.exempt", [], ["Bash"])


def test_tightened_takes_the_stricter_values_and_names_every_other() -> None:
    operator = load_config(env={"LOOPWARDEN_RULES_DISABLED": "alternation"})
    asked = load_config(env={"LOOPWARDEN_LIMITS_MAX_RUNTIME": "100000h",
                             "LOOPWARDEN_REPETITION_MAX_IDENTICAL_CALLS": "0", "LOOPWARDEN_REPETITION_NUDGE_AFTER": "1",
                             "LOOPWARDEN_RULES_DISABLED": "", "LOOPWARDEN_HOOKS_MAX_SESSIONS": "100000"})
    config, refused = tightened(operator, asked)
    assert (config.repetition.nudge_after, config.rules.disabled) == (1, [])
    assert (config.limits.max_runtime, config.repetition.max_identical_calls) == (4 * 3600.0, 5)
    assert config.hooks.max_sessions == 256
    assert sorted(r.split("=")[0] for r in refused) == ["hooks.max_sessions", "limits.max_runtime",
                                                        "repetition.max_identical_calls"]


def test_every_key_is_covered() -> None:
    """A key added to the configuration is either tightenable by a rule above or refused: never loosened."""
    base = Config()
    for section, cls in SECTIONS.items():
        for key in fields(cls):
            name = f"{section}.{key.name}"
            value = value_of(base, name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:  # (0: already off)
                loose = value * 10 + 1 if name not in ("attempts.window", "rereads.window") else value / 10
                assert not stricter(name, value, loose), name
