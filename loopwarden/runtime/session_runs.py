"""Starting a session in the daemon: registered, published, and run in the daemon's task group, where a crash
of its loop is recorded as its end, never the daemon's."""

from __future__ import annotations

from collections.abc import Callable

from ..supervisor.verdicts import SessionState
from .contract import Supervised
from .lifecycle import Tasks
from .registry import SessionRegistry
from .routing import Router


class SessionStarter:
    """Puts a new session (launched, adopted or attached) in the registry and runs it."""

    def __init__(self, registry: SessionRegistry, router: Router, tasks: Tasks, *, log: Callable[[str], None],
                 clock: Callable[[], float]) -> None:
        self.registry = registry
        self.router = router
        self.tasks = tasks
        self.log = log
        self.clock = clock
        self.told: Callable[[Supervised], None] = lambda session: None  # the daemon's budgets reached, told

    def start(self, session: Supervised) -> None:
        sid = session.spec.id
        self.registry.add(session)
        self.told(session)
        self.router.mark(sid)
        self.tasks.start_soon(self._run, session)

    async def _run(self, session: Supervised) -> None:
        try:
            await session.run()
        except Exception as exc:  # noqa: BLE001 - a session's failure is recorded, never the daemon's end
            self.log(f"session {session.spec.id} crashed the supervisor loop: {type(exc).__name__}: {exc}")
            session.state = SessionState.EXITED
            session.ended_at = session.ended_at or self.clock()  # else its runtime would grow forever
        self.router.mark(session.spec.id)
