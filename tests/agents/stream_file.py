"""Plays back a recorded agent stream: each record of FILE (a JSON array, or JSON lines) as one stdout line.

Usage: stream_file.py FILE

Stands in for an agent that prints its own JSON-lines stream (`claude -p --output-format stream-json`,
`codex exec --json`); reads nothing, flushes each line, exits 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    text = Path(sys.argv[1]).read_text(encoding="utf-8")
    records = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x]
    for record in records:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
