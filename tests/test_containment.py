"""Finding a session's processes (runtime/containment.py): what many sessions ending at once cost."""

from __future__ import annotations

import anyio
import pytest

from loopwarden.runtime import containment
from loopwarden.runtime.procfs import ProcTable

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_sessions_ending_together_share_one_scan_of_proc(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = []
    real = ProcTable.scan

    def counted() -> ProcTable:
        scans.append(1)
        return real()

    monkeypatch.setattr(ProcTable, "scan", staticmethod(counted))
    monkeypatch.setattr(containment, "_last_scan", (0.0, ProcTable()))
    tables = []

    async def one() -> None:
        tables.append(await containment.fresh_table())

    async with anyio.create_task_group() as tg:
        for _ in range(50):
            tg.start_soon(one)
    assert len(scans) == 1 and len(tables) == 50 and all(t is tables[0] for t in tables)
    assert tables[0].children  # a real scan of this machine's /proc
