"""The console shows a session's cost: the table's cell, and the detail's health panel (through its Pilot)."""

from __future__ import annotations

import json

import pytest

from loopwarden.widgets.detail import SessionDetail
from loopwarden.widgets.session_table import usage_text
from tests.console.helpers import until
from tests.console.test_detail import DetailApp, panel_text
from tests.support.daemon import Harness
from tests.support.paths import PY

LINES = [{"type": "usage", "input_tokens": 2_000_000, "output_tokens": 100_000, "model": "gpt-5",
          "cache_read_tokens": 1_000_000},
         {"type": "usage", "input_tokens": 500, "output_tokens": 5, "model": "mystery-2"}]


@pytest.mark.anyio
async def test_the_detail_shows_the_cost_its_source_tokens_and_models(lw: Harness) -> None:
    text = "\n".join(json.dumps(line) for line in LINES)
    sid = lw.launch(PY, "-c", f"print({text!r})", name="spender")
    snap = lw.wait_state(sid, "exited", timeout=30)
    expected = (1_000_000 * 1.25 + 1_000_000 * 0.125 + 100_000 * 10) / 1e6
    assert usage_text(snap) == f"${expected:,.2f}+?"  # the session table's cell: part of it has no price
    detail = SessionDetail(lw.paths, sid)
    async with DetailApp(detail).run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "cost" in panel_text(detail), what="the cost in the health panel")
        shown = " ".join(panel_text(detail).split())
    assert f"cost ${expected:,.2f}+? priced from the table; 1 usage report(s) of a model with no price" in shown
    assert "2,000,500 in (1,000,000 cached), 100,005 out · gpt-5, mystery-2" in shown


def test_a_cell_with_tokens_and_no_price_says_they_are_tokens() -> None:
    """The COST column shows dollars; tokens without any price are marked as tokens, never a bare number."""
    assert usage_text({"counters": {"tokens": [48_200, 0]}}) == "48.2k tok"
    assert usage_text({"counters": {"tokens": [300, 0]}}) == "300 tok"
    assert usage_text({"counters": {}}) == "-"
