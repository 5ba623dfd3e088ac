"""The build backend: setuptools' own, asking pip for mypyc's build requirements only when the engine is compiled.

A plain `pip install -e .` builds no C and needs setuptools alone. `LOOPWARDEN_COMPILE=1` at install compiles
the per-event path with mypyc (setup.py), which type-checks the engine with everything it imports: pip then
installs `[tool.loopwarden.build] compile-requires` (pyproject.toml) into the build environment as well.
build-system.requires cannot depend on the environment; these hooks can (setuptools' documented way of dynamic
build requirements), and they run offline the same as setuptools does.
"""

from __future__ import annotations

import os
import tomllib

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 - every other hook is setuptools' own

COMPILE = "LOOPWARDEN_COMPILE"


def compile_asked() -> bool:
    """Whether this build compiles the engine: LOOPWARDEN_COMPILE set, and not to 0."""
    return os.environ.get(COMPILE, "0") not in ("", "0")


def compile_requires() -> list[str]:
    """What mypyc's build needs beside setuptools (read from pyproject.toml, pip runs the hooks in the project)."""
    with open("pyproject.toml", "rb") as f:
        return list(tomllib.load(f)["tool"]["loopwarden"]["build"]["compile-requires"])


def _extra() -> list[str]:
    return compile_requires() if compile_asked() else []


def get_requires_for_build_wheel(config_settings: dict[str, object] | None = None) -> list[str]:
    return [*build_meta.get_requires_for_build_wheel(config_settings), *_extra()]


def get_requires_for_build_editable(config_settings: dict[str, object] | None = None) -> list[str]:
    return [*build_meta.get_requires_for_build_editable(config_settings), *_extra()]
