"""`loopwarden hook install/uninstall --agent codex`: the PreToolUse hook in `$CODEX_HOME/hooks.json`, and
the trust Codex requires before it runs a hook, in `$CODEX_HOME/config.toml`.

Codex skips an untrusted hook silently. Trust is a table `[hooks.state."<hooks.json>:pre_tool_use:G:H"]`
with `trusted_hash = "sha256:<hex>"`, the SHA-256 of the hook's identity as canonical JSON (keys sorted,
compact): `{"event_name": "pre_tool_use", "matcher": ..., "hooks": [{"type": "command", "command": ...,
"timeout": ..., "async": false}]}` (Codex CLI 0.163.0; a test checks it against `codex app-server`'s
`hooks/list`). config.toml is edited as text, so the user's content and comments stay byte for byte:
our table is appended under a marker comment and removed with it; tomllib checks every result.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import click

from ..sessions.codex_hooks import EVENT_LABELS
from .common import Fail
from .hook import (HOOK_TIMEOUT, hook_command, is_ours, read_settings, read_text, without_hooks, write_settings,
                   write_text)

AGENT = "codex"
EVENT = "PreToolUse"
MARK = "# loopwarden: trust for its Codex PreToolUse hook (`loopwarden hook uninstall --agent codex` removes it)"
_STATE_HEADER = re.compile(r"""^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\.[ \t]*("(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
                           r"""[ \t]*\][ \t]*(?:#.*)?$""", re.MULTILINE)
_TABLE_START = re.compile(r"^[ \t]*\[", re.MULTILINE)
_TRUSTED_LINE = re.compile(r"^[ \t]*trusted_hash[ \t]*=.*\n?", re.MULTILINE)


def codex_home() -> Path:
    """$CODEX_HOME, else ~/.codex."""
    home = os.environ.get("CODEX_HOME")
    return Path(home).expanduser().absolute() if home else Path.home() / ".codex"


def trust_key(hooks_path: Path, group: int, handler: int = 0, event: str = EVENT) -> str:
    return f"{hooks_path}:{EVENT_LABELS[event]}:{group}:{handler}"


