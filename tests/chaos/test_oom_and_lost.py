"""Survival (issue 29, item 6): under memory pressure the kernel picks agents before the daemon and its
guardian; after a SIGKILL of the daemon, each session it lost says how it ended (killed by the guardian,
found gone, still running?) and what is known of the events it wrote that nobody judged."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from loopwarden.widgets.session_table import ended_text
from tests.chaos.test_process_hygiene import contained, guardian_of  # noqa: F401 - a fixture, and a helper
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.processes import gone
from tests.support.waiting import wait_for

STOP_AND_GO = str(AGENTS / "stop_and_go.py")
IGNORE_SIGTERM = str(AGENTS / "ignore_sigterm.py")
UNREAD = 4000  # bytes an agent writes while its daemon is stopped: never read


def oom_score_adj(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def printed(lw: Harness, sid: str, text: str) -> dict[str, Any] | None:
    return next((e for e in lw.events(sid) if str(e["data"].get("text", "")).startswith(text)), None)


def test_a_launched_agent_and_its_children_are_likelier_oom_victims_than_the_daemon_and_its_guardian(
        contained: Harness) -> None:  # noqa: F811 - the fixture imported above
    lw = contained
    assert lw.daemon is not None
    sid = lw.launch(PY, "-c", "import subprocess, time; subprocess.Popen(['sleep', '60']); print('ok', flush=True);"
                    " time.sleep(60)", adapter="plain")
    wait_for(lambda: printed(lw, sid, "ok"), what="the agent to start its child")
    agent = psutil.Process(lw.status(sid)["pid"])
    [child] = agent.children()
    guardian = guardian_of(lw.daemon.pid)
    assert guardian is not None
    daemon_score, guardian_score = oom_score_adj(lw.daemon.pid), oom_score_adj(guardian.pid)
    agent_score, child_score = oom_score_adj(agent.pid), oom_score_adj(child.pid)
    assert agent_score == child_score == min(1000, daemon_score + 500) > max(daemon_score, guardian_score)
    assert lw.request("ping")["oom_score_adj"] == {"daemon": daemon_score, "agents": agent_score}
    assert f"agents start with oom_score_adj {agent_score}" in (lw.home / "daemon.out").read_text()
    lw.request("kill", session=sid)


def lost_of(lw: Harness, sids: list[str]) -> dict[str, dict[str, Any]] | None:
    """Every session's snapshot once each says how it ended (not while its guardian is still at work)."""
    snaps = {sid: lw.status(sid) for sid in sids}
    done = all((s.get("lost") or {}).get("how") not in (None, "pending") for s in snaps.values())
    return snaps if done else None


@pytest.mark.unkept
def test_a_sigkilled_daemons_sessions_say_how_they_ended_and_what_went_unjudged(lw: Harness, tmp_path: Path) -> None:
    go, written = tmp_path / "go", tmp_path / "written"
    writer = lw.launch(PY, STOP_AND_GO, str(go), "write", str(UNREAD), str(written), adapter="plain", name="writer")
    stubborn = lw.launch(PY, IGNORE_SIGTERM, name="stubborn")  # the guardian's SIGTERM is not enough
    quitter = lw.launch(PY, STOP_AND_GO, str(go), "exit", adapter="plain", name="quitter")
    victim = subprocess.Popen([PY, "-c", "import time; time.sleep(120)"])
    try:
        adopted = lw.cli("adopt", str(victim.pid)).stdout.split()[0]  # no guardian stops an adopted process
        sids = [writer, stubborn, quitter, adopted]
        wait_for(lambda: set(sids) <= {s["id"] for s in lw.request("list", stored=True)},
                 what="the sessions' rows in the store")  # (a session unknown to the store is not marked lost)
        ready = wait_for(lambda: printed(lw, writer, "ready"), what="the writer's first line")
        wait_for(lambda: printed(lw, quitter, "ready") and printed(lw, stubborn, "grandchild"), what="the agents")
        quitter_pid = lw.status(quitter)["pid"]
        assert lw.daemon is not None
        daemon = lw.daemon
        os.kill(daemon.pid, signal.SIGSTOP)  # a hung daemon: what its agents do now is never read
        try:
            go.touch()
            wait_for(written.exists, what=f"the writer's {UNREAD} bytes")
            wait_for(lambda: gone(quitter_pid), what="the quitter to exit")
            killed_at = time.time()
        finally:
            os.kill(daemon.pid, signal.SIGKILL)
        daemon.wait(10)
        lw.start()
        snaps = wait_for(lambda: lost_of(lw, sids), timeout=30, what="every lost session to say how it ended")
        w, s, q, a = (snaps[sid]["lost"] for sid in sids)

        assert (w["how"], w["processes"], w["survivors"], w["unread_stdout"]) == ("guardian", 1, 0, UNREAD)
        assert killed_at <= w["daemon_died_at"] <= w["term_at"] < killed_at + 2
        assert w["last_event"] == {"seq": ready["seq"], "ts": ready["ts"]}
        assert w["unjudged_window"] == round(w["term_at"] - ready["ts"], 3) > 0
        text = snaps[writer]["termination_text"]
        assert text.startswith("killed by the guardian when the daemon died at ") and "SIGKILL" not in text
        assert (f"its last stored event: #{ready['seq']} at " in text
                and f"; {UNREAD:,} bytes it wrote to stdout were never read" in text)

        assert (s["how"], s["processes"], s["sigkill"], s["survivors"]) == ("guardian", 3, 3, 0)
        assert s["kill_at"] - s["term_at"] >= 4.5  # the guardian's grace, then SIGKILL
        assert "SIGTERM to 3 processes at " in snaps[stubborn]["termination_text"]
        assert ", SIGKILL to 3 at " in snaps[stubborn]["termination_text"]

        assert (q["how"], q["processes"]) == ("gone", 0) and q["daemon_died_at"] == w["daemon_died_at"]
        assert snaps[quitter]["termination_text"].startswith(
            "found gone by the guardian when the daemon died at ") and "(its process had exited)" in \
            snaps[quitter]["termination_text"]

        assert (a["how"], a["pid"], a["pid_alive"]) == ("running", victim.pid, True)
        assert snaps[adopted]["termination_text"].startswith(
            f"still running? (not seen by the guardian; a process with its pid {victim.pid} exists)")

        listed = {line.split()[0]: line for line in lw.cli("ls").stdout.splitlines()[1:]}
        assert "lost: killed by guardian" in listed[writer] and "lost: killed by guardian" in listed[stubborn]
        assert "lost: found gone" in listed[quitter] and "lost: still running?" in listed[adopted]
        assert [ended_text(snaps[sid]).plain for sid in sids] == [
            "killed by guardian", "killed by guardian", "found gone", "still running?"]
        assert f"ended: {text}" in lw.cli("explain", writer).stdout
        assert f"ended: lost: {text}" in lw.cli("status", writer).stdout
        assert not list(lw.paths.data.glob(f"guardian-{daemon.pid}.*.json"))  # settled: the report is gone

        assert lw.cli("stop-daemon").returncode == 0
        wait_for(lambda: not list(lw.paths.data.glob("guardian-*.json")), timeout=10,
                 what="the guardian of a clean stop, with nothing to report, to remove its file")
        lw.start()  # and it stays said, from the store
        assert lw.status(writer)["termination_text"] == text and lw.status(quitter)["lost"] == q
    finally:
        victim.kill()
        victim.wait()
