"""The fake ACP agent kept by the keeper (`[daemon] keep_agents = true`), through a real daemon: what a kept ACP
session's end records."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.runtime.session import group_alive
from tests.acp.conftest import on_acp
from tests.acp.helpers import start
from tests.keeper.test_durable import ended, kept  # noqa: F401 - a fixture, and a helper
from tests.support.daemon import Harness
from tests.support.processes import gone, process_with
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def kept_acp(kept: Harness, tmp_path: Path) -> Harness:  # noqa: F811
    """A daemon whose agents the keeper holds, with a work dir and the fake agent's report file (`on_acp`)."""
    return on_acp(kept, tmp_path)


def test_a_kept_agent_killed_mid_call_has_its_exit_code(kept_acp: Harness) -> None:
    """Killed while its call runs, the agent outlasts the adapter's stop grace (waited for, then given up) and is
    signalled: the exit the keeper reports is still the session's."""
    sid = start(kept_acp, "sleep", env={"FAKE_ACP_SLEEP": "600.55"})  # no other test's sleeper, run beside it
    sleeper = wait_for(lambda: process_with("sleep 600.55"), 20, "the call's sleeping process")
    kept_acp.request("kill", session=sid, note="test")
    snap = ended(kept_acp, [sid], timeout=30)[sid]
    assert (snap["state"], snap["termination"]) == ("terminated", "operator"), snap
    assert snap["exit_code"] in (-15, 143), snap  # SIGTERM after the grace
    assert wait_for(lambda: gone(sleeper.pid), 15, "the sleeper to be gone")
    assert not group_alive(snap["pid"])
