"""The change a file-changing call makes, from what its protocol carries: per file, a unified diff and its counts.

Recognised by the arguments' shape, whatever the tool is called (Claude Code's and Gemini CLI's edits share it):
* an edit: `file_path` (or `path`), `old_string`, `new_string` (Claude Code Edit, Gemini CLI replace, ACP rawInput),
  or `path`, `old`, `new` (the native protocol's example edit);
* several edits: `file_path` and `edits`, each an edit's strings (Claude Code MultiEdit);
* a write: `file_path` and `content` (Claude Code Write, Gemini CLI write_file); the old content is unknown, so
  the whole new content shows as added;
* a notebook cell: `notebook_path` and `new_source` (Claude Code NotebookEdit);
* Codex's `changes`: a list of `{path, kind, diff, move_path}` (app-server fileChange: `diff` is a unified diff for
  an update, the content for an add or a delete; `codex exec --json` names the paths only) or a map of path to
  `{add|delete: {content}, update: {unified_diff, move_path}}`;
* ACP's `diffs`: `{path, oldText, newText}` blocks (kept by the ACP adapter from a tool call's content).

An edit's hunk counts lines within the edited text, not the file (the file's line numbers are not in the call).
Everything is bounded: each text is cut at `limit` bytes before it is compared, and a cut is reported as
`truncated`. Pure: no I/O.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

LIMIT = 64 * 1024  # bytes of one text (an old or new string, a content, a diff) compared or kept
MOST_EDITS = 200  # a MultiEdit's edits read
MOST_FILES = 200  # files of one call
CONTEXT = 3  # lines of context around a change, as git shows
STATUSES = ("modified", "added", "deleted", "renamed")


@dataclass(slots=True)
class FileChange:
    """One file's change: `hunks` are the unified diff's hunks (each from its `@@` line), without the header."""

    path: str
    status: str
    hunks: str
    added: int
    removed: int
    old_path: str | None = None  # a renamed file's old path
    truncated: bool = False

    def header(self) -> str:
        old = "/dev/null" if self.status == "added" else _side("a", self.old_path or self.path)
        new = "/dev/null" if self.status == "deleted" else _side("b", self.path)
        return f"--- {old}\n+++ {new}\n"

    def patch(self) -> str:
        """The file's unified diff (header and hunks); a change whose content is unknown has no hunks."""
        return self.header() + self.hunks if self.hunks else ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "added": self.added, "removed": self.removed,
                "patch": self.patch(), **({"old_path": self.old_path} if self.old_path else {}),
                **({"truncated": True} if self.truncated else {})}


def _side(prefix: str, path: str) -> str:
    """git's `a/` and `b/` before a relative path; an absolute one as it is."""
    return path if path.startswith("/") else f"{prefix}/{path}"


def _cut(text: Any) -> tuple[str, bool]:
    """`text` as a string of at most LIMIT bytes (cut at a line end where one is near), and whether it was cut."""
    if not isinstance(text, str):
        return "", False
    if len(text) <= LIMIT // 4 or len(text.encode("utf-8", "surrogatepass")) <= LIMIT:
        return text, False
    head = text.encode("utf-8", "surrogatepass")[:LIMIT].decode("utf-8", "ignore")
    end = head.rfind("\n")
    return (head[: end + 1] if end > 0 else head), True


def _lines(text: str) -> list[str]:
    return text.splitlines() if text else []


def hunks(old: str, new: str, heading: str = "") -> tuple[str, int, int]:
    """The unified diff hunks from `old` to `new` (lines numbered within them), with added and removed counts;
    `heading` follows each hunk's `@@` line (as git puts a function's name there)."""
    diff = difflib.unified_diff(_lines(old), _lines(new), lineterm="", n=CONTEXT)
    return _counted("\n".join(diff), heading)


def _whole(text: str, sign: str) -> tuple[str, int]:
    """A new (`+`) or deleted (`-`) file's content as one hunk."""
    lines = _lines(text)
    if not lines:
        return "", 0
    span = f"-0,0 +1,{len(lines)}" if sign == "+" else f"-1,{len(lines)} +0,0"
    return f"@@ {span} @@\n" + "".join(f"{sign}{line}\n" for line in lines), len(lines)


def _counted(patch: str, heading: str = "") -> tuple[str, int, int]:
    """A unified diff's hunks (any `---`/`+++`/`diff` header dropped) and its added and removed lines."""
    out: list[str] = []
    added = removed = 0
    in_hunk = False
    for line in patch.splitlines():
        if line.startswith("@@"):
            in_hunk = True
            line += f" {heading}" if heading else ""
        elif not in_hunk:
            continue  # headers before the first hunk
        elif line.startswith("+"):
            added += 1
        elif line.startswith("-"):
            removed += 1
        out.append(line)
    return ("\n".join(out) + "\n" if out else ""), added, removed


