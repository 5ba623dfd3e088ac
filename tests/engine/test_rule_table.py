"""Every issue-14 rule is in the rule table of docs/rules.md (with its keys), can be reset by name, and
its keys are listed by `loopwarden config keys` (describe_keys) and can be set on a running session."""

from __future__ import annotations

from loopwarden.supervisor.config import LIVE_KEYS, describe_keys
from loopwarden.supervisor.health import RESETTABLE
from tests.support.paths import ROOT

RULES_DOC = ROOT / "docs" / "rules.md"
RULES = {
    "polling": ["repetition.progress_nudge_after", "repetition.progress_gate_after"],
    "rereads": ["rereads.max_reads", "rereads.window", "rereads.read_tools", "rereads.write_tools"],
    "chanting": ["chanting.repeats", "chanting.chunk_chars"],
    "condensation": ["condensation.max_in_a_row"],
    "reflections": ["reflections.max_rounds", "reflections.commands"],
}


def test_each_rule_has_a_row_its_keys_and_a_reset():
    table = RULES_DOC.read_text(encoding="utf-8").split("## What it catches", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    listed = {key for key, *_ in describe_keys()}
    for rule, keys in RULES.items():
        assert rule in rows, rule
        assert "source" in rows[rule] or "OpenHands" in rows[rule], rule
        assert rule in RESETTABLE
        for key in keys:
            assert key in listed and key in LIVE_KEYS, key
            assert key.split(".", 1)[1] in rows[rule], (rule, key)