def trust_hash(handler: dict[str, Any], matcher: Any, event: str = EVENT) -> str:
    """The hash Codex records for a trusted command hook."""
    hook: dict[str, Any] = {"type": "command", "command": handler.get("command"),
                            "timeout": handler.get("timeout", 600), "async": bool(handler.get("async", False))}
    if isinstance(handler.get("statusMessage"), str):
        hook["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [hook]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def our_hooks(settings: dict[str, Any], hooks_path: Path) -> list[tuple[str, str]]:
    """(trust key, hash) of every loopwarden hook in a hooks.json."""
    found = []
    for g, group in enumerate(settings.get("hooks", {}).get(EVENT, [])):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
            if is_ours(handler, AGENT):
                found.append((trust_key(hooks_path, g, h), trust_hash(handler, group.get("matcher"))))
    return found


def with_hook(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """hooks.json with our PreToolUse hook last (an older loopwarden command replaced), the rest kept."""
    out = without_hooks(settings, AGENT)
    group = {"matcher": "*", "hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]}
    out.setdefault("hooks", {}).setdefault(EVENT, []).append(group)
    return out


# ---- config.toml, as text ----------------------------------------------------------

def read_config(path: Path) -> tuple[str | None, dict[str, Any]]:
    text = read_text(path)
    return (None, {}) if text is None else (text, _parse(path, text))


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Fail(f"{path} is not valid TOML ({exc}); nothing was changed") from None


def _trusted(doc: dict[str, Any], key: str) -> Any:
    hooks = doc.get("hooks")
    state = hooks.get("state") if isinstance(hooks, dict) else None
    entry = state.get(key) if isinstance(state, dict) else None
    return entry.get("trusted_hash") if isinstance(entry, dict) else None


def _table(text: str, key: str) -> tuple[int, int, int] | None:
    """(start of its header line, end of that line, end of the table) of `[hooks.state."key"]`."""
    for match in _STATE_HEADER.finditer(text):
        if tomllib.loads(f"k = {match.group(1)}")["k"] != key:
            continue
        body = match.end() + (1 if text[match.end():match.end() + 1] == "\n" else 0)
        following = _TABLE_START.search(text, body)
        return match.start(), body, following.start() if following else len(text)
    return None


def with_trust(path: Path, text: str | None, key: str, digest: str) -> str:
    """config.toml's text with `key` trusted at `digest`."""
    text = text or ""
    doc = _parse(path, text)
    if _trusted(doc, key) == digest:
        return text
    table = _table(text, key)
    if table:
        _, body, end = table
        line = f'trusted_hash = "{digest}"\n'
        found = _TRUSTED_LINE.search(text, body, end)
        new = text[:found.start()] + line + text[found.end():] if found else text[:body] + line + text[body:]
    elif "hooks" in doc and _trusted(doc, key) is not None:
        raise Fail(f"{path} trusts {key} in a form loopwarden does not edit; remove that entry and try again")
    else:
        sep = "" if not text else "\n" if text.endswith("\n") else "\n\n"
        new = f'{text}{sep}{MARK}\n[hooks.state.{json.dumps(key, ensure_ascii=False)}]\ntrusted_hash = "{digest}"\n'
    try:
        ok = _trusted(tomllib.loads(new), key) == digest
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise Fail(f"cannot record the hook's trust in {path} (its [hooks] tables have a shape loopwarden does "
                   "not edit); nothing was changed")
    return new


def without_trust(text: str, key: str, digest: str) -> str:
    """config.toml's text without our trust entry for `key`: the table under our marker, or else a
    `trusted_hash` of `digest` (another's trust, or an entry of its own, is left)."""
    table = _table(text, key)
    if not table:
        return text
    start, body, end = table
    before = text[:start]
    if before.endswith(MARK + "\n") and not [line for line in text[body:end].splitlines()
                                             if line.strip() and not line.lstrip().startswith("trusted_hash")]:
        cut = start - len(MARK) - 1
        cut -= 1 if text[:cut].endswith("\n\n") else 0
        return text[:cut] + text[end:]
    found = _TRUSTED_LINE.search(text, body, end)
    try:
        ours = bool(found) and tomllib.loads(found.group(0) if found else "").get("trusted_hash") == digest
    except tomllib.TOMLDecodeError:
        ours = False
    if not found or not ours:
        return text
    rest = text[body:found.start()] + text[found.end():end]
    if any(line.strip() and not line.lstrip().startswith("#") for line in rest.splitlines()):
        return text[:found.start()] + text[found.end():]  # the table keeps the user's other keys
    return text[:start] + text[end:]


# ---- the commands --------------------------------------------------------------------

def change(install: bool) -> None:
    """Install or remove our hook in $CODEX_HOME/hooks.json and its trust in config.toml."""
    home = codex_home()
    hooks_path, config_path = home / "hooks.json", home / "config.toml"
    hooks_text, current = read_settings(hooks_path)
    config_text, _ = read_config(config_path)
    old = our_hooks(current, hooks_path)
    new = with_hook(current, hook_command(AGENT)) if install else without_hooks(current, AGENT)
    config = config_text or ""
    keep = our_hooks(new, hooks_path)
    for key, digest in old:
        if (key, digest) not in keep:
            config = without_trust(config, key, digest)
    for key, digest in keep:
        config = with_trust(config_path, config, key, digest)
    if new == current and config == (config_text or ""):
        what = "already installed" if install else "no loopwarden hook"
        click.echo(f"{what} in {hooks_path}; nothing changed")
        return
    saved = []
    try:
        if new != current:
            saved.append(write_settings(hooks_path, hooks_text, new))
        if config != (config_text or ""):
            saved.append(write_text(config_path, config_text, config))
    except OSError as exc:
        raise Fail(f"cannot write {exc.filename or home}: {exc.strerror or exc}") from None
    backups = [str(b) for b in saved if b]
    note = f"; the old files are in {', '.join(backups)}" if backups else ""
    if install:
        click.echo(f"installed the loopwarden PreToolUse hook in {hooks_path}, trusted in {config_path}{note}")
        click.echo("Codex reads hooks when a session starts: new sessions are supervised by a running daemon.")
    else:
        click.echo(f"removed the loopwarden hook from {hooks_path} and its trust from {config_path}{note}")
