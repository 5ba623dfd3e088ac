"""Large outputs (seed 003): a tool_result over spill.threshold_chars earns a `spill` verdict
(the file itself is written outside the pure engine); at or under the threshold, none."""

from __future__ import annotations

from tests.engine.helpers import Action, call, config, of, ok, run, summary


def test_output_over_the_threshold_is_spilled():
    cfg = config("spill.threshold_chars=100")
    verdicts = run([call("cat", {"path": "big.log"}), ok("cat", "x" * 101)], cfg)
    assert summary(verdicts) == [("spill", "large_output", 2)]
    assert 101 in verdicts[0].evidence.values()
    assert "cat" in verdicts[0].reason


def test_near_miss_output_at_the_threshold_is_not_spilled():
    cfg = config("spill.threshold_chars=100")
    assert run([call("cat", {"path": "big.log"}), ok("cat", "x" * 100)], cfg) == []


def test_default_threshold_is_200k_characters():
    assert run([call("cat", {"path": "a"}), ok("cat", "y" * 200_000)]) == []
    verdicts = run([call("cat", {"path": "a"}), ok("cat", "y" * 200_001)])
    assert summary(verdicts) == [("spill", "large_output", 2)]


def test_failed_outputs_are_spilled_too():
    cfg = config("spill.threshold_chars=10")
    verdicts = run([call("bash", {"command": "make"}), ok("bash", "E" * 50, is_error=True)], cfg)
    assert summary(of(verdicts, Action.SPILL)) == [("spill", "large_output", 2)]


def test_the_threshold_counts_characters_not_bytes():
    cfg = config("spill.threshold_chars=150")
    assert run([call("cat", {"path": "u"}), ok("cat", "é" * 120)], cfg) == []       # 240 bytes, 120 chars
    assert summary(run([call("cat", {"path": "u"}), ok("cat", "é" * 151)], cfg)) == [("spill", "large_output", 2)]
