"""A session's worktree merged into the user's checkout, or discarded; each checked in full first (`plan`), so
that a refusal touches nothing. Blocking: the daemon calls these in a worker thread."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from .worktrees import (
    DIFF_FLAGS, Worktree, WorktreeError, changed_files, first_line, git, gitdir_of, out, scratch, state_tree,
)

AUTHOR = {"GIT_AUTHOR_NAME": "loopwarden", "GIT_AUTHOR_EMAIL": "loopwarden@localhost",
          "GIT_COMMITTER_NAME": "loopwarden", "GIT_COMMITTER_EMAIL": "loopwarden@localhost"}
NAMES_SHOWN = 5  # files a refusal names
# files that, merged, change what git or a shell does in the checkout: a plan warns of each
_SENSITIVE = re.compile(r"(^|/)(\.git[^/]*|\.envrc|\.husky|\.githooks)(/|$)")


@dataclass(frozen=True)
class Plan:
    """What a merge or discard would do: the session's changes as one commit (`commit`, on top of the branch
    when the worktree holds changes not committed yet: `fresh`), the files, and the checkout's branch."""

    action: str
    tree: Worktree
    files: list[dict[str, Any]]
    target: str | None = None  # the checkout's branch a merge goes into
    commit: str | None = None
    head: str | None = None  # the branch's commit now (None: the branch is gone)
    fresh: bool = False

    def to_dict(self, sid: str) -> dict[str, Any]:
        return {"session": sid, "action": self.action, "worktree": self.tree.path, "branch": self.tree.branch,
                "base": self.tree.base, "checkout": self.tree.checkout, "target": self.target,
                "files": self.files, "added": sum(f["added"] for f in self.files),
                "removed": sum(f["removed"] for f in self.files), "commits_pending": self.fresh,
                "warnings": warnings(self.files) if self.action == "merge" else []}


def warnings(files: list[dict[str, Any]]) -> list[str]:
    """A line for each file the merge would bring that changes what git or a shell runs or obeys in the
    checkout (.gitattributes, .gitignore, .gitmodules, hooks, .envrc): worth reading before merging."""
    paths = sorted({p for f in files for p in (f["path"], f.get("old_path") or "") if p and _SENSITIVE.search(p)})
    return [f"{p} is {next(f['status'] for f in files if p in (f['path'], f.get('old_path')))} by this merge: it "
            "changes what git or your shell does in your checkout; read it first" for p in paths]


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:NAMES_SHOWN])
    return shown + (f" and {len(paths) - NAMES_SHOWN} more" if len(paths) > NAMES_SHOWN else "")


def _branch_head(tree: Worktree) -> str | None:
    found = git(tree.checkout, "rev-parse", "-q", "--verify", f"refs/heads/{tree.branch}^{{commit}}", ok=(0, 1))
    return out(found) if found.returncode == 0 else None


def _checkout_branch(tree: Worktree) -> str:
    """The branch the user's checkout is on, or WorktreeError when a merge cannot go into it now."""
    if not os.path.isdir(tree.checkout):
        raise WorktreeError(f"the checkout {tree.checkout} is gone")
    ref = git(tree.checkout, "symbolic-ref", "-q", "--short", "HEAD", ok=(0, 1))
    if ref.returncode != 0:
        raise WorktreeError(f"your checkout {tree.checkout} is on a detached HEAD; check out the branch to merge "
                            "into, then merge again")
    for state in ("MERGE_HEAD", "REBASE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD"):
        if git(tree.checkout, "rev-parse", "-q", "--verify", state, ok=(0, 1)).returncode == 0:
            raise WorktreeError(f"your checkout {tree.checkout} is in the middle of a "
                                f"{state.split('_')[0].lower().replace('cherry', 'cherry-pick')}; finish it, "
                                "then merge again")
    return out(ref)


