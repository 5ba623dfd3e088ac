"""What a request may carry and how it is refused: the fields of `run`, `adopt` and `set` checked (a bad one
is refused with one line, never half-run), and the errors every operation answers with."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..supervisor.tags import TagError, check_tags
from ..supervisor.visible import visible

NAME_CHARS = 80
TASK_CHARS = 200


class BadRequest(ValueError):
    """A field of a request is missing or wrong; the message is one line that names it."""


class RequestError(Exception):
    """A request the daemon refuses; the message is sent back as one line. `kind` says whose trouble it
    is, for the client's exit code: "request" (what was asked is wrong), "daemon" (the daemon cannot do it
    now: its store, its audit log, a shutdown), "refused" (the asker may not)."""

    def __init__(self, message: str, *, kind: str = "request") -> None:
        super().__init__(message)
        self.kind = kind


class AlreadyAudited(RequestError):
    """A refusal the operation recorded in the audit log itself (or could not record): not logged twice."""


@dataclass(frozen=True)
class RunRequest:
    """A `run` spec whose every field has been checked."""

    command: list[str]
    adapter: str = "auto"
    name: str | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    preset: str | None = None
    sets: list[str] = field(default_factory=list)
    task: str | None = None
    config_file: str | None = None
    config_env: dict[str, str] = field(default_factory=dict)
    worktree: bool | None = None  # None: as sessions.worktree says
    tags: list[str] = field(default_factory=list)
    on: str | None = None  # local or kubernetes[:CONTEXT[/NAMESPACE]]; None: as kubernetes.place says
    image: str | None = None  # a pod's image; None: kubernetes.image


@dataclass(frozen=True)
class AdoptRequest:
    """An `adopt` request whose every field has been checked."""

    pid: int
    name: str | None = None
    preset: str | None = None
    sets: list[str] = field(default_factory=list)


def run_request(spec: Any, adapters: Collection[str]) -> RunRequest:
    """The checked fields of a `run` spec, or BadRequest naming the first bad one."""
    if not isinstance(spec, dict):
        raise BadRequest("run needs a 'spec' object")
    command = spec.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(c, str) and c for c in command):
        raise BadRequest("run needs a non-empty command (a list of non-empty strings)")
    if any("\0" in c for c in command):
        raise BadRequest("command: an argument holds a NUL character")
    adapter = _optional_str(spec, "adapter") or "auto"  # chosen from the command and its first line
    worktree = spec.get("worktree")
    if worktree is not None and not isinstance(worktree, bool):
        raise BadRequest(f"worktree must be true, false or null, not {_kind(worktree)}")
    if adapter not in adapters:
        raise BadRequest(f"unknown adapter {adapter[:40]!r}; use one of {', '.join(adapters)}")
    return RunRequest(
        command=command, adapter=adapter, name=_name(spec), cwd=_cwd(spec.get("cwd")),
        env=_str_map(spec, "env", variables=True), preset=_optional_str(spec, "preset"),
        sets=_str_list(spec, "sets"), task=_optional_str(spec, "task", TASK_CHARS),
        config_file=_path(spec, "config_file"), config_env=_str_map(spec, "config_env", variables=True),
        worktree=worktree, tags=_tags(spec.get("tags")), on=_optional_str(spec, "on"),
        image=_optional_str(spec, "image"),
    )


def _tags(tags: Any) -> list[str]:
    if tags is None:
        return []
    if not isinstance(tags, list):
        raise BadRequest(f"tags must be a list of strings, not {_kind(tags)}")
    try:
        return check_tags(tags)
    except TagError as exc:
        raise BadRequest(str(exc)) from None


def adopt_request(req: dict[str, Any]) -> AdoptRequest:
    """The checked fields of an `adopt` request, or BadRequest naming the first bad one."""
    pid = req.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid < 1 << 31:
        raise BadRequest("adopt needs a process id (a positive integer)")
    return AdoptRequest(pid=pid, name=_name(req), preset=_optional_str(req, "preset"), sets=_str_list(req, "sets"))


def set_values(values: Any) -> dict[str, str | int | float | bool]:
    """The checked `values` of a `set` request (KEY -> a string or a scalar), or BadRequest."""
    if not isinstance(values, dict) or not values:
        raise BadRequest("set needs 'values', such as {\"limits.max_runtime\": \"2h\"}")
    for key, value in values.items():
        if len(key) > 200:
            raise BadRequest(f"set: the key {key[:80]!r}... is longer than 200 characters")
        if not isinstance(value, (str, int, float)):
            raise BadRequest(f"set: the value of {key[:80]!r} must be a string or a number, not {_kind(value)}")
    return dict(values)


def _optional_str(fields: dict[str, Any], key: str, limit: int = 200) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string, not {_kind(value)}")
    if len(value) > limit:
        raise BadRequest(f"{key} is longer than {limit} characters")
    if "\0" in value:
        raise BadRequest(f"{key} holds a NUL character")
    return value or None


def _name(fields: dict[str, Any]) -> str | None:
    value = fields.get("name")
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"name must be a string, not {_kind(value)}")
    name = (value or "").strip()[:NAME_CHARS]  # a long name is cut, as the console shows it
    if visible(name) != name:  # what every output would show escaped is refused at the door
        raise BadRequest(f"name must be printable, without control characters or bidi marks: {visible(name)}")
    return name or None


def _cwd(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise BadRequest(f"cwd must be a directory path (a string), not {_kind(value)}")
    if not os.path.isabs(value):
        raise BadRequest(f"cwd {value[:200]!r} must be an absolute path")
    if not os.path.isdir(value):
        raise BadRequest(f"cwd {value[:200]!r} is not a directory")
    return value


def _path(fields: dict[str, Any], key: str) -> str | None:
    value = _optional_str(fields, key, 4096)
    if value is not None and not os.path.isabs(value):
        raise BadRequest(f"{key} {value[:200]!r} must be an absolute path")
    return value


def _str_list(fields: dict[str, Any], key: str) -> list[str]:
    value = fields.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise BadRequest(f"{key} must be a list of strings, such as [\"limits.max_runtime=30m\"]")
    return list(value)


def _str_map(fields: dict[str, Any], key: str, *, variables: bool) -> dict[str, str]:
    value = fields.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise BadRequest(f"{key} must map names to strings")
    for name, text in value.items():
        if variables and (not name or "=" in name or "\0" in name):
            raise BadRequest(f"{key}: {name[:80]!r} is not a valid variable name")
        if "\0" in text:
            raise BadRequest(f"{key}: the value of {name[:80]!r} holds a NUL character")
    return dict(value)


def environment(req: dict[str, Any]) -> dict[str, str]:
    """The checked `env` of a request (the client's environment, as `run` sends it), or BadRequest."""
    return _str_map(req, "env", variables=True)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def attempted_target(req: dict[str, Any]) -> str | None:
    """What a refused request aimed at, for the audit log: a gate, a counter, a pid or a command."""
    for key in ("gate", "counter", "pid"):
        if isinstance(req.get(key), (str, int)) and not isinstance(req.get(key), bool):
            return str(req[key])[:200]
    if isinstance(req.get("values"), dict):
        return ",".join(map(str, req["values"]))[:200]
    spec = req.get("spec")
    command = spec.get("command") if isinstance(spec, dict) else None
    return " ".join(map(str, command))[:200] if isinstance(command, list) else None


def request_note(req: dict[str, Any]) -> str | None:
    note = req.get("note")
    return note[:2000] if isinstance(note, str) and note.strip() else None
