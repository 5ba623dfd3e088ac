"""The change a file-changing call makes, read from what each protocol carries (supervisor/changes.py), on recorded
real streams and on the shapes each agent sends."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.sessions.acp import AcpParser
from loopwarden.sessions.claude_code import ClaudeCodeParser, parse_array
from loopwarden.sessions.codex import CodexParser
from loopwarden.sessions.codex_app import AppServerParser
from loopwarden.supervisor import events as ev
from loopwarden.supervisor.changes import LIMIT, call_changes, summary

DATA = Path(__file__).parents[1] / "data"


def calls(parser: object, path: Path) -> list[ev.ToolCall]:
    out: list[ev.ToolCall] = []
    for seq, line in enumerate(path.read_bytes().splitlines(), 1):
        if line.strip():
            out += [e for e in parser.parse_line(line, seq) if isinstance(e, ev.ToolCall)]  # type: ignore[attr-defined]
    return out


def test_claude_code_edits_and_writes_of_a_recorded_session() -> None:
    """Every Edit and Write of a real Claude Code session gives its file's change: an edit counts the lines its
    strings differ by, a write shows the new file whole."""
    found = calls(ClaudeCodeParser(), DATA / "claude_stream-json__ccagent__claude_response1__edits.jsonl")
    assert len(found) == 18 and {c.tool for c in found} == {"Edit"}
    changes = [call_changes(c.tool, c.args) for c in found]
    assert all(len(files) == 1 for files in changes)
    first = changes[0][0]
    assert first.path.endswith("ccbackend/services/services.go") and first.status == "modified"
    assert (first.added, first.removed) == (70, 0)
    import_edit = changes[1][0]  # "context" and "mo" imports, with "time" added between them
    assert (import_edit.added, import_edit.removed) == (1, 0)
    assert '+\t"time"' in import_edit.patch() and ' \t"context"' in import_edit.patch()
    assert import_edit.patch().startswith(f"--- {import_edit.path}\n+++ {import_edit.path}\n@@ ")
    # the session's two refused edits ("No changes to make: old_string and new_string are exactly the same")
    assert sum(1 for files in changes if files[0].added == files[0].removed == 0) == 2


def test_a_write_shows_the_new_files_content_whole() -> None:
    [change] = call_changes("Write", {"file_path": "src/new.py", "content": "import os\n\nprint(os.getcwd())\n"})
    assert (change.status, change.added, change.removed) == ("added", 3, 0)
    assert change.patch() == ("--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,3 @@\n+import os\n+\n"
                              "+print(os.getcwd())\n")


def test_the_recorded_claude_turns_array_edit() -> None:
    events = parse_array((DATA / "claude_turns_array__claude-code-action__sample-turns.json").read_bytes())
    [edit] = [e for e in events if isinstance(e, ev.ToolCall) and e.tool == "Edit"]
    [change] = call_changes(edit.tool, edit.args)
    assert (change.path, change.status, change.added, change.removed) == ("/path/to/sample/file.py", "modified", 0, 1)
    assert "\n-    print(\"Debug message\")  # This should be removed\n" in change.patch()


def test_multiedit_one_file_a_hunk_each_edit() -> None:
    [change] = call_changes("MultiEdit", {"file_path": "/w/a.py", "edits": [
        {"old_string": "x = 1", "new_string": "x = 2"},
        {"old_string": "def f():\n    pass", "new_string": "def f():\n    return x", "replace_all": False}]})
    assert (change.status, change.added, change.removed) == ("modified", 2, 2)
    assert "@@ -1 +1 @@ edit 1\n-x = 1\n+x = 2\n" in change.hunks
    assert "@@ -1,2 +1,2 @@ edit 2\n def f():\n-    pass\n+    return x\n" in change.hunks


def test_notebook_edit_shows_the_new_cell() -> None:
    [change] = call_changes("NotebookEdit", {"notebook_path": "n.ipynb", "cell_id": "c1", "new_source": "a = 1\nb"})
    assert (change.path, change.status, change.added) == ("n.ipynb", "modified", 2)


def test_codex_exec_file_change_names_the_path_with_no_diff() -> None:
    """`codex exec --json` (a recorded stream) says which file changed, not how: the file is listed, no hunks."""
    found = calls(CodexParser(), DATA / "codex_exec_json__agentcmd__stream-output-3.jsonl")
    [patch] = [c for c in found if c.tool == "apply_patch"]
    [change] = call_changes(patch.tool, patch.args)
    assert (change.path, change.status, change.patch()) == ("/private/tmp/codex-research-test/hello.txt", "added", "")


def test_codex_app_server_file_change_approval_carries_each_files_diff() -> None:
    """The app-server's fileChange item (its changes: a unified diff for an update, the content for an add, a
    move path) is the call its approval request judges: each file's change comes from it."""
    parser = AppServerParser()
    item = {"type": "fileChange", "id": "fc1", "status": "inProgress", "changes": [
        {"path": "src/a.py", "kind": {"type": "update", "move_path": None},
         "diff": "@@ -1,2 +1,2 @@\n import os\n-x = 1\n+x = 2\n"},
        {"path": "src/old.py", "kind": {"type": "update", "move_path": "src/new.py"}, "diff": "@@ -1 +1 @@\n-a\n+b\n"},
        {"path": "NOTES.md", "kind": {"type": "add"}, "diff": "one\ntwo\n"},
        {"path": "gone.txt", "kind": {"type": "delete"}, "diff": "bye\n"}]}
    assert parser.feed({"method": "item/started", "params": {"item": item}}, 1) == []
    [call] = parser.feed({"id": 0, "method": "item/fileChange/requestApproval",
                          "params": {"itemId": "fc1", "reason": "edit files"}}, 2)
    assert isinstance(call, ev.ToolCall) and call.tool == "apply_patch"
    files = {c.path: c for c in call_changes(call.tool, call.args)}
    assert [(p, c.status, c.added, c.removed) for p, c in files.items()] == [
        ("src/a.py", "modified", 1, 1), ("src/new.py", "renamed", 1, 1), ("NOTES.md", "added", 2, 0),
        ("gone.txt", "deleted", 0, 1)]
    assert files["src/new.py"].old_path == "src/old.py"
    assert files["src/new.py"].patch().startswith("--- a/src/old.py\n+++ b/src/new.py\n@@ -1 +1 @@\n")
    assert files["gone.txt"].patch() == "--- a/gone.txt\n+++ /dev/null\n@@ -1,1 +0,0 @@\n-bye\n"


