"""Grouping the sessions table: by project (working directory), host, agent, state or tag."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from rich.text import Text

from ..supervisor.visible import visible

GROUPS = ("project", "host", "agent", "state", "tag")  # G cycles through these, then no grouping
GROUP_COLUMN = ("group", "GROUP")
GROUP_CHARS = 30  # a long directory keeps its end, where the project's name is
NONE = {"project": "(no directory)", "agent": "(unknown)", "tag": "(untagged)"}


def project_of(cwd: object) -> str:
    """A working directory as a person reads it: ~ for the home directory."""
    if not isinstance(cwd, str) or not cwd:
        return ""
    home = os.path.expanduser("~")
    return "~" + cwd[len(home):] if home != "/" and (cwd == home or cwd.startswith(home + "/")) else cwd


def group_of(snap: dict[str, Any], by: str) -> str:
    """The group a session is in (a session with several tags is grouped by all of them, as one label)."""
    if by == "project":
        value = project_of(snap.get("cwd"))
    elif by == "host":
        value = str(snap.get("host") or "local")
    elif by == "agent":
        value = str(snap.get("agent") or snap.get("adapter") or "")
    elif by == "state":
        value = str(snap.get("state") or "")
    else:
        value = ",".join(sorted(snap.get("tags") or []))
    return visible(value) or NONE.get(by, "-")


def group_labels(order: Sequence[str], groups: dict[str, str]) -> dict[str, Text]:
    """The GROUP cell of each group's first row in `order`: its name and how many rows it has; others blank."""
    counts = Counter(groups[sid] for sid in order)
    labels: dict[str, Text] = {}
    previous = None
    for sid in order:
        group = groups[sid]
        if group != previous:
            name = group if len(group) <= GROUP_CHARS else "…" + group[-GROUP_CHARS + 1:]
            labels[sid] = Text.assemble((f"▸ {name} ", "bold"), (f"({counts[group]})", "dim"))
        previous = group
    return labels


class Sized(Protocol):
    content_width: int


def next_group(current: str | None) -> str | None:
    """The grouping after `current` in GROUPS; after the last, none."""
    order: list[str | None] = [None, *GROUPS]
    return order[(order.index(current) + 1) % len(order) if current in order else 0]


class Grouping:
    """How the table's rows are grouped now: each row's group, and the GROUP cell of each group's first row."""

    def __init__(self) -> None:
        self.by: str | None = None  # a key of GROUPS, or None: not grouped
        self.groups: dict[str, str] = {}
        self.labels: dict[str, Text] = {}

    def arrange(self, order: list[str], snapshots: dict[str, dict[str, Any]],
                key: Callable[[str], Any]) -> bool:
        """Put the rows of each group together in `order` (a stable sort: each group keeps the order inside it,
        groups ordered by `key` of their name) and label them; True when a row's group or label changed."""
        before = (self.groups, self.labels)
        if self.by is None:
            self.groups, self.labels = {}, {}
        else:
            self.groups = {sid: group_of(snapshots.get(sid) or {}, self.by) for sid in order}
            order.sort(key=lambda sid: key(self.groups[sid]))
            self.labels = group_labels(order, self.groups)
        return (self.groups, {k: v.plain for k, v in self.labels.items()}) != \
            (before[0], {k: v.plain for k, v in before[1].items()})

    def width(self) -> int:
        return max([0] + [label.cell_len for label in self.labels.values()])

    def widen(self, column: Sized) -> bool:
        """Make the GROUP column as wide as its widest label (it never narrows until a rebuild); True if it grew."""
        if self.width() <= column.content_width:
            return False
        column.content_width = self.width()
        return True
