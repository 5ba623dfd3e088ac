"""The layers of docs/architecture.md, read from every import in the package: none runs back up.

engine (supervisor/) < adapters (sessions/, and paths.py: where loopwarden keeps its files) < runtime (runtime/)
< the people's side (cli/, widgets/, the rest)
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "loopwarden"
RANK = {"supervisor": 0, "sessions": 1, "paths": 1, "runtime": 2}
TOP = 3  # cli, widgets, web, replay.py, entry.py, hook_client.py
ENGINE_FORBIDDEN = {"textual", "anyio", "asyncio", "psutil", "sqlite3", "sqlite_utils", "socket", "subprocess",
                    "platformdirs"}


def _room(module: str) -> int:
    """The layer of a `loopwarden.X...` module name."""
    parts = module.split(".")
    return RANK.get(parts[1], TOP) if len(parts) > 1 else TOP


def _imports(path: Path) -> list[tuple[str, int]]:
    """Every module `path` imports (absolute names), with its line."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.append((base, node.lineno))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_back_up(path: Path) -> None:
    own = _room("loopwarden." + ".".join(path.relative_to(PACKAGE).parts))
    upward = [f"line {line}: {name}" for name, line in _imports(path)
              if name.startswith("loopwarden.") and name.count(".") >= 1 and _room(name) > own
              and _is_module_room(name)]
    assert not upward, f"{path.relative_to(PACKAGE)} imports from a layer above it: {upward}"


def _is_module_room(name: str) -> bool:
    """`loopwarden.cli` etc.: skip names that are attributes of the package itself (there are none today)."""
    return name.split(".")[1] in {*RANK, "cli", "widgets", "web", "replay", "entry", "hook_client"}


