"""Where the tests find what they run and read, whatever the clone's path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository
PY = sys.executable  # the interpreter running the tests, with loopwarden importable
# The same interpreter by its name, found on PATH_TO_PY: a command line that starts with it stays short however
# deep the clone is (loopwarden shows command lines cut at 200 characters, in the audit and the process tree).
PY_NAME = os.path.basename(PY)
PATH_TO_PY = {"PATH": os.pathsep.join([os.path.dirname(PY), os.environ.get("PATH", "")])}
AGENTS = ROOT / "tests" / "agents"  # the small agent programs the tests launch
DATA = ROOT / "tests" / "data"  # third-party recordings copied into the repository (tests/data/LICENSE-NOTE.txt)
# Larger recordings that are not copied here: beside the repository in the project's shared folder, or where
# LOOPWARDEN_TRANSCRIPTS points; the tests that need them skip when they are absent.
TRANSCRIPTS = Path(os.environ.get("LOOPWARDEN_TRANSCRIPTS") or ROOT.parent / "shared" / "data" / "transcripts")


def recording(name: str) -> Path:
    """A recorded stream, by its path in the repository (`loopwarden/examples/demo.jsonl`) or by its file name
    in tests/data or the shared recordings; the test skips when it is in none of them."""
    for path in (ROOT / name, DATA / Path(name).name, TRANSCRIPTS / Path(name).name):
        if path.exists():
            return path
    pytest.skip(f"{name} is not available")
