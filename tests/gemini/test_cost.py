"""The real Gemini CLI's usage (its per-model token counts at each prompt's end) priced from the table."""

from __future__ import annotations

import pytest

from loopwarden.supervisor.prices import SHIPPED_TABLE
from tests.gemini.fake_gemini import FakeGemini, say
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def test_gemini_usage_is_priced_by_the_model_it_ran(gm: Harness, fake_gemini: FakeGemini) -> None:
    fake_gemini.play([say("All done.")])
    # Gemini CLI 0.61 on its own default model (gemini-3.8-flash), which the table prices
    sid = gm.run_detached("say done", agent="gemini", name="gm", cwd=gm.work)  # type: ignore[attr-defined]
    snap = gm.wait_state(sid, "exited", "terminated", timeout=90)
    usages = wait_for(lambda: of_kind(gm, sid, "usage") or None, what="usage events")
    models = {model for model, _ in fake_gemini.usages}
    assert {u["model"] for u in usages} == models == {"gemini-3.8-flash"}
    model = models.pop()
    assert SHIPPED_TABLE.price(model) is not None, f"the table has no price for Gemini CLI's model {model}"
    assert sum(u["input_tokens"] for u in usages) == sum(m["promptTokenCount"] for _, m in fake_gemini.usages)
    assert sum(u["output_tokens"] for u in usages) == sum(m["candidatesTokenCount"] for _, m in fake_gemini.usages)
    for usage in usages:
        assert usage["cost_source"] == "table"
        assert usage["cost_usd"] == pytest.approx(SHIPPED_TABLE.cost(model, usage["input_tokens"],
                                                                     usage["output_tokens"]))
    expected = sum(u["cost_usd"] for u in usages)
    assert snap["cost"]["cost_usd"] == pytest.approx(expected, abs=1e-6) and snap["cost"]["unpriced"] == 0
    assert snap["counters"]["cost_usd"][0] == pytest.approx(expected, abs=1e-4)
