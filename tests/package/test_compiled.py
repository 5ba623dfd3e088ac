"""The build (setup.py, build_backend/, loopwarden/compiled.py): the default install is the Python engine and
compiles nothing; LOOPWARDEN_COMPILE=1 compiles it, which is used only while it was compiled from the sources
beside it, and gives the verdicts its Python source gives."""

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
import sysconfig
import tomllib
from pathlib import Path

import pytest

from loopwarden import compiled
from loopwarden.supervisor import health

ROOT = Path(__file__).resolve().parents[2]
EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)
DEFAULT_BUILD = "the default build; LOOPWARDEN_COMPILE=1 at install compiles it"  # setup.py's, in compiled.json
needs_compiled = pytest.mark.skipif(compiled.STATE != "compiled", reason=f"the engine is not compiled: {compiled.WHY}")


def _installed_record() -> dict[str, object]:
    """compiled.json as the install wrote it (beside the sources: an editable install)."""
    path = ROOT / "loopwarden" / "compiled.json"
    if not path.exists():
        pytest.skip("not installed: no loopwarden/compiled.json (pip install -e . writes it)")
    return json.loads(path.read_text())  # type: ignore[no-any-return]


PROBE = """
import json, loopwarden.compiled as c, loopwarden.supervisor.health as h, loopwarden.supervisor.guards.budget as b
print(json.dumps({"state": c.STATE, "why": c.WHY, "files": [h.__file__, b.__file__]}))
"""


def test_the_default_install_builds_no_c() -> None:
    """`pip install -e .` without LOOPWARDEN_COMPILE: the Python engine, no extension module in the package, and
    `loopwarden --version` says so and how to compile it."""
    record = _installed_record()
    if record["why_pure"] != DEFAULT_BUILD:
        pytest.skip(f"installed with LOOPWARDEN_COMPILE=1 ({record['why_pure'] or 'compiled'})")
    assert record["compiled"] == []
    assert "LOOPWARDEN_PURE" in compiled.WHY or compiled.WHY == DEFAULT_BUILD
    assert compiled.STATE == "pure"
    assert health.__file__ and health.__file__.endswith(".py")
    assert inspect.isfunction(health.SessionHealth.observe)
    assert not [path for path in (ROOT / "loopwarden").rglob("*") if path.name.endswith(EXTENSIONS)]
    version = subprocess.run([sys.executable, "-m", "loopwarden", "--version"], capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in os.environ.items() if k != "LOOPWARDEN_PURE"})
    assert f"(engine in pure Python: {DEFAULT_BUILD})" in version.stdout, version.stdout + version.stderr


def test_an_install_asked_to_compile_compiles_the_engine() -> None:
    """LOOPWARDEN_COMPILE=1 at install: every module setup.py lists is an extension module, and they are used; a
    build that fell back to the Python engine fails here (compiled.json says why)."""
    record = _installed_record()
    if record["why_pure"] == DEFAULT_BUILD:
        pytest.skip("the default install: nothing was asked to compile")
    if "LOOPWARDEN_PURE" in compiled.WHY:
        pytest.skip(f"the Python engine was asked for: {compiled.WHY}")
    assert compiled.STATE == "compiled", compiled.WHY
    assert health.__file__ and health.__file__.endswith(EXTENSIONS)
    assert not inspect.isfunction(health.SessionHealth.observe)  # C, not Python bytecode
    names = [source["path"].removesuffix(".py").replace("/", ".") for source in record["compiled"]]  # type: ignore[attr-defined]
    assert "loopwarden.supervisor.guards.repetition" in names
    for name in names:
        __import__(name)
        assert sys.modules[name].__file__.endswith(EXTENSIONS), name  # type: ignore[union-attr]
    version = subprocess.run([sys.executable, "-m", "loopwarden", "--version"], capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in os.environ.items() if k != "LOOPWARDEN_PURE"})
    assert "(engine compiled by mypyc)" in version.stdout, version.stdout + version.stderr


def _project_copy(tmp_path: Path) -> Path:
    """What a build reads, copied: the sources without their caches and built files."""
    copy = tmp_path / "project"
    for folder in ("loopwarden", "build_backend"):
        shutil.copytree(ROOT / folder, copy / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "compiled.json"))
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, copy / name)
    return copy


def test_the_default_build_compiles_nothing_and_clears_an_earlier_compiled_build(tmp_path: Path) -> None:
    """setup.py's build without LOOPWARDEN_COMPILE: no C, seconds; the extension modules a compiled build left
    beside the sources are removed (Python would import them before the sources), and the record says why."""
    copy = _project_copy(tmp_path)
    left = copy / "loopwarden" / "supervisor" / f"health{sysconfig.get_config_var('EXT_SUFFIX')}"
    left.write_bytes(b"an earlier compiled build's module")
    environ = {k: v for k, v in os.environ.items() if k not in ("LOOPWARDEN_COMPILE", "LOOPWARDEN_PURE")}
    done = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=copy, env=environ,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not left.exists()
    assert not [path for path in copy.rglob("*") if path.name.endswith(EXTENSIONS)]
    record = json.loads((copy / "loopwarden" / "compiled.json").read_text())
    assert record["compiled"] == [] and record["why_pure"] == DEFAULT_BUILD
    assert "mypyc" not in done.stdout + done.stderr and "gcc" not in done.stdout + done.stderr


REQUIRES_PROBE = """
import json, compile_on_request as backend
print(json.dumps({"wheel": backend.get_requires_for_build_wheel(),
                  "editable": backend.get_requires_for_build_editable()}))
"""


def test_the_build_backend_asks_for_mypyc_only_when_asked_to_compile(tmp_path: Path) -> None:
    """pip installs what these hooks return into the build's environment before it builds: the default build
    needs setuptools alone (build-system.requires), a compiling one mypyc's requirements too."""
    pytest.importorskip("setuptools", reason="the backend is setuptools' own: pip installs it in a build")
    copy = _project_copy(tmp_path)
    compile_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["loopwarden"]["build"][
        "compile-requires"]
    environ = {k: v for k, v in os.environ.items() if k not in ("LOOPWARDEN_COMPILE", "LOOPWARDEN_PURE")}
    environ["PYTHONPATH"] = str(copy / "build_backend")
    asked = {}
    for value in ("", "0", "1"):
        done = subprocess.run([sys.executable, "-c", REQUIRES_PROBE], cwd=copy, capture_output=True, text=True,
                              env=environ | ({"LOOPWARDEN_COMPILE": value} if value else {}), timeout=120)
        assert done.returncode == 0, done.stderr
        asked[value] = json.loads(done.stdout.strip().splitlines()[-1])
    for value in ("", "0"):
        assert not any("mypy" in r for hook in asked[value].values() for r in hook), asked[value]
    for hook in ("wheel", "editable"):
        assert set(compile_requires) <= set(asked["1"][hook]), asked["1"]
        assert set(asked["1"][hook]) - set(compile_requires) == set(asked[""][hook])
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"] == ["setuptools>=68"]


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
    """mypyc type-checks the engine with everything it imports, in pip's build environment, where only what the
    build backend asks for is installed (a fresh venv has nothing else yet while it builds): a package the engine
    imports and the build lacks leaves the install with the Python engine (seen: msgspec, orjson)."""
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["loopwarden"]["build"]["compile-requires"]
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
    missing = sorted(third_party - built_with)
    assert not missing, f"not in [tool.loopwarden.build] compile-requires: {missing}"
    assert "mypy" in built_with
