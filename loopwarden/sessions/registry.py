"""Every adapter, registered in one place: the built-in ones here, others through an entry point.

Another package adds one with, in its pyproject.toml::

    [project.entry-points."loopwarden.adapters"]
    my-agent = "my_package.adapter:MyAdapter"

The class follows `sessions.base.Adapter`. A built-in name cannot be replaced, and an entry point that
fails to load is reported by `loopwarden adapters`, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

from .acp import AcpAdapter
from .base import Adapter
from .claude_live import ClaudeCodeAdapter
from .codex_app import CodexAppServerAdapter
from .detect import AUTO, AutoAdapter
from .formats import FORMATS
from .native import NativeAdapter
from .observed import ClaudeStreamAdapter, CodexExecAdapter
from .plain import PlainAdapter

GROUP = "loopwarden.adapters"
ATTACHED = ("claude-code-hook", "codex-hook", "adopted")  # session kinds that are not launched, names taken too
BUILTIN: dict[str, type[Adapter]] = {cls.name: cls for cls in (
    AutoAdapter, NativeAdapter, PlainAdapter, ClaudeCodeAdapter, CodexAppServerAdapter, AcpAdapter, ClaudeStreamAdapter,
    CodexExecAdapter)}


@dataclass(frozen=True)
class Broken:
    """An entry point that did not load: its name, where it points and why."""

    name: str
    target: str
    error: str


def discover() -> tuple[dict[str, type[Adapter]], list[Broken]]:
    """The built-in adapters, then every loadable one from the entry-point group."""
    found = dict(BUILTIN)
    broken: list[Broken] = []
    for point in entry_points(group=GROUP):
        if point.name in BUILTIN or point.name in ATTACHED:
            broken.append(Broken(point.name, point.value, "a built-in adapter has this name"))
            continue
        if point.name in found:
            broken.append(Broken(point.name, point.value, "another package registered this name first"))
            continue
        try:
            cls = point.load()
        except Exception as exc:  # noqa: BLE001 - a third party's import error is reported, not raised
            broken.append(Broken(point.name, point.value, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        if not (isinstance(cls, type) and issubclass(cls, Adapter)):
            broken.append(Broken(point.name, point.value, "not a subclass of loopwarden.sessions.base.Adapter"))
            continue
        if cls.name != point.name:  # the class's name is what snapshots and the store record
            broken.append(Broken(point.name, point.value, f"its class is named {cls.name!r}, not {point.name!r}"))
            continue
        found[point.name] = cls
    return found, broken


_CACHE: dict[str, type[Adapter]] | None = None


def adapters() -> dict[str, type[Adapter]]:
    """Name -> adapter class, discovered once per process."""
    global _CACHE
    if _CACHE is None:
        _CACHE = discover()[0]
    return _CACHE


def names() -> list[str]:
    return list(adapters())


def recordings() -> dict[str, type[Adapter]]:
    """Recorded format -> the adapter that reads it (`replay_format`); a format two adapters name is the first's
    (the built-in ones come first). The formats a recording's first lines are told by come first, in that order."""
    found: dict[str, type[Adapter]] = {}
    for cls in adapters().values():
        if cls.replay_format is not None:
            found.setdefault(cls.replay_format, cls)
    order = {fmt: i for i, fmt in enumerate(FORMATS)}
    return dict(sorted(found.items(), key=lambda item: order.get(item[0], len(order))))


def recording(fmt: str) -> type[Adapter]:
    """The adapter that reads recordings in `fmt`; ValueError (one line) naming the formats there are."""
    known = recordings()
    cls = known.get(fmt)
    if cls is None:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(known)}")
    return cls


def known_agents() -> dict[str, type[Adapter]]:
    """Agent name -> the adapter that starts it by name alone (`run --agent NAME`); a name two adapters know is
    the first's."""
    found: dict[str, type[Adapter]] = {}
    for cls in adapters().values():
        for name in cls.known_agents():
            found.setdefault(name, cls)
    return found


@dataclass(frozen=True)
class Launch:
    """What `loopwarden run` and the console's launch dialog start."""

    adapter: str
    command: list[str]
    env: dict[str, str]  # added to the user's environment


def prepare_launch(adapter: str, words: list[str], env: Mapping[str, str], cwd: str, *,
                   agent: str | None = None) -> Launch:
    """The launch of `words` (what the user typed after `--`) by `adapter`, or of the known `agent`, `words` being
    its prompt. Raises ValueError (one line) when it cannot be launched as asked."""
    if agent is not None:
        cls = known_agents().get(agent)
        if cls is None:
            raise ValueError(f"unknown agent {agent!r}; known: {', '.join(known_agents())}")
        if adapter not in (AUTO, cls.name):
            raise ValueError(f"--agent {agent} runs the {cls.name} adapter; leave out --adapter {adapter}")
        adapter, words = cls.name, cls.agent_words(agent, words, env, cwd)
    cls = adapters()[adapter]
    command = cls.launch_command(words, dict(env))
    return Launch(adapter, command, cls.launch_env(command, dict(env), cwd))
