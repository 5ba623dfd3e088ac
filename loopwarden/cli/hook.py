"""`loopwarden hook ...`: the Claude Code hook command, and installing it in Claude Code's settings."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from .common import Fail

TOOL_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure")
OTHER_EVENTS = ("UserPromptSubmit", "Stop", "SessionStart", "SessionEnd")
HOOK_TIMEOUT = 180  # seconds Claude Code gives one hook run; above LOOPWARDEN_HOOK_HOLD's default (120)
BACKUP_SUFFIX = ".loopwarden.bak"


def hook_command(agent: str = "claude-code") -> str:
    """The hook's shell command: this installation's `loopwarden` by absolute path."""
    script = Path(sys.executable).parent / "loopwarden"
    if not (script.is_file() and os.access(script, os.X_OK)):
        found = shutil.which("loopwarden")
        if not found:
            return f"{shlex.quote(sys.executable)} -m loopwarden hook {agent}"
        script = Path(found).resolve()
    return f"{shlex.quote(str(script.absolute()))} hook {agent}"


def is_ours(hook: Any, agent: str = "claude-code") -> bool:
    """A hook entry that runs `loopwarden hook <agent>` (from any installation)."""
    command = hook.get("command") if isinstance(hook, dict) else None
    return isinstance(command, str) and command.rstrip().endswith(f"hook {agent}") and "loopwarden" in command


def settings_path(user: bool, file: str | None) -> Path:
    if file:
        return Path(file).expanduser().absolute()
    if user:
        return Path.home() / ".claude" / "settings.json"
    return Path.cwd() / ".claude" / "settings.json"


def read_text(path: Path) -> str | None:
    """A settings file's text, None when it does not exist; unreadable or not UTF-8 is a Fail."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Fail(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise Fail(f"{path} is not UTF-8 text; nothing was changed") from None


def read_settings(path: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text (None when it does not exist) and its settings; a malformed file is a Fail."""
    text = read_text(path)
    if text is None:
        return None, {}
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise Fail(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    if not isinstance(data, dict):
        raise Fail(f"{path} does not hold a JSON object; nothing was changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise Fail(f"{path}: 'hooks' must map event names to lists; nothing was changed")
    return text, data


def with_hooks(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """Settings with our hook on every event (an older loopwarden command replaced), the rest kept."""
    out = without_hooks(settings)
    hooks = out.setdefault("hooks", {})
    for event in TOOL_EVENTS + OTHER_EVENTS:
        group: dict[str, Any] = {"matcher": "*"} if event in TOOL_EVENTS else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]
        hooks.setdefault(event, []).append(group)
    return out


def without_hooks(settings: dict[str, Any], agent: str = "claude-code") -> dict[str, Any]:
    """Settings with every loopwarden hook removed, and the groups and events left empty by that."""
    out = json.loads(json.dumps(settings))
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event in list(hooks):
        groups = []
        for group in hooks[event]:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not is_ours(h, agent)]
                if not kept and len(kept) != len(group["hooks"]):
                    continue
                group = {**group, "hooks": kept}
            groups.append(group)
        if groups:
            hooks[event] = groups
        else:
            del hooks[event]
    if not hooks and settings.get("hooks"):  # emptied by us (an empty object of the user's stays)
        del out["hooks"]
    return out


def write_settings(path: Path, old_text: str | None, data: dict[str, Any]) -> Path | None:
    """Write `data` atomically, after a backup of the old file (returned)."""
    return write_text(path, old_text, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def write_text(path: Path, old_text: str | None, text: str) -> Path | None:
    """Write `text` atomically, after a backup of the old file (returned)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if old_text is not None:
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        backup.write_text(old_text, encoding="utf-8")
        shutil.copymode(path, backup)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if old_text is not None:
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return backup


def _change(path: Path, install: bool) -> None:
    old_text, current = read_settings(path)
    new = with_hooks(current, hook_command()) if install else without_hooks(current)
    if new == current:
        what = "already installed" if install else "no loopwarden hooks"
        click.echo(f"{what} in {path}; nothing changed")
        return
    try:
        backup = write_settings(path, old_text, new)
    except OSError as exc:
        raise Fail(f"cannot write {path}: {exc.strerror or exc}") from None
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
