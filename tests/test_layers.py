"""The layers of ARCHITECTURE.md, read from every import in the package: none runs back up.

engine (supervisor/) < adapters (sessions/, and paths.py: where loopwarden keeps its files) < runtime (runtime/)
< the people's side (cli/, widgets/, the rest)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "loopwarden"
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
