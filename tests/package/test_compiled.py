"""The compiled engine (setup.py, loopwarden/compiled.py): the README's install compiles it, it is used only
while it was compiled from the sources beside it, and it gives the verdicts its Python source gives."""

from __future__ import annotations

import ast
import importlib.machinery
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from loopwarden import compiled
from loopwarden.supervisor import health

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)
ASKED_PURE = "LOOPWARDEN_PURE" in compiled.WHY  # set now, or when it was installed
needs_compiled = pytest.mark.skipif(compiled.STATE != "compiled", reason=f"the engine is not compiled: {compiled.WHY}")

PROBE = """
import json, loopwarden.compiled as c, loopwarden.supervisor.health as h, loopwarden.supervisor.guards.budget as b
print(json.dumps({"state": c.STATE, "why": c.WHY, "files": [h.__file__, b.__file__]}))
"""


def test_the_install_compiles_the_engine() -> None:
    if ASKED_PURE:
        pytest.skip(f"the Python engine was asked for: {compiled.WHY}")
    assert compiled.STATE == "compiled", compiled.WHY
    assert health.__file__ and health.__file__.endswith(EXTENSIONS)
    assert not inspect.isfunction(health.SessionHealth.observe)  # C, not Python bytecode
    record = json.loads((ROOT / "loopwarden" / "compiled.json").read_text())
    names = [source["path"].removesuffix(".py").replace("/", ".") for source in record["compiled"]]
    assert "loopwarden.supervisor.guards.repetition" in names
    for name in names:
        __import__(name)
        assert sys.modules[name].__file__.endswith(EXTENSIONS), name  # type: ignore[union-attr]


def _probe(package_root: Path, **env: str) -> dict[str, object]:
    """STATE, WHY and two compiled modules' files, as a new interpreter sees the package under `package_root`."""
    environ = {k: v for k, v in os.environ.items() if k != "LOOPWARDEN_PURE"} | {"PYTHONPATH": str(package_root)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=environ | env, cwd=package_root, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@needs_compiled
def test_a_changed_source_sends_the_whole_engine_back_to_python(tmp_path: Path) -> None:
    """The compiled modules call each other in C: one changed source, and none of them is used."""
    shutil.copytree(ROOT / "loopwarden", tmp_path / "loopwarden", ignore=shutil.ignore_patterns("__pycache__"))
    budget = tmp_path / "loopwarden" / "supervisor" / "guards" / "budget.py"
    seen = _probe(tmp_path)
    assert seen["state"] == "compiled", seen["why"]
    assert all(str(f).startswith(str(tmp_path)) and str(f).endswith(EXTENSIONS) for f in seen["files"])  # type: ignore[attr-defined]

    os.utime(budget, ns=(0, 10**18))  # a new time, the same text (a checkout, a copy): still the compiled engine
    assert _probe(tmp_path)["state"] == "compiled"

    text = budget.read_bytes()
    budget.write_bytes(text.replace(b"budget", b"Budget", 1))  # the same size, another text
    seen = _probe(tmp_path)
    assert seen["state"] == "stale"
    assert "loopwarden/supervisor/guards/budget.py changed" in str(seen["why"])
    assert all(str(f).endswith(".py") for f in seen["files"])  # type: ignore[attr-defined]

    budget.write_bytes(text)
    (tmp_path / "loopwarden" / "compiled.json").unlink()  # no record of the build: its modules are not used
    seen = _probe(tmp_path)
    assert seen["state"] == "pure" and "no compiled.json" in str(seen["why"])
    assert all(str(f).endswith(".py") for f in seen["files"])  # type: ignore[attr-defined]


@needs_compiled
def test_loopwarden_pure_asks_for_the_python_engine(tmp_path: Path) -> None:
    seen = _probe(ROOT, LOOPWARDEN_PURE="1")
    assert seen["state"] == "pure" and seen["why"] == "LOOPWARDEN_PURE is set"
    assert all(str(f).endswith(".py") for f in seen["files"])  # type: ignore[attr-defined]


@needs_compiled
def test_the_python_engine_gives_the_compiled_one_s_verdicts() -> None:
    """The verdict goldens of every recording (tests/engine/test_verdicts_unchanged.py), this process having
    held them for the compiled engine, held again by the Python one."""
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           "tests/engine/test_verdicts_unchanged.py"], cwd=ROOT, capture_output=True, text=True,
                          env=os.environ | {"LOOPWARDEN_PURE": "1"}, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


def test_the_build_requires_what_the_engine_imports() -> None:
    """mypyc type-checks the engine with everything it imports, in pip's build environment, where only
    build-system.requires is installed (a fresh venv has nothing else yet while it builds): a package the engine
    imports and the build lacks leaves the install with the Python engine (seen: msgspec, orjson)."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    built_with = {re.split(r"[<>=!~ \[;]", r, maxsplit=1)[0].lower().replace("-", "_") for r in requires}
    imported: set[str] = set()
    for path in (ROOT / "loopwarden" / "supervisor").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"loopwarden", "__future__"}
    assert third_party, "the engine imports orjson and msgspec: the walk found nothing"
    assert third_party <= built_with, f"not in build-system.requires: {sorted(third_party - built_with)}"
