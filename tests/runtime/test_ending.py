"""ending(): why a session ended, in words, for each way a session ends."""

from __future__ import annotations

from loopwarden.runtime.ending import ending, exit_words
from loopwarden.runtime.store import LOST_TEXT


def snap(state: str, **fields: object) -> dict[str, object]:
    return {"state": state, **fields}


def test_a_live_session_has_not_ended() -> None:
    assert ending(snap("running", exit_code=None)) == ""
    assert ending(snap("gated")) == ""


def test_an_exit_says_its_code() -> None:
    assert ending(snap("exited", exit_code=0)) == "exited 0"
    assert ending(snap("exited", exit_code=3, termination="exited")) == "exited 3"
    assert ending(snap("exited")) == "exited"


def test_a_signal_death_names_the_signal_not_a_negative_code() -> None:
    assert ending(snap("exited", exit_code=-9)) == "killed by SIGKILL"
    assert ending(snap("exited", exit_code=-15)) == "killed by SIGTERM"
    assert exit_words(-77) == "killed by signal 77"


def test_an_adapter_failure_is_told_in_full_and_left_out_of_the_short_form() -> None:
    s = snap("exited", exit_code=1, failure="claude: not logged in")
    assert ending(s) == "exited 1: claude: not logged in"
    assert ending(s, short=True) == "exited 1"


def test_a_termination_tells_its_reason_in_full_or_in_a_few_words() -> None:
    text = ("session terminated: repetition loop: tool 'read' was called 5 times in a row "
            "and 3 blocked repeats did not change the approach")
    s = snap("terminated", exit_code=-15, termination="repetition_loop", termination_text=text)
    assert ending(s) == ("terminated: repetition loop: tool 'read' was called 5 times in a row "
                         "and 3 blocked repeats did not change the approach")
    assert ending(s, short=True) == "terminated: repeated calls"
    assert ending(snap("terminated", termination="operator")) == "terminated: killed by operator"


def test_a_lost_session_says_the_daemon_restarted() -> None:
    s = snap("lost", termination="lost", termination_text=LOST_TEXT)
    assert ending(s) == f"lost: {LOST_TEXT}"
    assert ending(s, short=True) == "lost: daemon restarted"


def test_an_unknown_reason_from_a_newer_store_is_shown_as_it_is() -> None:
    assert ending(snap("terminated", termination="cosmic_ray"), short=True) == "terminated: cosmic_ray"


def test_agent_text_in_the_reason_cannot_move_the_terminal() -> None:
    s = snap("terminated", termination="consecutive_failures",
             termination_text="session terminated: 5 consecutive failures (last: \x1b[2Jboom)")
    assert "\x1b" not in ending(s)
