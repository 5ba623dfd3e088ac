"""`loopwarden demo` as a user runs it: a real demo daemon in a profile of its own, real scripted agents."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwarden.paths import default_paths
from loopwarden.runtime.client import Client
from loopwarden.sessions.demo import DEMO_AGENTS, demo_specs, scripted_seconds
from loopwarden.sessions.scripted import load_scenario
from loopwarden.supervisor.config import format_duration
from tests.support.waiting import wait_for

FAST = "50"  # the tests play the demo fifty times faster than a person watches it


class Demo:
    """The demo's profile under a short private XDG_DATA_HOME (a unix socket path is short)."""

    def __init__(self, data_home: Path) -> None:
        self.env = {**{k: v for k, v in os.environ.items() if not k.startswith("LOOPWARDEN_") and k != "CLAUDECODE"},
                    "XDG_DATA_HOME": str(data_home)}
        self.home = data_home / "loopwarden" / "demo"

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.loopwarden("demo", *args)

    def loopwarden(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "loopwarden", *args], env={**self.env, **env},
                              capture_output=True, text=True, timeout=60, check=False)

    def sessions(self) -> list[dict[str, Any]]:
        with Client.connect(default_paths({"LOOPWARDEN_HOME": str(self.home)}), autostart=False) as client:
            return list(client.request("list"))

    def by_name(self) -> dict[str, dict[str, Any]]:
        return {str(s["name"]): s for s in self.sessions()}


@pytest.fixture
def demo() -> Iterator[Demo]:
    with tempfile.TemporaryDirectory(prefix="lwdemo-", dir="/tmp") as tmp:
        d = Demo(Path(tmp))
        try:
            yield d
        finally:
            d.cli("--stop")


def test_no_console_lists_the_agents_and_says_how_to_watch_and_stop_them(demo: Demo) -> None:
    proc = demo.cli("--no-console", "--speed", FAST)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"started {len(DEMO_AGENTS)} scripted agents on the demo daemon (its files: {demo.home}):"
    listed = [line.split() for line in lines[1:1 + len(DEMO_AGENTS)]]
    assert [(row[0], row[1]) for row in listed] == [(f"s{i}", a.scenario) for i, a in enumerate(DEMO_AGENTS, 1)]
    assert lines[1].endswith(DEMO_AGENTS[0].shows)
    stall = next(a for a in DEMO_AGENTS if a.scenario == "stall")
    limit = float(FAST)  # the times said are the times this round keeps, not the speed-1 ones
    assert f"a tool silent for {format_duration(stall.silence / limit)}: a stall nudge after " \
           f"{format_duration(20 / limit)}" in proc.stdout
    assert f"stopped at its {format_duration(180 / limit)} limit" in proc.stdout
    hints = "\n".join(lines[1 + len(DEMO_AGENTS):])
    assert "loopwarden demo " in hints and "ctrl+r restarts" in hints
    assert f"LOOPWARDEN_HOME={demo.home} loopwarden status" in hints and "loopwarden demo --stop" in hints
    assert proc.stderr == ""
    assert len(demo.sessions()) == len(DEMO_AGENTS)

    again = demo.cli("--no-console")  # a round is live: nothing new starts, the live ones are listed
    assert again.returncode == 0 and again.stdout.startswith("the demo is already running, ")
    assert "--again starts a new round" in again.stdout and len(demo.sessions()) == len(DEMO_AGENTS)
    assert demo.cli("--stop").stdout.startswith("demo daemon stopped; ")


