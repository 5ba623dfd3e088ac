"""A session in a worktree of its own: a real git repository per test, a real daemon, the scripted editor agent
(tests/agents/editor.py) changing files while the user's checkout stays byte-identical; diff, merge, discard and
their refusals, each of which leaves everything as it was."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopwarden.runtime.worktrees import WorktreeError, safe_id
from tests.support.daemon import Harness
from tests.support.keeping import killed_and_taken_up
from tests.support.paths import AGENTS, PY
from tests.support.waiting import wait_for

EDITOR = str(AGENTS / "editor.py")
GIT_ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
USER = ("-c", "user.name=someone", "-c", "user.email=someone@example.invalid")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *USER, *args], cwd=repo, env=GIT_ENV, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_repo(path: Path) -> Path:
    """A checkout on branch main with one commit: a.txt (five lines), gone.txt, logo.bin, sub/keep.txt."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "a.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    (path / "gone.txt").write_text("bye\n")
    (path / "logo.bin").write_bytes(bytes(range(256)) * 4)
    (path / "sub").mkdir()
    (path / "sub" / "keep.txt").write_text("kept\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def hashes(checkout: Path) -> dict[str, str]:
    """Every file of the checkout (but .git) by its path: its content's digest and its mode."""
    out = {}
    for path in sorted(checkout.rglob("*")):
        rel = path.relative_to(checkout)
        if rel.parts[0] == ".git" or path.is_dir():
            continue
        out[str(rel)] = f"{hashlib.sha256(path.read_bytes()).hexdigest()} {oct(path.stat().st_mode)}"
    return out


def run_in(lw: Harness, cwd: Path, *steps: str, flags: tuple[str, ...] = ("--worktree",)) -> tuple[str, str]:
    """`loopwarden run --detach --worktree` of the editor agent from `cwd`: the session id and what run said."""
    proc = lw.cli("run", "--detach", *flags, "--adapter", "native", "--", PY, EDITOR, *steps, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip(), proc.stderr


def waiting(lw: Harness, sid: str) -> None:
    """Until the agent says it waits (every step before its `wait` done)."""
    wait_for(lambda: any(e["kind"] == "assistant_message" for e in lw.events(sid)), 30, f"{sid} to wait")


def diff_json(lw: Harness, sid: str, *flags: str) -> dict[str, Any]:
    proc = lw.cli("diff", sid, "--json", *flags)
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def by_path(answer: dict[str, Any]) -> dict[str, tuple[str, int, int]]:
    return {f["path"]: (f["status"], f["added"], f["removed"]) for f in answer["files"]}


def branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").splitlines()


def test_the_agent_edits_its_worktree_while_the_checkout_stays_byte_identical(lw: Harness, repo: Path) -> None:
    (repo / "sub" / "draft.txt").write_text("not committed\n")  # left out of the worktree, and run says so
    before, head = hashes(repo), git(repo, "rev-parse", "HEAD")
    sid, said = run_in(lw, repo / "sub",
                       "write:../a.txt:one\nTWO\nthree\nfour\nfive\n", "delete:../gone.txt", "write:new.txt:hello\n",
                       "write:../logo.bin:\x01binary", "wait",
                       "commit:the agent's own commit", "append:new.txt:more\n", "move:keep.txt:kept.txt")
    tree = lw.paths.data / "worktrees" / sid
    assert f"works in its own worktree {tree}" in said and "uncommitted changes in your checkout are not" in said
    waiting(lw, sid)
    assert hashes(repo) == before and not (tree / "sub" / "draft.txt").exists()
    assert (tree / "sub" / "new.txt").read_text() == "hello\n"  # the agent worked in the same subdirectory

    during = diff_json(lw, sid)
    assert {k: during[k] for k in ("session", "source", "worktree", "branch", "base", "truncated")} == {
        "session": sid, "source": "worktree", "worktree": str(tree), "branch": f"loopwarden/{sid}", "base": head,
        "truncated": False}
    assert by_path(during) == {"a.txt": ("modified", 1, 1), "gone.txt": ("deleted", 0, 1),
                               "sub/new.txt": ("added", 1, 0), "logo.bin": ("modified", 0, 0)}
    assert (during["added"], during["removed"]) == (2, 2)
    assert "-two\n+TWO\n" in during["patch"] and "+hello\n" in during["patch"]
    assert "Binary files a/logo.bin and b/logo.bin differ" in during["patch"]
    assert git(tree, "status", "--porcelain") != ""  # the agent's own index was left alone: nothing staged for it
    assert git(tree, "diff", "--cached", "--name-only") == ""

    stat = lw.cli("diff", sid, "--stat")
    assert stat.returncode == 0, stat.stderr
    assert stat.stdout.splitlines()[1:] == [" M a.txt  +1 -1", " D gone.txt  +0 -1", " M logo.bin  +0 -0",
                                            " A sub/new.txt  +1 -0", "4 files changed, +2 -2"]
    status = lw.cli("status", sid)
    assert f"worktree: {tree} (branch loopwarden/{sid}, from commit {head[:12]}" in status.stdout

    assert lw.cli("inject", sid, "go on").returncode == 0
    lw.wait_state(sid, "exited")
    after = diff_json(lw, sid)  # the agent's commit and what it left uncommitted, against the same base
    assert by_path(after) == {"a.txt": ("modified", 1, 1), "gone.txt": ("deleted", 0, 1),
                              "sub/new.txt": ("added", 2, 0), "logo.bin": ("modified", 0, 0),
                              "sub/kept.txt": ("renamed", 0, 0)}
    assert [f["old_path"] for f in after["files"] if f["status"] == "renamed"] == ["sub/keep.txt"]
    assert git(tree, "log", "-1", "--format=%s") == "the agent's own commit"
    assert hashes(repo) == before and git(repo, "rev-parse", "HEAD") == head


def test_merge_asks_first_then_brings_the_changes_into_the_checkout(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "write:a.txt:one\ntwo\nthree\nfour\nFIVE\n", "write:docs/new.md:# new\n", "wait",
                    "delete:gone.txt")
    waiting(lw, sid)
    running = lw.cli("worktree", sid, "merge", "--yes")
    assert running.returncode == 2
    assert running.stderr.strip().splitlines() == [
        f"loopwarden: error: refused: session {sid} is running; its agent may still write in its worktree: stop it "
        f"first ('loopwarden kill {sid}') or wait until it ends"]
    lw.cli("inject", sid, "go on")
    lw.wait_state(sid, "exited")
    (repo / "notes.txt").write_text("the user's own, untracked\n")  # not touched by the merge: no refusal
    before = hashes(repo)

    unasked = lw.cli("worktree", sid, "merge")  # no terminal to ask on
    assert unasked.returncode == 2 and len(unasked.stderr.strip().splitlines()) == 1
    assert "no terminal to ask on" in unasked.stderr and hashes(repo) == before

    merged = lw.cli("worktree", sid, "merge", "--yes")
    assert merged.returncode == 0, merged.stderr
    assert " M a.txt  +1 -1" in merged.stdout and " D gone.txt  +0 -1" in merged.stdout
    assert f"merged into main in your checkout {repo}" in merged.stdout
    assert f"the worktree {lw.paths.data / 'worktrees' / sid} is removed and the branch deleted" in merged.stdout
    assert (repo / "a.txt").read_text().endswith("FIVE\n") and (repo / "docs" / "new.md").read_text() == "# new\n"
    assert not (repo / "gone.txt").exists() and (repo / "notes.txt").exists()
    assert git(repo, "log", "-1", "--format=%s") == f"Merge loopwarden session {sid} (editor.py) from loopwarden/{sid}"
    assert git(repo, "log", "-1", "--format=%an %s", "HEAD^2") == f"loopwarden loopwarden: session {sid} (editor.py)"
    assert git(repo, "status", "--porcelain") == "?? notes.txt"
    assert not (lw.paths.data / "worktrees" / sid).exists() and branches(repo) == ["main"]
    actions = [(a["action"], a["outcome"]) for a in lw.request("actions", session=sid)]
    assert ("worktree-merge", "done") in actions
    gone = lw.cli("diff", sid)
    assert gone.returncode == 2 and "is gone" in gone.stderr


def test_discard_removes_the_worktree_and_its_branch(lw: Harness, repo: Path) -> None:
    before = hashes(repo)
    sid, _ = run_in(lw, repo, "write:a.txt:changed\n", "write:junk.txt:x\n")
    lw.wait_state(sid, "exited")
    shown = lw.cli("worktree", sid, "discard", "--yes")
    assert shown.returncode == 0, shown.stderr
    assert "these changes are lost" in shown.stdout and " A junk.txt  +1 -0" in shown.stdout
    assert not (lw.paths.data / "worktrees" / sid).exists()
    assert branches(repo) == ["main"] and git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert hashes(repo) == before
    again = lw.cli("worktree", sid, "discard", "--yes")
    assert again.returncode == 2 and "are gone already" in again.stderr


def test_run_refuses_a_worktree_outside_git_and_in_a_repository_without_commits(lw: Harness, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = lw.cli("run", "--worktree", "--adapter", "native", "--", PY, EDITOR, cwd=plain)
    assert outside.returncode == 2
    assert outside.stderr.splitlines() == [
        f"loopwarden: error: refused: {plain} is not inside a git repository (or is inside its .git); a worktree "
        "needs one: run from your project's checkout, or without --worktree"]
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    fresh = lw.cli("run", "--worktree", "--adapter", "native", "--", PY, EDITOR, "write:x:y", cwd=empty)
    assert fresh.returncode == 2 and len(fresh.stderr.splitlines()) == 1
    assert "has no commits yet" in fresh.stderr
    assert lw.request("list") == [] and not (lw.paths.data / "worktrees").exists()
    assert sorted(p.name for p in empty.iterdir()) == [".git"]


def test_the_setting_gives_every_run_a_worktree_unless_told_otherwise(lw: Harness, repo: Path) -> None:
    on = {"LOOPWARDEN_SESSIONS_WORKTREE": "true"}
    proc = lw.cli("run", "--detach", "--adapter", "native", "--", PY, EDITOR, "write:a.txt:x\n", cwd=repo, env=on)
    assert proc.returncode == 0, proc.stderr
    sid = proc.stdout.strip()
    lw.wait_state(sid, "exited")
    assert lw.status(sid)["worktree"]["branch"] == f"loopwarden/{sid}"
    assert (repo / "a.txt").read_text().startswith("one\n")
    proc = lw.cli("run", "--detach", "--no-worktree", "--adapter", "native", "--", PY, EDITOR, "write:b.txt:y\n",
                  cwd=repo, env=on)
    plain = proc.stdout.strip()
    lw.wait_state(plain, "exited")
    assert lw.status(plain).get("worktree") is None and (repo / "b.txt").read_text() == "y\n"
    assert diff_json(lw, plain) == {"session": plain, "source": "none", "worktree": None, "branch": None,
                                    "base": None, "files": [], "added": 0, "removed": 0, "patch": "",
                                    "truncated": False}
    assert "has no worktree" in lw.cli("diff", plain).stdout
    refused = lw.cli("worktree", plain, "discard", "--yes")
    assert refused.returncode == 2 and "has no worktree" in refused.stderr


def _refused_untouched(lw: Harness, repo: Path, sid: str, why: str) -> None:
    """A merge refused in one line saying `why`, with the checkout, the worktree and the branch as they were."""
    before, head = hashes(repo), git(repo, "rev-parse", "HEAD")
    tree = lw.paths.data / "worktrees" / sid
    in_tree = hashes(tree)
    refused = lw.cli("worktree", sid, "merge", "--yes")
    assert refused.returncode == 2
    assert len(refused.stderr.strip().splitlines()) == 1 and why in refused.stderr, refused.stderr
    assert hashes(repo) == before and git(repo, "rev-parse", "HEAD") == head
    assert hashes(tree) == in_tree and f"loopwarden/{sid}" in branches(repo)
    assert not (repo / ".git" / "MERGE_HEAD").exists()


def test_a_merge_that_would_conflict_is_refused_and_touches_nothing(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "write:a.txt:one\nAGENT\nthree\nfour\nfive\n", "write:new.txt:n\n")
    lw.wait_state(sid, "exited")
    (repo / "a.txt").write_text("one\nUSER\nthree\nfour\nfive\n")
    git(repo, "commit", "-q", "-am", "the user's own change to the same line")
    _refused_untouched(lw, repo, sid, "would conflict in a.txt; nothing was changed")


def test_a_merge_over_uncommitted_changes_it_would_touch_is_refused(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "write:a.txt:one\nAGENT\nthree\nfour\nfive\n", "write:new.txt:n\n")
    lw.wait_state(sid, "exited")
    (repo / "a.txt").write_text("one\ntwo\nthree\nfour\nfive\nthe user's, not committed\n")
    _refused_untouched(lw, repo, sid, "has uncommitted changes to a.txt, which the merge would change")
    (repo / "new.txt").write_text("the user's own untracked file of the same name\n")
    git(repo, "checkout", "a.txt")
    _refused_untouched(lw, repo, sid, "has uncommitted changes to new.txt")


def test_agent_file_names_and_content_reach_the_terminal_sanitised(lw: Harness, repo: Path) -> None:
    name = "evil\x1b[31mred\x07.txt"
    sid, _ = run_in(lw, repo, f"write:{name}:\x1b]0;owned\x07 line\n", "write:ok.txt:fine\r\n")
    lw.wait_state(sid, "exited")
    for args in ((), ("--stat",)):
        shown = lw.cli("diff", sid, *args)
        assert shown.returncode == 0, shown.stderr
        assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
        assert "evil\\x1b[31mred\\x07.txt" in shown.stdout
    assert "+\\x1b]0;owned\\x07 line" in lw.cli("diff", sid).stdout
    assert "+fine\\r" in lw.cli("diff", sid).stdout
    raw = lw.cli("diff", sid, "--json")  # the names as they are, each control character a JSON escape
    assert "\x1b" not in raw.stdout and name in {f["path"] for f in json.loads(raw.stdout)["files"]}
    plan = lw.cli("worktree", sid, "discard", "--yes")
    assert "\x1b" not in plan.stdout and "evil\\x1b[31mred\\x07.txt" in plan.stdout


def test_a_patch_past_1_mib_is_cut_at_a_line_end_and_says_so(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "lines:big.txt:200000", "write:a.txt:small\n")
    lw.wait_state(sid, "exited")
    answer = diff_json(lw, sid)
    assert answer["truncated"] is True and by_path(answer)["big.txt"] == ("added", 200_000, 0)
    patch = answer["patch"].encode()
    assert 1_000_000 < len(patch) <= 1 << 20 and patch.endswith(b"\n")
    assert by_path(answer)["a.txt"] == ("modified", 1, 5)  # the files and their counts are whole
    shown = lw.cli("diff", sid)
    assert shown.stdout.rstrip().endswith(f"(the patch was cut at 1 MiB; the whole worktree is at "
                                          f"{lw.paths.data / 'worktrees' / sid})")


def test_the_diff_is_coloured_on_a_terminal_with_the_agent_text_still_escaped(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "write:a.txt:one\n\x1b[2Jtwo\nthree\nfour\nfive\n")
    lw.wait_state(sid, "exited")
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([PY, "-m", "loopwarden", "diff", sid], env=lw.env, stdin=secondary, stdout=secondary,
                            stderr=secondary)
    os.close(secondary)
    shown = b""
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the terminal's last writer has gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(primary)
    assert proc.wait(30) == 0
    text = shown.decode()
    assert "\x1b[32m+\\x1b[2Jtwo" in text and "\x1b[31m-two" in text  # green and red, the agent's ESC escaped
    assert "\x1b[2J" not in text.replace("\\x1b[2J", "")


def test_git_variables_of_the_daemon_and_the_client_point_nowhere_else(tmp_path: Path, repo: Path) -> None:
    """A GIT_DIR in the daemon's or the client's environment (a shell inside a git hook, an editor's terminal)
    neither picks the repository nor reaches the agent, whose commits stay on its worktree's branch."""
    decoy = make_repo(tmp_path / "decoy")
    pointing = {"GIT_DIR": str(decoy / ".git"), "GIT_WORK_TREE": str(decoy), "GIT_INDEX_FILE": str(decoy / "idx")}
    decoy_before, decoy_head = hashes(decoy), git(decoy, "rev-parse", "HEAD")
    (repo / "a.txt").write_text("a different first commit\n")
    git(repo, "commit", "-q", "-am", "second")
    (tmp_path / "home").mkdir()
    harness = Harness(tmp_path / "home")
    harness.env.update(pointing)
    with harness as lw:
        proc = lw.cli("run", "--detach", "--worktree", "--adapter", "native", "--", PY, EDITOR,
                      "write:b.txt:b\n", "commit:by the agent", cwd=repo, env=pointing)
        assert proc.returncode == 0, proc.stderr
        sid = proc.stdout.strip()
        snap = lw.wait_state(sid, "exited")
        assert snap["exit_code"] == 0 and snap["worktree"]["base"] == git(repo, "rev-parse", "HEAD")
        assert git(repo, "log", "-1", "--format=%s", f"loopwarden/{sid}") == "by the agent"
        assert by_path(diff_json(lw, sid)) == {"b.txt": ("added", 1, 0)}
    assert hashes(decoy) == decoy_before and git(decoy, "rev-parse", "HEAD") == decoy_head
    assert not (decoy / "idx").exists()


@pytest.mark.parametrize("sid", ["", "../s1", "s1/x", "-s1", "s 1", "s1\n", "a" * 64])
def test_a_session_id_that_is_not_a_plain_name_names_no_worktree(sid: str) -> None:
    with pytest.raises(WorktreeError, match="cannot name a worktree"):
        safe_id(sid)


def test_a_restarted_session_goes_on_in_the_worktree_which_is_not_merged_under_it(lw: Harness, repo: Path) -> None:
    first, _ = run_in(lw, repo, "append:a.txt:more\n", "wait")
    waiting(lw, first)
    restarted = lw.cli("restart", first)
    assert restarted.returncode == 0, restarted.stderr
    lw.wait_state(first, "terminated")
    second = wait_for(lambda: next((s["id"] for s in lw.request("list") if s["id"] != first), None),
                      what="the restarted session")
    waiting(lw, second)
    assert lw.status(second)["worktree"] == lw.status(first)["worktree"]
    assert (lw.paths.data / "worktrees" / first / "a.txt").read_text().endswith("more\nmore\n")
    refused = lw.cli("worktree", first, "discard", "--yes")
    assert refused.returncode == 2 and f"session {second} still works in this worktree" in refused.stderr
    assert (lw.paths.data / "worktrees" / first).is_dir()
    lw.cli("kill", second)
    lw.wait_state(second, "terminated")
    assert lw.cli("worktree", first, "discard", "--yes").returncode == 0


def test_a_kept_session_keeps_its_worktree_across_a_daemon_restart(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "write:a.txt:before the restart\n", "wait", "write:b.txt:after\n")
    waiting(lw, sid)
    snap = killed_and_taken_up(lw, sid, "restart-daemon")
    assert snap["worktree"]["path"] == str(lw.paths.data / "worktrees" / sid)
    assert lw.cli("inject", sid, "go on").returncode == 0
    lw.wait_state(sid, "exited")
    assert by_path(diff_json(lw, sid)) == {"a.txt": ("modified", 1, 5), "b.txt": ("added", 1, 0)}


def test_a_merge_after_the_checkout_moved_on_keeps_both_sides(lw: Harness, repo: Path) -> None:
    sid, _ = run_in(lw, repo, "write:a.txt:one\ntwo\nthree\nfour\nFIVE\n")
    lw.wait_state(sid, "exited")
    (repo / "a.txt").write_text("ONE\ntwo\nthree\nfour\nfive\n")  # the user's own commit, another line
    git(repo, "commit", "-q", "-am", "the user's")
    user_head = git(repo, "rev-parse", "HEAD")
    merged = lw.cli("worktree", sid, "merge", "--yes", "--note", "reviewed")
    assert merged.returncode == 0, merged.stderr
    assert (repo / "a.txt").read_text() == "ONE\ntwo\nthree\nfour\nFIVE\n"
    assert git(repo, "rev-parse", "HEAD^1") == user_head and git(repo, "status", "--porcelain") == ""
    [row] = [a for a in lw.request("actions", session=sid) if a["action"] == "worktree-merge"]
    assert (row["target"], row["note"], row["outcome"]) == (f"loopwarden/{sid} -> main", "reviewed", "done")
