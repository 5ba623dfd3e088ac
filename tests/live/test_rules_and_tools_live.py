"""Control on a real daemon: a tool exempt from the repetition rules is never blocked, and `loopwarden set`
takes the exemption away at once (the agent is tests/agents/paced_caller.py: `ls .` on demand)."""

from __future__ import annotations

from pathlib import Path

from tests.live.helpers import verdict_on_call
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY


def test_an_exempt_tool_is_allowed_every_repeat_until_set_takes_the_exemption_away(lw: Harness,
                                                                                 tmp_path: Path) -> None:
    sid = lw.run_detached(PY, str(AGENTS / "paced_caller.py"), str(tmp_path), sets=("tools.exempt=ls",))
    assert [verdict_on_call(tmp_path, n) for n in range(1, 9)] == ["allow"] * 8  # the default blocks the 6th
    proc = lw.cli("set", sid, "tools.exempt=")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{sid}: tools.exempt ls -> (none)\n"
    # an exempt call was invisible to the rule: the streak starts with the first call judged
    assert [verdict_on_call(tmp_path, n) for n in range(9, 15)] == ["allow"] * 5 + ["block"]
    lw.cli("kill", sid)
