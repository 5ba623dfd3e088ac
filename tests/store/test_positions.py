"""A kept agent's stored position: where its stored output ends, and what its adapter knew there."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwarden.runtime import store as store_mod
from loopwarden.runtime.store import Batch, Store


def position(sid: str, judged: int, memory: object) -> dict[str, object]:
    return {"session_id": sid, "out_offset": 10 * judged, "out_seq": judged, "judged_seq": judged,
            "err_offset": 0, "memory": memory}


def test_the_last_position_and_its_adapter_memory_come_back(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store.db") as s:
        s.write(Batch(positions=[position("s1", 3, {"thread": "t-1", "pending": {"3": "req-7"}})]))
        s.write(Batch(positions=[position("s1", 5, {"thread": "t-1", "pending": {}, "ids": 4})]))
        assert s.position("s1") == (50, 5, 5, 0)
        assert s.adapter_memory("s1") == (5, {"thread": "t-1", "pending": {}, "ids": 4})


def test_a_position_without_memory_reads_none(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store.db") as s:
        s.write(Batch(positions=[position("s1", 2, None)]))
        assert s.adapter_memory("s1") is None
        assert s.adapter_memory("unknown") is None


def test_a_memory_too_large_is_stored_as_a_marker_not_refused(tmp_path: Path) -> None:
    """The store's caps apply: the row is still stored (its position counts), the memory reads as a marker that
    recall ignores."""
    with Store.open(tmp_path / "store.db", text_cap=100, json_cap=1000) as s:
        s.write(Batch(positions=[position("s1", 9, {"inputs": ["x" * 400] * 10})]))
        assert s.position("s1")[:2] == (90, 9)
        found = s.adapter_memory("s1")
        assert found is not None and found[0] == 9 and "inputs" not in found[1]


def test_a_store_before_adapter_memory_is_migrated_keeping_its_positions(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "store.db"
    migrations = store_mod.MIGRATIONS
    monkeypatch.setattr(store_mod, "MIGRATIONS", migrations[:6])
    with Store.open(path) as s:
        s.write(Batch(positions=[{"session_id": "s1", "out_offset": 70, "out_seq": 7, "judged_seq": 7,
                                  "err_offset": 3}]))
    monkeypatch.setattr(store_mod, "MIGRATIONS", migrations)
    with Store.open(path) as s:
        assert s.position("s1") == (70, 7, 7, 3)
        assert s.adapter_memory("s1") is None
