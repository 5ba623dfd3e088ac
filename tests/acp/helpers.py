"""What the ACP tests share: the fake agent's path, starting it through a real daemon, its report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import psutil

from tests.support.daemon import PY, Harness

FAKE = str(Path(__file__).resolve().parents[1] / "agents" / "fake_acp_agent.py")


def start(h: Harness, mode: str, prompt: str = "do the task", sets: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> str:
    """`loopwarden run -d --adapter acp -- python fake_acp_agent.py MODE -- PROMPT` in the work dir."""
    args = ["run", "--detach", "--adapter", "acp", "--name", f"acp-{mode}"]
    for s in sets:
        args += ["--set", s]
    done = subprocess.run([PY, "-m", "loopwarden", *args, "--", PY, FAKE, mode, "--", prompt],
                          env={**h.env, **(env or {})}, cwd=h.work,  # type: ignore[attr-defined]
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def report(h: Harness) -> list[dict[str, Any]]:
    path: Path = h.report  # type: ignore[attr-defined]
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x]


def prompts(h: Harness) -> list[str]:
    return [r["prompt"] for r in report(h) if "prompt" in r]


def answers(h: Harness) -> dict[Any, dict[str, Any]]:
    return {r["answer"]["id"]: r["answer"] for r in report(h) if "answer" in r}


def of_kind(h: Harness, sid: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in h.events(sid) if e["kind"] == kind]


def chosen(answer: dict[str, Any]) -> str:
    outcome = answer["result"]["outcome"]
    return str(outcome.get("optionId", outcome["outcome"]))


def process_with(marker: str) -> psutil.Process | None:
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            return proc
    return None
