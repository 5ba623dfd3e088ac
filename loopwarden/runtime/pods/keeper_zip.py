"""The keeper as one zip file Python runs (`python3 keeper.pyz RUNTIME_DIR ...`, or `... bridge SOCKET`), so
that a pod needs no loopwarden installed: only a Python 3. It holds the keeper's modules, which use the standard
library alone, and is built from this loopwarden's own sources, so the keeper in a pod always speaks the
daemon's protocol. The same sources give the same bytes (fixed times and order), so its name, a hash of them,
names one ConfigMap per loopwarden version."""

from __future__ import annotations

import hashlib
import io
import zipfile
from functools import cache
from pathlib import Path
from typing import Final

RUNTIME: Final = Path(__file__).resolve().parent.parent
# the keeper's import closure (tests/kubernetes/test_keeper_zip.py runs the zip with the standard library only)
MODULES: Final = ("__init__", "keeper", "keeper_bridge", "keeper_input", "keeper_output", "keeper_requests",
                  "keeper_revival", "keeper_wire", "kept", "kept_output", "principal", "hook_claims", "procfs",
                  "reaper")
MAIN: Final = '''"""loopwarden's keeper in a pod: `RUNTIME_DIR [options]` keeps agents, `bridge SOCKET` carries one
connection to it."""
import sys

from loopwarden.runtime import keeper, keeper_bridge

if sys.argv[1:2] == ["bridge"]:
    sys.exit(keeper_bridge.main(sys.argv[2:]))
sys.exit(keeper.main(sys.argv[1:]))
'''
PACKAGE: Final = '"""loopwarden\'s keeper, as a pod runs it (no engine, no console)."""\n'
_EPOCH: Final = (1980, 1, 1, 0, 0, 0)


@cache
def keeper_zip() -> bytes:
    """The zip's bytes."""
    files = {"__main__.py": MAIN, "loopwarden/__init__.py": PACKAGE}
    for name in MODULES:
        files[f"loopwarden/runtime/{name}.py"] = (RUNTIME / f"{name}.py").read_text(encoding="utf-8")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files):
            info = zipfile.ZipInfo(path, date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, files[path])
    return buffer.getvalue()


def keeper_digest() -> str:
    """The first 12 hex digits of the zip's SHA-256: what names its ConfigMap."""
    return hashlib.sha256(keeper_zip()).hexdigest()[:12]