def test_codex_patch_begin_map_shape() -> None:
    files = call_changes("apply_patch", {"changes": {
        "a.txt": {"add": {"content": "hi\n"}},
        "b.txt": {"update": {"unified_diff": "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n", "move_path": None}}}})
    assert [(f.path, f.status, f.added, f.removed) for f in files] == [("a.txt", "added", 1, 0),
                                                                       ("b.txt", "modified", 1, 1)]
    assert files[1].patch().count("--- a/b.txt") == 1  # the diff's own header replaced, not doubled


def test_acp_diff_content_is_kept_and_becomes_the_change() -> None:
    """An ACP agent's tool call with `diff` content (Gemini CLI's edits): the adapter keeps the diff blocks in the
    call's arguments; a block with no old text is a new file."""
    parser = AcpParser()
    request = {"jsonrpc": "2.0", "id": 4, "method": "session/request_permission", "params": {"toolCall": {
        "toolCallId": "e1", "title": "Edit a.py", "kind": "edit", "content": [
            {"type": "diff", "path": "/w/a.py", "oldText": "x = 1\ny = 2\n", "newText": "x = 1\ny = 3\n"},
            {"type": "diff", "path": "/w/b.py", "oldText": None, "newText": "new\n"},
            {"type": "content", "content": {"type": "text", "text": "ignored"}}]}, "options": []}}
    [call] = parser.parse_line(json.dumps(request).encode(), 1)
    assert isinstance(call, ev.ToolCall) and call.args["title"] == "Edit a.py" and len(call.args["diffs"]) == 2
    files = call_changes(call.tool, call.args)
    assert [(f.path, f.status, f.added, f.removed) for f in files] == [("/w/a.py", "modified", 1, 1),
                                                                       ("/w/b.py", "added", 1, 0)]


def test_native_edit_and_calls_that_change_nothing() -> None:
    [change] = call_changes("edit", {"path": "src/fmt.py", "old": "return out", "new": "return out + '\\n'"})
    assert (change.path, change.added, change.removed) == ("src/fmt.py", 1, 1)
    for tool, args in (("Bash", {"command": "ls"}), ("Read", {"file_path": "a.py"}), ("x", {"path": "a"}),
                       ("Edit", {"file_path": 3, "old_string": "a", "new_string": "b"}),
                       ("apply_patch", {"changes": 7}),
                       ("Edit", "not a dict")):
        assert call_changes(tool, args) == []


def test_long_texts_are_cut_and_say_so() -> None:
    big = "".join(f"line {i}\n" for i in range(LIMIT // 4))
    [change] = call_changes("Write", {"file_path": "big.txt", "content": big})
    assert change.truncated and change.to_dict()["truncated"] is True
    assert len(change.patch().encode()) < LIMIT + LIMIT // 4
    assert summary([change])["truncated"] is True


def test_agent_text_is_carried_as_it_is() -> None:
    """The engine keeps the text exact (the JSON outputs hold it); the console and web make it visible."""
    [change] = call_changes("Edit", {"file_path": "a\x1b]0;pwned\x07.py", "old_string": "a", "new_string": "\x1b[2J"})
    assert "+\x1b[2J\n" in change.patch()


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["file_path", "path", "old_string", "new_string", "content", "edits",
                                        "changes", "diffs", "notebook_path", "new_source", "old", "new"]),
                       st.recursive(st.none() | st.text(max_size=30) | st.integers(),
                                    lambda inner: st.lists(inner, max_size=3)
                                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12)))
def test_no_arguments_crash_it(args: dict[str, object]) -> None:
    for change in call_changes("any", args):
        assert change.status in ("modified", "added", "deleted", "renamed")
        assert change.added >= 0 and change.removed >= 0 and isinstance(change.patch(), str)
