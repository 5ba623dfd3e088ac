"""Rebuilding a long session reads the store a page at a time: its memory is what the engine keeps, whatever the
number of events."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

from loopwarden.runtime.rebuild import rebuild
from loopwarden.runtime.store import Store
from loopwarden.supervisor.config import load_config
from tests.rebuild.helpers import store_flood


def peak_while_rebuilding(store: Store, sid: str, events: int) -> int:
    config = load_config(env={})
    gc.collect()
    tracemalloc.start()
    try:
        done = rebuild(store, sid, config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert done.events == events and done.health.state == "running"
    return peak


def test_rebuilding_ten_times_the_events_takes_about_the_same_memory(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store.db") as store:
        store_flood(store, "s1", 6_000)
        store_flood(store, "s2", 60_000)
        small, large = peak_while_rebuilding(store, "s1", 6_000), peak_while_rebuilding(store, "s2", 60_000)
    assert large < small * 1.5, (small, large)
    assert large < 8 << 20  # a few pages of rows and the engine's windows
