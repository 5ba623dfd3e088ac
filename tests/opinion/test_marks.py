"""Which verdicts the engine marks as open to a second opinion (pure: no model, no I/O)."""

from __future__ import annotations

from loopwarden.supervisor.opinion import MONOLOGUE, askable
from tests.engine.helpers import Action, call, msg, ok, run


def test_a_long_monologue_marks_its_nudge_and_its_gate() -> None:
    verdicts = run([msg(f"thinking, step {i}") for i in range(1, 7)])
    assert [(v.action, v.rule, v.ask) for v in verdicts] == [
        (Action.NUDGE, "monologue", MONOLOGUE), (Action.GATE, "monologue", MONOLOGUE)]
    assert all(askable(v) == MONOLOGUE for v in verdicts)
    assert verdicts[0].to_dict()["ask"] == MONOLOGUE


def test_a_plain_repeat_is_not_ambiguous() -> None:
    # the near miss: identical calls with identical output are a loop, never a question for a model
    verdicts = run([e for _ in range(3) for e in (call("ls", {"path": "."}), ok("ls", "a b"))])
    assert [(v.action, v.rule) for v in verdicts] == [(Action.NUDGE, "repetition")]
    assert verdicts[0].ask is None and "ask" not in verdicts[0].to_dict()


def test_a_poll_at_its_ceiling_marks_its_nudge_and_its_gate() -> None:
    from loopwarden.supervisor.opinion import POLL

    polls = [e for i in range(31) for e in (call("ls", {"path": "logs"}), ok("ls", f"build.log {1000 + i} bytes"))]
    verdicts = [v for v in run(polls) if v.rule == "polling"]
    assert [(v.action, v.ask) for v in verdicts] == [(Action.NUDGE, POLL), (Action.GATE, POLL)]
    assert all(askable(v) == POLL for v in verdicts)
