"""The diff beside the decision and the session's diff view, in the real console through its Pilot, against a real
daemon running a scripted agent whose edits carry escape sequences and markup."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import Static

from loopwarden.widgets.app import help_sections
from loopwarden.widgets.diffs import SessionDiff, diff_lines
from loopwarden.widgets.gates import GatesQueue, evidence_text
from tests.console.helpers import RecordingConsole, until
from loopwarden.widgets.dialogs import Confirm
from tests.console.test_actions import open_gates, page_text, select
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.anyio

HOSTILE = "\x1b[2J\x1b]0;pwned\x07[bold red]markup[/bold red]"
ERROR = {"type": "error", "task": "T-3", "message": "IntegrityError: duplicate key", "error_type": "IntegrityError"}
CAPTURES = os.environ.get("LOOPWARDEN_CONSOLE_CAPTURES")  # a folder: the test keeps its screenshots (SVG) there


def edit(path: str, old: str, new: str) -> dict:
    return {"call": {"tool": "Edit", "args": {"file_path": path, "old_string": old, "new_string": new}},
            "result": {"output": "ok"}}


def hostile_scenario(tmp: Path) -> Path:
    """loop_gate's story in Claude Code's Edit calls: four fixes of one error open the loop gate, which holds a
    fifth edit; the second fix and the held edit write an escape sequence and markup."""
    steps: list[dict] = [{"scenario": "hostile_edits", "handshake": True, "config": []}]
    fixes = [("op.create_table", "op.create_table_if_missing"), ("unique=True", f"unique=False  # {HOSTILE}"),
             ("bulk_insert(users)", "bulk_insert(dedupe(users))"), ("dedupe(users)", "dedupe(users, key=str.lower)")]
    for old, new in fixes:
        steps += [edit("migrations/0007_users.py", old, new), {"emit": ERROR}]
    steps += [edit("migrations/seed_users.json", '  {"email": "ann@example.com", "id": 2},\n  {"id": 3}',
                   f'  {{"id": 3, "note": "{HOSTILE}"}}'),
              {"emit": {"type": "done", "summary": "done"}}]
    path = tmp / "hostile_edits.jsonl"
    path.write_text("".join(json.dumps(step) + "\n" for step in steps))
    return path


def gated(lw: Harness, tmp: Path) -> tuple[str, str]:
    sid = lw.run_detached(PY, "-m", "loopwarden.sessions.scripted", str(hostile_scenario(tmp)), name="hostile")
    snap = lw.wait_state(sid, "gated")
    return sid, f"{sid}:{snap['pending_gates'][0]}"


def capture(app: RecordingConsole, name: str) -> None:
    if CAPTURES:
        app.save_screenshot(filename=name, path=CAPTURES)


def inert(text: str) -> None:
    """No control character reached the screen; each escape shows as its visible spelling."""
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J\\x1b]0;pwned\\x07[bold red]markup[/bold red]" in text


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_a_gate_on_an_edit_shows_its_diff_and_v_or_its_link_opens_the_sessions_diff(
        lw: Harness, tmp_path: Path, size: tuple[int, int]) -> None:
    sid, ref = gated(lw, tmp_path)
    app = RecordingConsole(lw.paths, autostart=False)
    async with app.run_test(size=size) as pilot:
        screen = await open_gates(pilot, app, ref)
        evidence = await until(pilot, lambda: next((str(screen.query_one("#evidence", Static).render())
                                                   for g in app.gates if g.get("changes")), None),
                               what="the gate's change")
        assert "the change this call would make: 1 file, +1 -2" in evidence
        assert "M +1 -2  migrations/seed_users.json" in evidence
        assert '-  {"email": "ann@example.com", "id": 2},' in evidence
        inert(evidence)
        if size == (160, 48):
            capture(app, "console_gate_diff.svg")
        if size == (160, 48):  # the evidence's link, clicked (a browser's click reaches it the same way)
            box, shown = screen.query_one("#evidence-box"), screen.query_one("#evidence", Static)
            box.scroll_end(animate=False)
            await pilot.pause()
            line = evidence.splitlines().index("v: the session's diff so far")
            await pilot.click(offset=(shown.region.x + 3, shown.region.y + line))
        else:
            await pilot.press("v")
        diff = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDiff) else None,
                           what="the session's diff")
        await until(pilot, lambda: diff.diff is not None, what="the diff read")
        summary = str(diff.query_one("#diff-summary", Static).render())
        assert "1 file changed, +4 -4" in summary and "M +4 -4  migrations/0007_users.py" in summary
        patch = str(diff.query_one("#diff-patch", Static).render())
        assert "-unique=True" in patch and "+unique=False" in patch
        inert(patch)
        assert "seed_users.json" not in patch  # held by the gate: not made yet
        page = app.export_screenshot()
        assert "\x1b" not in page and re.search(r"migrations/0007_users\.py", page)
        if size == (160, 48):
            capture(app, "console_session_diff.svg")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="back to the queue")
        await pilot.press("a")  # the approval question shows the change it lets through
        dialog = await until(pilot, lambda: app.screen if isinstance(app.screen, Confirm) else None,
                             what="the approval question")
        said = page_text(dialog)
        assert "the change this call would make" in said and '-  {"id": 3}' in said
        inert(said)
        if size == (160, 48):
            await pilot.press("y")
            await until(pilot, lambda: not lw.status(sid)["pending_gates"], what="the approval")
            await pilot.press("escape")
            await select(pilot, app, sid)
            await pilot.press("v")  # from the sessions table: the approved edit is in the diff now
            diff = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDiff) else None,
                               what="the session's diff again")
        else:
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, GatesQueue), what="back to the queue")
            await pilot.press("v")
            diff = await until(pilot, lambda: app.screen if isinstance(app.screen, SessionDiff) else None,
                               what="the session's diff again")
            await until(pilot, lambda: diff.diff is not None, what="the diff read")
            lw.request("approve", gate=ref)  # decided elsewhere while the diff is shown: it follows
        await until(pilot, lambda: "seed_users.json" in str(diff.query_one("#diff-summary", Static).render()),
                    what="the approved edit in the diff", timeout=30)
        assert "M +4 -4  migrations/0007_users.py" in str(diff.query_one("#diff-summary", Static).render())


def test_the_diffs_colours_and_the_help() -> None:
    """Added lines green, removed red, hunk headers cyan, file headers bold; `v` is in the help, and the gate's
    evidence says where the session's diff is."""
    text = diff_lines(["--- a/x", "+++ b/x", "@@ -1 +1 @@", "-old", "+new", " same"])
    styles = {text.plain[span.start:span.end].strip(): str(span.style) for span in text.spans}
    assert styles == {"--- a/x": "bold", "+++ b/x": "bold", "@@ -1 +1 @@": "cyan", "-old": "red", "+new": "green"}
    keys = {(b.key, b.description) for _, bindings in help_sections(None) for b in bindings}
    assert {("v", "Diff"), ("v", "Diff so far"), ("escape,v", "Back")} <= keys
    gate = {"ref": "s1:g1", "rule": "loop_counter", "reason": "r", "evidence": {}}
    assert "v: the session's diff so far" in evidence_text(gate).plain
    changes = {"files": [{"path": "a.py", "status": "modified", "added": 1, "removed": 0,
                          "patch": ["--- a/a.py", "+++ b/a.py", "@@ -1 +1,2 @@", " x", "+y"]}],
               "added": 1, "removed": 0, "truncated": False}
    shown = evidence_text({**gate, "changes": changes})
    assert isinstance(shown, Text) and "+y\n" in shown.plain
