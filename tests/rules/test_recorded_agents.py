"""The loop counter and the reflection budget on real recorded streams of each agent (tests/data, recorded with
tests/rules/record_failing_rounds.py from the real CLIs on the fake model servers).

Claude Code, Codex and claude-agent-acp (Claude Code over ACP) run a failing test command ten times over: four
rounds whose failures shrink (4, 3, 2, 1 failing tests), then four the same. The fourth failed round opens the
reflections gate (the loop counter sees progress there: no loop yet); the third repeat of the same failure (the
seventh run) opens the loop counter's. Gemini CLI over ACP reports no output or exit code for a shell call, so
only a failing call of its own tools feeds the rules: four failed reads of a missing file open the loop
counter's gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.replay import Replayer, choose_format, open_recording
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.verdicts import Verdict
from tests.support.paths import ROOT

DATA = ROOT / "tests" / "data"
CLAUDE = DATA / "claude_stream-json__loopwarden__failing-rounds.jsonl"
CODEX = DATA / "codex_exec_json__loopwarden__failing-rounds.jsonl"
GEMINI = DATA / "acp_gemini__loopwarden__failing-reads.jsonl"
CLAUDE_ACP = DATA / "acp_claude-agent-acp__loopwarden__failing-rounds.jsonl"


def replay(path: Path, *sets: str) -> tuple[list[Verdict], str]:
    """Every verdict `loopwarden replay` gives on the recording, and the format it read it as."""
    verdicts: list[Verdict] = []
    with open(path, "rb") as f:
        guess, stream = open_recording(f)
        fmt = choose_format(None, guess, path.name)
        Replayer(load_config(env={}, sets=list(sets)), spill=False).run(stream, fmt, verdicts.append,
                                                                          array=guess.array, detected=True)
    return verdicts, fmt


def gates(verdicts: list[Verdict]) -> dict[str, Verdict]:
    return {v.rule: v for v in verdicts if v.action == "gate"}


@pytest.mark.parametrize(("path", "fmt"), [(CLAUDE, "claude-code"), (CODEX, "codex"), (CLAUDE_ACP, "acp")])
def test_claude_code_codex_and_claude_acp_hit_the_reflection_budget_then_the_loop_counter(path: Path,
                                                                                          fmt: str) -> None:
    verdicts, read_as = replay(path)
    assert read_as == fmt
    by_rule = gates(verdicts)
    assert set(by_rule) == {"reflections", "loop_counter"}
    reflections, loop = by_rule["reflections"], by_rule["loop_counter"]
    assert reflections.evidence["rounds"] == 4 and reflections.seq < loop.seq
    assert [r["round"].endswith("python3 -m unittest test_calc'") or r["round"] == "python3 -m unittest test_calc"
            for r in reflections.evidence["history"]] == [True] * 4
    # the failures shrank over those four rounds: no loop then; the same failure three times over: a loop
    failures = loop.evidence["failures"]
    assert [f["message"] for f in failures] == [
        *(f"FAIL: test_{t} (test_calc.CalcTest.test_{t})" for t in "abcd"),
        *["FAIL: test_d (test_calc.CalcTest.test_d)"] * 3]
    assert loop.evidence["loop_count"] == 3 and "exact error message match" in loop.reason


@pytest.mark.parametrize("path", [CLAUDE, CODEX, CLAUDE_ACP])
def test_without_the_repeats_or_past_the_budget_there_is_no_gate(path: Path) -> None:
    # near misses: a budget of 4 rounds is not spent by 4 failed ones before the repeats; a loop counter
    # gating at 4 loops needs one more repeat than the recording has
    verdicts, _ = replay(path, "reflections.max_rounds=7", "loop.gate_after=4")
    assert gates(verdicts) == {}


def test_gemini_hits_the_loop_counter_with_its_failed_tool_calls() -> None:
    verdicts, fmt = replay(GEMINI)
    assert fmt == "acp"
    loop = gates(verdicts)["loop_counter"]
    messages = [f["message"] for f in loop.evidence["failures"]]
    assert len(messages) == 4 and len(set(messages)) == 1, messages
    assert messages[0].startswith("File not found: /tmp/") and messages[0].endswith("/work/calc.py")
    assert "reflections" not in gates(verdicts)
    assert gates(replay(GEMINI, "loop.gate_after=4")[0]) == {}  # near miss
