"""`loopwarden hook ...`: the hook command of every agent attached by its hooks (`hook AGENT`, one per hook
adapter), and installing it in the agent's settings (`hook install --agent AGENT`): in a JSON settings file
here, in Codex's home by codex_hook.py, as the agent's adapter says (sessions/hooks.py)."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from ..sessions.hooks import CODEX_HOME, DEFAULT_HOOK_AGENT, CLAUDE_SETTINGS, HookAdapter
from ..sessions.registry import hook_adapters
from . import dotfiles
from .common import Fail
from .hook_files import Additions, edited, read_settings

HOOK_TIMEOUT = 180  # seconds the agent gives one hook run; above LOOPWARDEN_HOOK_HOLD's default (120)


def hook_command(agent: str) -> str:
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


def groups(adapter: HookAdapter, command: str) -> Additions:
    """Our hook group for every event the agent's hooks are installed for: tool events with the matcher "*"."""
    return [(event, {**({"matcher": "*"} if event in adapter.tool_events else {}),
                     "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]})
            for event in adapter.hook_events]


def _change(adapter: HookAdapter, path: Path, install: bool) -> None:
    settings = read_settings(path)
    text, _ = edited(settings, adapter.hook_agent,
                     groups(adapter, hook_command(adapter.hook_agent)) if install else [])
    if text == settings.file.text:
        what = "already installed" if install else "no loopwarden hooks"
        click.echo(f"{what} in {path}; nothing changed")
        return
    backup = dotfiles.save(settings.file, text)
    saved = f"; the old file is in {backup}" if backup else ""
    if install:
        click.echo(f"installed loopwarden hooks ({', '.join(adapter.hook_events)}) in {path}{saved}")
        click.echo(f"{adapter.title} reads hooks when a session starts: new sessions are supervised by a running "
                   "daemon.")
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
    return click.option("--agent", type=click.Choice(list(hook_adapters())), default=DEFAULT_HOOK_AGENT,
                        show_default=True,
                        help="codex: the PreToolUse hook in $CODEX_HOME/hooks.json (default ~/.codex), "
                             "trusted in its config.toml.")(func)


def _for(agent: str, install: bool, scope: str, file: str | None) -> None:
    adapter = hook_adapters()[agent]()
    if adapter.settings == CODEX_HOME:
        if file:
            raise Fail("--file is for Claude Code's settings; Codex's hooks live in $CODEX_HOME (default ~/.codex)")
        from .codex_hook import change

        change(adapter, install)
        return
    if adapter.settings != CLAUDE_SETTINGS:
        raise Fail(f"loopwarden cannot install the hooks of {adapter.title} ({adapter.settings}); see its adapter")
    path = settings_path(scope == "user", file)
    if file and not path.parent.is_dir():  # a typo in a path the user gave makes no directories
        raise Fail(f"--file {file}: the directory {path.parent} does not exist (only the .claude directories of "
                   "--project and --user are created)")
    _change(adapter, path, install=install)


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


def _hook_command(adapter: type[HookAdapter]) -> click.Command:
    """`loopwarden hook AGENT`: the hook process an agent runs for each of its hook events."""

    def run() -> None:
        from ..hook_client import main

        sys.exit(main(agent=adapter.hook_agent))

    return click.Command(adapter.hook_agent, callback=run, help=adapter.hook_help)


for _adapter in hook_adapters().values():
    hook.add_command(_hook_command(_adapter))


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
