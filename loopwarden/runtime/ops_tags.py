"""`tag`: add or remove a live session's tags (`loopwarden set SESSION tag=NAME tag=-OLD`), audited first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..supervisor.tags import TagError, change_tags
from .audit import AuditLog, warned
from .principal import Principal
from .registry import SessionRegistry
from .requests import RequestError, request_note


class TagOperations:
    """`op_tag`: the new tags are the session's at once, and its snapshot (so the store and consoles) says so."""

    def __init__(self, registry: SessionRegistry, audit: AuditLog, changed: Callable[[str], None]) -> None:
        self.registry = registry
        self.audit = audit
        self.changed = changed  # publishes the session's snapshot on the next round

    async def op_tag(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        session = await self.registry.live(req.get("session"))
        changes = req.get("changes")
        if not isinstance(changes, list) or not changes:
            raise RequestError("tag needs 'changes', such as [\"review\", \"-wip\"]")
        before = list(session.spec.tags)
        try:
            after = change_tags(before, changes)
        except TagError as exc:
            raise RequestError(str(exc)) from None
        note = f"tags: {','.join(before) or '-'} -> {','.join(after) or '-'}"
        warning = await self.audit.before(who, session.spec.id, "tag", ",".join(map(str, changes))[:200],
                                          request_note(req) or note, "done")
        try:  # another change may have landed meanwhile, and filled the session's tags
            session.spec.tags = change_tags(session.spec.tags, changes)
        except TagError as exc:
            raise RequestError(str(exc)) from None
        self.changed(session.spec.id)
        return warned({"session": session.spec.id, "tags": list(session.spec.tags), "before": before}, warning)
