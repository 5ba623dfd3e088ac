"""`y` copies what a view shows: to the clipboard (OSC 52) and to a 0600 file the notification names, sanitised."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from loopwarden.paths import default_paths
from loopwarden.widgets.copying import COPY_FILE, MAX_CHARS
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.spill_viewer import SpillViewer
from tests.console.helpers import until
from tests.console.test_detail import FIXED_HISTORY, T0
from tests.console.test_search import ScreenApp

pytestmark = pytest.mark.anyio
HOSTILE_OUTPUT = "total 3\n\x1b]52;c;ZXZpbA==\x07\x1b[2J[bold red]pwned[/]\n\u202eevil\n"
ESCAPED = "total 3\n\\x1b]52;c;ZXZpbA==\\x07\\x1b[2J[bold red]pwned[/]\n\\u202eevil\n"


class NotingApp(ScreenApp):
    """The one-screen app, keeping what it notified."""

    def __init__(self, screen: Any) -> None:
        super().__init__(screen)
        self.notices: list[str] = []

    def notify(self, message: str, **kwargs: Any) -> None:  # type: ignore[override]
        self.notices.append(message)
        super().notify(message, **kwargs)


def copied(home: Path) -> Path:
    return home / "data" / COPY_FILE


def assert_private(path: Path) -> None:
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_y_copies_the_output_at_the_match_sanitised(tmp_path: Path, size: tuple[int, int]) -> None:
    hostile = {"kind": "tool_result", "ts": T0 + 20,
               "data": {"type": "tool_result", "ts": T0 + 20, "seq": 20, "tool": "bash", "output": HOSTILE_OUTPUT}}
    history = {**FIXED_HISTORY, "events": [*FIXED_HISTORY["events"], hostile]}
    detail = SessionDetail(default_paths({"LOOPWARDEN_HOME": str(tmp_path)}), "s7", snapshot_of=lambda sid: None,
                           history=history, live=False, clock=lambda: T0 + 90)
    app = NotingApp(detail)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: detail.history_done, what="the history")
        await pilot.press("slash", *"total 3", "enter", "y")
        path = await until(pilot, lambda: copied(tmp_path).exists() and copied(tmp_path), what="the copy file")
        assert path.read_text() == ESCAPED  # the whole output, not its one-line summary, made inert
        assert app.clipboard == ESCAPED and "\x1b" not in app.clipboard and "\x07" not in app.clipboard
        assert_private(path)
        assert any(str(path) in notice for notice in app.notices)
        await pilot.press("escape", "slash", *"read_file path", "enter", "y")
        await until(pilot, lambda: path.read_text().startswith("read_file {"), what="the call copied")
        assert '"path": "src/auth.py"' in path.read_text()


async def test_y_copies_the_spill_file_bounded_and_a_loose_old_copy_is_made_private(tmp_path: Path) -> None:
    spill = tmp_path / "spill.txt"
    spill.write_bytes(b"first \x1b[31mline\n" + b"x" * (MAX_CHARS + 500))
    paths = default_paths({"LOOPWARDEN_HOME": str(tmp_path / "home")})
    paths.data.mkdir(parents=True, mode=0o700)
    old = paths.data / COPY_FILE
    old.write_text("an earlier copy")
    old.chmod(0o644)
    viewer = SpillViewer(str(spill), paths)
    app = NotingApp(viewer)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: viewer.loaded, what="the file read")
        await pilot.press("y")
        await until(pilot, lambda: old.read_text() != "an earlier copy", what="the copy written")
        text = old.read_text()
        assert text.startswith("first \\x1b[31mline\n") and "\x1b" not in text
        assert len(text) < MAX_CHARS + 200 and text.rstrip().endswith("copied]")  # bounded, and says so
        assert app.clipboard == text
        assert_private(old)


@pytest.mark.parametrize("link", ["hard", "symbolic"])
async def test_a_link_left_at_the_copy_file_is_replaced_never_written_through(tmp_path: Path, link: str) -> None:
    spill = tmp_path / "spill.txt"
    spill.write_text("the copied text\n")
    victim = tmp_path / "victim.txt"  # a file of the same user an agent wants overwritten (a ~/.bashrc)
    victim.write_text("precious\n")
    victim.chmod(0o644)
    paths = default_paths({"LOOPWARDEN_HOME": str(tmp_path / "home")})
    paths.data.mkdir(parents=True, mode=0o700)
    planted = paths.data / COPY_FILE
    if link == "hard":
        planted.hardlink_to(victim)
    else:
        planted.symlink_to(victim)
    viewer = SpillViewer(str(spill), paths)
    app = NotingApp(viewer)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: viewer.loaded, what="the file read")
        await pilot.press("y")
        await until(pilot, lambda: any(str(planted) in n for n in app.notices), what="the copy written")
        assert planted.read_text() == "the copied text\n" and not planted.is_symlink()
        assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
        assert_private(planted)
        assert [p.name for p in paths.data.iterdir()] == [COPY_FILE]  # no temporary file left behind
