"""What a session's calls changed, read from the store: the `diff` op's "calls" source, and the change a gate's call
would make.

A session without a worktree still shows the changes its calls made where its protocol carries them (Claude Code's
and ACP agents' edits, Codex's file changes; see supervisor/changes.py). A call counts once its result came back
without an error; a call still waiting (for a gate, say) has changed nothing yet. Each session's changes are folded
in as its calls arrive (a cursor into the store per session, a few sessions kept), so a view polling the op reads
only what is new. Memory is bounded: per session kept, PATCH_BYTES of hunks, KNOWN_CONTENTS texts of at most
LIMIT bytes and PENDING_CALLS calls (each text in them cut at LIMIT by the changes they carry).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..supervisor.changes import LIMIT, FileChange, call_changes, edit_strings, summary
from .store import Store

PAGE = 1000  # calls and results read from the store at a time
MOST_ROWS = 200_000  # ... and at most this many in one request (the rest on the next)
PATCH_BYTES = 1 << 20  # hunks kept for one session's diff; past it the diff says `truncated`
KEPT_SESSIONS = 8  # sessions whose folded changes are kept between requests
PENDING_CALLS = 32  # file-changing calls waiting for their result, per session (a vetoed one never gets one)
KNOWN_CONTENTS = 32  # files the session wrote whose whole content is known, so a later edit stays exact
GATE_CALLS_READ = 500  # newest events searched for a gate's call
GATES_KEPT = 256  # gates whose change is remembered


def _event(row: dict[str, Any]) -> dict[str, Any]:
    data = row.get("data")
    return data if isinstance(data, dict) else {}


def _failed(result: dict[str, Any]) -> bool:
    code = result.get("exit_code")
    return bool(result.get("is_error")) or (isinstance(code, int) and code != 0)


def _shown_path(path: str, cwd: str | None) -> str:
    """`path` relative to the session's directory when it is inside it; as given otherwise."""
    if cwd and os.path.isabs(path):
        base = cwd.rstrip("/") + "/"
        if path.startswith(base):
            return path[len(base):]
    return path


@dataclass
class SessionChanges:
    """One session's changes so far, folded from its calls and results in order."""

    cursor: int = 0  # the last event id read
    files: dict[str, FileChange] = field(default_factory=dict)
    pending: OrderedDict[str | None, tuple[dict[str, Any], list[FileChange]]] = field(default_factory=OrderedDict)
    contents: OrderedDict[str, str] = field(default_factory=OrderedDict)  # files added here: their content now
    size: int = 0  # bytes of hunks kept
    truncated: bool = False

    def fold(self, row: dict[str, Any]) -> None:
        data = _event(row)
        if row.get("kind") == "tool_call":
            tool, args = data.get("tool"), data.get("args")
            if not isinstance(tool, str) or not isinstance(args, dict):
                return
            files = call_changes(tool, args)
            if files:
                self.pending[data.get("call_id")] = (args, files)
                while len(self.pending) > PENDING_CALLS:
                    self.pending.popitem(last=False)
            return
        call_id = data.get("call_id")
        call = self.pending.pop(call_id, None)
        if call is None and call_id is not None:
            return  # the result of a call that changed no file
        if call is not None and not _failed(data):
            self.apply(*call)

    def apply(self, args: dict[str, Any], files: list[FileChange]) -> None:
        """A call that succeeded (its arguments, its changes): its changes merged into each file's."""
        for change in files:
            change = self._exact(change, args) or change
            before = self.files.get(change.path)
            merged = change if before is None or self._replaces(change) else _merge(before, change)
            grow = len(merged.hunks) - (len(before.hunks) if before else 0)
            if self.size + grow > PATCH_BYTES:
                self.truncated = True
                continue
            self.size += grow
            self.files[change.path] = merged
            if merged.status == "added" and change.status == "added" and not change.truncated and merged is change:
                self._remember(change.path, args.get("content"))
            elif change.path in self.contents and merged is not change:
                self.contents.pop(change.path, None)

    def _replaces(self, change: FileChange) -> bool:
        """A write replaces what the session showed of the file: its new content is all there is to see."""
        return change.status == "added" and change.removed == 0 and change.hunks.startswith("@@ -0,0")

    def _exact(self, change: FileChange, args: dict[str, Any]) -> FileChange | None:
        """An edit of a file this session wrote, applied to its known content: the file shown whole, as added."""
        content = self.contents.get(change.path)
        pair = edit_strings(args)
        if content is None or pair is None or not pair[0] or pair[0] not in content:
            return None
        old, new = pair
        after = content.replace(old, new) if args.get("replace_all") else content.replace(old, new, 1)
        self.contents[change.path] = after
        return call_changes("Write", {"file_path": change.path, "content": after})[0]

    def _remember(self, path: str, content: Any) -> None:
        if isinstance(content, str) and len(content) <= LIMIT:
            self.contents[path] = content
            self.contents.move_to_end(path)
            while len(self.contents) > KNOWN_CONTENTS:
                self.contents.popitem(last=False)

    def reply(self, sid: str, cwd: str | None) -> dict[str, Any]:
        files = [_renamed(f, _shown_path(f.path, cwd), cwd) for f in self.files.values()]
        out = summary(files)
        return {"session": sid, "source": "calls" if files else "none", "worktree": None, "branch": None,
                "base": None, **out, "truncated": out["truncated"] or self.truncated}


