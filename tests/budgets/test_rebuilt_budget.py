"""A session held by its budget and by the daemon's, then released, is rebuilt from its store exactly as it ran:
the same gates decided by the same hands, the same calls held; the daemon's real record path and SQLite store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from loopwarden.runtime.inputs import with_values
from loopwarden.supervisor.config import load_config
from tests.rebuild.helpers import Recorded, differences


def call(n: int) -> str:
    return json.dumps({"type": "tool_call", "tool": "work", "args": {"i": n}, "call_id": f"c{n}"})


def usage(cost: float) -> str:
    return json.dumps({"type": "usage", "input_tokens": 10, "output_tokens": 1, "cost_usd": cost})


def steps(rec: Recorded) -> list[Callable[[], object]]:
    s = rec.session
    return [
        lambda: rec.line('{"type":"hello","name":"t","protocol":1,"handshake":true}'),
        lambda: rec.line(call(1)),
        lambda: rec.line(usage(0.6)),  # $0.60 of $0.50: reached
        lambda: rec.line(call(2)),  # held behind g1
        lambda: s.reconfigure(with_values(s.config, {"limits.max_cost_usd": 2.0})),  # raised: g1 released
        lambda: s.outside_budgets({"day": {"used": 9.5, "limit": 9.0}}),  # the daemon's day budget reached
        lambda: rec.line(call(3)),  # held behind g2
        lambda: s.decide("g2", True, "alice", None),  # one call through by hand
        lambda: rec.line(call(4)),  # held behind g3
        lambda: s.outside_budgets({}),  # the day budget raised: g3 released
        lambda: rec.line(call(5)),
    ]


def test_budget_holds_and_releases_are_rebuilt_exactly(tmp_path: Path) -> None:
    async def go() -> None:
        rec = Recorded(tmp_path, load_config(env={}, sets=["limits.max_cost_usd=0.5"]))
        try:
            for n, step in enumerate(steps(rec), 1):
                out = step()
                if asyncio.iscoroutine(out):
                    await out
                rebuilt, live = rec.rebuilt_state(), rec.live_state()
                assert rebuilt == live, f"after step {n}: {differences(rebuilt, live)}"
            health = rec.session.health
            decided = [(g.id, g.rule, g.status, g.decided_by) for g in health.all_gates()]
            assert decided == [("g1", "budget", "approved", "budget"), ("g2", "budget", "approved", "alice"),
                               ("g3", "budget", "approved", "budget")]
            assert health.state == "running" and not rec.session.interventions.held
        finally:
            rec.close()

    asyncio.run(go())
