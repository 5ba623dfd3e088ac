"""`loopwarden hook ...`: the Claude Code hook command, and installing it in Claude Code's settings."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from . import dotfiles
from .common import Fail
from .hook_files import Additions, edited, read_settings

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
OTHER_EVENTS = ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd")
HOOK_TIMEOUT = 180  # seconds Claude Code gives one hook run; above LOOPWARDEN_HOOK_HOLD's default (120)


def hook_command(agent: str = "claude-code") -> str:
    """The hook's shell command: this installation's `loopwarden` by absolute path."""
    script = Path(sys.executable).parent / "loopwarden"
    if not (script.is_file() and os.access(script, os.X_OK)):
        found = shutil.which("loopwarden")
        if not found:
            return f"{shlex.quote(sys.executable)} -m loopwarden hook {agent}"
        script = Path(found).resolve()
    return f"{shlex.quote(str(script.absolute()))} hook {agent}"


def settings_path(user: bool, file: str | None) -> Path:
    if file:
        return Path(file).expanduser().absolute()
    if user:
        return Path.home() / ".claude" / "settings.json"
    return Path.cwd() / ".claude" / "settings.json"


def groups(command: str) -> Additions:
    """Our hook group for every event: tool events with the matcher "*"."""
    return [(event, {**({"matcher": "*"} if event in TOOL_EVENTS else {}),
                     "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]})
            for event in TOOL_EVENTS + OTHER_EVENTS]


def _change(path: Path, install: bool) -> None:
    settings = read_settings(path)
    text, _ = edited(settings, "claude-code", groups(hook_command()) if install else [])
    if text == settings.file.text:
        what = "already installed" if install else "no loopwarden hooks"
        click.echo(f"{what} in {path}; nothing changed")
        return
    backup = dotfiles.save(settings.file, text)
    saved = f"; the old file is in {backup}" if backup else ""
    if install:
        click.echo(f"installed loopwarden hooks ({', '.join(TOOL_EVENTS + OTHER_EVENTS)}) in {path}{saved}")
        click.echo("Claude Code reads hooks when a session starts: new sessions are supervised by a running daemon.")
    else:
        click.echo(f"removed loopwarden hooks from {path}{saved}")


def _where(func: Any) -> Any:
    func = click.option("--file", "file", metavar="PATH",
                        help="Another settings file, e.g. .claude/settings.local.json; its directory must "
                             "exist.")(func)
    func = click.option("--user", "scope", flag_value="user",
                        help="~/.claude/settings.json: every Claude Code session.")(func)
    func = click.option("--project", "scope", flag_value="project", default=True,
                        help="./.claude/settings.json: sessions in this directory (the default).")(func)
    return func


def _agent(func: Any) -> Any:
    return click.option("--agent", type=click.Choice(["claude-code", "codex"]), default="claude-code",
                        show_default=True,
                        help="codex: the PreToolUse hook in $CODEX_HOME/hooks.json (default ~/.codex), "
                             "trusted in its config.toml.")(func)


def _for(agent: str, install: bool, scope: str, file: str | None) -> None:
    if agent == "codex":
        if file:
            raise Fail("--file is for Claude Code's settings; Codex's hooks live in $CODEX_HOME (default ~/.codex)")
        from .codex_hook import change

        change(install)
        return
    path = settings_path(scope == "user", file)
    if file and not path.parent.is_dir():  # a typo in a path the user gave makes no directories
        raise Fail(f"--file {file}: the directory {path.parent} does not exist (only the .claude directories of "
                   "--project and --user are created)")
    _change(path, install=install)


@click.group()
def hook() -> None:
    """Attach Claude Code or Codex sessions started in a terminal, through their hooks.

    \b
    Examples:
      loopwarden hook install                    Claude Code sessions in this directory
      loopwarden hook install --user             every Claude Code session of this user
      loopwarden hook install --agent codex      Codex sessions (its hooks.json)
      loopwarden hook uninstall
    """


@hook.command("claude-code")
def claude_code() -> None:
    """The hook command itself: reads a hook event on stdin, prints the daemon's answer. Never blocks
    the agent when no daemon answers (LOOPWARDEN_HOOK_TIMEOUT, default 1.5s).

    \b
    Example (Claude Code runs it; `loopwarden hook install` puts it in the settings):
      echo '{"hook_event_name":"SessionStart","session_id":"x"}' | loopwarden hook claude-code
    """
    from ..hook_client import main

    sys.exit(main())


@hook.command("codex")
def codex() -> None:
    """The Codex PreToolUse hook command: reads the event on stdin, prints the daemon's answer. Never
    blocks Codex when no daemon answers (LOOPWARDEN_HOOK_TIMEOUT, default 1.5s).

    \b
    Example (Codex runs it; `loopwarden hook install --agent codex` puts it in hooks.json):
      loopwarden hook codex < pre_tool_use_event.json
    """
    from ..hook_client import main

    sys.exit(main(agent="codex"))


@hook.command()
@_where
@_agent
def install(agent: str, scope: str, file: str | None) -> None:
    """Add the loopwarden hooks to Claude Code's settings, or Codex's (idempotent; other settings are kept).

    \b
    Examples:
      loopwarden hook install
      loopwarden hook install --user
      loopwarden hook install --file .claude/settings.local.json
      loopwarden hook install --agent codex
    """
    _for(agent, True, scope, file)


@hook.command()
@_where
@_agent
def uninstall(agent: str, scope: str, file: str | None) -> None:
    """Remove the loopwarden hooks from Claude Code's settings, or Codex's (other hooks are kept).

    \b
    Examples:
      loopwarden hook uninstall
      loopwarden hook uninstall --agent codex
    """
    _for(agent, False, scope, file)
