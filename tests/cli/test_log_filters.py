"""`logs --since/--until/--grep/--rule/--follow` and `audit --session/--actor/--action/--since` on a real daemon."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for

PHASES = ("import os, sys, time\n"
          "print('early NEEDLE 1', flush=True); print('early other', flush=True)\n"
          "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
          "print('late needle 2', flush=True); print('late other', flush=True)\n"
          "while not os.path.exists(sys.argv[1] + '.end'): time.sleep(0.05)\n")


def printed(stdout: str) -> str:
    """The agent's lines of a `logs` output (`  1 │ text`), not the audit's (a RUN line quotes the command)."""
    return "\n".join(line for line in stdout.splitlines() if "│" in line)


def texts(lw: Harness, sid: str) -> list[str]:
    return [str(e["data"].get("text")) for e in lw.events(sid) if e["kind"] == "output"]


def two_phases(lw: Harness, tmp_path: Path) -> tuple[str, Path, float]:
    """A plain session that printed its early lines, a moment between them and its late ones, and its go file."""
    go = tmp_path / "go"
    sid = lw.run_detached(PY, "-c", PHASES, str(go), adapter="plain")
    wait_for(lambda: "early other" in texts(lw, sid), what="the early lines stored")
    early = max(e["ts"] for e in lw.request("logs", session=sid)["events"])
    wait_for(lambda: time.time() > early + 0.01, what="a moment after the early lines", every=0.01)
    middle = time.time()
    wait_for(lambda: time.time() > middle + 0.01, what="a moment before the late lines", every=0.01)
    go.touch()
    wait_for(lambda: "late other" in texts(lw, sid), what="the late lines stored")
    return sid, go, middle


def test_logs_grep_since_and_until_are_read_from_the_store(lw: Harness, tmp_path: Path) -> None:
    sid, go, middle = two_phases(lw, tmp_path)
    everything = printed(lw.cli("logs", sid).stdout)
    assert all(word in everything for word in ("early NEEDLE 1", "early other", "late needle 2", "late other"))
    grep = printed(lw.cli("logs", sid, "--grep", "needle").stdout)
    assert "early NEEDLE 1" in grep and "late needle 2" in grep and "other" not in grep
    at = datetime.fromtimestamp(middle).isoformat()  # local time, as a person types it
    since = printed(lw.cli("logs", sid, "--since", at).stdout)
    assert "late needle 2" in since and "late other" in since and "early" not in since
    until = printed(lw.cli("logs", sid, "--until", at).stdout)
    assert "early NEEDLE 1" in until and "late" not in until
    both = printed(lw.cli("logs", sid, "--since", "1h", "--grep", "LATE").stdout)
    assert "late needle 2" in both and "late other" in both and "early" not in both
    assert "early" not in lw.cli("logs", sid, "--json", "--since", at).stdout
    newest_early = printed(lw.cli("logs", sid, "--limit", "1", "--grep", "early").stdout)
    assert newest_early.endswith("│ early other")  # the newest that match, not a match among the newest
    (tmp_path / "go.end").touch()
    go.unlink()


def test_logs_rule_keeps_that_rules_verdicts(lw: Harness) -> None:
    sid = lw.scenario("repetition")
    wait_for(lambda: any(v["action"] == "block" for v in lw.verdicts(sid)), what="a block")
    lines = [line for line in lw.cli("logs", sid, "--rule", "repetition").stdout.splitlines()
             if "  session " not in line]  # the line that says how an ended session ended
    assert any(" NUDGE [repetition] " in line for line in lines) and any(" BLOCK [repetition] " in line
                                                                         for line in lines)
    assert all("[repetition]" in line for line in lines), lines  # its verdicts alone: no events, no actions
    assert [line for line in lw.cli("logs", sid, "--rule", "no_such_rule").stdout.splitlines()
            if "  session " not in line] == []
    lw.cli("kill", sid)


def test_logs_follow_with_grep_prints_a_new_matching_event_and_ctrl_c_exits_cleanly(lw: Harness,
                                                                                    tmp_path: Path) -> None:
    go = tmp_path / "go"
    sid = lw.run_detached(PY, "-c", PHASES, str(go), adapter="plain")
    wait_for(lambda: "early other" in texts(lw, sid), what="the early lines stored")
    follower = subprocess.Popen([PY, "-m", "loopwarden", "logs", "-f", sid, "--grep", "needle"], env=lw.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(follower.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: any("early NEEDLE 1" in line for line in seen), what="the stored match printed")
        go.touch()
        wait_for(lambda: any("late needle 2" in line for line in seen), what="the new match, followed")
        wait_for(lambda: "late other" in texts(lw, sid), what="the line that does not match, stored")
        follower.send_signal(signal.SIGINT)
        assert follower.wait(timeout=30) == 0
        reader.join(timeout=30)
        assert not any("other" in line for line in seen if "│" in line)
        assert "Traceback" not in (follower.stderr.read() if follower.stderr else "")
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
        (tmp_path / "go.end").touch()


@pytest.mark.parametrize(("args", "said"), [
    (("--since", "yesterday"), "--since 'yesterday': not a duration or a time"),
    (("--until", "10x"), "--until '10x': not a duration or a time"),
    (("--since", "10m", "--until", "1h"), "--until '1h' is before --since '10m'"),
    (("--follow", "--until", "5m"), "--until ends the records and --follow waits for new ones"),
])
def test_bad_filter_values_are_one_line_errors(lw: Harness, args: tuple[str, ...], said: str) -> None:
    proc = lw.cli("logs", "s1", *args)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"loopwarden: error: {said}") and proc.stderr.count("\n") == 1, proc.stderr
    assert lw.cli("audit", "--since", "soon").stderr.count("\n") == 1


def test_audit_filters_by_session_action_actor_and_since(lw: Harness) -> None:
    first = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    second = lw.run_detached(PY, "-c", "import time; time.sleep(60)", adapter="plain")
    lw.wait_state(first, "running")
    lw.wait_state(second, "running")
    assert lw.cli("pause", first).returncode == 0
    assert lw.cli("resume", first).returncode == 0
    assert lw.cli("kill", second).returncode == 0

    def rows(*args: str) -> list[str]:
        proc = lw.cli("audit", *args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    kills = rows("--action", "kill")
    assert len(kills) == 1 and f" {second} " in kills[0]
    assert {line.split()[3] for line in rows("--session", first)} == {"run", "pause", "resume"}
    assert {line.split()[3] for line in rows(first)} == {"run", "pause", "resume"}  # the argument still works
    total = len(rows())
    assert total == 5
    user = lw.request("actions")[0]["user"]
    assert len(rows("--actor", user.upper())) == total
    assert rows("--actor", "nobody-of-that-name") == ["no audit entries match"]
    assert len(rows("--since", "1h")) == total
    assert len(rows("--since", "1h", "--action", "pause", "--session", first)) == 1
    assert rows("--since", "2999-01-01") == ["no audit entries match"]
    lw.cli("kill", first)
