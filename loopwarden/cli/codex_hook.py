"""`loopwarden hook install/uninstall --agent codex`: the PreToolUse hook in `$CODEX_HOME/hooks.json`, and
the trust Codex requires before it runs a hook, in `$CODEX_HOME/config.toml`.

Codex skips an untrusted hook silently. Trust is a table `[hooks.state."<hooks.json>:pre_tool_use:G:H"]`
with `trusted_hash = "sha256:<hex>"`, the SHA-256 of the hook's identity as canonical JSON (keys sorted,
compact): `{"event_name": "pre_tool_use", "matcher": ..., "hooks": [{"type": "command", "command": ...,
"timeout": ..., "async": false}]}` (Codex CLI 0.163.0; a test checks it against `codex app-server`'s
`hooks/list`). config.toml is edited as text, so the user's content, comments and line ends stay byte
for byte: our table is appended under a marker comment, in the file's line ends, and removed with it;
tomllib checks every result. Both files are read, written and backed up by `dotfiles`.
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
from ..sessions.hooks import HookAdapter
from . import dotfiles
from .common import Fail
from .hook import HOOK_TIMEOUT, hook_command
from .hook_files import edited, is_ours, read_settings

EVENT = "PreToolUse"
MARK = "# loopwarden: trust for its Codex PreToolUse hook (`loopwarden hook uninstall --agent codex` removes it)"
_STATE_HEADER = re.compile(r"""^[ \t]*\[[ \t]*hooks[ \t]*\.[ \t]*state[ \t]*\.[ \t]*("(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
                           r"""[ \t]*\][ \t]*(?:#[^\r\n]*)?\r?$""", re.MULTILINE)
_TABLE_START = re.compile(r"^[ \t]*\[", re.MULTILINE)
_TRUSTED_LINE = re.compile(r"^[ \t]*trusted_hash[ \t]*=.*\n?", re.MULTILINE)
_MARKED = re.compile("^" + re.escape(MARK) + r"\r?\n", re.MULTILINE)  # our marker line, at the start of a line


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


def our_hooks(settings: dict[str, Any], hooks_path: Path, agent: str) -> list[tuple[str, str]]:
    """(trust key, hash) of every loopwarden hook of `agent` in a hooks.json."""
    found = []
    for g, group in enumerate(settings.get("hooks", {}).get(EVENT, [])):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
            if is_ours(handler, agent):
                found.append((trust_key(hooks_path, g, h), trust_hash(handler, group.get("matcher"))))
    return found


# ---- config.toml, as text ----------------------------------------------------------

def read_config(path: Path) -> tuple[dotfiles.Dotfile, dict[str, Any]]:
    file = dotfiles.load(path)
    return file, _parse(path, file.text)


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Fail(f"{path} is not valid TOML ({exc}); nothing was changed") from None
    except RecursionError:
        raise Fail(f"{path} is nested too deeply to edit; nothing was changed") from None


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


def _line_end(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def with_trust(path: Path, text: str, key: str, digest: str) -> str:
    """config.toml's text with `key` trusted at `digest`; lines added end as the file's lines do."""
    doc = _parse(path, text)
    if _trusted(doc, key) == digest:
        return text
    nl = dotfiles.newline_of(text)
    line = f'trusted_hash = "{digest}"'
    table = _table(text, key)
    if table:
        _, body, end = table
        found = _TRUSTED_LINE.search(text, body, end)
        if found:
            new = text[:found.start()] + line + _line_end(found.group()) + text[found.end():]
        else:
            new = text[:body] + ("" if text[:body].endswith("\n") else nl) + line + nl + text[body:]
    elif "hooks" in doc and _trusted(doc, key) is not None:
        raise Fail(f"{path} trusts {key} in a form loopwarden does not edit; remove that entry and try again")
    else:  # a line end after the user's last line (a blank line if it had its own), then our table
        new = f"{text}{nl if text else ''}{MARK}{nl}[hooks.state.{json.dumps(key, ensure_ascii=False)}]{nl}{line}{nl}"
    try:
        ok = _trusted(tomllib.loads(new), key) == digest
    except tomllib.TOMLDecodeError:
        ok = False
    if not ok:
        raise Fail(f"cannot record the hook's trust in {path} (its [hooks] tables have a shape loopwarden does "
                   "not edit); nothing was changed")
    return new


def without_trust(text: str, key: str, digest: str) -> str:
    """config.toml's text without our trust entry for `key`: the table under our marker with the line end
    `with_trust` put before it, or else a `trusted_hash` of `digest` (another's trust, or an entry of its
    own, is left)."""
    table = _table(text, key)
    if not table:
        return text
    start, body, end = table
    at = text.rfind(MARK, 0, start)
    marked = _MARKED.match(text, at) if at >= 0 else None
    if marked and marked.end() == start and not [line for line in text[body:end].splitlines()
                                                 if line.strip() and not line.lstrip().startswith("trusted_hash")]:
        cut = marked.start()
        cut -= 2 if text[:cut].endswith("\r\n") else 1 if text[:cut].endswith("\n") else 0
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


def _save(changes: list[tuple[dotfiles.Dotfile, str]]) -> list[str]:
    """Write each file in turn; the backups made. A failure says which file was already written."""
    backups: list[str] = []
    for n, (file, text) in enumerate(changes):
        try:
            backup = dotfiles.save(file, text)
        except Fail as exc:
            if not n:
                raise
            raise Fail(f"{exc.format_message()} ({changes[0][0].path} was changed already; run the command "
                       "again)") from None
        backups += [str(backup)] if backup else []
    return backups


# ---- the commands --------------------------------------------------------------------

def change(adapter: HookAdapter, install: bool) -> None:
    """Install or remove our hook in $CODEX_HOME/hooks.json and its trust in config.toml."""
    home = codex_home()
    hooks_path, config_path = home / "hooks.json", home / "config.toml"
    hooks = read_settings(hooks_path)
    config, _ = read_config(config_path)
    agent = adapter.hook_agent
    group = {"matcher": "*", "hooks": [{"type": "command", "command": hook_command(agent), "timeout": HOOK_TIMEOUT}]}
    hooks_text, new = edited(hooks, agent, [(EVENT, group)] if install else [])
    config_text = config.text
    keep = our_hooks(new, hooks_path, agent)
    for key, digest in our_hooks(hooks.data, hooks_path, agent):
        if (key, digest) not in keep:
            config_text = without_trust(config_text, key, digest)
    for key, digest in keep:
        config_text = with_trust(config_path, config_text, key, digest)
    # the trust is written before the hook and removed after it: a failure between leaves at most an
    # unused trust entry, never a hook Codex would skip as untrusted
    order = [(config, config_text), (hooks.file, hooks_text)]
    changes = [(file, text) for file, text in (order if install else order[::-1]) if text != file.text]
    if not changes:
        what = "already installed" if install else "no loopwarden hook"
        click.echo(f"{what} in {hooks_path}; nothing changed")
        return
    backups = _save(changes)
    note = f"; the old files are in {', '.join(backups)}" if backups else ""
    if install:
        click.echo(f"installed the loopwarden PreToolUse hook in {hooks_path}, trusted in {config_path}{note}")
        click.echo("Codex reads hooks when a session starts: new sessions are supervised by a running daemon.")
    else:
        click.echo(f"removed the loopwarden hook from {hooks_path} and its trust from {config_path}{note}")
