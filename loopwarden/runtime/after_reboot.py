"""`sessions.continue_after_reboot`: the sessions an earlier daemon lost (a reboot, a crash) continued by this
daemon in their agents' own conversations, a few at a time, each audited as the daemon's own action."""

from __future__ import annotations

import os
from collections.abc import Callable

import anyio

from ..paths import Paths
from ..supervisor.config import ConfigError, Sessions
from .continuing import ContinueOperations
from .hook_intake import operator_config
from .registry import SessionRegistry
from .requests import RequestError

ANSWER_WAIT = 120.0  # seconds one continue holds its place while its agent takes the conversation up
POLL = 0.2


class ContinueAfterReboot:
    """Started once, with the sessions the daemon marked lost when it opened the store."""

    def __init__(self, paths: Paths, registry: SessionRegistry, continues: ContinueOperations, *,
                 log: Callable[[str], None]) -> None:
        self.paths = paths
        self.registry = registry
        self.continues = continues
        self.log = log
        self.limiter: anyio.CapacityLimiter | None = None  # one for every call: sessions in pods come one by one

    def settings(self) -> Sessions | None:
        """The daemon's [sessions] settings (config file < environment); None, said in the log, when unreadable."""
        try:
            return operator_config(self.paths).sessions
        except ConfigError as exc:
            self.log(f"continue_after_reboot: settings not read ({exc}); no session is continued")
            return None

    async def run(self, lost: list[str]) -> None:
        settings = self.settings() if lost else None
        if settings is None or not settings.continue_after_reboot:
            return
        if self.limiter is None:
            self.limiter = anyio.CapacityLimiter(max(1, settings.continue_at_once))
        limiter = self.limiter
        async with anyio.create_task_group() as tg:
            for sid in lost:
                tg.start_soon(self._one, sid, limiter)

    async def _one(self, sid: str, limiter: anyio.CapacityLimiter) -> None:
        try:
            snap = await self.continues.stored_snapshot(sid)
        except RequestError:
            return
        if not snap.get("resumable"):
            return  # its agent reported no conversation loopwarden can resume: it stays lost
        async with limiter:
            try:
                started = await self.continues.start(sid, None, dict(os.environ), fresh=False, who=None)
            except RequestError as exc:
                self.log(f"continue_after_reboot: {sid} not continued: {exc}")
                return
            self.log(f"continue_after_reboot: {sid} continued as {started['id']}")
            await self._answered(started["id"])

    async def _answered(self, new: str) -> None:
        """Until the new run's agent accepted or refused the conversation, or the run ended (bounded)."""
        with anyio.move_on_after(ANSWER_WAIT):
            while True:
                session = self.registry.sessions.get(new)
                if session is None or session.final or session.snapshot().get("resume") != "waiting":
                    return
                await anyio.sleep(POLL)
