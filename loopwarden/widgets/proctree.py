"""The agent's processes (the daemon's `processes` op) as a tree, relabelled in place when only numbers move."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

QUIET_STATUSES = ("running", "sleeping", "disk-sleep", "idle")


def process_label(row: dict[str, Any]) -> Text:
    status = str(row.get("status") or "")
    return Text.assemble((str(row.get("pid")), "bold"), f" {row.get('name') or '?'}",
                         (f" {row.get('cpu_percent') or 0:.0f}% {(row.get('rss') or 0) / (1 << 20):.0f}M", "cyan"),
                         ("" if status in QUIET_STATUSES else f" {status}", "yellow"),
                         (f"  {row.get('cmdline') or ''}", "dim"))


class ProcessTree(Tree[int]):
    """Processes nested by parent pid; a process whose parent is not in the list starts a branch of its own."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("processes", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._shape: list[tuple[int, int]] | None = None
        self._by_pid: dict[int, TreeNode[int]] = {}

    def show(self, rows: list[dict[str, Any]]) -> None:
        shape = [(int(r["pid"]), int(r.get("ppid") or 0)) for r in rows]
        if shape == self._shape:
            for row in rows:
                self._by_pid[int(row["pid"])].set_label(process_label(row))
            return
        self._shape = shape
        self.clear()
        self._by_pid = {}
        pids = {pid for pid, _ in shape}
        for row in rows:  # the daemon lists parents before their children
            pid, ppid = int(row["pid"]), int(row.get("ppid") or 0)
            parent = self._by_pid.get(ppid) if ppid in pids else None
            self._by_pid[pid] = (parent or self.root).add(process_label(row), data=pid, expand=True,
                                                         allow_expand=False)
        if not rows:
            self.root.add_leaf(Text("no processes (the session has ended)", style="dim"))
