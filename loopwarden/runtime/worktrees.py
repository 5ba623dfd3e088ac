"""A session's own git worktree: made from the repository at its working directory, and what it changed since.

Git runs as a subprocess with an argument list (never a shell), without any GIT_* variable of the daemon's
environment (which could point it at another repository), and with hooks off: a worktree's hooks path can be
one of its own files (husky's `.githooks`), which the agent writes. Git never finds a worktree's repository
from its `.git` file, which the agent can rewrite to a repository of its own (whose config would run its
commands: core.fsmonitor, filters): every command on a worktree names the gitdir recorded when it was made
(GIT_DIR, GIT_WORK_TREE), with fsmonitor off and no textconv or external diff. Every function here blocks: the
daemon calls them in a worker thread. Merging and discarding: worktree_merge.py.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import private_dir
from .reaper import release, spawn_waited

BRANCH_PREFIX = "loopwarden/"
GIT_TIMEOUT = 300.0  # seconds one git command may take (a checkout of a large repository)
PATCH_CAP = 1 << 20  # bytes of unified diff in one answer; the rest is cut (truncated: true)
DIFF_FLAGS = ("--no-ext-diff", "--no-textconv", "--no-color", "-M")  # no command of the repository's choosing
# hooks off, names unquoted (the sanitiser shows them), no automatic gc left running behind the daemon
GIT = ("git", "-c", "core.hooksPath=/dev/null", "-c", "core.quotePath=false", "-c", "gc.auto=0",
       "-c", "maintenance.auto=false", "-c", "core.fsmonitor=false")
INDEX_CAP = 1 << 30  # bytes of a worktree's index copied for a diff; a bigger one is rebuilt from HEAD
LINK_CAP = 4096  # bytes of a worktree's `.git` file read
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}")
_STATUS = {"A": "added", "C": "added", "D": "deleted", "R": "renamed"}  # M, T, U: modified
# variables that point git at another repository, index or object store: an agent in a worktree gets its own
_POINTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
             "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX")



def project_dir(cwd: str | None, checkout: Any = None, subdir: Any = None) -> str | None:
    """Where a session works as its budgets see it: for a worktree session (its `worktree` record's checkout and
    subdir) the user's checkout, not the worktree under the daemon's data directory; else its working directory."""
    if isinstance(checkout, str) and checkout:
        return os.path.join(checkout, subdir) if isinstance(subdir, str) and subdir else checkout
    return cwd


class WorktreeError(Exception):
    """What git or the repository does not allow; the message is one line for a person."""


@dataclass(frozen=True)
class Worktree:
    """A session's worktree: where it is, its branch, the commit it began from, the user's checkout it came
    from, the session's directory inside it (relative, "" for its top), and its gitdir in the checkout's
    repository (`.git/worktrees/ID`, "" in a record made before it was kept: then found from the checkout)."""

    path: str
    branch: str
    base: str
    checkout: str
    subdir: str = ""
    gitdir: str = ""

    @property
    def cwd(self) -> str:
        return os.path.join(self.path, self.subdir) if self.subdir else self.path

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "branch": self.branch, "base": self.base, "checkout": self.checkout,
                "subdir": self.subdir, "gitdir": self.gitdir}

    @classmethod
    def of(cls, value: Any) -> Worktree | None:
        """The worktree a stored snapshot or spec names (`worktree`), or None when it names none."""
        if not isinstance(value, dict):
            return None
        fields = [value.get(k) for k in ("path", "branch", "base", "checkout", "subdir")]
        if not all(isinstance(v, str) for v in fields):
            return None
        path, branch, base, checkout, subdir = (str(v) for v in fields)
        gitdir = value.get("gitdir")
        gitdir = gitdir if isinstance(gitdir, str) else ""
        return cls(path, branch, base, checkout, subdir, gitdir) if branch.startswith(BRANCH_PREFIX) else None


def stored_worktree(snap: dict[str, Any]) -> dict[str, str] | None:
    """The worktree a stored snapshot names, for the spec of the session taken up or continued from it."""
    tree = Worktree.of(snap.get("worktree"))
    return tree.to_dict() if tree else None


@dataclass(frozen=True)
class Origin:
    """Where a worktree would come from: the checkout's top, its HEAD commit, the directory inside it, and
    whether the checkout has changes a worktree of HEAD leaves out."""

    top: str
    base: str
    subdir: str
    dirty: bool


def git_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The daemon's environment without GIT_* (a GIT_DIR there would aim every command elsewhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", **(extra or {})})
    return env


def agent_env(env: dict[str, str], cwd: str) -> dict[str, str]:
    """An agent's environment for its worktree: nothing pointing git back at the user's checkout, PWD its own."""
    out = {k: v for k, v in env.items() if k not in _POINTING}
    if "PWD" in out:
        out["PWD"] = cwd
    return out


def git(cwd: str, *args: str, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,),
        stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` in `cwd`, hooks off; WorktreeError (git's first line) unless its exit code is in `ok`."""
    child = _start([*GIT, *args], cwd, env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                   stderr=subprocess.PIPE)
    try:
        stdout, stderr = child.communicate(stdin, timeout=GIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        raise WorktreeError(f"git {args[0]} took longer than {GIT_TIMEOUT:g} s in {cwd}") from None
    finally:
        release(child.pid)
    proc = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
    if proc.returncode not in ok:
        raise WorktreeError(f"git {args[0]} failed: {first_line(proc.stderr) or f'exit code {proc.returncode}'}")
    return proc


def _start(argv: list[str], cwd: str, env: dict[str, str] | None, **pipes: Any) -> subprocess.Popen[bytes]:
    """git started as a child the daemon's reaper leaves alone (its exit code is ours to read: reaper.py)."""
    try:
        return spawn_waited(argv, cwd=cwd, env=git_env(env), stdout=subprocess.PIPE, **pipes)
    except FileNotFoundError as exc:
        missing = "git is not installed (not on PATH)" if exc.filename == "git" else f"{cwd} does not exist"
        raise WorktreeError(missing) from None
    except NotADirectoryError:
        raise WorktreeError(f"{cwd} is not a directory") from None


def first_line(data: bytes) -> str:
    """The first non-empty line of git's output, "fatal: " and "error: " taken off."""
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line:
            return re.sub(r"^(fatal|error): ", "", line)[:300]
    return ""


def out(proc: subprocess.CompletedProcess[bytes]) -> str:
    return proc.stdout.decode("utf-8", "replace").strip()


def safe_id(sid: str) -> str:
    """`sid`, checked to be a plain name for a directory and a branch (`s3`); WorktreeError otherwise."""
    if not _SAFE_ID.fullmatch(sid):
        raise WorktreeError(f"session id {sid[:40]!r} cannot name a worktree (letters, digits, - and _ only)")
    return sid


def origin(cwd: str) -> Origin:
    """Where a worktree of `cwd` would come from; WorktreeError (one line) when it cannot have one."""
    probe = git(cwd, "rev-parse", "--is-inside-work-tree", ok=(0, 128))
    if probe.returncode != 0 or out(probe) != "true":
        raise WorktreeError(f"{cwd} is not inside a git repository (or is inside its .git); a worktree needs "
                            "one: run from your project's checkout, or without --worktree")
    top = out(git(cwd, "rev-parse", "--show-toplevel"))
    head = git(cwd, "rev-parse", "-q", "--verify", "HEAD^{commit}", ok=(0, 1))
    if head.returncode != 0:
        raise WorktreeError(f"the repository at {top} has no commits yet, so there is nothing to make a worktree "
                            "of: commit once, then run again")
    subdir = os.path.relpath(os.path.realpath(cwd), os.path.realpath(top))
    if subdir == ".":
        subdir = ""
    elif subdir.startswith(".."):
        raise WorktreeError(f"{cwd} is not inside its repository's top {top}")
    status = git(top, "status", "--porcelain", "--untracked-files=normal", "-z")
    return Origin(top=top, base=out(head), subdir=subdir, dirty=bool(status.stdout))


def create(place: Origin, sid: str, root: Path) -> Worktree:
    """A new worktree of `place`'s commit at ROOT/SID on a new branch loopwarden/SID; ROOT is made 0700."""
    branch = BRANCH_PREFIX + safe_id(sid)
    private_dir(root.parent)
    private_dir(root)
    path = root / sid
    if path.exists() or path.is_symlink():
        raise WorktreeError(f"{path} exists already (left by an earlier profile?); remove it, then run again")
    taken = git(place.top, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", ok=(0, 1))
    if taken.returncode == 0:
        raise WorktreeError(f"the branch {branch} exists already in {place.top}; delete it "
                            f"(git branch -D {branch}), then run again")
    git(place.top, "worktree", "add", "-q", "-b", branch, str(path), place.base)
    # asked of the new worktree before the agent starts, so its `.git` file is still git's own
    gitdir = out(git(str(path), "rev-parse", "--absolute-git-dir"))
    tree = Worktree(path=str(path), branch=branch, base=place.base, checkout=place.top, subdir=place.subdir,
                    gitdir=gitdir)
    os.makedirs(tree.cwd, exist_ok=True)  # a directory git does not track (empty, or all ignored) is not checked out
    return tree


def gitdir_of(tree: Worktree) -> str:
    """The worktree's gitdir: the recorded one (else `.git/worktrees/NAME` of the checkout's repository, as
    git names it), checked to be what the worktree's `.git` file still names; WorktreeError (one line) when
    the file names another (the agent rewrote it: nothing of that repository is read) or cannot be read."""
    gitdir = tree.gitdir
    if not gitdir:
        common = out(git(tree.checkout, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        gitdir = os.path.join(common, "worktrees", os.path.basename(tree.path))
    named = _read_regular(os.path.join(tree.path, ".git"), LINK_CAP)
    line = named.decode("utf-8", "replace").strip() if named is not None else ""
    target = line.removeprefix("gitdir:").strip() if line.startswith("gitdir:") else None
    if target is None or os.path.normpath(os.path.join(tree.path, target)) != os.path.normpath(gitdir):
        raise WorktreeError(f"the worktree's .git file ({tree.path}/.git) no longer names its repository's "
                            f"{gitdir}: refused, nothing of it was read (restore it, or discard the worktree)")
    return gitdir


def _read_regular(path: str, cap: int) -> bytes | None:
    """The content of `path` if it is a regular file (not a link, FIFO or device: opening those could hang or
    read elsewhere) of at most `cap` bytes, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > cap:
            return None
        return f.read(cap + 1)[:cap]


def tree_git(tree: Worktree, gitdir: str, *args: str, env: dict[str, str] | None = None,
             ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
    """`git ARGS` on the worktree with its repository named (GIT_DIR, GIT_WORK_TREE), never discovered."""
    return git(tree.path, *args, env={"GIT_DIR": gitdir, "GIT_WORK_TREE": tree.path, **(env or {})}, ok=ok)


@contextmanager
def scratch(tree: Worktree, gitdir: str) -> Iterator[dict[str, str]]:
    """An environment whose new objects go to a private directory removed afterwards (the user's object
    store only read, as an alternate): a diff polled every 2 s adds nothing to the user's `.git`."""
    objects = out(tree_git(tree, gitdir, "rev-parse", "--path-format=absolute", "--git-path", "objects"))
    with tempfile.TemporaryDirectory(prefix="loopwarden-objects-") as private:  # 0700
        yield {"GIT_OBJECT_DIRECTORY": private, "GIT_ALTERNATE_OBJECT_DIRECTORIES": objects}


def state_tree(tree: Worktree, gitdir: str, env: dict[str, str] | None = None) -> str:
    """The tree of everything in the worktree now (committed, changed and untracked files, .gitignore
    obeyed), as `git add -A` would stage it, staged in a private index: the agent's own index is only read.
    Its objects go where `env` says (scratch: a diff's), else into the repository (a merge's)."""
    with tempfile.TemporaryDirectory(prefix="loopwarden-diff-") as private:  # 0700
        index = os.path.join(private, "index")
        env = {**(env or {}), "GIT_INDEX_FILE": index}
        own = os.lstat(os.path.join(gitdir, "index")) if os.path.lexists(os.path.join(gitdir, "index")) else None
        data = _read_regular(os.path.join(gitdir, "index"), INDEX_CAP) if own else None
        if own is not None and data is not None:
            with open(os.open(index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(data)
            # its stat data spares hashing unchanged files; its mtime keeps git's racy-clean check right
            os.utime(index, ns=(own.st_atime_ns, own.st_mtime_ns))
        else:
            tree_git(tree, gitdir, "read-tree", "HEAD", env=env)
        tree_git(tree, gitdir, "add", "-A", env=env)
        return out(tree_git(tree, gitdir, "write-tree", env=env))


def changed_files(cwd: str, old: str, new: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each file that differs from `old` to `new` (trees or commits): path, status, lines added and removed
    (0 and 0 for a binary file); a renamed file also names `old_path`. `env` names the repository when `cwd`
    is a worktree (tree_git's), never found from its `.git` file."""
    names = git(cwd, "diff", *DIFF_FLAGS, "--name-status", "-z", old, new, env=env).stdout.split(b"\0")
    counts = git(cwd, "diff", *DIFF_FLAGS, "--numstat", "-z", old, new, env=env).stdout.split(b"\0")
    files: list[dict[str, Any]] = []
    i = j = 0
    while i < len(names) and names[i]:
        code = names[i].decode()[:1]
        renamed = code in ("R", "C")
        paths = [_name(p) for p in names[i + 1:i + (3 if renamed else 2)]]
        i += 3 if renamed else 2
        added, removed = _counts(counts[j]) if j < len(counts) else (0, 0)
        j += 3 if renamed else 1  # a rename's numstat is "A\tR\t", then both paths
        entry: dict[str, Any] = {"path": paths[-1], "status": _STATUS.get(code, "modified"), "added": added,
                                 "removed": removed}
        if code == "R":
            entry["old_path"] = paths[0]
        files.append(entry)
    return files


def _name(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _counts(record: bytes) -> tuple[int, int]:
    """Lines added and removed from a numstat record ("3\t1\tpath", "-\t-\tpath" for a binary file)."""
    parts = record.split(b"\t")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return 0, 0


def patch(cwd: str, old: str, new: str, cap: int = PATCH_CAP, env: dict[str, str] | None = None) -> tuple[str, bool]:
    """The unified diff from `old` to `new`, at most `cap` bytes (cut at a line's end), and whether it was
    cut. Binary files are named without their content. Git is stopped once the cap is passed."""
    proc = _start([*GIT, "diff", *DIFF_FLAGS, old, new], cwd, env, stdin=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)
    timer = threading.Timer(GIT_TIMEOUT, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None
        data = proc.stdout.read(cap + 1)
        truncated = len(data) > cap
        if truncated:
            proc.kill()
            data = data[:cap]
            data = data[:data.rfind(b"\n") + 1] or data
        proc.stdout.close()
        code = proc.wait()
    finally:
        timer.cancel()
        release(proc.pid)
    if code != 0 and not truncated:
        raise WorktreeError(f"git diff failed (exit code {code}) in {cwd}")
    return data.decode("utf-8", "replace"), truncated


def changes(tree: Worktree, *, with_patch: bool = True) -> dict[str, Any]:
    """What the worktree holds now against its base commit: files, lines added and removed, the patch."""
    if not os.path.isdir(tree.path):
        raise WorktreeError(f"the worktree {tree.path} is gone (merged or discarded: see 'loopwarden audit')")
    gitdir = gitdir_of(tree)
    with scratch(tree, gitdir) as objects:
        env = {"GIT_DIR": gitdir, "GIT_WORK_TREE": tree.path, **objects}
        now = state_tree(tree, gitdir, objects)
        files = changed_files(tree.path, tree.base, now, env)
        text, truncated = patch(tree.path, tree.base, now, env=env) if with_patch and files else ("", False)
    return {"files": files, "added": sum(f["added"] for f in files), "removed": sum(f["removed"] for f in files),
            "patch": text, "truncated": truncated, "tree": now}
