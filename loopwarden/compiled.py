"""Which engine runs: its Python source (the default build), or the one mypyc compiled at install when
LOOPWARDEN_COMPILE=1 asked for it (setup.py).

Compiled modules sit beside their sources, and Python's import system prefers them. They are used only
while the build's record (compiled.json) says every one was compiled from the sources as they are now. After
an edit in an editable install, or a build that failed, every compiled module is passed over for its source:
the modules of one build call each other in C, so a mix would still run the old code. LOOPWARDEN_PURE=1 asks
for the Python engine in any case (a traceback with every line, a comparison of the two).

`STATE` is "compiled", "pure" (nothing compiled, or asked for) or "stale"; `WHY` says why it is not
"compiled". The check runs once, when `loopwarden` is imported: one stat per compiled module, and a hash only
for a file whose size and time differ from the record's (a wheel's files get new times when installed).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent
RECORD = PACKAGE / "compiled.json"
ROOT = PACKAGE.parent  # the record's paths are relative to the project (or site-packages)


def _check() -> tuple[str, str]:
    """(STATE, WHY)."""
    if os.environ.get("LOOPWARDEN_PURE"):
        return "pure", "LOOPWARDEN_PURE is set"
    try:
        record = json.loads(RECORD.read_bytes())
        sources = record["compiled"]
        if not sources:
            return "pure", record.get("why_pure") or "nothing was compiled"
        for source in sources:
            changed = _changed(ROOT / source["path"], source)
            if changed:
                return "stale", (f"{source['path']} {changed} since the engine was compiled; "
                                 "LOOPWARDEN_COMPILE=1 pip install -e . compiles it again")
    except FileNotFoundError:
        return "pure", "not built: no compiled.json (pip install -e . writes it)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return "pure", f"compiled.json is unreadable ({exc})"
    return "compiled", ""


def _changed(path: Path, source: dict[str, object]) -> str | None:
    """How `path` differs from the record of the source compiled; None when it is the same file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return "was removed"
    if stat.st_size != source["size"]:
        return "changed"
    if stat.st_mtime_ns != source["mtime_ns"] and hashlib.sha256(path.read_bytes()).hexdigest() != source["sha256"]:
        return "changed"
    return None


class SourceFirst:
    """A finder that gives loopwarden's modules from their Python source, passing over compiled ones."""

    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if not name.startswith("loopwarden.") or not path:
            return None
        leaf = name.rpartition(".")[2]
        for folder in path:
            source = os.path.join(folder, leaf + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(name, source)
        return None  # a package, or no source: the usual finders decide


STATE, WHY = _check()
if STATE != "compiled":
    sys.meta_path.insert(0, SourceFirst)  # a class whose find_spec is static: a finder


def describe() -> str:
    """One line for --version and the benches."""
    return "engine compiled by mypyc" if STATE == "compiled" else f"engine in pure Python: {WHY}"