def test_at_speed_every_agent_plays_its_scenario_to_its_outcome(demo: Demo) -> None:
    assert demo.cli("--no-console", "--speed", FAST).returncode == 0

    def settled() -> dict[str, dict[str, Any]] | None:
        snaps = demo.by_name()
        waiting = {"gate_request", "loop_gate"}  # they wait for a human
        done = all(s["state"] == "gated" if n in waiting else s["state"] in ("exited", "terminated")
                   for n, s in snaps.items())
        return snaps if done else None

    snaps = wait_for(settled, timeout=60, what="every demo agent to finish or wait for a human")
    ended = {name: (s["state"], s.get("termination")) for name, s in snaps.items()}
    assert ended["repetition"] == ("terminated", "repetition_loop")
    assert ended["validation"] == ("terminated", "validation_failure")
    assert ended["max_runtime"] == ("terminated", "max_runtime")
    for name in ("healthy", "stall", "huge_output", "same_error", "alternation", "blocked_spin"):
        assert ended[name][0] == "exited", (name, snaps[name])


def test_each_scenario_plays_out_over_minutes_at_the_demos_own_pace() -> None:
    for agent in DEMO_AGENTS:
        seconds = scripted_seconds(agent)
        if seconds is None:  # runs until the supervisor stops it: a rule, or its time limit
            limits = dict(agent.limits)
            assert agent.scenario == "repetition" or 60 <= limits["limits.max_runtime"] <= 240, agent
        else:
            assert 60 <= seconds <= 240, (agent.scenario, seconds)


def test_speed_divides_every_pause_and_every_stretched_limit(tmp_path: Path) -> None:
    slow, fast = demo_specs(tmp_path), demo_specs(tmp_path, speed=50)
    for agent, one, fifty in zip(DEMO_AGENTS, slow, fast, strict=True):
        assert one["command"][-4:] == ["--pace", f"{agent.pace:g}", "--speed", f"{1 / agent.slow:g}"]
        assert fifty["command"][-4:] == ["--pace", f"{agent.pace / 50:g}", "--speed", f"{50 / agent.slow:g}"]
        header = load_scenario(agent.scenario).config
        assert one["sets"] == [*header, *(f"{k}={v:g}" for k, v in agent.limits)]  # the demo's limits win
        assert fifty["sets"] == [*header, *(f"{k}={v / 50:g}" for k, v in agent.limits)]


@pytest.mark.parametrize("speed", ["0", "-1", "fast", "inf", "nan", "101"])
def test_a_bad_speed_is_a_one_line_error(speed: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "loopwarden", "demo", "--speed", speed], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("loopwarden: error: Invalid value for '--speed'")
    assert proc.stderr.count("\n") == 1


def test_a_speed_given_while_a_round_is_live_says_in_one_line_how_to_play_it(demo: Demo) -> None:
    assert demo.cli("--no-console", "--speed", FAST).returncode == 0
    proc = demo.cli("--no-console", "--speed", "4")
    assert proc.returncode == 0 and proc.stdout.startswith("the demo is already running, ")
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "a round is already live" in proc.stderr
    assert "'loopwarden demo --again --speed 4' starts it now" in proc.stderr
    assert len(demo.sessions()) == len(DEMO_AGENTS)  # nothing new started
    assert demo.cli("--no-console").stderr == ""  # no speed asked for: nothing to explain


def test_ls_with_only_the_demos_daemon_running_points_at_it(demo: Demo, tmp_path: Path) -> None:
    assert demo.cli("--no-console", "--speed", FAST).returncode == 0
    runtime = tmp_path / "run"  # the user's own profile, where no daemon runs
    runtime.mkdir(mode=0o700)
    proc = demo.loopwarden("ls", XDG_RUNTIME_DIR=str(runtime))
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.startswith("loopwarden: error: no daemon is running") and proc.stderr.count("\n") == 1
    assert f"the demo's daemon is running: 'loopwarden demo' shows it, or LOOPWARDEN_HOME={demo.home} loopwarden ls" \
        in proc.stderr
    listed = demo.loopwarden("ls", LOOPWARDEN_HOME=str(demo.home))  # the command the hint gives works
    assert listed.returncode == 0 and "repetition" in listed.stdout

    demo.cli("--stop")
    alone = demo.loopwarden("ls", XDG_RUNTIME_DIR=str(runtime))  # no demo either: no hint
    assert alone.returncode == 3 and "the demo's daemon" not in alone.stderr
