"""Where the tests find what they run and read, whatever the clone's path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
PY = sys.executable  # the interpreter running the tests, with loopwarden importable
AGENTS = ROOT / "tests" / "agents"  # the small agent programs the tests launch
DATA = ROOT / "tests" / "data"  # third-party recordings copied into the repository (tests/data/LICENSE-NOTE.txt)
# Larger recordings that are not copied here: beside the repository in the project's shared folder, or where
# LOOPWARDEN_TRANSCRIPTS points; the tests that need them skip when they are absent.
TRANSCRIPTS = Path(os.environ.get("LOOPWARDEN_TRANSCRIPTS") or ROOT.parent / "shared" / "data" / "transcripts")
