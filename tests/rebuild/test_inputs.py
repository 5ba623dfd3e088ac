"""The operator's inputs as the store keeps them: a `set` records only the live keys that moved, and puts back
the same config; each input reads as a line in the session's log."""

from __future__ import annotations

import orjson

from loopwarden.runtime import inputs
from loopwarden.supervisor.config import change, load_config


def test_a_set_records_the_keys_that_moved_and_gives_back_the_same_config() -> None:
    before = load_config(env={})
    after = change(before, {"limits.max_runtime": "2h", "rules.disabled": "alternation,monologue",
                            "repetition.max_identical_calls": "5"})  # (5 is the default: it did not move)
    given = orjson.loads(orjson.dumps(inputs.reconfigured(before, after)))  # as stored
    assert given == {"call": "set", "values": {"limits.max_runtime": 7200.0,
                                               "rules.disabled": ["alternation", "monologue"]}}
    assert inputs.with_values(before, given["values"]) == after


def test_each_input_is_a_log_line_with_its_data() -> None:
    record = inputs.record(inputs.decided("g2", False, "alice", "no"), 12.5)
    assert record == {"stream": "loopwarden", "text": "gate g2 denied by alice", "ts": 12.5,
                      "engine": {"call": "decide", "gate": "g2", "approve": False, "by": "alice", "note": "no"}}
    assert [inputs.described(g) for g in (inputs.reset(None), inputs.reset("repetition"),
                                          inputs.granted("t1", None), inputs.rewound("policy", withdraw=True))] == [
        "counters reset: all", "counters reset: repetition", "unblock authority granted",
        "rewound by policy: gates approved, counters reset"]
