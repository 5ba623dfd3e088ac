"""The live demo: every bundled scenario as a watchable session, under a daemon of its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from .scripted import load_scenario

# (scenario, seconds before each line it writes, settings on top of its header's)
DEMO_SESSIONS: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("max_runtime", 0.4, ("limits.max_runtime=3m",)),
    ("repetition", 1.2, ()),
    ("same_error", 1.2, ()),
    ("alternation", 0.7, ()),
    ("validation", 2.0, ()),
    ("stall", 0.6, ()),
    ("huge_output", 1.5, ()),
    ("loop_gate", 1.2, ()),
    ("gate_request", 1.0, ()),
    ("blocked_spin", 1.2, ()),
    ("healthy", 1.0, ()),
)


def demo_specs(home: Path) -> list[dict[str, Any]]:
    """One `run` spec per demo session: the scripted agent, paced so a person can follow it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_")}
    specs = []
    for scenario, pace, extra in DEMO_SESSIONS:
        header = load_scenario(scenario).config
        specs.append({"name": scenario, "adapter": "native", "cwd": str(home), "env": env,
                      "command": [sys.executable, "-m", "loopwarden.sessions.scripted", scenario,
                                  "--pace", str(pace)],
                      "sets": [*header, *extra], "config_env": {}})
    return specs
