"""A newcomer's install against its dependencies alone: wall time of `pip install -e '.[test]'` in a new venv,
and of `pip install -r` (the same dependencies, read from pyproject.toml) in another, interleaved.

    .venv/bin/python bench/install_time.py [--rounds 2] [--source DIR] [--compile]

Each round makes two new venvs in a temporary folder: one installs the dependencies alone, then the project
with --no-deps (its own build); the other installs the project with its dependencies, as the README says. Both
use pip's cache as it is (a first round warms it: compare the rounds after it). `--source`: another checkout
(the before); `--compile`: with LOOPWARDEN_COMPILE=1. Prints each time and the engine each install runs.
Exits non-zero only when an install fails.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def dependencies(source: Path) -> list[str]:
    project = tomllib.loads((source / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["test"]]


def timed(args: list[str], env: dict[str, str]) -> float:
    start = time.monotonic()
    done = subprocess.run(args, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.monotonic() - start


def venv(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True)
    return folder / "bin"


def engine(bin_dir: Path) -> str:
    done = subprocess.run([str(bin_dir / "loopwarden"), "--version"], capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--source", type=Path, default=ROOT)
    parser.add_argument("--compile", action="store_true", help="LOOPWARDEN_COMPILE=1 for the project's build")
    opts = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPWARDEN_COMPILE", "LOOPWARDEN_PURE")}
    if opts.compile:
        env["LOOPWARDEN_COMPILE"] = "1"
    source = opts.source.resolve()
    print(f"source {source}, load {os.getloadavg()[0]:.1f}, compile {opts.compile}")
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp, "requirements.txt")
        requirements.write_text("\n".join(dependencies(source)) + "\n")
        for r in range(opts.rounds):
            bin_dir = venv(Path(tmp, f"deps{r}"))
            deps = timed([str(bin_dir / "pip"), "install", "-q", "-r", str(requirements)], env)
            own = timed([str(bin_dir / "pip"), "install", "-q", "--no-deps", "-e", str(source)], env)
            print(f"round {r}: dependencies alone {deps:6.1f} s, then the project --no-deps {own:6.1f} s")
            bin_dir = venv(Path(tmp, f"full{r}"))
            full = timed([str(bin_dir / "pip"), "install", "-q", "-e", f"{source}[test]"], env)
            print(f"round {r}: pip install -e '.[test]'   {full:6.1f} s  ({engine(bin_dir)}), "
                  f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