@pytest.mark.parametrize("path", sorted((PACKAGE / "supervisor").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_engine_does_no_io(path: Path) -> None:
    used = {name.split(".")[0] for name, _ in _imports(path)}
    assert not used & ENGINE_FORBIDDEN, f"the engine module {path.name} imports {sorted(used & ENGINE_FORBIDDEN)}"


def test_relative_imports_resolve_to_their_rooms() -> None:
    """The tests above rely on resolving `from ..x import y`: check it on a module with both kinds."""
    found = dict(_imports(PACKAGE / "runtime" / "launcher.py"))
    assert "loopwarden.supervisor.config" in found and "loopwarden.runtime.session" in found
    assert _room("loopwarden.runtime.session") > _room("loopwarden.sessions.native") > _room("loopwarden.supervisor")


# ---- one module per agent: the people's side and the runtime ask capabilities and protocol methods -----------
# An agent is one adapter module (sessions/), registered through the entry points: nothing above it may test a
# session's or an adapter's class, or switch on an agent's name. What is scanned: runtime/, cli/, widgets/, web/,
# replay.py, entry.py and hook_client.py.
UPPER = ("runtime", "cli", "widgets", "web")
# Modules allowed to name agents, and why.
EXEMPT = {
    "entry.py": "the built-in hook agents served without the command line: their entry points are too slow to "
                "read once per tool call (a third party's hook agent goes through the command line)",
}
GENERIC = {"any", "command", "process", ""}  # defaults and kinds that name no agent


def _scanned() -> list[Path]:
    loose = [PACKAGE / name for name in ("replay.py", "entry.py", "hook_client.py")]
    return sorted([p for room in UPPER for p in (PACKAGE / room).rglob("*.py")] + loose)


@functools.cache
def _class_names() -> set[str]:
    """Adapter classes (sessions/: Adapter, HookAdapter and every subclass) and session classes (runtime/: a
    class that runs, snapshots and kills, as contract.Supervised says a session does)."""
    adapters = {"Adapter", "HookAdapter"}
    defined = [(node, path) for path in sorted((PACKAGE / "sessions").rglob("*.py"))
               for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)]
    grew = True
    while grew:
        before = len(adapters)
        adapters |= {node.name for node, _ in defined if {_base(b) for b in node.bases} & adapters}
        grew = len(adapters) > before
    sessions = set()
    for path in sorted((PACKAGE / "runtime").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and "Protocol" not in {_base(b) for b in node.bases}:
                methods = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
                if {"run", "snapshot", "kill"} <= methods:
                    sessions.add(node.name)
    return adapters | sessions


def _base(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


@functools.cache
def _agent_names() -> set[str]:
    """Every agent's and adapter's name: what adapters are registered as, the agents they speak to, the word
    of their hook command, their programs, and the known ACP agents."""
    from loopwarden.runtime.adopted import AdoptedSession
    from loopwarden.sessions import acp_agents, registry

    found = registry.found()
    names = {AdoptedSession.adapter_name, *acp_agents.AGENTS, *(a.binary for a in acp_agents.AGENTS.values())}
    for cls in [*found.launched.values(), *found.hooked.values()]:
        names |= {cls.name, cls.agent, getattr(cls, "hook_agent", ""), *getattr(cls, "programs", ())}
    return names - GENERIC


def switches(source: str, classes: set[str], names: set[str]) -> list[str]:
    """Where `source` tests a value's class against one of `classes`, or switches on one of `names` (compared
    with, listed in a comparison, a key of a literal table, a case of a match), written out or through a
    constant of the module's own."""
    tree = ast.parse(source)
    finder = _Finder(classes, names)
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and (name := finder.named(statement.value)):
            finder.aliases.update({t.id: name for t in statement.targets if isinstance(t, ast.Name)})
    found = [(getattr(node, "lineno", 0), what) for node in ast.walk(tree) for what in finder.find(node)]
    return [f"line {line}: {what}" for line, what in sorted(found)]


class _Finder:
    """What one node switches on."""

    def __init__(self, classes: set[str], names: set[str]) -> None:
        self.classes = classes
        self.names = names
        self.aliases: dict[str, str] = {}  # a module constant that holds a name (AGENT = "codex"), or a list

    def named(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in self.names:
            return node.value
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return next((n for n in map(self.named, node.elts) if n), None)
        return self.aliases.get(node.id) if isinstance(node, ast.Name) else None

    def classed(self, node: ast.expr) -> str | None:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return next((c for c in map(self.classed, node.elts) if c), None)
        name = _base(node)
        return name if name in self.classes else None

    def find(self, node: ast.AST) -> list[str]:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "isinstance", "issubclass") and len(node.args) == 2 and (cls := self.classed(node.args[1])):
            return [f"{node.func.id}(..., {cls})"]
        if isinstance(node, ast.Compare):
            return self._compared([node.left, *node.comparators])
        if isinstance(node, ast.Dict):
            return [f"a table keyed by the name {name!r}" for key in node.keys
                    if key is not None and (name := self.named(key))]
        if isinstance(node, ast.MatchValue) and (name := self.named(node.value)):
            return [f"a case of the name {name!r}"]
        if isinstance(node, ast.MatchClass) and (cls := self.classed(node.cls)):
            return [f"a case of the class {cls}"]
        return []

    def _compared(self, sides: list[ast.expr]) -> list[str]:
        typed = any(isinstance(s, ast.Call) and isinstance(s.func, ast.Name) and s.func.id == "type" for s in sides)
        found = [f"type(...) compared with {cls}" for s in sides if typed and (cls := self.classed(s))]
        return found + [f"compared with the name {name!r}" for s in sides if (name := self.named(s))]


def test_the_switch_finder_finds_each_kind_of_switch() -> None:
    source = ("isinstance(s, LiveSession)\nissubclass(c, (int, NativeAdapter))\ntype(a) is codex.CodexHookAdapter\n"
              "agent == 'codex'\nx in ('auto', 'acp')\nt = {'gemini': 1}\n"
              "match a:\n    case 'native': pass\n    case HookedSession(): pass\n"
              "isinstance(s, dict)\nop == 'run'\nAGENT = 'codex'\nif a == AGENT: pass\n")
    found = switches(source, {"LiveSession", "NativeAdapter", "CodexHookAdapter", "HookedSession"},
                     {"codex", "acp", "gemini", "native"})
    assert [f.split(":")[0] for f in found] == [f"line {n}" for n in (1, 2, 3, 4, 5, 6, 8, 9, 13)], found


def test_the_sets_it_looks_for_hold_every_session_adapter_and_agent() -> None:
    classes, names = _class_names(), _agent_names()
    assert {"LiveSession", "HookedSession", "AdoptedSession", "NativeAdapter", "ClaudeCodeHookAdapter",
            "CodexHookAdapter", "ClaudeStreamAdapter", "AcpAdapter"} <= classes
    assert {"native", "codex", "claude-code", "claude-code-hook", "acp", "gemini", "adopted", "claude"} <= names
    assert not {"Daemon", "Recorder", "Store", "Config"} & classes


@pytest.mark.parametrize("path", _scanned(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_switch_on_a_session_class_or_an_agent_name_above_the_adapters(path: Path) -> None:
    where = str(path.relative_to(PACKAGE))
    found = switches(path.read_text(), _class_names(), _agent_names())
    if where in EXEMPT:
        assert found, f"{where} switches on nothing any more: take it off EXEMPT"
        return
    assert not found, f"{where} asks a type or a name, not a capability or a protocol method: {found}"
