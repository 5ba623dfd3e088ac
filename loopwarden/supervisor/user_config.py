"""The user's own settings in the profile's config.toml: the console's keys and theme, and launch defaults per
project. Read and checked here (no I/O beyond reading the file, no Textual); the console and `run` apply them.

    [console]
    theme = "gruvbox"

    [console.keys]
    kill = "ctrl+x"

    [projects."~/code/api"]
    adapter = "claude-code"
    worktree = true
    limits.max_runtime = "2h"

Nothing here stops a program: a file that cannot be read leaves every default (`error` says why in one line),
and a setting that cannot be taken is left out with a one-line warning.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import KEYS, ConfigError, convert, show_value

PROJECT_FIELDS = ("adapter", "limits", "worktree")
EXAMPLE = """\
[console]
theme = "gruvbox"            # any Textual theme: textual-dark, nord, dracula, ...

[console.keys]               # action = "key" (several: "ctrl+x,X"); `loopwarden config check` lists them
kill = "ctrl+x"
limits = "ctrl+l"

[projects."~/code/api"]      # sessions started in this directory or below it
adapter = "claude-code"
worktree = true
limits.max_runtime = "2h"    # any limits.* key
limits.max_cost_usd = 5
"""


@dataclass(frozen=True)
class ProjectDefaults:
    """Launch defaults for sessions whose working directory is `root` or inside it."""

    name: str  # as written in the file
    root: Path
    adapter: str | None = None
    worktree: bool | None = None
    limits: dict[str, Any] = field(default_factory=dict)  # "limits.max_runtime" -> the value as written

    def covers(self, cwd: str | os.PathLike[str]) -> bool:
        """Whether `cwd` is the root or inside it, as written or through symlinks (a shell's directory is the
        real one: ~/code may be a link to /data/code)."""
        roots = {self.root, Path(os.path.realpath(self.root))}
        return any(here in roots or not roots.isdisjoint(here.parents)
                   for here in {Path(cwd), Path(os.path.realpath(cwd))})

    def sets(self) -> list[str]:
        """The limits as `--set` words."""
        return [f"{key}={value}" for key, value in self.limits.items()]

    def describe(self) -> str:
        """What it sets, in a few words: `adapter claude-code, worktree on, limits.max_runtime=2h`."""
        parts = [f"adapter {self.adapter}"] if self.adapter else []
        if self.worktree is not None:
            parts.append(f"worktree {'on' if self.worktree else 'off'}")
        parts += [f"{key}={show_value(key, convert(key, KEYS[key], value))}" for key, value in self.limits.items()]
        return ", ".join(parts) or "nothing"


@dataclass(frozen=True)
class UserConfig:
    """What the file says, checked; `exists` false and nothing set when there is no file."""

    path: Path
    exists: bool = False
    theme: str | None = None
    keys: dict[str, str] = field(default_factory=dict)  # action id -> its keys, not yet checked against the console
    projects: tuple[ProjectDefaults, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None  # the file could not be read: every default applies

    def project_for(self, cwd: str | os.PathLike[str]) -> ProjectDefaults | None:
        """The project whose directory holds `cwd`, the deepest (as the directories really are) when several do."""
        holding = [p for p in self.projects if p.covers(cwd)]
        return max(holding, key=lambda p: len(Path(os.path.realpath(p.root)).parts)) if holding else None


def read_user_config(path: Path) -> UserConfig:
    """The user config at `path`, checked; a missing file is an empty one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # a profile that is a file: its own error says so, once
        return UserConfig(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return UserConfig(path, True, error=f"{path}: cannot read it ({reason}); the defaults apply")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where = "" if "line" in str(exc) else f" (at line {text.count(chr(10)) + 1})"
        return UserConfig(path, True, error=f"{path}: not valid TOML: {exc}{where}; the defaults apply")
    warnings: list[str] = []
    console = _table(data.get("console"), "console", warnings)
    theme = console.get("theme")
    if theme is not None and not isinstance(theme, str):
        warnings.append(f"console.theme: {theme!r} is not a theme name; the default is kept")
        theme = None
    keys = {}
    for action, value in _table(console.get("keys"), "console.keys", warnings).items():
        if isinstance(value, str) and value.strip():
            keys[action] = value.strip()
        else:
            warnings.append(f"console.keys.{action}: {value!r} is not a key such as \"ctrl+x\"; the default is kept")
    for name in sorted(set(console) - {"theme", "keys"}):
        warnings.append(f"console.{name}: unknown setting (console takes theme and keys); ignored")
    projects = [_project(name, table, warnings)
                for name, table in _table(data.get("projects"), "projects", warnings).items()]
    return UserConfig(path, True, theme, keys, tuple(p for p in projects if p is not None), tuple(warnings))


def _table(value: Any, where: str, warnings: list[str]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        warnings.append(f"{where}: expected a table ([{where}]); ignored")
        return {}
    return value


def _project(name: str, table: Any, warnings: list[str]) -> ProjectDefaults | None:
    where = f'projects."{name}"'
    if not isinstance(table, dict):
        warnings.append(f"{where}: expected a table of {', '.join(PROJECT_FIELDS)}; ignored")
        return None
    root = Path(os.path.expanduser(name))
    if not root.is_absolute():
        warnings.append(f"{where}: not an absolute path (write it as ~/code/api or /srv/api); ignored")
        return None
    adapter = table.get("adapter")
    if adapter is not None and not isinstance(adapter, str):
        warnings.append(f"{where}.adapter: {adapter!r} is not an adapter name; ignored")
        adapter = None
    worktree = table.get("worktree")
    if worktree is not None and not isinstance(worktree, bool):
        warnings.append(f"{where}.worktree: expected true or false, not {worktree!r}; ignored")
        worktree = None
    limits = _limits(where, _table(table.get("limits"), f"{where}.limits", warnings), warnings)
    for unknown in sorted(set(table) - set(PROJECT_FIELDS)):
        warnings.append(f"{where}.{unknown}: unknown setting (a project takes {', '.join(PROJECT_FIELDS)}); ignored")
    return ProjectDefaults(name, Path(os.path.normpath(root)), adapter, worktree, limits)


def _limits(where: str, table: Mapping[str, Any], warnings: list[str]) -> dict[str, Any]:
    names = [key.removeprefix("limits.") for key in KEYS if key.startswith("limits.")]
    limits = {}
    for name, value in table.items():
        key = f"limits.{name}"
        if key not in KEYS:
            close = difflib.get_close_matches(name, names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else "; see 'loopwarden config keys'"
            warnings.append(f"{where}.limits.{name}: unknown limit{hint}; ignored")
            continue
        try:
            convert(key, KEYS[key], value)
        except ConfigError as exc:
            warnings.append(f"{where}.{exc}; ignored")
            continue
        limits[key] = value
    return limits


def check_keys(wanted: Mapping[str, str], defaults: Mapping[str, Iterable[str]],
               reserved: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """The rebindings that can be taken (action id -> its keys, comma-separated) and a warning for each that
    cannot: an unknown action, or a key another action keeps, or one of `reserved` (key -> where it is kept:
    "the sessions table"), which the console's screens and Textual keep for themselves.
    They are judged together, so two actions can swap keys whatever order they are written in; of two asking
    for the same key, the first written gets it. `defaults` and `wanted` hold keys as the console names them
    (Textual's long names: question_mark)."""
    problems: dict[str, str] = {}
    asked: dict[str, list[str]] = {}
    for action, keys in wanted.items():
        if action in defaults:
            asked[action] = [k.strip() for k in keys.split(",") if k.strip()]
            continue
        close = difflib.get_close_matches(action, list(defaults), n=1)
        hint = f" (did you mean {close[0]}?)" if close else f"; it accepts {', '.join(sorted(defaults))}"
        problems[action] = f"console.keys.{action}: unknown action{hint}; ignored"
    while (refused := _first_clash(asked, defaults, reserved or {})) is not None:
        action, key, owner = refused
        problems[action] = f"console.keys.{action}: {key!r} is already {owner}; the default is kept"
        del asked[action]  # it keeps its default keys, which may now clash with another's new ones: judge again
    chosen = {action: ",".join(keys) for action, keys in asked.items()}
    return chosen, [problems[action] for action in wanted if action in problems]


def _first_clash(asked: Mapping[str, list[str]], defaults: Mapping[str, Iterable[str]],
                 reserved: Mapping[str, str]) -> tuple[str, str, str] | None:
    """The first rebinding (in the order written) whose key is reserved, an action's that keeps its defaults,
    or one asked for earlier: (action, key, whose it is)."""
    held = {owner: set(keys) for owner, keys in defaults.items() if owner not in asked}
    for action, keys in asked.items():
        for key in keys:
            owner = next((f"{o}'s key" for o, ks in held.items() if key in ks), None)
            if owner is None and key in reserved:
                owner = f"a key of {reserved[key]}"
            if owner is not None:
                return action, key, owner
        held[action] = set(keys)
    return None


def check_theme(theme: str | None, known: Iterable[str]) -> tuple[str | None, list[str]]:
    """`theme` when it is one of `known`, else None and a warning naming the close one or some choices."""
    names = sorted(known)
    if theme is None or theme in names:
        return theme, []
    close = difflib.get_close_matches(theme, names, n=1)
    hint = f"did you mean {close[0]}?" if close else f"it accepts {', '.join(names)}"
    return None, [f"console.theme: unknown theme {theme!r} ({hint}); the default is kept"]