def _path(args: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _edit(path: str, pairs: list[tuple[Any, Any]]) -> FileChange:
    """Edits of one file, each (old_string, new_string): one hunk set each. An empty old string makes a new file."""
    parts: list[str] = []
    added = removed = 0
    cut = False
    for n, (old_text, new_text) in enumerate(pairs, 1):
        old, old_cut = _cut(old_text)
        new, new_cut = _cut(new_text)
        cut = cut or old_cut or new_cut
        text, a, r = hunks(old, new, f"edit {n}" if len(pairs) > 1 else "")
        parts.append(text)
        added, removed = added + a, removed + r
    status = "added" if len(pairs) == 1 and not pairs[0][0] else "modified"
    return FileChange(path, status, "".join(parts), added, removed, truncated=cut)


def _write(path: str, content: Any) -> FileChange:
    text, cut = _cut(content)
    body, added = _whole(text, "+")
    return FileChange(path, "added", body, added, 0, truncated=cut)


def _codex_kind(change: dict[str, Any]) -> tuple[str, str | None]:
    """A Codex change's status and, for a move, its new path."""
    kind = change.get("kind")
    if isinstance(kind, dict):  # the app-server's own shape, {type, move_path}
        change = {**change, "move_path": change.get("move_path") or kind.get("move_path")}
        kind = kind.get("type")
    move = change.get("move_path")
    if kind == "add":
        return "added", None
    if kind == "delete":
        return "deleted", None
    return ("renamed", move) if isinstance(move, str) and move else ("modified", None)


def _codex_change(path: str, change: dict[str, Any]) -> FileChange:
    status, moved_to = _codex_kind(change)
    text, cut = _cut(change.get("diff") if "diff" in change else change.get("unified_diff", change.get("content")))
    if status in ("added", "deleted"):
        body, n = _whole(text, "+" if status == "added" else "-")
        added, removed = (n, 0) if status == "added" else (0, n)
    else:
        body, added, removed = _counted(text)
    if moved_to:
        return FileChange(moved_to, status, body, added, removed, old_path=path, truncated=cut)
    return FileChange(path, status, body, added, removed, truncated=cut)


def _codex_changes(changes: Any) -> list[FileChange]:
    out: list[FileChange] = []
    if isinstance(changes, dict):  # path -> {add|delete: {content}} | {update: {unified_diff, move_path}}
        for path, change in list(changes.items())[:MOST_FILES]:
            if isinstance(path, str) and isinstance(change, dict) and change:
                kind, body = next(iter(change.items()))
                body = body if isinstance(body, dict) else {}
                out.append(_codex_change(path, {**body, "kind": kind}))
        return out
    for change in changes[:MOST_FILES] if isinstance(changes, list) else []:
        if isinstance(change, dict) and isinstance(change.get("path"), str):
            out.append(_codex_change(change["path"], change))
    return out


def _acp_diffs(diffs: Any) -> list[FileChange]:
    out: list[FileChange] = []
    for block in diffs[:MOST_FILES] if isinstance(diffs, list) else []:
        if not isinstance(block, dict) or not isinstance(block.get("path"), str):
            continue
        old_text = block.get("oldText")
        if old_text is None:  # no old text: a new file
            out.append(_write(block["path"], block.get("newText")))
        else:
            out.append(_edit(block["path"], [(old_text, block.get("newText"))]))
    return out


def edit_strings(args: dict[str, Any]) -> tuple[str, str] | None:
    """An edit's (old, new) strings: `old_string` and `new_string`, or the native protocol's `old` and `new`."""
    for old_key, new_key in (("old_string", "new_string"), ("old", "new")):
        old, new = args.get(old_key), args.get(new_key)
        if isinstance(old, str) and isinstance(new, str):
            return old, new
    return None


def call_changes(tool: str, args: Any) -> list[FileChange]:
    """The files a call changes (or would), each with its diff; empty when the call changes no file it says."""
    del tool  # recognised by the arguments' shape: agents name the same tools differently
    if not isinstance(args, dict):
        return []
    path = _path(args, "file_path", "path", "filePath")
    pair = edit_strings(args)
    if path is not None and pair is not None:
        return [_edit(path, [pair])]
    if path is not None and isinstance(args.get("edits"), list):
        pairs = [(e.get("old_string"), e.get("new_string")) for e in args["edits"][:MOST_EDITS] if isinstance(e, dict)]
        return [_edit(path, pairs)] if pairs else []
    if path is not None and isinstance(args.get("content"), str):
        return [_write(path, args["content"])]
    notebook = _path(args, "notebook_path")
    if notebook is not None and isinstance(args.get("new_source"), str):
        change = _write(notebook, args["new_source"])
        change.status = "deleted" if args.get("edit_mode") == "delete" else "modified"
        return [change]
    if "changes" in args:
        return _codex_changes(args["changes"])
    if "diffs" in args:
        return _acp_diffs(args["diffs"])
    return []


def summary(files: list[FileChange]) -> dict[str, Any]:
    """The files as the `diff` op's shape: each file (with its patch), the totals, the whole patch."""
    return {"files": [{k: v for k, v in f.to_dict().items() if k != "patch"} for f in files],
            "added": sum(f.added for f in files), "removed": sum(f.removed for f in files),
            "patch": "".join(f.patch() for f in files), "truncated": any(f.truncated for f in files)}
