"""Every adapter, registered through one entry-point group: loopwarden's own as any other package's.

loopwarden's pyproject.toml lists its built-in adapters there; another package adds one the same way::

    [project.entry-points."loopwarden.adapters"]
    my-agent = "my_package.adapter:MyAdapter"

The class follows `sessions.base.Adapter` (an agent loopwarden launches) or `sessions.hooks.HookAdapter` (an
agent attached by its hooks). A built-in name cannot be replaced, and an entry point that fails to load is
reported by `loopwarden adapters`, never raised.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .base import AUTO, Adapter
from .formats import FORMATS
from .hooks import DEFAULT_HOOK_AGENT, HookAdapter

GROUP = "loopwarden.adapters"
OWN = "loopwarden"  # the distribution whose entry points are the built-in adapters
RESERVED = ("adopted",)  # a session kind that is no adapter's (an adopted process): its name is taken too


@dataclass(frozen=True)
class Broken:
    """An entry point that did not load: its name, where it points and why."""

    name: str
    target: str
    error: str


@dataclass
class Found:
    """The adapters discovered: launched ones, hook-attached ones (both by adapter name), and the broken."""

    launched: dict[str, type[Adapter]] = field(default_factory=dict)
    hooked: dict[str, type[HookAdapter]] = field(default_factory=dict)
    broken: list[Broken] = field(default_factory=list)


def _own(point: EntryPoint) -> bool:
    dist = point.dist
    return dist is not None and dist.name.replace("_", "-").lower() == OWN


def discover() -> Found:
    """The built-in adapters in the order of their `listed` (the installed metadata lists them by name), then
    every loadable one another package registers."""
    points = sorted(entry_points(group=GROUP), key=lambda point: not _own(point))  # built-ins first
    builtin = {point.name for point in points if _own(point)} | set(RESERVED)
    found = Found()
    for point in points:
        if point.name in builtin and not _own(point):
            found.broken.append(Broken(point.name, point.value, "a built-in adapter has this name"))
        elif point.name in found.launched or point.name in found.hooked:
            found.broken.append(Broken(point.name, point.value, "another package registered this name first"))
        else:
            _load(point, found)
    def order(item: tuple[str, Any]) -> tuple[bool, int]:  # another package's in its entry points' order
        return (item[0] not in builtin, item[1].listed if item[0] in builtin else 0)

    found.launched = dict(sorted(found.launched.items(), key=order))
    found.hooked = dict(sorted(found.hooked.items(), key=order))
    return found


def _load(point: EntryPoint, found: Found) -> None:
    """One entry point's class into `found`, or the reason it is broken."""
    try:
        cls = point.load()
    except Exception as exc:  # noqa: BLE001 - a third party's import error is reported, not raised
        found.broken.append(Broken(point.name, point.value, f"{type(exc).__name__}: {exc}"[:300]))
        return
    if not (isinstance(cls, type) and issubclass(cls, (Adapter, HookAdapter))):
        found.broken.append(Broken(point.name, point.value, "not a subclass of loopwarden.sessions.base.Adapter"))
    elif cls.name != point.name:  # the class's name is what snapshots and the store record
        found.broken.append(Broken(point.name, point.value, f"its class is named {cls.name!r}, not {point.name!r}"))
    elif issubclass(cls, HookAdapter):
        found.hooked[point.name] = cls
    else:
        found.launched[point.name] = cls


_CACHE: Found | None = None


def found() -> Found:
    """Every adapter, discovered once per process."""
    global _CACHE
    if _CACHE is None:
        _CACHE = discover()
    return _CACHE


def adapters() -> dict[str, type[Adapter]]:
    """Name -> the class of an adapter for agents loopwarden launches."""
    return found().launched


def names() -> list[str]:
    return list(adapters())


def hook_adapters() -> dict[str, type[HookAdapter]]:
    """The agent of a hook request (`loopwarden hook AGENT`) -> its hook-attached adapter's class."""
    return {cls.hook_agent: cls for cls in found().hooked.values()}


def hook_adapter(agent: Any) -> HookAdapter:
    """The adapter of a hook request's `agent` (absent: DEFAULT_HOOK_AGENT's). ValueError if none has it."""
    known = hook_adapters()
    name = DEFAULT_HOOK_AGENT if agent is None else agent
    cls = known.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"unknown hook agent {str(agent)[:40]!r} ({' or '.join(known)})")
    return cls()


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