def _session_commit(tree: Worktree, head: str, sid: str, name: str) -> tuple[str, bool]:
    """The session's work as a commit: the branch's own when the worktree holds nothing more, else a new
    commit on it by loopwarden (made, not yet on the branch); and whether it is new."""
    gitdir = gitdir_of(tree)
    now = state_tree(tree, gitdir)  # its objects kept: the merge brings them
    if now == out(git(tree.checkout, "rev-parse", f"{head}^{{tree}}")):
        return head, False
    message = (f"loopwarden: session {sid} ({name})\n\nWhat the agent of session {sid} left in its worktree, "
               f"committed by 'loopwarden worktree {sid} merge'.\n")
    made = git(tree.checkout, "commit-tree", "--no-gpg-sign", now, "-p", head, "-F", "-", env=AUTHOR,  # not the user's
               stdin=message.encode())
    return out(made), True


def _dirty_paths(checkout: str) -> set[str]:
    """Files of the checkout that differ from its HEAD, untracked ones included (read without writing its index)."""
    raw = git(checkout, "status", "--porcelain", "-z", "--untracked-files=all").stdout.split(b"\0")
    paths, i = set(), 0
    while i < len(raw):
        record = raw[i]
        i += 1
        if len(record) < 4:
            continue
        paths.add(record[3:].decode("utf-8", "replace"))
        if record[:1] in (b"R", b"C"):  # a rename's source follows
            paths.add(raw[i].decode("utf-8", "replace"))
            i += 1
    return paths


def _untracked_in_the_way(checkout: str, target: str, merged: str) -> list[str]:
    """Files the merge would add that the checkout has on disk without tracking them: ignored ones (`.env`),
    which `git status` does not list and `git merge` would overwrite, included."""
    added = git(checkout, "diff", "--no-renames", "--diff-filter=A", "--name-only", "-z", f"refs/heads/{target}",
                merged).stdout
    found = []
    for raw in added.split(b"\0"):
        path = raw.decode("utf-8", "replace")
        parts = path.split("/")
        # the file itself, or a file where the merge needs a directory
        if path and any(os.path.lexists(os.path.join(checkout, *parts[:n])) and
                        (n == len(parts) or not os.path.isdir(os.path.join(checkout, *parts[:n])))
                        for n in range(1, len(parts) + 1)):
            found.append(path)
    return sorted(found)


def plan_merge(tree: Worktree, sid: str, name: str) -> Plan:
    """A merge of the session's work into the checkout's branch, checked: refused (WorktreeError) when the
    worktree or branch is gone, there is nothing to merge, it would conflict, or it would touch a file the
    checkout has uncommitted changes to."""
    if not os.path.isdir(tree.path):
        raise WorktreeError(f"the worktree {tree.path} is gone (merged or discarded already?)")
    target = _checkout_branch(tree)
    head = _branch_head(tree)
    if head is None:
        raise WorktreeError(f"the branch {tree.branch} is gone from {tree.checkout}")
    commit, fresh = _session_commit(tree, head, sid, name)
    files = changed_files(tree.checkout, tree.base, commit)
    if not files:
        raise WorktreeError(f"session {sid} changed nothing in its worktree; there is nothing to merge (discard it: "
                            f"'loopwarden worktree {sid} discard')")
    merged = git(tree.checkout, "merge-tree", "--write-tree", "--name-only", "--no-messages", f"refs/heads/{target}",
                 commit, ok=(0, 1))
    lines = out(merged).splitlines()
    if merged.returncode == 1:
        raise WorktreeError(f"merging {tree.branch} into {target} would conflict in {_names(lines[1:])}; nothing was "
                            f"changed. Merge it by hand (git merge {tree.branch}), or discard it")
    touched = git(tree.checkout, "diff", *DIFF_FLAGS, "--name-only", "-z", f"refs/heads/{target}", lines[0]).stdout
    dirty = sorted({p.decode("utf-8", "replace") for p in touched.split(b"\0") if p} & _dirty_paths(tree.checkout))
    if dirty:
        raise WorktreeError(f"your checkout {tree.checkout} has uncommitted changes to {_names(dirty)}, which the "
                            "merge would change; commit or stash them, then merge again")
    hidden = _untracked_in_the_way(tree.checkout, target, lines[0])
    if hidden:
        raise WorktreeError(f"your checkout {tree.checkout} has files git ignores or does not track at "
                            f"{_names(hidden)}, which the merge would overwrite; nothing was changed. Move them "
                            "aside, then merge again")
    return Plan("merge", tree, files, target=target, commit=commit, head=head, fresh=fresh)


