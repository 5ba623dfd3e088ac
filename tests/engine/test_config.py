"""Configuration: defaults from the seeds, presets, TOML < env < --set, one-line errors."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from loopwarden.supervisor.config import ConfigError, convert, load_config, parse_duration


def test_defaults_come_from_the_seeds() -> None:
    c = load_config(env={})
    assert c.limits.max_runtime == 4 * 3600
    assert c.limits.stall_timeout == 30
    assert (c.limits.max_tokens, c.limits.max_cost_usd) == (0, 0.0)
    assert c.repetition.nudge_after == 2
    assert c.repetition.max_identical_calls == 5
    assert c.repetition.max_blocks == 3
    assert c.repetition.max_same_error == 3
    assert c.repetition.alternation_window == 6
    assert c.repetition.max_monologue == 3
    assert c.repetition.reset_on_user_message is True
    assert c.validation.max_consecutive == 3
    assert c.failures.max_consecutive == 5
    assert c.loop.gate_after == 3
    assert (c.attempts.max_attempts, c.attempts.window, c.attempts.force_next_after) == (3, 3600, 5)
    assert c.attempts.auto_unblock is True
    assert c.escalation.failures_per_model == 2
    assert (c.spill.threshold_chars, c.spill.preview_chars, c.spill.retention) == (200_000, 1000, 86400)
    assert c.preset == "recommended"


@pytest.mark.parametrize(
    ("preset", "max_attempts", "force_next_after", "auto_unblock"),
    [("conservative", 5, 8, False), ("recommended", 3, 5, True), ("aggressive", 2, 3, True)],
)
def test_presets_follow_seed_001(preset: str, max_attempts: int, force_next_after: int, auto_unblock: bool) -> None:
    a = load_config(preset=preset, env={}).attempts
    assert (a.max_attempts, a.force_next_after, a.auto_unblock) == (max_attempts, force_next_after, auto_unblock)


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("4h", 14400), ("1h30m", 5400),
                                                ("250ms", 0.25), ("90", 90), ("1.5h", 5400), ("2d", 172800)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "4x", "h", "-5s", "1h-2m", "nan"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_precedence_file_then_env_then_set(tmp_path: Path) -> None:
    toml = tmp_path / "lw.toml"
    toml.write_text('preset = "aggressive"\n[limits]\nmax_runtime = "1h"\nstall_timeout = "10s"\n'
                    '[repetition]\nmax_identical_calls = 7\n', encoding="utf-8")
    env = {"LOOPWARDEN_LIMITS_STALL_TIMEOUT": "20s", "LOOPWARDEN_REPETITION_MAX_IDENTICAL_CALLS": "9"}
    c = load_config(file=toml, env=env, sets=["repetition.max_identical_calls=11"])
    assert c.preset == "aggressive"
    assert c.attempts.max_attempts == 2  # from the preset
    assert c.limits.max_runtime == 3600  # from the file
    assert c.limits.stall_timeout == 20  # env beats file
    assert c.repetition.max_identical_calls == 11  # --set beats env
    assert load_config(preset="conservative", file=toml, env={}).preset == "conservative"  # --preset beats file


def test_env_preset_and_lists() -> None:
    c = load_config(env={"LOOPWARDEN_PRESET": "conservative", "LOOPWARDEN_ESCALATION_MODELS": "small, big"})
    assert c.preset == "conservative"
    assert c.escalation.models == ["small", "big"]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"sets": ["limits.max_runtim=5m"]},
         "--set: unknown key 'limits.max_runtim' (did you mean limits.max_runtime?)"),
        ({"sets": ["limits.max_runtime=soon"]},
         "limits.max_runtime: 'soon' is not valid; it accepts a duration such as 30s, 5m or 4h"),
        ({"sets": ["repetition.max_blocks=-1"]},
         "repetition.max_blocks: '-1' is not valid; it accepts a whole number >= 0"),
        ({"sets": ["repetition.reset_on_user_message=maybe"]}, "it accepts true or false"),
        ({"sets": ["gates.on_timeout=explode"]}, "it accepts one of deny, approve"),
        ({"sets": ["nokey"]}, "expected section.key=value"),
        ({"env": {"LOOPWARDEN_LIMITS_MAX_RUNTIME": "x"}}, "limits.max_runtime: 'x' is not valid"),
        ({"env": {"LOOPWARDEN_LIMITS_NOPE": "1"}},
         "environment variable LOOPWARDEN_LIMITS_NOPE: unknown key 'limits.nope'"),
        ({"preset": "reckless"},
         "preset 'reckless' is unknown; it accepts one of recommended, conservative, aggressive"),
    ],
)
def test_errors_are_one_line_and_name_the_key(kwargs: dict, expected: str) -> None:
    kwargs.setdefault("env", {})
    with pytest.raises(ConfigError) as info:
        load_config(**kwargs)
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_bad_toml_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[limits\nmax_runtime = 1", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(file=bad, env={})
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[limits]\nmax_runtimes = '1h'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"config file .*unknown key 'limits.max_runtimes'"):
        load_config(file=unknown, env={})
    with pytest.raises(ConfigError, match="cannot read it"):
        load_config(file=tmp_path / "missing.toml", env={})


def test_unrelated_environment_is_ignored() -> None:
    c = load_config(env={"LOOPWARDEN_HOME": "/x", "PATH": "/bin", "LOOPWARDEN_DEBUG": "1"})
    assert c.limits.max_runtime == 4 * 3600


def test_sizes() -> None:
    assert load_config(env={}, sets=["limits.max_line_bytes=64KiB"]).limits.max_line_bytes == 65536
    assert load_config(env={}, sets=["limits.max_line_bytes=2MiB"]).limits.max_line_bytes == 2 << 20


def test_change_takes_live_keys_and_refuses_the_others_in_one_line() -> None:
    from loopwarden.supervisor.config import change, show_value, value_of

    base = load_config(env={})
    changed = change(base, {"limits.max_runtime": "2h", "repetition.max_identical_calls": 3})
    assert value_of(changed, "limits.max_runtime") == 7200.0 and changed.repetition.max_identical_calls == 3
    assert show_value("limits.max_runtime", 7200.0) == "2h" and show_value("gates.timeout", 0.0) == "0 (off)"
    for values, message in (({}, "set needs at least one KEY=VALUE"),
                            ({"limits.max_runtim": "1h"}, "did you mean limits.max_runtime?"),
                            ({"spill.dir": "/tmp"}, "cannot change on a running session"),
                            ({"limits.max_runtime": "-1"}, "is not valid")):
        with pytest.raises(ConfigError, match=message):
            change(base, values)


def test_a_reconfigured_health_judges_the_next_call_by_the_new_threshold() -> None:
    from loopwarden.supervisor.config import change
    from loopwarden.supervisor.events import ToolCall
    from loopwarden.supervisor.health import SessionHealth

    health = SessionHealth(load_config(env={}), started_at=0.0)
    calls = [ToolCall(seq=n, ts=None, task=None, agent=None, tool="ls", args={"p": "."}) for n in range(1, 5)]
    assert all(v.action != "block" for c in calls[:3] for v in health.observe(c, 1.0))
    health.reconfigure(change(health.config, {"repetition.max_identical_calls": "3"}))
    assert [v.action for v in health.observe(calls[3], 2.0)] == ["block"]



@pytest.mark.parametrize("key, kind, value", [
    ("limits.max_runtime", "duration", "inf"), ("limits.max_runtime", "duration", "1e400"),
    ("limits.stall_timeout", "duration", "1e400h"), ("limits.max_runtime", "duration", float("inf")),
    ("limits.max_runtime", "duration", "nan"), ("loop.similarity", "float", "inf")])
def test_infinite_or_undefined_numbers_are_a_clear_error_not_a_limit(key: str, kind: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}: .* is not valid"):
        convert(key, kind, value)


def test_an_infinite_set_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^limits\.max_runtime: 'inf' is not valid; it accepts a duration"):
        load_config(env={}, sets=["limits.max_runtime=inf"])
