"""The ceiling on the progress exemption (issue 14, item 1): an identical call whose output keeps
changing is nudged at `repetition.progress_nudge_after` calls and gated past
`repetition.progress_gate_after`, with evidence of what changed (volatile parts only, or content).
"""

from __future__ import annotations

from tests.engine.helpers import Action, Session, call, config, of, ok, one, run, summary, user

LS = {"command": "ls -la logs"}


def listing(i: int) -> str:
    """A directory listing whose log grows: only its size and time change."""
    return (f"total 16\n-rw-r--r-- 1 me staff {4096 + 517 * i} Nov 24 03:{i % 60:02d} build.log\n"
            f"-rw-r--r-- 1 me staff 120 Nov 24 01:00 README")


def polls(n: int, output=listing, tool: str = "Bash", args=LS):
    out = []
    for i in range(n):
        out += [call(tool, dict(args)), ok(tool, output(i))]
    return out


def test_changing_output_is_nudged_at_10_and_gated_on_the_31st_call():
    verdicts = run(polls(40))
    assert summary(verdicts) == [("nudge", "polling", 20), ("gate", "polling", 61)]
    nudge, gate = verdicts
    assert nudge.evidence["count"] == 10 and nudge.evidence["changed"] == "volatile"
    assert nudge.evidence["volatile_changes"] == 8 and nudge.evidence["content_changes"] == 0  # from the 3rd call on
    assert "build.log" in nudge.evidence["before"] and nudge.evidence["before"] != nudge.evidence["after"]
    assert 'Tool "Bash"' in nudge.message and "only numbers, sizes or times changed" in nudge.message
    assert gate.evidence["count"] == 31 and "Waiting for a human" in gate.message


def test_near_miss_nine_polls_and_thirty_polls():
    assert run(polls(9)) == []
    assert summary(run(polls(30))) == [("nudge", "polling", 20)]


def test_real_content_changes_are_told_apart_from_volatile_ones():
    pages = polls(12, output=lambda i: f"chunk {i}: " + ["alpha", "beta", "gamma", "delta"][i % 4] * 3)
    nudge = one(run(pages), Action.NUDGE, "polling")
    assert nudge.evidence["changed"] == "content" and nudge.evidence["content_changes"] > 0
    assert "its content changed" in nudge.message


def test_volatile_parts_are_normalised_like_error_fingerprints():
    stamps = [f"2026-11-24T03:{i:02d}:00Z job 0x{i:04x}ff running in /tmp/tmp{i}abc pid={100 + i} {i}.{i}s"
              for i in range(12)]
    nudge = one(run(polls(12, output=lambda i: stamps[i])), Action.NUDGE, "polling")
    assert nudge.evidence["changed"] == "volatile" and nudge.evidence["content_changes"] == 0


def test_a_different_call_or_a_human_turn_starts_the_run_over():
    events = polls(9) + [call("Bash", {"command": "pwd"}), ok("Bash", "/w")] + polls(9)
    assert run(events) == []
    assert run(polls(9) + [user()] + polls(9)) == []


def test_the_ceiling_is_configurable_and_can_be_switched_off():
    cfg = config("repetition.progress_nudge_after=3", "repetition.progress_gate_after=5")
    assert summary(run(polls(7), cfg)) == [("nudge", "polling", 6), ("gate", "polling", 11)]
    off = config("repetition.progress_nudge_after=0", "repetition.progress_gate_after=0")
    assert run(polls(60), off) == []


def test_an_approved_gate_resets_the_run():
    session = Session(config("repetition.progress_nudge_after=0", "repetition.progress_gate_after=5"))
    session.feed(*polls(6))
    gate = one(session.verdicts, Action.GATE, "polling")
    session.decide(gate.gate_id, True)
    session.feed(*polls(5))
    assert len(of(session.verdicts, Action.GATE)) == 1


def test_unchanging_output_is_still_the_repetition_rule():
    verdicts = run(polls(7, output=lambda i: "same"))
    assert {v.rule for v in verdicts} == {"repetition"}
