"""Ended sessions in the daemon's memory: the newest ones' snapshots, bounded by bytes.

The store holds every session; this keeps `list`, `status` and the console fast for the
sessions people look at, without the daemon growing with the size of its history.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import orjson


class EndedSessions:
    """Snapshots of ended sessions, oldest first; the oldest leave once over `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bytes = 0
        self._snaps: OrderedDict[str, tuple[dict[str, Any], int]] = OrderedDict()

    def add(self, sid: str, snapshot: dict[str, Any]) -> None:
        size = len(orjson.dumps(snapshot, default=str))
        self.discard(sid)
        self._snaps[sid] = (snapshot, size)
        self.bytes += size
        while self.bytes > self.limit and len(self._snaps) > 1:
            _, (_, old) = self._snaps.popitem(last=False)
            self.bytes -= old

    def replace(self, sid: str, snapshot: dict[str, Any]) -> None:
        """A newer snapshot of a session already here, in its place (it was not newly ended)."""
        found = self._snaps.get(sid)
        if found is None:
            return
        size = len(orjson.dumps(snapshot, default=str))
        self._snaps[sid] = (snapshot, size)
        self.bytes += size - found[1]

    def discard(self, sid: str) -> None:
        found = self._snaps.pop(sid, None)
        if found is not None:
            self.bytes -= found[1]

    def get(self, sid: str) -> dict[str, Any] | None:
        found = self._snaps.get(sid)
        return found[0] if found else None

    def named(self, name: str) -> list[str]:
        """The ended sessions with this name, oldest first."""
        return [sid for sid, (snap, _) in self._snaps.items() if snap.get("name") == name]

    def __contains__(self, sid: object) -> bool:
        return sid in self._snaps

    def __iter__(self) -> Iterator[str]:
        return iter(self._snaps)

    def __len__(self) -> int:
        return len(self._snaps)

    @property
    def oldest(self) -> dict[str, Any] | None:
        return next(iter(self._snaps.values()))[0] if self._snaps else None
