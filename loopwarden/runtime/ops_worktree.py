"""The operations on a session's worktree: `diff` (what it changed, live) and `worktree` (merge or discard it),
each computed in a worker thread so that git never stalls the daemon."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..supervisor.verdicts import FINAL_STATES
from .audit import AuditLog
from .principal import Principal
from .registry import SessionRegistry
from .requests import AlreadyAudited, RequestError, request_note
from .worktree_merge import discard, merge, plan_discard, plan_merge
from .worktrees import Worktree, WorktreeError, changes

DIFFS_AT_ONCE = 2  # git diffs computed at once (each can hash a whole tree): the rest wait their turn
ACTIONS = ("merge", "discard")


async def worktree_diff(sid: str, snap: dict[str, Any], *, with_patch: bool = True,
                        limiter: anyio.CapacityLimiter | None = None) -> dict[str, Any] | None:
    """What session `sid` changed in its worktree (its snapshot names it) against the commit it began from,
    as `diff` answers it; None when it has no worktree. RequestError (one line) when git cannot tell."""
    tree = Worktree.of(snap.get("worktree"))
    if tree is None:
        return None
    try:
        found = await anyio.to_thread.run_sync(lambda: changes(tree, with_patch=with_patch), limiter=limiter)
    except WorktreeError as exc:
        raise RequestError(f"session {sid}: {exc}") from None
    found.pop("tree", None)
    return {"session": sid, "source": "worktree", "worktree": tree.path, "branch": tree.branch, "base": tree.base,
            **found}


class WorktreeOperations:
    """`op_diff` (read-only) and `op_worktree` (an operator's: merge or discard, audited)."""

    def __init__(self, registry: SessionRegistry, audit: AuditLog,
                 from_calls: Callable[[str], Awaitable[dict[str, Any]]]) -> None:
        self.registry = registry
        self.audit = audit
        self.from_calls = from_calls  # a session without a worktree: the changes its calls made
        self.diffs = anyio.CapacityLimiter(DIFFS_AT_ONCE)
        self.acting = anyio.Lock()  # one merge or discard at a time: each checks the repository, then changes it

    async def op_diff(self, req: dict[str, Any], **_: Any) -> dict[str, Any]:
        """The session's changes: its worktree's, else those its calls made (`stat: true`: without the patch)."""
        sid = await self.registry.resolve(req.get("session"))
        found = await worktree_diff(sid, self.registry.snapshot(sid), with_patch=not req.get("stat"),
                                    limiter=self.diffs)
        if found is not None:
            return found
        from_calls = await self.from_calls(sid)
        if req.get("stat"):
            from_calls["patch"] = ""
        return from_calls

    async def op_worktree(self, req: dict[str, Any], *, who: Principal) -> dict[str, Any]:
        """Merge the session's worktree into the user's checkout, or discard it; `plan: true` only says what
        would be done (or why it is refused). Refused while the session runs: its agent still writes there."""
        action = req.get("action")
        if action not in ACTIONS:
            raise RequestError("worktree needs an 'action': merge or discard")
        sid = await self.registry.resolve(req.get("session"))
        snap = self.registry.snapshot(sid)
        tree = Worktree.of(snap.get("worktree"))
        if tree is None:
            raise RequestError(f"refused: session {sid} has no worktree (it was started without --worktree)")
        if snap.get("state") not in FINAL_STATES:
            raise RequestError(f"refused: session {sid} is {snap.get('state') or 'running'}; its agent may still write "
                               f"in its worktree: stop it first ('loopwarden kill {sid}') or wait until it ends")
        sharing = [s.spec.id for s in self.registry.sessions.values()
                   if not s.final and Worktree.of(s.spec.worktree) == tree]
        if sharing:  # a restarted or continued session goes on in the same worktree
            raise RequestError(f"refused: session {sharing[0]} still works in this worktree (it went on from "
                               f"{sid}); stop it first ('loopwarden kill {sharing[0]}') or wait until it ends")
        name = str(snap.get("name") or sid)
        async with self.acting:
            try:
                plan = await anyio.to_thread.run_sync(
                    lambda: plan_merge(tree, sid, name) if action == "merge" else plan_discard(tree))
            except WorktreeError as exc:
                raise RequestError(f"refused: {exc}") from None
            if req.get("plan"):
                return plan.to_dict(sid)
            note = request_note(req)
            target = f"{tree.branch} -> {plan.target}" if action == "merge" else tree.branch
            await self.audit.before(who, sid, f"worktree-{action}", target, note, "done")
            try:
                return await anyio.to_thread.run_sync(
                    lambda: merge(tree, sid, name) if action == "merge" else discard(tree, sid))
            except WorktreeError as exc:
                self.audit.record(who, sid, f"worktree-{action}", target, note, f"failed: {exc}")
                raise AlreadyAudited(str(exc)) from None
