"""`/` search in the console's text views, `n`/`N`, the count and the highlights, at two terminal sizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App
from textual.containers import VerticalScroll
from textual.strip import Strip
from textual.widgets import RichLog, Static

from loopwarden.paths import default_paths
from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.help import Help
from loopwarden.widgets.search import find
from loopwarden.widgets.search_bar import SearchBar
from loopwarden.widgets.spill_viewer import SearchLog, SpillViewer
from tests.console.helpers import until
from tests.console.test_console import frozen
from tests.console.test_detail import FIXED_HISTORY, T0
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.anyio
SIZES = [(160, 48), (80, 24)]
HOSTILE = "boom \x1b]52;c;ZXZpbA==\x07 [bold red]error[/] \x1b[31mERROR\x1b[0m end"


class ScreenApp(App[None]):
    """One screen, as the console pushes it."""

    def __init__(self, screen: Any) -> None:
        super().__init__()
        self.first = screen

    def on_mount(self) -> None:
        self.push_screen(self.first)


def count_of(screen: Any) -> str:
    return str(screen.query_one(SearchBar).query_one("#search-count", Static).render())


def styled_spans(strip: Strip) -> list[tuple[str, str]]:
    """(text, style) of each segment of a drawn line."""
    return [(seg.text, str(seg.style)) for seg in strip]


def spill_file(tmp_path: Path) -> Path:
    lines = [f"line {n}: fine" for n in range(200)]
    for n in (20, 90, 150):
        lines[n] = f"line {n}: an Error here"
    lines[170] = HOSTILE
    path = tmp_path / "spill.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_find_is_case_insensitive_plain_text() -> None:
    found = find(["a.b A.B", "axb", "[x]"], "a.b")
    assert [(m.line, m.start, m.end) for m in found] == [(0, 0, 3), (0, 4, 7)]  # "." is a dot, not any character
    assert [(m.line, m.start) for m in find(["[x]"], "[X]")] == [(0, 0)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_spill_viewer_search_next_previous_count_and_highlight(tmp_path: Path, size: tuple[int, int]) -> None:
    viewer = SpillViewer(str(spill_file(tmp_path)))
    async with ScreenApp(viewer).run_test(size=size) as pilot:
        await until(pilot, lambda: viewer.loaded, what="the file read")
        log = viewer.query_one(SearchLog)
        await pilot.press("slash", *"error")
        await until(pilot, lambda: count_of(viewer) == "1/5", what="five matches, the first current")
        bar = viewer.query_one(SearchBar)
        assert bar.input.content_region.height == 1  # the query has its line (no border taking it)
        await pilot.press("enter")
        assert log.has_focus
        await pilot.press("n")
        await until(pilot, lambda: count_of(viewer) == "2/5", what="n: the next match")
        assert viewer.search.match is not None and viewer.search.match.line == 90
        await until(pilot, lambda: in_view(log, 90), what="the view scrolled to line 90")
        drawn = styled_spans(log.render_line(90 - log.scroll_offset.y))
        assert any(text == "Error" and "bright_cyan" in style for text, style in drawn)
        await pilot.press("N", "N")
        await until(pilot, lambda: count_of(viewer) == "5/5", what="N twice: back past the first, to the last")
        assert viewer.search.match is not None and viewer.search.match.line == 170
        await pilot.press("escape")
        await until(pilot, lambda: not viewer.search.active and count_of(viewer) == "", what="escape clears")
        assert isinstance(pilot.app.screen, SpillViewer)  # the first escape only cleared the search


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_hostile_text_stays_inert_when_found(tmp_path: Path, size: tuple[int, int]) -> None:
    viewer = SpillViewer(str(spill_file(tmp_path)))
    async with ScreenApp(viewer).run_test(size=size) as pilot:
        await until(pilot, lambda: viewer.loaded, what="the file read")
        log = viewer.query_one(SearchLog)
        await pilot.press("slash", *"[bold red]")
        await until(pilot, lambda: count_of(viewer) == "1/1", what="the markup found as text")
        await until(pilot, lambda: in_view(log, 170), what="the view at the hostile line")
        await pilot.press("enter")
        log.scroll_to(x=0, animate=False)
        await pilot.pause()
        drawn = styled_spans(log.render_line(170 - log.scroll_offset.y))
        text = "".join(t for t, _ in drawn)
        assert "\\x1b]52;c;ZXZpbA==\\x07" in text and "\\x1b[31mERROR\\x1b[0m" in text  # shown, never acted on
        assert "\x1b" not in text and "\x07" not in text
        assert any(t == "[bold red]" and "bright_cyan" in s for t, s in drawn)  # the match, highlighted
        assert not any("red" in s for _, s in drawn)  # the markup styled nothing


def detail_screen(tmp_path: Path, extra: list[dict[str, Any]] = ()) -> SessionDetail:  # type: ignore[assignment]
    history = {**FIXED_HISTORY, "events": [*FIXED_HISTORY["events"], *extra]}
    return SessionDetail(default_paths({"LOOPWARDEN_HOME": str(tmp_path)}), "s7", snapshot_of=lambda sid: None,
                         history=history, live=False, clock=lambda: T0 + 90)


def stream_line(detail: SessionDetail, number: int) -> list[tuple[str, str]]:
    return styled_spans(detail.query_one("#stream", RichLog).lines[number])


def in_view(view: Any, line: int) -> bool:
    return bool(view.scroll_offset.y <= line < view.scroll_offset.y + view.scrollable_content_region.height)


HOSTILE_EVENT = {"kind": "assistant_message", "ts": T0 + 20,
                 "data": {"type": "assistant_message", "ts": T0 + 20, "seq": 20, "text": HOSTILE}}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_detail_stream_search_next_previous_count_and_highlight(tmp_path: Path, size: tuple[int, int]) -> None:
    detail = detail_screen(tmp_path)
    async with ScreenApp(detail).run_test(size=size) as pilot:
        await until(pilot, lambda: detail.history_done, what="the history")
        await pilot.press("slash", *"READ_FILE", "enter")
        await until(pilot, lambda: count_of(detail) == "1/4", what="four matches, case-insensitive")
        stream = detail.query_one("#stream", RichLog)
        assert stream.has_focus and not stream.auto_scroll  # a found match stops the following
        lines = [strip.text for strip in stream.lines]
        first = detail.search.match
        assert first is not None and "read_file" in lines[first.line][first.start:first.end]
        assert any(t == "read_file" and "bright_cyan" in s for t, s in stream_line(detail, first.line))
        await pilot.press("n")
        await until(pilot, lambda: count_of(detail) == "2/4", what="n: the next")
        second = detail.search.match
        assert second is not None and second.line > first.line
        await until(pilot, lambda: in_view(stream, second.line), what="the stream scrolled to the match")
        assert not any("bright_cyan" in s for _, s in stream_line(detail, first.line))
        assert any(t == "read_file" and "on yellow" in s for t, s in stream_line(detail, first.line))
        await pilot.press("N", "N")
        await until(pilot, lambda: count_of(detail) == "4/4", what="N past the first wraps to the last")
        await pilot.press("escape")
        await until(pilot, lambda: count_of(detail) == "", what="escape clears the search")
        assert pilot.app.screen is detail
        assert not any("on yellow" in s or "on bright_cyan" in s for n in range(len(stream.lines))
                       for _, s in stream_line(detail, n))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_detail_search_of_hostile_text_stays_inert(tmp_path: Path, size: tuple[int, int]) -> None:
    detail = detail_screen(tmp_path, [HOSTILE_EVENT])
    async with ScreenApp(detail).run_test(size=size) as pilot:
        await until(pilot, lambda: detail.history_done, what="the history")
        await pilot.press("slash", *"[bold red]error[/]")
        await until(pilot, lambda: count_of(detail) == "1/1", what="the markup found as text")
        found = detail.search.match
        assert found is not None
        drawn = stream_line(detail, found.line)
        text = "".join(t for t, _ in drawn)
        assert "\\x1b]52;c;ZXZpbA==\\x07" in text and "\x1b" not in text and "\x07" not in text
        assert any(t == "[bold red]error[/]" and "bright_cyan" in s for t, s in drawn)
        assert not any("red" in s for _, s in drawn)


async def test_the_stderr_log_lines_are_searched_once_shown(tmp_path: Path) -> None:
    detail = detail_screen(tmp_path)
    async with ScreenApp(detail).run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: detail.history_done, what="the history")
        await pilot.press("slash", *"c2 spilled")
        await until(pilot, lambda: count_of(detail) == "no match", what="hidden stderr lines are not searched")
        await pilot.press("enter", "l")
        await until(pilot, lambda: count_of(detail) == "1/1", what="the stderr line found once shown")


def help_match_styles(screen: Help) -> list[tuple[str, str]]:
    """(text, style) of each highlighted span of the help as drawn."""
    content = screen.query_one("#help-text", Static).content
    assert isinstance(content, Text)
    return [(content.plain[s.start:s.end], str(s.style)) for s in content.spans if "on " in str(s.style)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_help_search_next_previous_count_and_highlight(size: tuple[int, int]) -> None:
    app = frozen()
    async with app.run_test(size=size) as pilot:
        await pilot.press("question_mark")
        screen = await until(pilot, lambda: app.screen if isinstance(app.screen, Help) else None, what="the help")
        await pilot.press("slash", *"KILL")
        total = len(find(screen.search_lines(), "kill"))
        assert total >= 2
        await until(pilot, lambda: count_of(screen) == f"1/{total}", what="the matches counted")
        await pilot.press("enter", "n")
        await until(pilot, lambda: count_of(screen) == f"2/{total}", what="n: the next")
        marks = help_match_styles(screen)
        assert len(marks) == total and all(text.lower() == "kill" for text, _ in marks)
        assert sum("bright_cyan" in style for _, style in marks) == 1
        box = screen.query_one(VerticalScroll)
        line = screen.search.match.line if screen.search.match else -1
        top = screen.query_one("#help-text").virtual_region.y
        await until(pilot, lambda: box.scroll_y <= top + line < box.scroll_y + box.scrollable_content_region.height,
                    what="the help scrolled to the match")
        await pilot.press("N", "N")
        await until(pilot, lambda: count_of(screen) == f"{total}/{total}", what="N wraps to the last")
        await pilot.press("escape")
        await until(pilot, lambda: count_of(screen) == "" and not help_match_styles(screen), what="cleared")
        assert app.screen is screen
        await pilot.press("slash", "q", "question_mark")  # the help's own close keys are typed into the search
        await until(pilot, lambda: screen.search.query == "q?", what="q and ? typed as text")
        assert app.screen is screen
        await pilot.press("escape", "escape")
        await until(pilot, lambda: not isinstance(app.screen, Help), what="the second escape closes the help")


async def test_a_live_line_that_matches_joins_the_search(lw: Harness, tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = ("import os, sys, time\nprint('first marker line', flush=True)\n"
              "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\nprint('second MARKER line', flush=True)\n"
              "while not os.path.exists(sys.argv[1] + '.end'): time.sleep(0.05)\n")
    sid = lw.run_detached(PY, "-c", script, str(go), adapter="plain")
    detail = SessionDetail(lw.paths, sid)
    async with ScreenApp(detail).run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: any("first marker" in line for line in detail.search_lines()), what="line one")
        await pilot.press("slash", *"marker", "enter")
        await until(pilot, lambda: count_of(detail) == "1/1", what="the first match")
        go.touch()
        await until(pilot, lambda: count_of(detail) == "1/2", what="the live line counted")
        await pilot.press("n")
        await until(pilot, lambda: count_of(detail) == "2/2", what="n to the live line")
        found = detail.search.match
        assert found is not None
        assert any(t == "MARKER" and "on bright_cyan" in s for t, s in stream_line(detail, found.line))
    (tmp_path / "go.end").touch()
    lw.cli("kill", sid)


def release(go: Path, batch: int) -> str:
    """Let the agent print its next 200 lines; the last of them."""
    Path(f"{go}.{batch}").touch()
    return f"row {batch * 200 + 199}"


async def test_the_match_and_the_view_stay_on_their_lines_when_old_lines_leave_the_stream(lw: Harness,
                                                                                   tmp_path: Path) -> None:
    """The stream keeps its newest MAX_LINES: as lines fall off the top, `n`'s place stays on the same text."""
    go = tmp_path / "go"
    script = ("import os, sys, time\nfor batch in range(7):\n"
              "    while not os.path.exists(f'{sys.argv[1]}.{batch}'): time.sleep(0.05)\n"
              "    for i in range(batch * 200, batch * 200 + 200):\n"
              "        print(f'mark {i}' if i % 50 == 0 else f'row {i}', flush=True)\n"
              "while not os.path.exists(sys.argv[1] + '.end'): time.sleep(0.05)\n")
    sid = lw.run_detached(PY, "-c", script, str(go), adapter="plain")
    detail = SessionDetail(lw.paths, sid)
    async with ScreenApp(detail).run_test(size=(160, 48)) as pilot:
        for batch in range(5):  # 1,000 lines: the stream is full
            last = release(go, batch)
            await until(pilot, lambda last=last: any(line.endswith(last) for line in detail.search_lines()),
                        what=last)
        await pilot.press("slash", *"mark", "enter")
        await until(pilot, lambda: detail.search.match is not None, what="a match")
        while not detail.search_lines()[detail.search.match.line].endswith("mark 500"):
            await pilot.press("n")
        stream = detail.query_one("#stream", RichLog)
        for batch in (5, 6):
            stream.scroll_to(y=600, animate=False, immediate=True)  # read elsewhere than the match
            await until(pilot, lambda: stream.scroll_y == 600, what="the stream scrolled")
            in_view = detail.search_lines()[600]
            last = release(go, batch)
            await until(pilot, lambda last=last: any(line.endswith(last) for line in detail.search_lines()),
                        what=last)
            found = detail.search.match
            assert found is not None and detail.search_lines()[found.line].endswith("mark 500")
            assert detail.search_lines()[int(stream.scroll_y)] == in_view  # new lines never move the view
    (tmp_path / "go.end").touch()
    lw.cli("kill", sid)
