"""The hooks files of Claude Code (`settings.json`) and Codex (`hooks.json`): read, checked, and changed
by splicing loopwarden's hook groups into the user's text.

`without_hooks` and `plus` say what the settings become, as values; the text is then edited to
match (`jsonsplice`), every other byte kept, and checked against those values: a text that would
parse to anything else is refused, so an edit can never change a setting it was not about.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import dotfiles, jsonsplice
from .common import Fail

Additions = list[tuple[str, dict[str, Any]]]  # (event, hook group) to append


@dataclass(frozen=True)
class Settings:
    file: dotfiles.Dotfile
    data: dict[str, Any]


def is_ours(hook: Any, agent: str) -> bool:
    """A hook entry that runs `loopwarden hook <agent>` (from any installation)."""
    command = hook.get("command") if isinstance(hook, dict) else None
    return isinstance(command, str) and command.rstrip().endswith(f"hook {agent}") and "loopwarden" in command


def _decode(text: str) -> Any:
    # NaN and Infinity are not JSON; a file holding one is left as it is, and compared as the word
    return json.loads(text, parse_constant=lambda word: f"\0{word}")


def read_settings(path: Path) -> Settings:
    """The hooks file at `path` ({} when it does not exist or is blank); a file loopwarden cannot edit
    (unreadable, not UTF-8, not JSON, not an object, `hooks` not a map of lists) is a one-line Fail."""
    file = dotfiles.load(path)
    if not file.text.strip():
        return Settings(file, {})
    try:
        data = _decode(file.text)
    except ValueError as exc:
        raise Fail(f"{path} is not valid JSON ({exc}); nothing was changed") from None
    except RecursionError:
        raise Fail(f"{path} is nested too deeply to edit; nothing was changed") from None
    if not isinstance(data, dict):
        raise Fail(f"{path} does not hold a JSON object; nothing was changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise Fail(f"{path}: 'hooks' must map event names to lists; nothing was changed")
    return Settings(file, data)


def without_hooks(settings: dict[str, Any], agent: str) -> dict[str, Any]:
    """Settings with every loopwarden hook removed, and the groups, events and `hooks` emptied by that
    (what was empty before stays)."""
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
        if groups or not hooks[event]:
            hooks[event] = groups
        else:
            del hooks[event]
    if not hooks and settings.get("hooks"):
        del out["hooks"]
    return out


def plus(settings: dict[str, Any], add: Additions) -> dict[str, Any]:
    """Settings with each group appended to its event's list."""
    for event, group in add:
        settings.setdefault("hooks", {}).setdefault(event, []).append(group)
    return settings


def edited(settings: Settings, agent: str, add: Additions) -> tuple[str, dict[str, Any]]:
    """The text and settings without any loopwarden hook of `agent`, then with `add` appended. The text
    is the old one when nothing changes; a new or blank file is written as indented JSON."""
    new = plus(without_hooks(settings.data, agent), add)
    if new == settings.data:
        return settings.file.text, settings.data
    before = None if add else restored(settings.file, new)
    if before is not None:  # uninstalled: the file as it was before install, byte for byte
        return before, new
    if not settings.file.text.strip():
        return json.dumps(new, indent=2, ensure_ascii=False) + "\n", new
    try:
        text = _append_groups(_remove_ours(settings.file.text, agent), add)
        same = _decode(text) == new
    except (ValueError, RecursionError):
        same = False
    if not same:
        raise Fail(f"cannot change the hooks in {settings.file.path} without changing the rest of it; nothing "
                   "was changed")
    return text, new


def restored(file: dotfiles.Dotfile, new: dict[str, Any]) -> str | None:
    """The text of the newest backup when it holds the settings `new` (an emptied `hooks` and empty event
    lists aside): what the file was before install, with the empty `hooks` it may have had; else None."""
    for backup in dotfiles.backups(file)[:1]:
        try:
            old = dotfiles.load(backup)
            if _bare(_decode(old.text)) == _bare(new) and old.bom == file.bom:
                return old.text
        except (Fail, ValueError, RecursionError):
            return None
    return None


def _bare(settings: Any) -> Any:
    """Settings without empty event lists, and without `hooks` when it is left empty."""
    if not isinstance(settings, dict) or not isinstance(settings.get("hooks"), dict):
        return settings
    hooks = {event: groups for event, groups in settings["hooks"].items() if groups}
    out = {k: v for k, v in settings.items() if k != "hooks"}
    return {**out, "hooks": hooks} if hooks else out


def _remove_ours(text: str, agent: str) -> str:
    root = jsonsplice.parse(text)
    hooks = root.last("hooks")
    if hooks is None or hooks.value.kind != "{":
        return text
    splices: list[jsonsplice.Splice] = []
    emptied = []
    for e, event in enumerate(hooks.value.items):
        groups = event.value
        whole = []
        for g, group in enumerate(groups.items):
            handlers = group.value.last("hooks") if group.value.kind == "{" else None
            if handlers is None or handlers.value.kind != "[":
                continue
            ours = [h for h, handler in enumerate(handlers.value.items)
                    if is_ours(_decode(text[handler.start:handler.end]), agent)]
            if ours and len(ours) == len(handlers.value.items):
                whole.append(g)
            else:
                splices += jsonsplice.delete(text, handlers.value, ours)
        if whole and len(whole) == len(groups.items):
            emptied.append(e)
        else:
            splices += jsonsplice.delete(text, groups, whole)
    if emptied and len(emptied) == len(hooks.value.items):
        splices += jsonsplice.delete(text, root, [root.items.index(hooks)])
    else:
        splices += jsonsplice.delete(text, hooks.value, emptied)
    return jsonsplice.apply(text, splices)


def _append_groups(text: str, add: Additions) -> str:
    if not add:
        return text
    root = jsonsplice.parse(text)
    style = jsonsplice.style_of(text, root)
    hooks = root.last("hooks")
    if hooks is None:
        return jsonsplice.apply(text, [jsonsplice.append(text, root, [("hooks", plus({}, add)["hooks"])], style)])
    splices: list[jsonsplice.Splice] = []
    events: dict[str, list[dict[str, Any]]] = {}
    for event, group in add:
        member = hooks.value.last(event)
        if member is None:
            events.setdefault(event, []).append(group)
        else:
            splices.append(jsonsplice.append(text, member.value, [(None, group)], style))
    if events:
        splices.append(jsonsplice.append(text, hooks.value, [(e, g) for e, g in events.items()], style))
    return jsonsplice.apply(text, splices)
