"""The live demo: every bundled scenario as a watchable session, under a daemon of its own.

The scenario files are written for the tests (short sleeps, limits of a second or
two). The demo paces them like agents at work: seconds of thinking before each line,
tools that take seconds, and limits stretched to match, so each scenario plays out
over one to four minutes. `speed` divides every pause and limit (the tests run the
same demo at a hundred times the pace).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..supervisor.config import format_duration
from .scripted import PACE_RHYTHM, Scenario, load_scenario, step_kind


@dataclass(frozen=True)
class DemoAgent:
    scenario: str
    shows: str  # what to watch for, in a few words
    pace: float  # mean seconds before each line it writes (the model thinking)
    slow: float = 1.0  # the scenario's sleeps and tool times are multiplied by this
    limits: tuple[tuple[str, float], ...] = ()  # duration settings, in seconds at speed 1
    silence: float = 0.0  # seconds a tool is silent at speed 1, when the story is about that

    def describe(self, speed: float = 1.0) -> str:
        """What to watch for, its times at `speed` (`{stall_timeout}`: the setting of that name)."""
        times = {key.rsplit(".", 1)[-1]: format_duration(seconds / speed) for key, seconds in self.limits}
        return self.shows.format(silence=format_duration(self.silence / speed), **times)

    def spec_args(self, speed: float) -> tuple[list[str], list[str]]:
        """The scripted agent's pacing arguments and the settings, at `speed` times the demo's pace."""
        args = ["--pace", f"{self.pace / speed:g}", "--speed", f"{speed / self.slow:g}"]
        return args, [f"{key}={seconds / speed:g}" for key, seconds in self.limits]


# In the order they are launched; `demo --no-console` describes them from here (the README and docs/console.md
# list them too).
DEMO_AGENTS: tuple[DemoAgent, ...] = (
    DemoAgent("healthy", "a varied, successful session: no intervention", 10, 20),
    DemoAgent("repetition", "re-reads one file: nudged, blocked, then stopped (repetition_loop)", 8),
    DemoAgent("validation", "writes malformed lines: nudged twice, then stopped (validation_failure)", 15, 20),
    DemoAgent("stall", "a tool silent for {silence}: a stall nudge after {stall_timeout}", 12, 20,
              (("limits.stall_timeout", 20),), silence=36),
    DemoAgent("huge_output", "300,000 characters of logs: spilled to a file", 16),
    DemoAgent("gate_request", "asks a human before dropping a table: decide it (g)", 16),
    DemoAgent("same_error", "the same connection error 4 times: the 4th run is blocked", 12, 20),
    DemoAgent("alternation", "reads A, greps B, again and again: nudged, then blocked", 6, 20),
    DemoAgent("loop_gate", "the same error after 4 fixes: a gate waits for a human", 10, 20),
    DemoAgent("blocked_spin", "blocked 3 times on one blocker: granted authority to work around it", 12, 20),
    DemoAgent("max_runtime", "never finishes: stopped at its {max_runtime} limit (max_runtime)", 8, 20,
              (("limits.max_runtime", 180),)),
)


def demo_specs(home: Path, speed: float = 1.0) -> list[dict[str, Any]]:
    """One `run` spec per demo agent: the scripted agent, paced so a person can follow it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
    specs = []
    for agent in DEMO_AGENTS:
        header = load_scenario(agent.scenario).config
        pacing, limits = agent.spec_args(speed)
        specs.append({"name": agent.scenario, "adapter": "native", "cwd": str(home), "env": env,
                      "command": [sys.executable, "-m", "loopwarden.sessions.scripted", agent.scenario, *pacing],
                      "sets": [*header, *limits], "config_env": {}})
    return specs


def scripted_seconds(agent: DemoAgent) -> float | None:
    """How long the agent's script takes at speed 1, waiting for no one; None when it runs until stopped."""
    lines = 0
    waits = 0.0

    def walk(steps: list[dict[str, Any]], times: int) -> bool:
        nonlocal lines, waits
        for _ in range(times):
            for step in steps:
                kind = step_kind(step)
                if kind == "until_stopped":
                    return False
                if kind == "repeat" and not walk(step["steps"], step["repeat"]):
                    return False
                if kind in ("emit", "raw", "call"):
                    waits += agent.pace * PACE_RHYTHM[lines % len(PACE_RHYTHM)] + step.get("takes", 0) * agent.slow
                    lines += 1
                elif kind == "sleep":
                    waits += step["sleep"] * agent.slow
        return True

    scenario: Scenario = load_scenario(agent.scenario)
    return waits if walk(list(scenario.steps), 1) else None
