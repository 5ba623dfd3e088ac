"""The detail stream draws loopwarden's own lines red only when something failed (a plain session's notes are not)."""

from __future__ import annotations

import pytest
from textual.widgets import RichLog

from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.stream import render
from tests.console.helpers import until
from tests.console.test_detail import DetailApp
from tests.support.daemon import Harness
from tests.support.paths import PY

pytestmark = pytest.mark.anyio


def styles_of(detail: SessionDetail, words: str) -> list[str]:
    """The styles of the drawn segments of the stream's line holding `words`."""
    for strip in detail.query_one("#stream", RichLog).lines:
        if words in strip.text:
            return [str(seg.style) for seg in strip if seg.text.strip() and not seg.text.strip()[:2].isdigit()]
    return []


async def test_a_plain_sessions_informational_line_is_not_red(lw: Harness) -> None:
    sid = lw.run_detached(PY, "-c", "print('hello from a plain command')", adapter="auto")
    lw.wait_state(sid, "exited")
    detail = SessionDetail(lw.paths, sid)
    async with DetailApp(detail).run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: styles_of(detail, "adapter plain"), what="loopwarden's note on the adapter")
        await until(pilot, lambda: styles_of(detail, "hello from a plain command"), what="the output")
        assert not any("red" in style for style in styles_of(detail, "adapter plain"))
        assert not any("red" in style for style in styles_of(detail, "hello from a plain command"))


def test_only_a_failure_loopwarden_reports_is_red() -> None:
    failed = render({"kind": "log", "data": {"stream": "loopwarden", "text": "cannot start 'x'", "level": "error"}})
    noted = render({"kind": "log", "data": {"stream": "loopwarden", "text": "stdin closed: the agent reads none"}})
    assert failed is not None and any("red" in str(span.style) for span in failed.spans)
    assert noted is not None and not any("red" in str(span.style) for span in noted.spans)


@pytest.mark.parametrize("text", ["cannot start 'nope': No such file or directory",
                                  "supervision failed (KeyError: 'x'); stopping the agent",
                                  "3 processes of the session survived SIGKILL at the end: 11, 12, 13",
                                  "spill of bash output (90000 chars) to /full failed: No space left on device"])
def test_a_failure_stored_before_levels_is_still_red(text: str) -> None:
    """A store written by an older daemon has no level on its lines: its failures stay red, its notes do not."""
    old = render({"kind": "log", "data": {"stream": "loopwarden", "text": text}})
    assert old is not None and any("red" in str(span.style) for span in old.spans)
