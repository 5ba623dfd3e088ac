"""`loopwarden diff` and `loopwarden worktree`: what a session changed in its worktree, then merged or discarded.

Everything shown comes from the agent (file names, their content): each line passes the sanitiser before any
colour is added, so no escape sequence of the agent's reaches the terminal."""

from __future__ import annotations

import sys
from typing import Any

import click
import orjson

from ..supervisor.visible import visible, visible_lines
from .common import Fail, ask_first, call

_MARK = {"added": "A", "deleted": "D", "modified": "M", "renamed": "R"}
_COLOUR = (("diff --git", {"bold": True}), ("+++", {"bold": True}), ("---", {"bold": True}),
           ("@@", {"fg": "cyan"}), ("+", {"fg": "green"}), ("-", {"fg": "red"}))


def _file_line(f: dict[str, Any]) -> str:
    """` M src/a.py  +3 -1`; a rename names where it came from; a binary file has no line counts."""
    path = visible(str(f.get("path")))
    if f.get("old_path"):
        path = f"{visible(str(f['old_path']))} -> {path}"
    return f" {_MARK.get(str(f.get('status')), '?')} {path}  +{f.get('added', 0)} -{f.get('removed', 0)}"


def _totals(found: dict[str, Any]) -> str:
    n = len(found.get("files") or [])
    return f"{n} file{'s' if n != 1 else ''} changed, +{found.get('added', 0)} -{found.get('removed', 0)}"


def _patch_line(line: str) -> str:
    """One line of the patch, sanitised, then coloured by what it is (stripped again off a terminal)."""
    shown = visible_lines(line)
    for prefix, style in _COLOUR:
        if line.startswith(prefix):
            return click.style(shown, **style)
    return shown


def _header(found: dict[str, Any]) -> str:
    """Where the changes come from: the worktree against its base commit, or the session's calls."""
    if found.get("source") == "calls":
        return visible(f"session {found.get('session')}: no worktree; the changes its calls made (each edit's "
                       "lines are numbered within the edit)")
    return visible(f"session {found.get('session')}: worktree {found.get('worktree')}, branch {found.get('branch')}, "
                   f"against commit {str(found.get('base'))[:12]}")


@click.command()
@click.argument("session")
@click.option("--stat", is_flag=True, help="Only the files and their lines added and removed, not the patch.")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON (files, added, removed, patch).")
def diff(session: str, stat: bool, as_json: bool) -> None:
    """Show what SESSION changed in its worktree, live while its agent works.

    Everything in the worktree now (committed on its branch, changed and new
    files; .gitignore obeyed) against the commit it began from: what a merge
    would bring. In colour on a terminal; the patch is cut at 1 MiB, binary
    files are named without their content. A session started without
    --worktree shows the changes its calls made instead (the file edits and
    writes its agent reported; not commands' effects), where its protocol
    carries them.

    \b
    Examples:
      loopwarden diff s3
      loopwarden diff s3 --stat
      loopwarden diff fixer --json
    """
    found = call("diff", session=session, stat=stat)
    if as_json:
        click.echo(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
        return
    if found.get("source") == "none":
        click.echo(f"session {visible(str(found.get('session')))} has no worktree, and none of its calls changed a "
                   "file yet: no changes to show")
        return
    click.echo(_header(found))
    for f in found.get("files") or []:
        click.echo(_file_line(f))
    click.echo(_totals(found))
    if stat or not found.get("patch"):
        return
    click.echo()
    for line in str(found["patch"]).removesuffix("\n").split("\n"):  # only \n ends a line: \r, \f... are escaped
        click.echo(_patch_line(line))
    if found.get("truncated"):
        click.echo(click.style(visible(f"(the patch was cut at 1 MiB; the whole worktree is at {found['worktree']})"),
                               fg="yellow"))


def _plan_words(plan: dict[str, Any]) -> list[str]:
    """What a merge or discard will do, in words, for the question before it."""
    sid, branch, tree = plan.get("session"), plan.get("branch"), plan.get("worktree")
    lines = [f" {_file_line(f)}" for f in plan.get("files") or []]
    lines.append(f"  {_totals(plan)}")
    if plan.get("action") == "merge":
        if plan.get("commits_pending"):
            lines.append(f"The changes not committed in the worktree are committed on {branch} (author loopwarden).")
        lines.append(f"{branch} is merged into {plan.get('target')} in your checkout {plan.get('checkout')} (a merge "
                     f"commit naming session {sid}); then the worktree {tree} is removed and the branch deleted.")
        lines.extend(f"Warning: {w}" for w in plan.get("warnings") or [])
    else:
        lines.append(f"The worktree {tree} is removed with every file in it, and the branch {branch} deleted: "
                     "these changes are lost.")
    return [visible(line) for line in lines]


@click.command()
@click.argument("session")
@click.argument("action", type=click.Choice(["merge", "discard"]))
@click.option("--yes", "-y", is_flag=True, help="Do not ask first (needed without a terminal to ask on).")
@click.option("--note", help="Why; recorded in the audit log.")
def worktree(session: str, action: str, yes: bool, note: str | None) -> None:
    """Merge SESSION's worktree into your checkout, or discard it.

    Only once the session has ended (stop it first with 'loopwarden kill').
    Shows what will happen and asks first. merge: what the agent left in the
    worktree is committed on its branch (loopwarden/ID, author loopwarden),
    the branch is merged into the branch your checkout is on (a merge
    commit naming the session), then the worktree is removed and the branch
    deleted. Refused in one line, with nothing changed, when the merge would
    conflict, would touch a file your checkout has uncommitted changes
    to, or would overwrite a file your checkout has but does not track
    (an ignored .env too). The plan warns when the merge brings a
    .gitattributes, .gitignore, .gitmodules, hooks or .envrc. discard:
    the worktree and its branch are deleted. Git hooks do not run.
    docs/worktrees.md

    \b
    Examples:
      loopwarden worktree s3 merge
      loopwarden worktree s3 discard --yes
    """
    if not yes and not sys.stdin.isatty():
        raise Fail(f"no terminal to ask on; run 'loopwarden worktree {visible(session)} {action} --yes' to {action} "
                   "without asking ('loopwarden diff' shows what it holds)")
    plan = call("worktree", session=session, action=action, plan=True)
    sid = visible(str(plan.get("session")))
    click.echo(f"{'Merge' if action == 'merge' else 'Discard'} the worktree of session {sid}:")
    for line in _plan_words(plan):
        click.echo(line)
    if not yes:
        ask_first(f"{action.capitalize()} it?", "no terminal to ask on")
    done = call("worktree", session=session, action=action, note=note)
    if action == "merge":
        click.echo(visible(f"merged session {sid} into {done.get('target')} (commit {str(done.get('merged'))[:12]}); "
                           f"the worktree and branch {done.get('branch')} are removed"))
    else:
        click.echo(visible(f"discarded the worktree of session {sid} and its branch {done.get('branch')}"))