def merge(tree: Worktree, sid: str, name: str) -> dict[str, Any]:
    """Merge the session's work into the checkout's branch (a merge commit naming the session), then remove
    the worktree and delete its branch. Checked first in full: a refusal leaves everything as it was."""
    plan = plan_merge(tree, sid, name)
    assert plan.commit is not None and plan.head is not None
    if plan.fresh:  # compare-and-swap: refused if the branch moved since the plan
        git(tree.checkout, "update-ref", "-m", f"loopwarden: session {sid}", f"refs/heads/{tree.branch}",
            plan.commit, plan.head)
    who = {} if _has_identity(tree.checkout) else AUTHOR
    done = git(tree.checkout, "merge", "--no-ff", "--no-edit", "--no-overwrite-ignore", "-m",
               f"Merge loopwarden session {sid} ({name}) from {tree.branch}", plan.commit, env=who, ok=(0, 1, 2, 128))
    if done.returncode != 0:
        git(tree.checkout, "merge", "--abort", ok=(0, 1, 128))
        raise WorktreeError(f"git merge failed, and was undone: {first_line(done.stderr) or first_line(done.stdout)}")
    merged = out(git(tree.checkout, "rev-parse", "HEAD"))
    _remove(tree)
    return {**plan.to_dict(sid), "merged": merged, "removed": True}


def _has_identity(checkout: str) -> bool:
    """Whether the user set a name and email for their commits (else the merge commit is loopwarden's)."""
    return all(git(checkout, "config", key, ok=(0, 1)).stdout.strip() for key in ("user.name", "user.email"))


def plan_discard(tree: Worktree) -> Plan:
    """What a discard would throw away (the files the session changed), or WorktreeError when nothing is left."""
    gone = not os.path.isdir(tree.path)
    head = _branch_head(tree) if os.path.isdir(tree.checkout) else None
    if gone and head is None:
        raise WorktreeError(f"the worktree {tree.path} and its branch {tree.branch} are gone already")
    try:
        files = [] if gone else _worktree_files(tree)
    except WorktreeError:  # its .git file rewritten: it can still be thrown away, its files unlisted
        files = []
    return Plan("discard", tree, files, head=head)


def _worktree_files(tree: Worktree) -> list[dict[str, Any]]:
    gitdir = gitdir_of(tree)
    with scratch(tree, gitdir) as objects:
        now = state_tree(tree, gitdir, objects)
        return changed_files(tree.path, tree.base, now, {"GIT_DIR": gitdir, "GIT_WORK_TREE": tree.path, **objects})


def discard(tree: Worktree, sid: str) -> dict[str, Any]:
    """Remove the worktree with everything in it and delete its branch."""
    plan = plan_discard(tree)
    _remove(tree)
    return {**plan.to_dict(sid), "removed": True}


def _remove(tree: Worktree) -> None:
    """The worktree removed (its files too, changed or not) and its branch deleted."""
    if not os.path.isdir(tree.checkout):
        raise WorktreeError(f"the checkout {tree.checkout} is gone; remove {tree.path} by hand")
    if os.path.isdir(tree.path):
        git(tree.checkout, "worktree", "remove", "--force", "--force", tree.path)
    git(tree.checkout, "worktree", "prune")
    if _branch_head(tree) is not None:
        git(tree.checkout, "branch", "-q", "-D", tree.branch)
