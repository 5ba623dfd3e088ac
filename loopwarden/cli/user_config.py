"""`loopwarden config path` and `config check`, and the user config's part of `config show`: the console's keys
and theme and the launch defaults per project, from config.toml in the profile's config directory."""

from __future__ import annotations

import sys

import click
import orjson

from ..paths import default_paths
from ..supervisor.user_config import EXAMPLE, UserConfig, read_user_config

_EXAMPLE_HELP = "\n".join(f"  {line}" for line in EXAMPLE.splitlines())


def _checked() -> tuple[UserConfig, list[str]]:
    """The user config and every problem with it: the file's, then what the console cannot take."""
    from ..widgets.user_settings import console_settings  # Textual only for a check

    user = read_user_config(default_paths().config_file)
    problems = [user.error] if user.error else []
    return user, problems + list(user.warnings) + console_settings(user).warnings


def rebindable() -> list[str]:
    """The console's actions a user may give other keys, by the names [console.keys] takes."""
    from ..widgets.user_settings import rebindable_actions

    return sorted(rebindable_actions())


def user_config_lines() -> list[str]:
    """The user config as `config show` prints it: where it is, its effective settings as TOML, each problem."""
    user, problems = _checked()
    lines = [f"# user config: {user.path} ({'exists' if user.exists else 'not there: every default applies'})"]
    from ..widgets.user_settings import console_settings

    console = console_settings(user)
    if console.theme:
        lines += ["\n[console]", f"theme = {_quoted(console.theme)}"]
    if console.keymap:
        lines.append("\n[console.keys]")
        lines += [f"{action} = {_quoted(keys)}" for action, keys in console.keymap.items()]
    for project in user.projects:
        where = "" if str(project.root) == project.name else f"  # {project.root}"
        lines.append(f"\n[projects.{_quoted(project.name)}]{where}")
        if project.adapter:
            lines.append(f"adapter = {_quoted(project.adapter)}")
        if project.worktree is not None:
            lines.append(f"worktree = {'true' if project.worktree else 'false'}")
        lines += [f"{key} = {orjson.dumps(value).decode()}" for key, value in project.limits.items()]
    lines += [f"# warning: {problem}" for problem in problems]
    return lines


def _quoted(text: str) -> str:
    return orjson.dumps(text).decode()


@click.command("path")
def config_path() -> None:
    """Print where the user config is, and whether it exists.

    \b
    Example:
      $EDITOR "$(loopwarden config path)"
    """
    path = default_paths().config_file
    click.echo(str(path))
    if not path.exists():
        click.echo("loopwarden: it does not exist yet; 'loopwarden config check --help' shows an example", err=True)


CHECK_HELP = f"""Check the user config: each problem in one line; exit 1 when there is one.

The user config is config.toml in the profile's config directory (`loopwarden config path`); the daemon
reads its engine sections ([notify], [budgets] ...), the console its [console] section, and both
`loopwarden run` and the console's launch dialog (n) its [projects."DIR"] defaults, for sessions started in
DIR or below it (the deepest DIR wins; a flag, --config file or LOOPWARDEN_* variable given to run wins over
a default). What cannot be taken keeps
its default. `loopwarden config show` prints the effective settings.

\b
Examples:
  loopwarden config check
  loopwarden config check && loopwarden

\b
An example file:
{_EXAMPLE_HELP}
"""


@click.command("check", help=CHECK_HELP)
def config_check() -> None:
    user, problems = _checked()
    for problem in problems:
        click.echo(f"loopwarden: {problem}", err=True)
    if problems:
        sys.exit(1)
    click.echo(f"{user.path}: {'no problems' if user.exists else 'not there: every default applies'}")
    click.echo(f"the actions [console.keys] can rebind: {', '.join(rebindable())}")
