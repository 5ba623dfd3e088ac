"""What an agent writes in its worktree cannot make loopwarden run a command, hang, overwrite the user's ignored
files, or fill the user's `.git`: real repositories, real git, the worktree functions the daemon calls."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from loopwarden.runtime.worktree_merge import merge, plan_discard, plan_merge
from loopwarden.runtime.worktrees import Worktree, WorktreeError, changes, create, origin
from tests.worktree.test_worktree import git, make_repo


@pytest.fixture
def tree(tmp_path: Path) -> Worktree:
    repo = make_repo(tmp_path / "repo")
    return create(origin(str(repo)), "s1", tmp_path / "data" / "worktrees")


def pwned(root: Path) -> list[Path]:
    return [p for p in root.rglob("PWNED*")]


def test_a_rewritten_dot_git_runs_nothing_and_is_refused_in_one_line(tmp_path: Path, tree: Worktree) -> None:
    work, checkout = Path(tree.path), Path(tree.checkout)
    evil = work / "evil"
    (evil / "objects" / "info").mkdir(parents=True)
    (evil / "refs").mkdir()
    (evil / "HEAD").write_text(tree.base + "\n")
    (evil / "objects" / "info" / "alternates").write_text(str(checkout / ".git" / "objects") + "\n")
    (evil / "config").write_text('[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch PWNED"\n'
                                 '[filter "x"]\n\tclean = touch PWNED2\n')
    (work / ".gitattributes").write_text("* filter=x\n")
    (work / "a.txt").write_text("changed\n")
    (work / ".git").write_text("gitdir: evil\n")
    assert git(work, "rev-parse", "HEAD") == tree.base  # the trap works for git found from the worktree
    for act in (lambda: changes(tree), lambda: plan_merge(tree, "s1", "fixer")):
        with pytest.raises(WorktreeError) as refused:
            act()
        assert "no longer names its repository" in str(refused.value) and "\n" not in str(refused.value)
    assert pwned(tmp_path) == []
    shutil.rmtree(evil)  # discarding still works: the user's repository is named, not found
    assert plan_discard(tree).files == []


def test_agent_attributes_and_its_restored_dot_git_run_no_filter(tmp_path: Path, tree: Worktree) -> None:
    work = Path(tree.path)
    (work / ".gitattributes").write_text("* filter=x diff=x\n")
    (work / "a.txt").write_text("changed\n")
    found = changes(tree)
    assert {f["path"] for f in found["files"]} == {".gitattributes", "a.txt"} and "+changed" in found["patch"]
    assert pwned(tmp_path) == []


@pytest.mark.parametrize("where", [".git", "index"])
def test_a_fifo_for_dot_git_or_the_index_does_not_hang_a_diff(tmp_path: Path, tree: Worktree, where: str) -> None:
    target = Path(tree.path) / ".git" if where == ".git" else Path(tree.gitdir) / "index"
    target.unlink()
    os.mkfifo(target)
    answer: list[object] = []
    worker = threading.Thread(target=lambda: answer.append(_attempt(tree)), daemon=True)
    worker.start()
    worker.join(60)
    assert answer, "the diff hung on a FIFO"
    if where == ".git":
        assert isinstance(answer[0], WorktreeError)
    else:  # the index is rebuilt from HEAD instead
        assert isinstance(answer[0], dict) and answer[0]["files"] == []


def _attempt(tree: Worktree) -> object:
    try:
        return changes(tree)
    except WorktreeError as exc:
        return exc


def test_a_record_without_its_gitdir_finds_it_from_the_checkout(tree: Worktree) -> None:
    (Path(tree.path) / "new.txt").write_text("x\n")
    old = Worktree.of({**tree.to_dict(), "gitdir": None})
    assert old is not None and old.gitdir == ""
    assert [f["path"] for f in changes(old)["files"]] == ["new.txt"]
    assert {"path", "branch", "base", "checkout", "subdir", "gitdir"} <= set(tree.to_dict())


def test_a_merge_over_an_ignored_file_is_refused_by_name_and_changes_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / ".gitignore").write_text(".env\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore .env")
    (repo / ".env").write_text("MY_SECRET=1\n")
    tree = create(origin(str(repo)), "s2", tmp_path / "data" / "worktrees")
    (Path(tree.path) / ".gitignore").write_text("")
    (Path(tree.path) / ".env").write_text("MY_SECRET=agent\n")
    head = git(repo, "rev-parse", "HEAD")
    for act in (lambda: plan_merge(tree, "s2", "fixer"), lambda: merge(tree, "s2", "fixer")):
        with pytest.raises(WorktreeError) as refused:
            act()
        assert "files git ignores or does not track at .env, which the merge would overwrite" in str(refused.value)
    assert (repo / ".env").read_text() == "MY_SECRET=1\n" and git(repo, "rev-parse", "HEAD") == head
    (repo / ".env").unlink()  # moved aside: the merge goes ahead, warning of the .gitignore it changes
    plan = plan_merge(tree, "s2", "fixer").to_dict("s2")
    assert plan["warnings"] == [".gitignore is modified by this merge: it changes what git or your shell does in "
                                "your checkout; read it first"]


def _loose(repo: Path) -> int:
    return sum(len(files) for _, _, files in os.walk(repo / ".git" / "objects"))


def test_repeated_diffs_of_a_growing_untracked_file_add_nothing_to_the_users_objects(tree: Worktree) -> None:
    repo, log = Path(tree.checkout), Path(tree.path) / "build.log"
    before = _loose(repo)
    for n in range(3):
        log.write_bytes(os.urandom(200_000) + str(n).encode())
        found = changes(tree)
        assert [f["path"] for f in found["files"]] == ["build.log"]
    assert _loose(repo) == before
    (Path(tree.path) / "a.txt").write_text("merged\n")
    merged = merge(tree, "s1", "fixer")  # a merge keeps what it brings
    assert merged["removed"] and (repo / "build.log").exists() and (repo / "a.txt").read_text() == "merged\n"
