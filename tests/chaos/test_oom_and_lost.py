"""Survival (issue 29, item 6): under memory pressure the kernel picks agents before the daemon and its
guardian."""

from __future__ import annotations

from pathlib import Path

import psutil

from tests.chaos.test_process_hygiene import contained, guardian_of  # noqa: F401 - a fixture, and a helper
from tests.live.live_harness import PY, Harness, wait_for


def oom_score_adj(pid: int) -> int:
    return int(Path(f"/proc/{pid}/oom_score_adj").read_text())


def printed(lw: Harness, sid: str, text: str) -> dict | None:
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
