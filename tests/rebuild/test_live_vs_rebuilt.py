"""A live session's engine state equals the state rebuilt from its store after every step: events, repetition,
validation failures, gates opened, approved and left open, counters reset, authority granted, limits changed,
a tick's stall nudge, and calls held by an open gate."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

from loopwarden.runtime.rebuild import rebuild
from tests.rebuild.helpers import Recorded, differences


def call(tool: str, **args: object) -> str:
    return json.dumps({"type": "tool_call", "tool": tool, "args": args})


def result(output: str, *, error: bool = False) -> str:
    return json.dumps({"type": "tool_result", "output": output, "is_error": error})


def steps(rec: Recorded) -> list[Callable[[], object]]:
    """What happens to the session, one step at a time."""
    s = rec.session

    async def tick(after: float) -> None:
        rec.clock.now += after
        await s.ticker._due()

    return [
        lambda: rec.line('{"type":"hello","name":"t","protocol":1,"handshake":true}'),
        *[lambda: rec.line(call("sh", cmd="make")) for _ in range(4)],  # repetition: a nudge, then blocks
        lambda: rec.line(result("error: boom", error=True)),
        lambda: rec.line("not json"),
        lambda: rec.line('{"type":"validation_error","message":"bad tool args"}'),
        lambda: rec.line(result("a.txt b.txt")),  # valid: the failures in a row start again
        lambda: rec.line("{broken"),
        lambda: tick(45.0),  # silence past stall_timeout: the ticker's stall nudge
        lambda: rec.line('{"type":"gate_request","reason":"deploy to prod?"}'),
        lambda: rec.line(call("deploy", env="prod")),  # held by the open gate
        lambda: s.decide("g1", True, "alice", "go ahead, carefully"),
        lambda: s.reset("repetition"),
        lambda: rec.line(call("sh", cmd="make")),
        lambda: s.grant("use the staging database"),
        lambda: s.reconfigure(_set(s.config, {"repetition.max_identical_calls": 9, "limits.max_runtime": 7200.0})),
        *[lambda: rec.line(call("sh", cmd="make test")) for _ in range(3)],
        lambda: rec.line('{"type":"gate_request","reason":"drop the table?"}'),  # left open
        lambda: rec.line(call("psql", q="drop table t")),  # held
        lambda: rec.line('{"type":"test_result","passed":3,"failed":1,"failing":["t::a"]}'),
    ]


def _set(config, values):  # type: ignore[no-untyped-def]
    from loopwarden.runtime.inputs import with_values

    return with_values(config, values)


def test_the_state_rebuilt_from_the_store_equals_the_live_one_after_every_step(tmp_path: Path) -> None:
    async def go() -> None:
        rec = Recorded(tmp_path)
        try:
            for n, step in enumerate(steps(rec), 1):
                out = step()
                if asyncio.iscoroutine(out):
                    await out
                rebuilt, live = rec.rebuilt_state(), rec.live_state()
                assert rebuilt == live, f"after step {n}: {differences(rebuilt, live)}"
            health = rec.session.health
            assert [g.id for g in health.pending_gates()] == ["g2"]
            assert health.gate("g1").status == "approved" and health.gate("g1").decided_by == "alice"
            assert health.by_rule["stall"] == 1 and health.by_rule["repetition"] >= 2
            assert health.validation_total == 3 and health.config.limits.max_runtime == 7200.0
            assert len(rec.session.interventions.held) == 1  # the call made while g2 is open is still held
            counts = rebuild(rec.store(), "s1", rec.config)
            assert counts.inputs == 4 and counts.ticks == 1 and counts.unreadable == 0
        finally:
            rec.close()

    asyncio.run(go())
