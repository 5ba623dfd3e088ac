"""A project's launch defaults from the user config (`[projects."DIR"]`) applied to `loopwarden run`: what was
given on the command line wins, and what was applied is said in one line."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import click

from ..paths import default_paths
from ..supervisor.config import given_keys, parse_set
from ..supervisor.user_config import read_user_config


@dataclass(frozen=True)
class RunChoices:
    """What `run` starts with: the adapter (None: as given), the worktree choice and the --set words."""

    adapter: str | None
    worktree: bool | None
    sets: tuple[str, ...]


def with_project_defaults(cwd: str, adapters: list[str], *, adapter_given: bool, worktree: bool | None,
                          sets: tuple[str, ...], config_file: str | None = None) -> RunChoices:
    """The launch with the defaults of the deepest project holding `cwd` where nothing explicit says otherwise:
    a flag, `--set`, or a key the `--config` file or a LOOPWARDEN_* variable sets."""
    user = read_user_config(default_paths().config_file)
    if user.error:
        click.echo(f"loopwarden: warning: {user.error}", err=True)
    project = user.project_for(cwd)
    if project is None:
        return RunChoices(None, worktree, sets)
    for warning in user.warnings:
        if warning.startswith(f'projects."{project.name}"'):
            click.echo(f"loopwarden: warning: {warning}", err=True)
    adapter = project.adapter if project.adapter and not adapter_given else None
    if adapter is not None and adapter not in adapters:
        click.echo(f"loopwarden: warning: projects.\"{project.name}\".adapter: {adapter!r} is not an adapter "
                   f"({', '.join(adapters)}); chosen as without it", err=True)
        adapter = None
    given = {parse_set(word)[0] for word in sets} | given_keys(config_file, os.environ)
    limits = {key: value for key, value in project.limits.items() if key not in given}
    applied = replace(project, adapter=adapter, worktree=project.worktree if worktree is None else None,
                      limits=limits)
    if applied.adapter or applied.worktree is not None or applied.limits:
        click.echo(f"loopwarden: project defaults from {project.name}: {applied.describe()}", err=True)
    return RunChoices(adapter, worktree if worktree is not None else project.worktree, (*applied.sets(), *sets))
