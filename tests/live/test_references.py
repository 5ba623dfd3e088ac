"""How commands name sessions and gates: unique live names, ambiguous names refused, a gate by its session."""

from __future__ import annotations

import os

from tests.support.daemon import Harness
from tests.support.paths import PY

SLEEPER = (PY, "-c", "import time; time.sleep(120)")


def test_a_name_a_live_session_has_gets_a_suffix_and_run_says_so(lw: Harness) -> None:
    first = lw.run_detached(*SLEEPER, adapter="plain", name="dup")
    proc = lw.cli("run", "-d", "--adapter", "plain", "--name", "dup", "--", *SLEEPER)
    assert proc.returncode == 0, proc.stderr
    second = proc.stdout.strip()
    assert proc.stderr == f"loopwarden: a live session is already named 'dup'; {second} is named 'dup-2'\n"
    defaults = [lw.cli("run", "-d", "--adapter", "plain", "--", *SLEEPER) for _ in range(2)]  # the command's
    program = os.path.basename(PY)  # name: the program for `-c` (python, or python3 when pytest ran as python3)
    assert [p.stderr.endswith(f"is named '{program}-2'\n") for p in defaults] == [False, True], defaults[1].stderr
    assert lw.status("dup")["id"] == first and lw.status("dup-2")["id"] == second
    assert lw.status(f"{program}-2")["id"] == defaults[1].stdout.strip()


def test_a_name_several_sessions_had_is_an_error_listing_them_for_every_command(lw: Harness) -> None:
    ended = [lw.run_detached("true", adapter="plain") for _ in range(2)]
    for sid in ended:
        lw.wait_state(sid, "exited")
    for args in (("status", "true"), ("logs", "true"), ("kill", "true"), ("approve", "true"),
                 ("approve", "true:g1"), ("audit", "true"), ("set", "true", "limits.max_runtime=1h")):
        proc = lw.cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr == f"loopwarden: error: name 'true' matches {ended[0]}, {ended[1]}; use an id\n", args
    live = lw.run_detached(*SLEEPER, adapter="plain", name="true")  # an ended session's name is free again
    assert lw.status("true")["id"] == live  # ... and the live session that has it is the one meant


def test_approve_with_a_session_decides_its_only_gate_and_the_audit_names_it_session_colon_gate(lw: Harness) -> None:
    sid = lw.scenario("gate_request")
    gate = lw.wait_state(sid, "gated")["pending_gates"][0]
    proc = lw.cli("approve", sid)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sid}:{gate} approved\n"
    lw.wait_state(sid, "exited")
    again = lw.cli("approve", f"{sid}:{gate}")
    assert again.returncode == 2 and again.stderr.endswith(f"gate {sid}:{gate} was already approved by "
                                                           f"{lw.request('actions')[-1]['actor']}\n")
    bare = lw.cli("approve", gate)  # no live session has it pending, and it names no session
    assert bare.stderr == f"loopwarden: error: no pending gate or session '{gate}' (see 'loopwarden gates')\n"
    rows = [(a["target"], a["outcome"].split(":")[0]) for a in lw.request("actions", session=sid)
            if a["action"] == "approve"]
    assert rows == [(f"{sid}:{gate}", "done"), (f"{sid}:{gate}", "refused")]


def test_approve_with_a_session_without_one_pending_gate_says_why(lw: Harness) -> None:
    sid = lw.run_detached(*SLEEPER, adapter="plain")
    proc = lw.cli("deny", sid)
    assert proc.returncode == 2
    assert proc.stderr == (f"loopwarden: error: session {sid} has no pending gate; name one as SESSION:GATE "
                           "(see 'loopwarden gates')\n")
    [row] = [a for a in lw.request("actions", session=sid) if a["action"] == "deny"]
    assert row["outcome"].startswith("refused: session") and row["target"] == sid
