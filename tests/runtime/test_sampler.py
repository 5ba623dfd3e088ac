"""The daemon's sampler round (runtime/processes.py `sample_round`): a round over many sessions lets the event loop run
other tasks between them, and passes over a session that began to stop meanwhile."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from loopwarden.runtime import processes
from loopwarden.runtime.procfs import ProcTable

pytestmark = pytest.mark.anyio


class Loop:
    """Counts the turns another task gets while the round runs."""

    def __init__(self) -> None:
        self.turns = 0
        self.running = True

    async def spin(self) -> None:
        while self.running:
            await anyio.lowlevel.checkpoint()
            self.turns += 1


class Sampled:
    """A session as the sampler sees it (final, stopping, observe, sample), noting the other task's turns."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.final = False
        self.stopping = False
        self.seen_at: int | None = None
        self.tables: list[ProcTable] = []

    def observe(self, table: ProcTable) -> None:
        self.seen_at = self.loop.turns
        self.tables.append(table)

    async def sample(self, children: dict[int, list[int]] | None = None) -> None:
        assert children is self.tables[-1].children


async def _round(sessions: list[Any], loop: Loop) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(loop.spin)
        await anyio.lowlevel.checkpoint()
        await processes.sample_round(sessions)
        loop.running = False


async def test_a_round_over_many_sessions_lets_other_tasks_run_between_them() -> None:
    loop = Loop()
    sessions = [Sampled(loop) for _ in range(5 * processes.SAMPLE_SLICE)]
    await _round(sessions, loop)  # type: ignore[arg-type]
    seen = [s.seen_at for s in sessions]
    assert None not in seen
    assert len({id(t) for s in sessions for t in s.tables}) == 1  # one pass over /proc for all
    assert len(set(seen)) >= 5  # the other task ran between the slices (before: all in one turn)
    assert seen == sorted(seen)


async def test_a_session_that_began_to_stop_during_a_round_is_passed_over() -> None:
    loop = Loop()
    sessions = [Sampled(loop) for _ in range(3 * processes.SAMPLE_SLICE)]
    late = sessions[-1]

    async def stop_late() -> None:
        while sessions[0].seen_at is None:
            await anyio.lowlevel.checkpoint()
        late.stopping = True  # its end looks for its processes itself

    async with anyio.create_task_group() as tg:
        tg.start_soon(stop_late)
        await _round(sessions, loop)  # type: ignore[arg-type]
    assert sessions[0].seen_at is not None and late.seen_at is None
