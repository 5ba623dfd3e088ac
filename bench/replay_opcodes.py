"""Bytecodes per line of native replay, by function: where the interpreter's work goes (deterministic).

    .venv/bin/python bench/replay_opcodes.py STREAM [LINES] [TOP]
    cd /tmp && PYTHONPATH=/tmp/before /work/wt-x/.venv/bin/python /work/wt-x/bench/replay_opcodes.py ...  # main's

Replays the first LINES lines (default 20,000) of STREAM with the bench's configuration under an opcode
tracer and prints the bytecodes executed per line, in all and for the TOP functions (default 40). The count
is exact and noise-free, unlike time; it does not weigh the work a bytecode does in C (a `find`, a decode),
which valgrind's instruction count does (bench/HISTORY.md, "Replay, seventh round"). Always exits 0.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_throughput import FirstLines, bench_config

from loopwarden.replay import Replayer


def main(argv: list[str]) -> int:
    path = Path(argv[0])
    lines = int(argv[1]) if len(argv) > 1 else 20_000
    top = int(argv[2]) if len(argv) > 2 else 40
    counts: Counter[tuple[str, str, int]] = Counter()

    def local(frame: FrameType, event: str, _arg: Any) -> Any:
        if event == "opcode":
            code = frame.f_code
            counts[(Path(code.co_filename).name, code.co_name, code.co_firstlineno)] += 1
        return local

    def start(frame: FrameType, _event: str, _arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        return local

    replayer = Replayer(bench_config())
    with open(path, "rb") as f:
        stream: Any = FirstLines(f, lines)
        sys.settrace(start)
        try:
            summary = replayer.run(stream, "native", lambda _verdict: None)
        finally:
            sys.settrace(None)
    counts = Counter({k: v for k, v in counts.items() if k[1] != "readline" or k[0] != "replay_throughput.py"})
    n = summary.lines
    print(f"{n:,} lines, {sum(counts.values()) / n:,.1f} bytecodes per line (the bench's own line counter left out)")
    for (file, name, line), count in counts.most_common(top):
        print(f"{count / n:8.1f}  {file}:{line} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
