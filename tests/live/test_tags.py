"""Tags through the CLI on a real daemon: `run --tag`, `set ID tag=`, `ls --tag` and its TAGS column, bad tags."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loopwarden.supervisor.tags import MAX_CHANGES, MAX_TAGS, TagError, change_tags, check_tag, check_tags
from tests.support.daemon import Harness
from tests.support.paths import PY
from tests.support.waiting import wait_for

SLEEPER = (PY, "-c", "import time; time.sleep(120)")


def run_tagged(lw: Harness, *tags: str, name: str) -> str:
    args = [a for tag in tags for a in ("--tag", tag)]
    proc = lw.cli("run", "--detach", "--adapter", "plain", "--name", name, *args, "--", *SLEEPER)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def ls_rows(lw: Harness, *args: str) -> dict[str, str]:
    """`ls` as printed: each session's id -> its line."""
    proc = lw.cli("ls", *args)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[-1] == "TAGS"
    return {line.split()[0]: line for line in lines[1:] if line.split() and line.split()[0].startswith("s")}


def test_run_tag_set_tag_and_ls_tag(lw: Harness) -> None:
    a = run_tagged(lw, "team-a", "flaky", name="alpha")
    b = run_tagged(lw, "team-b", name="beta")
    assert lw.status(a)["tags"] == ["team-a", "flaky"]
    rows = ls_rows(lw)
    assert rows[a].endswith(" team-a,flaky") and rows[b].endswith(" team-b")
    assert set(ls_rows(lw, "--tag", "team-a")) == {a}

    proc = lw.cli("set", b, "tag=team-a", "tag=-team-b")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{b}: tags team-b -> team-a\n"
    wait_for(lambda: lw.status(b)["tags"] == ["team-a"], what="the new tags in the snapshot")
    assert set(ls_rows(lw, "--tag", "team-a")) == {a, b}
    assert set(ls_rows(lw, "--tag", "team-a", "--tag", "flaky")) == {a}
    [tagged] = [x for x in lw.request("actions", session=b) if x["action"] == "tag"]  # audited as an operator's
    assert tagged["target"] == "team-a,-team-b"
    for sid in (a, b):
        lw.request("kill", session=sid)
    wait_for(lambda: lw.status(a)["state"] == "terminated", what="the end")
    assert set(ls_rows(lw, "--all", "--tag", "flaky")) == {a}  # kept with the ended session


@pytest.mark.parametrize(("args", "said"), [
    (("run", "--tag", "two words", "--", *SLEEPER), "--tag: tag 'two words': use printable characters"),
    (("run", "--tag", "x" * 40, "--", *SLEEPER), "is longer than 32 characters"),
    (("run", "--tag", "bell\x07", "--", *SLEEPER), "use printable characters"),
    (("ls", "--tag", ""), "--tag: a tag cannot be empty"),
    (("set", "s1", "tag=a,b"), "set s1: tag 'a,b'"),
    (("set", "tag=x"), "name the session first"),
])
def test_a_bad_tag_is_one_line_of_error(lw: Harness, args: tuple[str, ...], said: str) -> None:
    proc = lw.cli(*args)
    assert proc.returncode == 2, proc.stdout
    assert said in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lw.request("list") == []  # nothing started


def test_the_daemon_refuses_a_bad_tag_sent_on_the_socket(lw: Harness) -> None:
    from loopwarden.runtime.client import DaemonError

    with pytest.raises(DaemonError, match="cannot start with '-'"):
        lw.request("run", spec={"command": list(SLEEPER), "adapter": "plain", "tags": ["-x"]})


def test_tag_changes_in_turn() -> None:
    assert change_tags(["a"], ["b", "-a", "b", "-zzz"]) == ["b"]
    with pytest.raises(TagError):
        check_tag("tab\there")


def test_a_restarted_session_keeps_its_tags(lw: Harness) -> None:
    proc = lw.cli("run", "--detach", "--adapter", "native", "--tag", "team-a", "--",
                  PY, "-m", "loopwarden.sessions.scripted", "gate_request")
    sid = proc.stdout.strip()
    lw.wait_state(sid, "gated")
    proc = lw.cli("restart", sid)
    assert proc.returncode == 0, proc.stderr
    new = wait_for(lambda: next((s["id"] for s in lw.request("list") if s["id"] != sid), None), what="the new run")
    assert lw.status(new)["tags"] == ["team-a"]
    lw.request("kill", session=new)


def counted(read: list[str]) -> Iterator[str]:
    """Ten thousand tags, each put in `read` as it is taken."""
    for n in range(10_000):
        read.append(f"t{n}")
        yield f"t{n}"


def test_too_many_tags_are_refused_without_reading_them_all() -> None:
    """A request with a million tags is refused at the seventeenth, not after comparing each with the rest."""
    for check, most in ((check_tags, MAX_TAGS), (lambda tags: change_tags([], tags), MAX_CHANGES)):
        read: list[str] = []
        with pytest.raises(TagError, match=f"more than {most} "):
            check(counted(read))
        assert len(read) == most + 1
    assert len(change_tags([f"t{n}" for n in range(MAX_TAGS)], ["new", "-t0"])) == MAX_TAGS  # one in, one out
