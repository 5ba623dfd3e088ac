"""Which rows an operator marked for an action on many: toggled one by one, by range, or all shown at once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

MARK = "✓"  # drawn in the row's marker place (the ID column's second character in the sessions table)


class Selection:
    """The marked keys (session ids or gate refs), in no order; the table's order is applied when they are read.

    `anchor` is the last key toggled: a range (V) runs from it to the cursor.
    """

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.anchor: str | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: object) -> bool:
        return key in self.keys

    def toggle(self, key: str) -> bool:
        """Mark `key`, or unmark it when it was marked; True when it is marked now."""
        self.anchor = key
        if key in self.keys:
            self.keys.discard(key)
            return False
        self.keys.add(key)
        return True

    def add(self, keys: Iterable[str]) -> None:
        self.keys.update(keys)

    def extend(self, order: Sequence[str], cursor: str) -> list[str]:
        """Mark every key from the anchor to `cursor` in `order` (the cursor's alone without an anchor shown)."""
        end = order.index(cursor)
        start = order.index(self.anchor) if self.anchor in order else end
        low, high = sorted((start, end))
        added = list(order[low:high + 1])
        self.keys.update(added)
        self.anchor = cursor
        return added

    def step(self, order: Sequence[str], index: int, step: int) -> list[str]:
        """Mark the key at `index` of `order` and the one `step` away (where there is one); the keys marked."""
        after = max(0, min(index + step, len(order) - 1))
        marked = [order[index], order[after]]
        self.keys.update(marked)
        self.anchor = order[after]
        return marked

    def clear(self) -> set[str]:
        """Unmark all; the keys that were marked."""
        was, self.keys, self.anchor = self.keys, set(), None
        return was

    def keep_only(self, present: Iterable[str]) -> set[str]:
        """Forget the keys no longer shown (filtered out, decided, gone); the keys dropped."""
        shown = set(present)
        dropped = self.keys - shown
        self.keys &= shown
        if self.anchor not in shown:
            self.anchor = None
        return dropped

    def ordered(self, order: Sequence[str]) -> list[str]:
        """The marked keys in the table's order."""
        return [key for key in order if key in self.keys]
