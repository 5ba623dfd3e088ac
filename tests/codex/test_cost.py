"""The real Codex CLI's usage priced in dollars (its model from thread/start, cached input at its own price, the
price overridden in the config), and its rate-limit updates kept as the session's quota."""

from __future__ import annotations

import pytest

from loopwarden.sessions.codex_app import quota_of
from loopwarden.supervisor.prices import SHIPPED_TABLE, table_of
from tests.codex.codex_home import MODEL
from tests.codex.fake_responses import FakeResponses, run, say
from tests.codex.test_launched import start
from tests.support.daemon import Harness
from tests.support.events import of_kind
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(90)
PRICE = f"{MODEL}=1.5,12,0.15"  # not the shipped price of the fake's model: the config's replaces it
RESETS = 1_900_000_000


def test_codex_usage_is_priced_from_the_configs_table_and_its_quota_kept(cx: Harness,
                                                                       fake_model: FakeResponses) -> None:
    fake_model.cached_share = 0.5
    fake_model.headers = {"x-codex-primary-used-percent": "42", "x-codex-primary-window-minutes": "300",
                          "x-codex-primary-reset-at": str(RESETS), "x-codex-secondary-used-percent": "7",
                          "x-codex-secondary-window-minutes": "10080"}
    fake_model.play([run("echo priced"), say("All done.")])
    sid = start(cx, "say hello", sets=(f"prices.models={PRICE}",))
    snap = cx.wait_state(sid, "exited", "terminated", timeout=60)
    usages = wait_for(lambda: of_kind(cx, sid, "usage") or None, what="usage events")
    assert sum(u["input_tokens"] for u in usages) == sum(u["input_tokens"] for u in fake_model.usages)
    assert sum(u["output_tokens"] for u in usages) == sum(u["output_tokens"] for u in fake_model.usages)
    assert sum(u["cache_read_tokens"] for u in usages) == sum(
        u["input_tokens_details"]["cached_tokens"] for u in fake_model.usages) > 0
    table = table_of([PRICE])
    assert table.price(MODEL) != SHIPPED_TABLE.price(MODEL) is not None  # the config's price, not the shipped one
    for usage in usages:
        assert usage["model"] == MODEL and usage["cost_source"] == "table"
        assert usage["cost_usd"] == pytest.approx(table.cost(MODEL, usage["input_tokens"], usage["output_tokens"],
                                                             usage["cache_read_tokens"]))
    expected = sum(u["cost_usd"] for u in usages)
    assert snap["cost"]["cost_usd"] == pytest.approx(expected, abs=1e-6) and snap["cost"]["source"] == "table"
    assert snap["counters"]["cost_usd"][0] == pytest.approx(expected, abs=1e-4)
    windows = {w["name"]: w for w in (snap.get("quota") or {}).get("windows") or []}
    assert windows["primary"] == {"name": "primary", "used_percent": 42, "window_minutes": 300,
                                  "resets_at": RESETS}
    assert windows["secondary"]["used_percent"] == 7
    status = cx.cli("status", sid).stdout
    assert "priced from the table" in status and MODEL in status
    assert "quota: primary: 42% used of a 5h window, resets 2030-03-17" in status
    assert "quota: secondary: 7% used of a 7d window" in status


def test_a_sparse_rate_limit_update_keeps_what_it_leaves_out() -> None:
    first = quota_of({"primary": {"usedPercent": 10, "windowDurationMins": 300, "resetsAt": RESETS},
                      "secondary": {"usedPercent": 3}, "planType": "plus"}, None)
    later = quota_of({"primary": {"usedPercent": 55}, "planType": None}, first)
    assert later is not None and later["plan"] == "plus"
    windows = {w["name"]: w for w in later["windows"]}
    assert windows["primary"]["used_percent"] == 55 and windows["secondary"]["used_percent"] == 3
    assert quota_of("not an object", first) is first
