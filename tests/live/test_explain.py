"""`loopwarden explain SESSION`: which rules fired and why, from the stored verdicts, with the settings
in force, on a real daemon (ended sessions too), as text and as JSON."""

from __future__ import annotations

import json

from loopwarden.cli.explain import render, summarise
from tests.support.daemon import Harness
from tests.support.events import rules
from tests.support.paths import PY

SLEEPER = (PY, "-c", "import time; time.sleep(120)")


def test_explain_tells_which_rules_fired_and_why_on_an_ended_session(lw: Harness) -> None:
    sid = lw.scenario("repetition")
    lw.wait_state(sid, "terminated")
    stored = rules(lw.verdicts(sid))
    assert stored == [("nudge", "repetition"), ("block", "repetition"), ("block", "repetition"),
                      ("block", "repetition"), ("terminate", "repetition")]
    proc = lw.cli("explain", sid)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert f"{sid} repetition: terminated (repetition_loop)" in text.splitlines()[0]
    assert "repetition  5x (nudge 1, block 3, terminate 1): the same call with the same arguments" in text
    assert "first, at line" in text and "read_file called 2x with identical arguments" in text
    assert "last, at line" in text and "session terminated" in text
    assert "rules switched off: none" in text
    assert "rules that never fired: polling, same_error, alternation" in text  # near miss: the quiet rules are named
    as_json = json.loads(lw.cli("explain", "--json", sid).stdout)
    assert [(r["rule"], r["count"], r["actions"]) for r in as_json["rules"]] == [
        ("repetition", 5, {"nudge": 1, "block": 3, "terminate": 1})]
    assert as_json["verdicts"] == 5 and as_json["termination"] == "repetition_loop"


def test_explain_shows_rules_switched_off_retuned_and_changed_while_running(lw: Harness) -> None:
    sid = lw.run_detached(*SLEEPER, adapter="plain",
                          sets=("rules.disabled=alternation,monologue", "repetition.max_identical_calls=9"))
    lw.wait_state(sid, "running")
    assert lw.cli("set", sid, "tools.exempt=Read").returncode == 0
    proc = lw.cli("explain", sid)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert ("settings: preset recommended; rules switched off: alternation, monologue; retuned: "
            "repetition.max_identical_calls=9, tools.exempt=Read") in lines
    assert any("changed while running by" in line and line.endswith("tools.exempt: (none) -> Read")
               for line in lines)
    assert "no rule fired." in lines
    data = json.loads(lw.cli("explain", "--json", sid).stdout)
    assert data["disabled"] == ["alternation", "monologue"] and data["rules"] == []
    assert "alternation" not in data["quiet"] and "repetition" in data["quiet"]
    lw.cli("kill", sid)


def test_an_unknown_session_is_a_one_line_error(lw: Harness) -> None:
    proc = lw.cli("explain", "s999")
    assert proc.returncode == 2
    assert proc.stderr.startswith("loopwarden: error: ") and proc.stderr.count("\n") == 1


def test_agent_text_in_reasons_is_shown_as_visible_escapes_and_kept_exact_in_json() -> None:
    snap = {"id": "s1", "name": "x", "state": "running", "settings": {}, "events": 3}
    verdicts = [{"seq": 3, "action": "gate", "rule": "gate_request", "reason": "agent asks: \x1b[2Jwipe"}]
    data = summarise(snap, verdicts)
    assert data["rules"][0]["first"]["reason"] == "agent asks: \x1b[2Jwipe"
    text = render(data)
    assert "\x1b" not in text and "agent asks: \\x1b[2Jwipe" in text
    assert "gate_request  1x (gate 1): the agent asking a human to approve something" in text