def _renamed(change: FileChange, path: str, cwd: str | None) -> FileChange:
    old = _shown_path(change.old_path, cwd) if change.old_path else None
    return FileChange(path, change.status, change.hunks, change.added, change.removed, old, change.truncated)


def _merge(before: FileChange, after: FileChange) -> FileChange:
    """Two changes of one file, one after the other: the hunks of both, the status the file ends with."""
    if after.status == "deleted":
        status = "deleted"
    elif before.status in ("added", "renamed"):
        status = before.status
    else:
        status = after.status
    return FileChange(before.path, status, before.hunks + after.hunks, before.added + after.added,
                      before.removed + after.removed, before.old_path or after.old_path,
                      before.truncated or after.truncated)


def calls_diff(store: Store, sid: str, cwd: str | None, changes: SessionChanges) -> dict[str, Any]:
    """The `diff` op's reply from the calls (in a worker thread): `changes` brought up to date from the store."""
    for _ in range(MOST_ROWS // PAGE):
        rows = store.calls(sid, changes.cursor, PAGE)
        for row in rows:
            changes.fold(row)
        if rows:
            changes.cursor = int(rows[-1]["id"])
        if len(rows) < PAGE:
            break
    return changes.reply(sid, cwd)


def gate_call_changes(store: Store, sid: str, seq: int) -> tuple[bool, dict[str, Any] | None]:
    """The call a gate holds: the call that opened it, or the first after what opened it (the call it holds).
    (found, the change it would make with `files` and their patches, or None when it changes no file)."""
    calls = [row for row in store.last("events", sid, GATE_CALLS_READ)
             if row.get("kind") == "tool_call" and isinstance(row.get("seq"), int) and row["seq"] >= seq]
    if not calls:
        return False, None
    data = _event(min(calls, key=lambda row: int(row["seq"])))
    files = call_changes(str(data.get("tool")), data.get("args"))
    if not files:
        return True, None
    out = summary(files)
    del out["patch"]  # each file's patch as lines instead, tabs expanded: a one-line sanitiser keeps a line a line
    out["files"] = [{**f.to_dict(), "patch": [line.expandtabs(4) for line in f.patch().splitlines()]} for f in files]
    return True, out


class CallChanges:
    """The changes kept between requests: each session's folded calls, each gate's call."""

    def __init__(self) -> None:
        self.sessions: OrderedDict[str, SessionChanges] = OrderedDict()
        self.gates: OrderedDict[str, dict[str, Any] | None] = OrderedDict()

    async def diff(self, store: Store, sid: str, cwd: str | None) -> dict[str, Any]:
        changes = self.sessions.pop(sid, None) or SessionChanges()
        self.sessions[sid] = changes
        while len(self.sessions) > KEPT_SESSIONS:
            self.sessions.popitem(last=False)
        return await anyio.to_thread.run_sync(calls_diff, store, sid, cwd, changes)

    def unread(self, gates: list[dict[str, Any]]) -> bool:
        """Some gate's call was not read yet."""
        return any(gate["ref"] not in self.gates for gate in gates)

    async def attach(self, store: Store, gates: list[dict[str, Any]]) -> None:
        """Each gate whose call was found gets `changes` (None when it changes no file); read once, then kept."""
        for gate in gates:
            ref = gate["ref"]
            if ref not in self.gates:
                found, changes = await anyio.to_thread.run_sync(gate_call_changes, store, gate["session"],
                                                                int(gate.get("seq") or 0))
                if not found:
                    continue  # no call held yet: asked again next time
                self.gates[ref] = changes
                while len(self.gates) > GATES_KEPT:
                    self.gates.popitem(last=False)
            gate["changes"] = self.gates[ref]  # None: its call changes no file; absent: no call held yet
