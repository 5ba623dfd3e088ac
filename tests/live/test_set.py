"""`loopwarden set`: a running session's limits changed, taken by the engine at once, and audited."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.live.helpers import verdict_on_call
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

SLEEPER = (PY, "-c", "import time; time.sleep(120)")


def test_raising_max_runtime_keeps_running_a_session_past_its_old_limit(lw: Harness) -> None:
    # the old limit leaves `set` (a CLI process) 15 s to get there: 6 s was too short on a machine at load 50
    sid = lw.run_detached(*SLEEPER, adapter="plain", sets=("limits.max_runtime=15s",))
    lw.wait_state(sid, "running")
    proc = lw.cli("set", sid, "limits.max_runtime=2h")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sid}: limits.max_runtime 15s -> 2h\n"
    snap = wait_for(lambda: (s := lw.status(sid))["runtime"] > 16 and s, timeout=40, what="the session to outlive 15 s")
    assert snap["state"] == "running" and snap["max_runtime"] == 7200.0


def test_lowering_max_runtime_ends_the_session_at_once(lw: Harness) -> None:
    sid = lw.run_detached(*SLEEPER, adapter="plain")  # the default limit: 4 h
    lw.wait_state(sid, "running")
    reply = lw.request("set", session=sid, values={"limits.max_runtime": "1s"})
    assert reply == {"session": sid, "changed": {"limits.max_runtime": [14400.0, 1.0]}}
    snap = lw.wait_state(sid, "terminated", timeout=15)  # the ticker was asleep for up to a minute
    assert snap["termination"] == "max_runtime"


def test_a_lower_repetition_threshold_applies_to_the_next_call(lw: Harness, tmp_path: Path) -> None:
    sid = lw.run_detached(PY, str(AGENTS / "paced_caller.py"), str(tmp_path))
    assert [verdict_on_call(tmp_path, n) for n in (1, 2, 3)] == ["allow"] * 3  # the default allows 5 identical calls
    proc = lw.cli("set", sid, "repetition.max_identical_calls=3", "repetition.max_blocks=9")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{sid}: repetition.max_identical_calls 5 -> 3",
                                        f"{sid}: repetition.max_blocks 3 -> 9"]
    assert verdict_on_call(tmp_path, 4) == "block"
    counters = lw.status(sid)["counters"]  # name -> [value, limit]
    assert counters["identical_calls"][1] == 3 and counters["blocks"] == [1, 9]


def test_a_change_is_audited_with_its_old_and_new_values(lw: Harness) -> None:
    sid = lw.run_detached(*SLEEPER, adapter="plain")
    assert lw.cli("set", sid, "limits.stall_timeout=2m", "gates.on_timeout=approve").returncode == 0
    again = lw.cli("set", sid, "limits.stall_timeout=120s")
    assert again.returncode == 0 and again.stdout == f"{sid}: nothing changed (the values were already in force)\n"
    rows = [(a["action"], a["target"], a["note"], a["outcome"]) for a in lw.request("actions", session=sid)
            if a["action"] == "set"]
    assert rows == [("set", "limits.stall_timeout,gates.on_timeout",
                     "limits.stall_timeout: 30s -> 2m; gates.on_timeout: deny -> approve", "done"),
                    ("set", "limits.stall_timeout", "no change", "done")]


def test_bad_keys_and_values_are_one_line_errors_and_change_nothing(lw: Harness) -> None:
    sid = lw.run_detached(*SLEEPER, adapter="plain")
    cases = {
        ("limits.max_runtim=2h",): "set: unknown key 'limits.max_runtim' (did you mean limits.max_runtime?)",
        ("limits.max_runtime=soon",): "limits.max_runtime: 'soon' is not valid; it accepts a duration such as "
                                      "30s, 5m or 4h",
        ("spill.threshold_chars=10",): "set: spill.threshold_chars cannot change on a running session (it shaped "
                                       "how the session started); give it to 'loopwarden run --set' instead",
        ("limits.max_runtime",): "set 'limits.max_runtime': expected section.key=value, e.g. "
                                 "limits.max_runtime=30m",
    }
    for args, message in cases.items():
        proc = lw.cli("set", sid, *args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f"loopwarden: error: {message}\n"
    assert lw.status(sid)["max_runtime"] == 14400.0
    refused = [a for a in lw.request("actions", session=sid) if a["action"] == "set"]  # the local error is not
    assert [a["outcome"] for a in refused] == [f"refused: {m}" for m in list(cases.values())[:3]]  # sent


def test_an_ended_session_cannot_be_set(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "pass", adapter="plain")
    lw.wait_state(sid, "exited")
    proc = lw.cli("set", sid, "limits.max_runtime=2h")
    assert proc.returncode == 2
    assert proc.stderr == f"loopwarden: error: session {sid} has ended; only its history remains\n"


def test_an_adopted_process_takes_a_lower_max_runtime_too(lw: Harness) -> None:
    victim = subprocess.Popen(list(SLEEPER))
    try:
        proc = lw.cli("adopt", str(victim.pid), "--set", "limits.kill_grace=0.2s")
        assert proc.returncode == 0, proc.stderr
        sid = proc.stdout.strip()
        reply = lw.request("set", session=sid, values={"limits.max_runtime": 1})
        assert reply["changed"] == {"limits.max_runtime": [14400.0, 1.0]}
        assert lw.wait_state(sid, "terminated", timeout=15)["termination"] == "max_runtime"
        assert victim.wait(15) < 0  # ended by loopwarden's signal
    finally:
        victim.kill()
        victim.wait()
