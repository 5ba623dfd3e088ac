"""A real daemon with budgets (and alerts to a webhook receiver on loopback), and the spending agent."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlite3

import pytest

from tests.fakes.webhook_receiver import WebhookReceiver, webhook  # noqa: F401
from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

Start = Callable[..., Harness]


def write_config(home: Path, **tables: dict[str, Any]) -> None:
    """The daemon's config file: {table: {key: value}}, values as TOML scalars or lists of strings."""
    lines: list[str] = []
    for table, values in tables.items():
        lines.append(f"[{table}]")
        for key, value in values.items():
            if isinstance(value, list):
                lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
            else:
                lines.append(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value!r}")
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    (home / "config.toml").chmod(0o600)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Start]:
    """start(**tables): a daemon (LOOPWARDEN_HOME in tmp_path/home) with that config file."""
    started: list[Harness] = []

    def start(**tables: dict[str, Any]) -> Harness:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        if tables:
            write_config(home, **tables)
        harness = Harness(home)
        harness.start()
        started.append(harness)
        return harness

    try:
        yield start
    finally:
        for harness in started:
            harness.stop()


def spender(lw: Harness, out: Path, cost: float, *extra: str, sets: tuple[str, ...] = (), cwd: Path | None = None,
            name: str = "spender") -> str:
    """tests/agents/spender.py launched (in `cwd`), each call costing `cost` dollars; its session id."""
    return lw.run_detached(PY, str(AGENTS / "spender.py"), str(out), str(cost), *extra, sets=sets, name=name,
                           cwd=cwd)


def calls(out: Path) -> list[tuple[int, str]]:
    """The verdicts the spender got, in order."""
    if not out.exists():
        return []
    return [(int(n), action) for n, action in (line.split() for line in out.read_text().splitlines())]


def budget_gate(lw: Harness, sid: str, gate: str = "g1", timeout: float = 30.0) -> dict[str, Any]:
    """The budget gate `gate` of session `sid`, once it is pending."""
    def pending() -> dict[str, Any] | None:
        found = [g for g in lw.request("gates") if g["ref"] == f"{sid}:{gate}"]
        return found[0] if found else None
    return wait_for(pending, timeout, f"gate {sid}:{gate} to open")


def spent(lw: Harness, sid: str) -> float:
    """The session's cost so far, as its engine counts it."""
    return float(lw.status(sid)["counters"]["cost_usd"][0])


def stored_gate(lw: Harness, sid: str, gate: str) -> tuple[str, str]:
    """(status, decided_by) of a gate as the store has it, once it is stored decided."""
    def read() -> tuple[str, str] | None:
        with sqlite3.connect(lw.paths.database) as db:
            row = db.execute("SELECT status, decided_by FROM gates WHERE session_id = ? AND gate_id = ?",
                             (sid, gate)).fetchone()
        return (row[0], row[1]) if row and row[0] != "pending" else None
    return wait_for(read, what=f"gate {sid}:{gate} stored decided")
