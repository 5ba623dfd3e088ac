"""A real daemon whose alerts go to a JSON webhook receiver on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.webhook_receiver import WebhookReceiver, webhook  # noqa: F401
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for

Start = Callable[..., Harness]


def write_notify(home: Path, urls: list[str], **settings: Any) -> None:
    """The daemon's config file with a [notify] table."""
    lines = ["[notify]", "urls = [" + ", ".join(f'"{u}"' for u in urls) + "]"]
    for key, value in settings.items():
        if isinstance(value, list):
            lines.append(f"{key} = [" + ", ".join(f'"{v}"' for v in value) + "]")
        else:
            lines.append(f"{key} = {value!r}" if not isinstance(value, str) else f'{key} = "{value}"')
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    (home / "config.toml").chmod(0o600)  # it holds the URLs: as docs/alerts.md asks


@pytest.fixture
def alerted(tmp_path: Path) -> Iterator[Start]:
    """start(urls, **notify settings): a daemon (LOOPWARDEN_HOME in tmp_path) with those settings."""
    started: list[Harness] = []

    def start(urls: list[str], env: dict[str, str] | None = None, keeping: bool = True,
              **settings: Any) -> Harness:
        harness = Harness(tmp_path)
        harness.env.update(env or {})
        if urls or settings:
            write_notify(tmp_path, urls, **settings)
        if not keeping:
            harness.not_keeping()
        harness.start()
        started.append(harness)
        return harness

    try:
        yield start
    finally:
        for harness in started:
            harness.stop()


def alert_rows(lw: Harness, **match: Any) -> list[dict[str, Any]]:
    """The audit's alert rows (actor loopwarden, action alert) matching every field given."""
    rows = [r for r in lw.request("actions") if r["action"] == "alert" and r["actor"] == "loopwarden"]
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def wait_rows(lw: Harness, count: int = 1, **match: Any) -> list[dict[str, Any]]:
    return wait_for(lambda: (rows := alert_rows(lw, **match)) and len(rows) >= count and rows,
                    what=f"{count} alert audit rows like {match}")


def alerts_health(lw: Harness) -> dict[str, Any]:
    return lw.request("ping").get("alerts") or {}


def scenario(lw: Harness, name: str) -> str:
    """A bundled scenario, with the settings its header asks for."""
    from loopwarden.sessions.scripted import load_scenario

    sets = tuple(load_scenario(name).config)
    return lw.launch(PY, "-m", "loopwarden.sessions.scripted", name, sets=sets, name=name)
