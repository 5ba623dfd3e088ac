"""Ambiguous verdicts a second opinion may overrule: the edge cases a rule cannot settle alone, put to a model.

A guard marks a verdict it is unsure of by setting `Verdict.ask` to one of the kinds below; the
engine stays deterministic and pure. The runtime (runtime/opinion.py) may then put the case to a
model, which can only withhold the verdict (progress, above the confidence threshold); on a loop
answer, a timeout, an error, a low confidence or a malformed answer the verdict stands.
Only nudges and gates are put to a model: a block answers a call that is waiting, and a
termination is never second-guessed.
"""

from __future__ import annotations

from .verdicts import Action, Verdict

POLL = "poll"  # an identical call whose output keeps changing reached the progress ceiling
ALTERNATION = "alternation"  # two calls alternating while their outputs change
MONOLOGUE = "monologue"  # many assistant messages in a row with no tool call

QUESTIONS: dict[str, str] = {
    POLL: ("The agent made the same tool call many times in a row and its output changed each time. "
           "Is it waiting on something that really progresses (a build, a growing log, a job's status), "
           "or is it stuck re-running a call whose changes mean nothing?"),
    ALTERNATION: ("The agent alternates between two tool calls and their outputs keep changing. "
                  "Is it working through something (edit and test, page and read), or going round in circles?"),
    MONOLOGUE: ("The agent wrote many messages in a row without calling a tool. "
                "Is it making progress (explaining, planning a long answer), or repeating itself instead of acting?"),
}

OPEN_TO_OPINION = (Action.NUDGE, Action.GATE)


def askable(verdict: Verdict) -> str | None:
    """The question kind of a verdict a second opinion may withhold, or None."""
    kind = verdict.ask
    if kind is None or verdict.action not in OPEN_TO_OPINION or kind not in QUESTIONS:
        return None
    return kind
