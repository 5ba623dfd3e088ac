"""The user config (supervisor/user_config.py) applied to the console: its keys rebound, its theme, and each
warning (or the file's error) said once in a toast; what cannot be taken leaves the default."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding, BindingType
from textual.keys import Keys, _character_to_key
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES

from ..paths import working_directory
from ..supervisor.user_config import ProjectDefaults, UserConfig, check_keys, check_theme, read_user_config


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console takes from the user config: binding id -> keys, a theme, and what it could not take."""

    keymap: dict[str, str]
    theme: str | None
    warnings: list[str]


def _keys(keys: str) -> list[str]:
    """A binding's keys by the names Textual matches them by (`?` is question_mark)."""
    return App._normalize_keymap({"k": keys})["k"].split(",")


MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
NAMED_KEYS = frozenset({k.value for k in Keys if "+" not in k.value and not k.value.startswith("<")}
                       | {_character_to_key(chr(code)) for code in range(32, 127)})  # slash, question_mark ...


def is_key_name(key: str) -> bool:
    """Whether Textual ever names a key press `key` (normalised: `?` is question_mark): a binding to anything
    else, such as "Ctrl+X" or "F5", would leave its action without a key."""
    *modifiers, name = key.split("+")
    if not name or not MODIFIERS.issuperset(modifiers):
        return False
    if len(name) == 1 or name in NAMED_KEYS:
        return True
    try:
        char = unicodedata.lookup(name.replace("_", " "))  # a character beyond ASCII by its name
    except KeyError:
        return False
    return _character_to_key(char) == name


def _not_a_key(keys: str) -> str | None:
    """The first of `keys` (comma-separated, as the user wrote them) that is no key's name, if any."""
    written = keys.split(",")
    return next((w.strip() for w, name in zip(written, _keys(keys), strict=True) if name and not is_key_name(name)),
                None)


def rebindable_actions() -> dict[str, list[str]]:
    """Each action the user config may rebind (its binding id) with its keys."""
    from .app import ACTION_KEYS, GENERAL_KEYS, SESSION_KEYS  # the app applies these settings: imported late

    return {b.id: _keys(b.key) for b in [*SESSION_KEYS, *ACTION_KEYS, *GENERAL_KEYS] if b.id}


def kept_keys(rebindable: set[str]) -> dict[str, str]:
    """The keys no action may take (key -> where it is kept): those of the screens the actions work on (a screen's
    own key there hides the app's), and Textual's own (ctrl+q quits before any binding of ours is asked)."""
    from .app import Sessions
    from .detail import SessionDetail
    from .gates import GatesQueue
    from .session_table import SessionTable

    places = [("Textual's own", [*App.BINDINGS, *Screen.BINDINGS, Binding(App.COMMAND_PALETTE_BINDING, "")]),
              ("the sessions table", [*SessionTable.BINDINGS, *Sessions.BINDINGS]),
              ("the session detail", SessionDetail.BINDINGS), ("the gates queue", GatesQueue.BINDINGS)]
    kept: dict[str, str] = {}
    for place, bindings in places:
        for b in bindings:
            if isinstance(b, Binding) and b.id not in rebindable:  # the gates queue's approve moves with the app's
                kept.update((key, kept.get(key, place)) for key in _keys(b.key))
    return kept


def console_settings(user: UserConfig, themes: Iterable[str] = BUILTIN_THEMES) -> ConsoleSettings:
    """The console's keymap and theme from `user`, checked against its bindings and `themes`."""
    defaults = rebindable_actions()
    wanted, named_badly = {}, []
    for action, keys in user.keys.items():
        bad = _not_a_key(keys)
        if bad is None:
            wanted[action] = ",".join(_keys(keys))
        else:
            named_badly.append(f"console.keys.{action}: {bad!r} is not a key's name (such as ctrl+x, K, f5, "
                               "escape, space); the default is kept")
    keymap, key_warnings = check_keys(wanted, defaults, kept_keys(set(defaults)))
    key_warnings = named_badly + key_warnings
    theme, theme_warnings = check_theme(user.theme, themes)
    return ConsoleSettings(keymap, theme, key_warnings + theme_warnings)


def apply_user_settings(app: App[Any], path: Path) -> ConsoleSettings:
    """Read the user config at `path` and apply it to `app`; every problem is a one-line toast."""
    user = read_user_config(path)
    settings = console_settings(user, app.available_themes)
    if settings.keymap:
        app.set_keymap(settings.keymap)
    if settings.theme:
        app.theme = settings.theme
    for problem in ([user.error] if user.error else []) + list(user.warnings) + settings.warnings:
        app.notify(problem, title="user config", severity="error" if user.error else "warning", timeout=10,
                   markup=False)
    return settings


def rebound(bindings: Iterable[BindingType], keymap: Mapping[str, str]) -> list[Binding]:
    """`bindings` with the keys the user gave them (for the help and the palette, which name keys)."""
    return [replace(b, key=keymap[b.id]) if b.id is not None and b.id in keymap else b
            for b in bindings if isinstance(b, Binding)]


def project_here(path: Path) -> ProjectDefaults | None:
    """The launch defaults of the project the console runs in (None when none holds its directory)."""
    try:
        return read_user_config(path).project_for(working_directory())
    except ValueError:  # the directory is gone: the launch dialog says so when it is used
        return None
