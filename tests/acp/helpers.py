"""What the ACP tests share: the fake agent's path, starting it through a real daemon, its report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.daemon import Harness
from tests.support.paths import AGENTS, PY

FAKE = str(AGENTS / "fake_acp_agent.py")


def start(h: Harness, mode: str, prompt: str = "do the task", sets: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> str:
    """`loopwarden run -d --adapter acp -- python fake_acp_agent.py MODE -- PROMPT` in the work dir."""
    return h.run_detached(PY, FAKE, mode, "--", prompt, adapter="acp", name=f"acp-{mode}", sets=sets,
                          cwd=h.work, env=env, timeout=30)  # type: ignore[attr-defined]


def report(h: Harness) -> list[dict[str, Any]]:
    path: Path = h.report  # type: ignore[attr-defined]
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x]


def prompts(h: Harness) -> list[str]:
    return [r["prompt"] for r in report(h) if "prompt" in r]


def answers(h: Harness) -> dict[Any, dict[str, Any]]:
    return {r["answer"]["id"]: r["answer"] for r in report(h) if "answer" in r}


def chosen(answer: dict[str, Any]) -> str:
    outcome = answer["result"]["outcome"]
    return str(outcome.get("optionId", outcome["outcome"]))
