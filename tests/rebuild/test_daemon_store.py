"""A real daemon runs a native agent through repetition, validation failures, a gate approved, counters reset,
authority granted, limits set and a gate left open with a call held by it; the engine rebuilt from the daemon's
store file while it runs shows what the live session shows, and its open gate can be approved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopwarden.runtime.rebuild import RebuildError, rebuild
from loopwarden.runtime.store import Store
from loopwarden.supervisor.config import load_config
from loopwarden.supervisor.health import RUNNING, SessionHealth
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

_CLOCK_COUNTERS = ("runtime", "silence")  # read from each side's own clock


def _call(n: int, tool: str, **args: object) -> str:
    return json.dumps({"type": "tool_call", "tool": tool, "args": args, "call_id": f"c{n}"})


LINES = [
    '{"type":"hello","name":"player","protocol":1,"handshake":true}',
    *[_call(n, "sh", cmd="make") for n in range(1, 5)],  # a nudge, then blocks
    '{"type":"tool_result","output":"error: boom","is_error":true}',
    "not json",
    '{"type":"validation_error","message":"bad tool args"}',
    '{"type":"tool_result","output":"a.txt b.txt"}',
    "{broken",
    '{"type":"gate_request","reason":"deploy to prod?"}',
    _call(5, "deploy", env="prod"),  # held until g1 is approved
    *[_call(n, "sh", cmd="make test") for n in range(6, 9)],
    '{"type":"gate_request","reason":"drop the table?"}',
    _call(9, "psql", q="drop table t"),  # held by g2, left open
]


def view(snap: dict[str, Any]) -> dict[str, Any]:
    """What a session's snapshot says of its judgement."""
    return {"events": snap["events"], "pending_gates": snap["pending_gates"], "last_verdict": snap["last_verdict"],
            "interventions": snap["interventions"], "validation_failures": snap["validation_failures"],
            "counters": {k: v for k, v in snap["counters"].items() if k not in _CLOCK_COUNTERS}}


def rebuilt_view(health: SessionHealth) -> dict[str, Any]:
    last = health.last_verdict
    return view({"events": health.events, "pending_gates": [g.id for g in health.pending_gates()],
                 "last_verdict": json.loads(json.dumps(last.to_dict())) if last else None,
                 "interventions": health.interventions(), "validation_failures": health.validation_total,
                 "counters": {c.name: [c.value, c.limit] for c in health.counters()}})


def test_an_engine_rebuilt_from_a_running_daemons_store_shows_what_the_live_session_shows(
        lw: Harness, tmp_path: Path) -> None:
    script = tmp_path / "lines.jsonl"
    script.write_text("\n".join(LINES) + "\n")
    sid = lw.launch(PY, str(AGENTS / "line_player.py"), str(script))
    wait_for(lambda: lw.status(sid)["pending_gates"] == ["g1"] and lw.status(sid)["events"] == 12, 30,
             "the deploy call held by g1")
    lw.request("reset", session=sid, counter="repetition")
    lw.request("grant", session=sid, note="use the staging database")
    lw.request("set", session=sid, values={"repetition.max_identical_calls": "9", "limits.max_runtime": "2h"})
    lw.request("approve", gate=f"{sid}:g1", note="go ahead, carefully")
    live = wait_for(lambda: (s := lw.status(sid))["pending_gates"] == ["g2"] and s["events"] == len(LINES) and s,
                    30, "the psql call held by g2")
    config = load_config(env=lw.env)
    with Store.open(lw.paths.database) as store:
        def same() -> Any:
            try:
                done = rebuild(store, sid, config)
            except RebuildError:  # its row is written with its first published snapshot
                return None
            return done if rebuilt_view(done.health) == view(lw.status(sid)) else None

        done = wait_for(same, 30, "the rebuilt engine to show what the live session shows (once stored)")
    health = done.health
    assert view(lw.status(sid)) == view(live)  # the agent waits on g2: nothing moved meanwhile
    assert live["interventions"]["gate"] == 2 and live["interventions"]["nudge"] >= 2
    assert live["validation_failures"] == 3 and live["counters"]["identical_calls"] == [1, 9]
    assert done.events == len(LINES) and done.inputs == 4 and done.unreadable == 0
    assert health.config.repetition.max_identical_calls == 9 and health.config.limits.max_runtime == 7200.0
    assert health.gate("g1").status == "approved" and health.gate("g1").decided_by  # type: ignore[union-attr]
    health.decide("g2", True, health.runtime.now + 1, by="test")  # the open gate, under its id, can be approved
    assert health.state == RUNNING
