"""A fixed console state for snapshot tests: the same sessions and gates every run, no daemon, no clock."""

from __future__ import annotations

from typing import Any

from loopwarden.paths import Paths
from loopwarden.widgets.feed import Feed

NOW = 1_790_000_000.0


def _snap(sid: str, name: str, state: str, **fields: Any) -> dict[str, Any]:
    counters = {"identical_calls": [0, 5], "validation": [0, 3], "loop": [0, 3], "tokens": [0, 0], "cost_usd": [0, 0]}
    counters.update(fields.pop("counters", {}))
    return {"id": sid, "name": name, "adapter": "native", "agent": "native", "state": state, "command": ["agent", name],
            "started_at": None, "runtime": 0.0, "max_runtime": 14400.0, "tool_calls": 0, "pending_gates": [],
            "cpu_percent": 0.0, "rss": 0, "termination": None, "exit_code": None, "counters": counters, **fields}


SESSIONS = [
    _snap("s1", "refactor-all", "running", runtime=95.0, max_runtime=180.0, tool_calls=212, cpu_percent=3.2,
          rss=18 << 20, counters={"identical_calls": [1, 5], "tokens": [48200, 0]}, interventions={"nudge": 1}),
    _snap("s2", "fix-login", "terminated", runtime=31.4, tool_calls=9, termination="repetition_loop",
          counters={"identical_calls": [8, 5]}, interventions={"nudge": 1, "block": 3}),
    _snap("s3", "migrations", "gated", runtime=62.0, tool_calls=14, cpu_percent=0.4, rss=21 << 20,
          pending_gates=["g1"], counters={"loop": [3, 3], "cost_usd": [0.42, 5]}, interventions={"gate": 1}),
    _snap("s4", "edit-session", "terminated", runtime=12.0, tool_calls=2, termination="validation_failure",
          counters={"validation": [3, 3]}, interventions={"nudge": 2}),
    _snap("s5", "report-json", "exited", runtime=8.1, tool_calls=6, exit_code=0,
          counters={"tokens": [19560, 0], "cost_usd": [0.07, 0]}, interventions={"nudge": 2, "spill": 1}),
    _snap("s6", "nightly-build", "paused", adapter="plain", runtime=400.0, tool_calls=0, rss=96 << 20),
]

_POD = {"on": "kubernetes:prod/agents", "context": "prod", "namespace": "agents", "image": "local/py3:1", "lost": None}
# a fleet with sessions on a cluster beside one here: running, gated, and one whose pod was deleted under it
POD_SESSIONS = [
    _snap("s7", "api-tests", "running", runtime=300.0, tool_calls=41, cpu_percent=1.1,
          pod={**_POD, "pod": "lw-s7-3f9a1c", "node": "node1"}),
    _snap("s8", "docs-pass", "gated", runtime=62.0, tool_calls=14, pending_gates=["g1"], interventions={"gate": 1},
          pod={**_POD, "pod": "lw-s8-b70e22", "node": "gke-agents-default-pool…"}),
    _snap("s9", "lint-fix", "lost", runtime=12.0, tool_calls=2, termination="lost",
          termination_text="host lost: pod lw-s9-0c4d5e on node node2 was deleted",
          lost={"how": "host", "text": "host lost: pod lw-s9-0c4d5e on node node2 was deleted"},
          pod={**_POD, "pod": "lw-s9-0c4d5e", "node": "node2",
               "lost": "host lost: pod lw-s9-0c4d5e on node node2 was deleted"}),
    _snap("s10", "local-build", "running", runtime=40.0, tool_calls=3, rss=12 << 20),
]

GATES = [{
    "ref": "s3:g1", "session": "s3", "name": "migrations", "id": "g1", "rule": "loop_counter",
    "reason": "task T-3 failed 3 times with the same error after different fixes",
    "opened_at": NOW - 75, "seq": 41, "status": "pending",
    "evidence": {"task": "T-3", "error": "sqlite3.OperationalError: table users already exists",
                 "failures": [{"seq": 12, "fix": "create_table_if_missing"}, {"seq": 25, "fix": "drop then create"},
                              {"seq": 38, "fix": "guard with has_table"}]},
}]


class FrozenFeed(Feed):
    """The console's feed with a fixed first reply and answers, instead of a daemon connection."""

    def __init__(self, sessions: list[dict[str, Any]] = SESSIONS) -> None:
        super().__init__(Paths(*(["/nonexistent"] * 3)))  # type: ignore[arg-type]
        self.first = sessions

    def start(self) -> None:
        self.sessions = [dict(s) for s in self.first]
        self._ready.set()

    def request(self, op: str, **fields: Any) -> Any:
        if op == "gates":
            return GATES if self.first else []
        raise AssertionError(f"a snapshot test sent {op}")

    def close(self) -> None:
        pass
