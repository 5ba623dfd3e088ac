"""The build: plain Python by default; with LOOPWARDEN_COMPILE=1, the per-event path compiled to C by mypyc (the
engine's, and a live session's per line), or left in Python where it cannot be.

Everything else is declared in pyproject.toml (build_backend/compile_on_request.py asks pip for mypyc only when
it compiles). The compiled modules are the same source, type-checked and turned into C (bench/README.md: a replay
runs about 1.5 times as fast; the live flood's daemon spends a little less per event). Every build writes
loopwarden/compiled.json: `loopwarden/compiled.py` reads it at import to tell whether the compiled modules are
still those of the sources beside them, and it says why nothing was compiled when nothing was (not asked for; no
C compiler or Python headers: the install then goes on with the Python engine). A build that compiles nothing
still removes the extension modules an earlier one left beside the sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ENGINE = Path("loopwarden", "supervisor")
# What is compiled: every guard, what SessionHealth.observe runs for each event (roster.py routes it to the guards),
# and a native line's typed reading (typed_line.py). The rest of the engine runs once per session, verdict or
# configuration; three modules of the per-event path stay Python:
#   events.py  typed.py makes events with object.__new__ and stores their fields, which a native class refuses;
#   typed.py   mypyc drops the class keywords of msgspec Structs (tag, kw_only, forbid_unknown_fields);
#   lines.py   LineSplitter's overloaded __init__ (typed by its self) compiles to C that does not build.
PER_EVENT = ("health.py", "roster.py", "signature.py", "control.py", "bounds.py", "gates.py", "counters.py",
             "kinds.py", "typed_line.py")
# ... and what a live session runs per line it reads: its pipes, its parts (runtime/session/: reading, judging,
# recording, carrying out; its package's __init__ stays Python, since a stale compiled package would still be
# imported), and the record path (records.py; store.py runs on the writer's thread, where SQLite's own C is
# most of it)
RUNTIME = Path("loopwarden", "runtime")
PER_LINE = ("pipes.py", "records.py")
SESSION = RUNTIME / "session"
# The runtime imports what the build does not install (anyio, psutil, sqlite-utils...): their types are taken as
# Any for the compile, and the project's mypy settings are left to the linter, which checks them with those
# packages installed (strict for the runtime, they refuse a value of a missing package's type returned as is);
# what the engine imports is in build-system.requires
MYPY_OPTIONS = ("--config-file=", "--ignore-missing-imports")
GROUP = "loopwarden.supervisor._compiled"  # the shared library the modules' shims load: inside the package
RECORD = "compiled.json"
DEFAULT_BUILD = "the default build; LOOPWARDEN_COMPILE=1 at install compiles it"  # why_pure when not asked to compile
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "install", "develop"}  # the commands that compile
# setuptools runs build_ext only for a distribution with extensions; this one stands for mypyc's until
# build_ext is finalized for a build (egg_info finalizes it too, only to list sources: mypyc takes seconds)
PLACEHOLDER = Extension("loopwarden.supervisor._placeholder", sources=[])


def compiled_sources() -> list[Path]:
    return sorted([*(ENGINE / name for name in PER_EVENT), *(ENGINE / "guards").glob("[!_]*.py"),
                   *(RUNTIME / name for name in PER_LINE), *SESSION.glob("[!_]*.py")])


def _first_line(exc: BaseException, most: int = 160) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= most else text[: most - 1] + "…"


def source_record(path: Path) -> dict[str, object]:
    data = path.read_bytes()
    return {"path": path.as_posix(), "size": len(data), "mtime_ns": path.stat().st_mtime_ns,
            "sha256": hashlib.sha256(data).hexdigest()}


class BuildEngine(build_ext):
    """build_ext with mypyc's extensions; any failure leaves the Python engine installed, and says why."""

    def finalize_options(self) -> None:
        self._why_pure = self._compile()
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1  # the modules' shims compile beside the shared library

    def _compile(self) -> str | None:
        """Put mypyc's extensions in the placeholder's place; else why there are none."""
        if not BUILDS.intersection(self.distribution.commands):
            self.distribution.ext_modules = []
            return "no build"
        if os.environ.get("LOOPWARDEN_COMPILE", "0") in ("", "0"):
            return DEFAULT_BUILD
        try:
            from mypyc.build import mypycify
        except ImportError as exc:
            return f"mypyc is not installed ({exc})"
        try:
            self.distribution.ext_modules = mypycify([*MYPY_OPTIONS, *(str(path) for path in compiled_sources())],
                                                     group_name=GROUP)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a type error mypy names above: the Python engine
            return f"mypyc could not compile the engine ({exc!r})"
        return None

    def run(self) -> None:
        inplace, why = self.inplace, self._why_pure  # build_ext.run clears inplace while it builds
        if why is None:
            try:
                super().run()
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - no compiler or headers: the Python engine
                self.inplace = inplace
                why = f"the C compiler failed: {_first_line(exc)} (pip install -v shows its output)"
        if why is not None:
            self.extensions = []
            self._remove_compiled()
            if why != DEFAULT_BUILD:  # asked to compile: say why it did not (pip install -v shows it)
                sys.stderr.write(f"loopwarden: the engine stays pure Python: {why}\n")
        record = {"compiled": [] if why else [source_record(path) for path in compiled_sources()],
                  "group": GROUP, "why_pure": why}
        self._package_dir().mkdir(parents=True, exist_ok=True)
        (self._package_dir() / RECORD).write_text(json.dumps(record, indent=1) + "\n")

    def _package_dir(self) -> Path:
        """Where the package's built files go: its source in place (an editable install), else build_lib."""
        if self.inplace:
            return Path(self.get_finalized_command("build_py").get_package_dir("loopwarden"))
        return Path(self.build_lib, "loopwarden")

    def _remove_compiled(self) -> None:
        """Extension modules an earlier build left (every one in the package is this build's): a shim whose
        shared library failed would not import (compiled.json would keep them unused all the same)."""
        for path in self._package_dir().rglob(f"*{sysconfig.get_config_var('EXT_SUFFIX')}"):
            path.unlink()

    def get_outputs(self) -> list[str]:
        return [*super().get_outputs(), str(self._package_dir() / RECORD)]


setup(ext_modules=[PLACEHOLDER], cmdclass={"build_ext": BuildEngine})
