"""The false-alarm budget: every healthy real recording replays with no hard intervention (block, gate,
terminate), and a generated healthy stream earns hard ones only for the stuck episodes it plants.

Spec: issue 14 item 6. Which recordings are healthy, and why, is listed in bench/false_alarms.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.false_alarms import HEALTHY, generated, replay
from tests.engine.helpers import call, config, fail, ok, run, summary
from tests.support.paths import recording

MAKE_FAIL = "make: *** [lint-fix] Error 1\n\ngolangci-lint run --fix\n{diag}\npackage services\n"


@pytest.mark.parametrize(("name", "why"), HEALTHY, ids=[n for n, _ in HEALTHY])
def test_a_healthy_recording_gets_no_hard_intervention(name: str, why: str) -> None:
    _, hard = replay(recording(name), config())
    assert hard == [], f"false alarm on a healthy recording ({why}): {hard}"


def test_a_generated_healthy_stream_is_blocked_only_where_a_loop_was_planted(tmp_path: Path) -> None:
    result = generated(30_000, tmp_path / "stream.jsonl",
                       config("limits.max_iterations=0", "limits.max_runtime=0", "spill.threshold_chars=0"))
    assert result["planted"] >= 1
    assert result["hard"] == result["planted"]  # one block per planted stuck episode, nothing else
    assert {(r, a) for (r, a) in result["counts"] if a in ("block", "gate", "terminate")} == {("repetition", "block")}


def _lint_round(diag: str, n: int) -> list:
    """A failed lint run, then an edit (a different one each round)."""
    return [call("Bash", {"command": "make lint-fix"}), fail("Bash", MAKE_FAIL.format(diag=diag)),
            call("Edit", {"file_path": "a.go", "old": f"line {n}"}), ok("Edit", "updated")]


def test_a_build_runner_failing_with_different_diagnostics_is_not_the_same_error() -> None:
    events = (_lint_round("agents_test.go:41:17: undefined: NewJobsService", 1)
              + _lint_round("agents.go:1: : import cycle not allowed in test", 2)
              + _lint_round("agents_test.go:131:9: too many return values", 3)
              + [call("Bash", {"command": "make lint-fix"})])
    assert run(events) == []


def test_a_build_runner_failing_with_the_same_diagnostics_is_still_the_same_error() -> None:
    diag = "agents.go:1: : import cycle not allowed in test"
    events = [*_lint_round(diag, 1), *_lint_round(diag, 2), *_lint_round(diag, 3),
              call("Bash", {"command": "make lint-fix"})]
    assert [(a, r) for a, r, _ in summary(run(events))] == [("block", "same_error")]
